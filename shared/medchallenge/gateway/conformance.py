"""`medchallenge gateway --config FILE --conformance`: the gateway's DICOM Conformance Statement (Markdown, in the
layout of DICOM PS3.2 Annex A), written from its real configuration and its real presentation contexts
(contexts.py): AE titles and ports, SOP classes as SCP and SCU, transfer syntaxes, association policies (acceptance:
called title, allowed callers, TLS, limits; initiation: results to the PACS), and the objects its writers create
(Comprehensive SR TID 1500, Segmentation). Configured text (AE titles, hosts, route names) is the hospital's own,
checked by config.py; it is shown as configured, in code spans."""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from .. import __version__
from .config import GatewayConfig
from .contexts import (COMPREHENSIVE_SR, IMPLEMENTATION_CLASS_UID, IMPLEMENTATION_VERSION_NAME, SEGMENTATION,
                       VERIFICATION, WRITTEN_SOP_CLASSES, accepted_contexts, proposed_transfer_syntaxes)

APPLICATION_CONTEXT = "1.2.840.10008.3.1.1.1"
# What each written SOP class holds (medchallenge.dicom.sr, .seg)
WRITTEN_CONTENT = {
    COMPREHENSIVE_SR: "TID 1500 Measurement Report: per finding a TID 1411 volumetric ROI (3-D box) or TID 1410 "
                      "planar ROI (SCOORD POINT) with its probability, TID 1501 measurements for image-level values "
                      "and absent findings, TID 4019 algorithm identification; a failed job: a partial report with "
                      "one TEXT comment naming the failure",
    SEGMENTATION: "Segmentation IOD (highdicom), one segment per label with its finding type, algorithm "
                  "identification and confidence; referenced to the source series",
}


def _name(uid: str) -> str:
    from pydicom.uid import UID

    return UID(uid).name


def _table(header: Sequence[str], rows: Iterable[Sequence[object]]) -> str:
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(str(cell) for cell in row) + " |" for row in rows]
    return "\n".join(lines)


def _code(text: object) -> str:
    return "`" + str(text).replace("`", "'") + "`"


def conformance_statement(config: GatewayConfig) -> str:
    """The statement, Markdown."""
    from pynetdicom import AE, __version__ as pynetdicom

    accepted = accepted_contexts()
    storage = [(syntax, transfers) for syntax, transfers in accepted if syntax != VERIFICATION]
    limits = config.limits
    max_pdu = AE().maximum_pdu_size
    callers = [(_code(c.ae_title), ", ".join(_code(n) for n in c.networks) or "any address")
               for c in config.callers] or [("any AE title", "any address")]
    routes = [(_code(r.name), ", ".join(r.modalities), ", ".join(r.body_parts) or "any", _code(r.interface),
               _code(r.image) if r.image else "local command") for r in config.routes]
    transfer_names = ", ".join(f"{_name(t)} ({t})" for t in storage[0][1]) if storage else ""
    proposed = ", ".join(f"{_name(t)} ({t})" for t in proposed_transfer_syntaxes())
    tls = ("DICOM TLS (PS3.15 Annex B.9) on the DICOM port: TLS 1.2 or later, the gateway's certificate, and a "
           "certificate of every caller that chains to the configured CA certificates (mutual TLS)"
           if config.tls else "none: plain TCP (configure `[tls]` for DICOM TLS)")
    pacs_tls = "DICOM TLS 1.2 or later, the PACS certificate checked" if config.pacs_tls else "plain TCP"
    return f"""# DICOM Conformance Statement: medchallenge gateway {__version__}

Written by `medchallenge gateway --conformance` from this site's configuration: it states what this gateway, as
configured, accepts and sends.

## 1 Overview

| Network service | SOP classes | User of service (SCU) | Provider of service (SCP) |
|---|---|---|---|
| Transfer | Storage SOP classes ({len(storage)}, section 4.2.1.3.2) | Yes: {", ".join(_name(u) for u in WRITTEN_SOP_CLASSES)} (results) | Yes |
| Verification | Verification | No | Yes |

No media interchange, query/retrieve, worklist, MPPS or storage commitment.

## 4 Networking

### 4.1 Implementation model

One Application Entity, {_code(config.ae_title)}. It accepts studies from the callers below (C-STORE SCP), holds each
study until no instance has arrived for {config.study_quiet_seconds:g} s, sends it to the detector its route names
(a container run as grand-challenge runs an algorithm, no network), and sends the detector's results, as new series
of the same study, to the PACS {_code(config.pacs_ae_title)} (C-STORE SCU). Results the PACS sends back are not
processed again.

### 4.2 AE specifications

#### 4.2.1 {_code(config.ae_title)}

##### 4.2.1.1 SOP classes

{_table(("SOP class", "SOP class UID", "SCU", "SCP"),
        [(_name(u), u, "Yes" if u in WRITTEN_SOP_CLASSES else "No", "Yes") for u, _ in accepted]
        + [(_name(u), u, "Yes", "No") for u in WRITTEN_SOP_CLASSES if u not in {s for s, _ in accepted}])}

##### 4.2.1.2 Association policies

- Application context name: {APPLICATION_CONTEXT} (DICOM Application Context).
- Maximum PDU size received: {max_pdu} bytes.
- Number of associations accepted at once: {limits.max_associations}; initiated: one per study's results.
- Connections: at most {limits.max_connections_per_address} open from one address; a connection's TLS handshake and
  A-ASSOCIATE-RQ must arrive within the ACSE timeout of its accept, else it is closed; at most
  {limits.max_pending_connections} connections waiting for their A-ASSOCIATE-RQ (the oldest closed for a new one).
- Asynchronous operations: not supported (one outstanding operation).
- Implementation class UID: {IMPLEMENTATION_CLASS_UID} (the project's own, under the UUID-derived root 2.25 of
  PS3.5 B.2; its last component the implementation's version); implementation version name:
  {IMPLEMENTATION_VERSION_NAME}; the same in both roles (SCP and SCU), on pynetdicom {pynetdicom}.
- Timeouts: association (ACSE) {limits.acse_timeout_seconds:g} s, DIMSE {limits.dimse_timeout_seconds:g} s,
  network {limits.network_timeout_seconds:g} s.

##### 4.2.1.3 Association acceptance policy

Called AE title: {_code(config.ae_title)} (compared as DICOM compares AE titles: leading and trailing spaces only are
insignificant). Callers: an association is accepted only from these calling AE titles and addresses, else it is
rejected (permanent, reason: calling AE title not recognized):

{_table(("Calling AE title", "Addresses"), callers)}

Security: {tls}.

###### 4.2.1.3.1 Activity: receive a study

An instance is accepted (status 0000) once it is on disk; it is refused with status A700 (out of resources) over
{limits.max_instance_bytes} bytes (a deflated one: inflated), when its study exceeds {limits.max_study_bytes} bytes or
the work folder {limits.work_quota_bytes} bytes, and with C000 (cannot understand) when it cannot be parsed or lacks
its Study and SOP Instance UIDs. Studies are routed by Modality and Body Part Examined:

{_table(("Route", "Modalities", "Body parts", "Interface", "Detector"), routes)}

###### 4.2.1.3.2 Accepted presentation contexts

Every storage SOP class below is accepted in each of these {len(storage[0][1]) if storage else 0} transfer syntaxes:
{transfer_names}. Role: SCP; no extended negotiation. Verification: the default transfer syntaxes.

{_table(("Abstract syntax", "UID", "Transfer syntaxes", "Role", "Extended negotiation"),
        [(_name(u), u, len(t), "SCP", "None") for u, t in accepted])}

##### 4.2.1.4 Association initiation policy

###### 4.2.1.4.1 Activity: send a study's results

One association per study to {_code(config.pacs_ae_title)} at {_code(config.pacs_host)}:{config.pacs_port}
({pacs_tls}), proposing only the SOP classes of the results to send, each with every transfer syntax below in a
presentation context of its own; a result is sent as written (Explicit VR Little Endian) where the PACS accepts that
context, else converted to a transfer syntax it accepts; each result instance once (a ledger of confirmed SOP
Instance UIDs), released after the last. A refused or failed C-STORE leaves the study queued for
another attempt (at most {config.max_attempts}).

{_table(("Abstract syntax", "UID", "Transfer syntaxes", "Role", "Extended negotiation"),
        [(_name(u), u, proposed, "SCU", "None") for u in WRITTEN_SOP_CLASSES])}

### 4.3 Network interfaces

TCP/IP, IPv4 and IPv6, listening on {_code(config.host)} port {config.port}.

### 4.4 Configuration

{_table(("Application Entity", "Default AE title", "Port"),
        [("gateway (SCP)", _code(config.ae_title), config.port),
         ("PACS (remote SCP)", _code(config.pacs_ae_title), config.pacs_port)])}

## 6 Support of character sets

Received instances are stored as received. Created instances use ISO_IR 100 (ISO 8859-1, Latin-1).

## 7 Security

Access: the caller list above (AE title and address). {tls[0].upper() + tls[1:]}. Every association and study is
written to the audit log ({_code(config.audit_log)}).

## 8 Annexes: created SOP instances

{_table(("SOP class", "UID", "Content"), [(_name(u), u, WRITTEN_CONTENT[u]) for u in WRITTEN_SOP_CLASSES])}
"""
