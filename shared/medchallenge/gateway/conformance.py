"""`medchallenge gateway --config FILE --conformance`: the gateway's DICOM Conformance Statement (Markdown, in the
sections of DICOM PS3.2 Annex A: 1 overview, 2 contents, 3 introduction, 4 networking, 5 media interchange, 6
character sets, 7 security, 8 annexes), written from its real configuration and its real presentation contexts
(contexts.py): AE titles and ports, SOP classes as SCP and SCU, transfer syntaxes, data flow and sequencing,
association policies (acceptance: called title, allowed callers, TLS, limits; initiation: results to the PACS) with
their status codes, and the objects its writers create (conformance_annex.py). Configured text (AE titles, hosts,
route names) is the hospital's own, checked by config.py; it is shown as configured, in code spans."""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence

from .. import __version__
from .config import GatewayConfig
from .conformance_annex import annexes
from .contexts import (IMPLEMENTATION_CLASS_UID, IMPLEMENTATION_VERSION_NAME, VERIFICATION, WRITTEN_SOP_CLASSES,
                       proposed_transfer_syntaxes)

APPLICATION_CONTEXT = "1.2.840.10008.3.1.1.1"
# The statement's revisions (PS3.2 A.3.1): the version of the gateway each first appeared in
REVISIONS = (("0.1.0", "First statement: SCP and SCU, TID 1500 SR, SEG, failure note; PS3.2's sections, operating "
                       "points, the project's Implementation Class UID, `accept`"),)
ASSOCIATION_REJECTIONS = (
    ("called AE title is not the gateway's", "1 rejected-permanent", "1 service-user",
     "7 called-AE-title-not-recognized"),
    ("calling AE title not on the caller list from this address, or not a valid AE title", "1 rejected-permanent",
     "1 service-user", "3 calling-AE-title-not-recognized"),
    ("max_associations associations open", "2 rejected-transient", "3 service-provider (presentation)",
     "2 local-limit-exceeded"),
)
HEADING = re.compile(r"^(#{2,4}) (\d[\d.]*) (.+)$", re.MULTILINE)


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

    accepted = config.accepted_contexts()
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
    if config.accept == "routes":
        acceptance = ("only the storage SOP classes of the routes' modalities, in the transfer syntaxes the gateway "
                      "reads without a codec (`accept = \"routes\"`): any other abstract syntax is rejected in its "
                      "presentation context at association (result 3, abstract syntax not supported), any other "
                      "transfer syntax likewise (result 4, transfer syntaxes not supported)")
    else:
        routed = {m for r in config.routes for m in r.modalities}
        acceptance = ("every storage SOP class pynetdicom knows, in every transfer syntax it knows (`accept = "
                      "\"all\"`): instances the routes cannot use (modalities other than "
                      f"{', '.join(sorted(routed))}) are stored and set aside as unroutable, no result sent, removed "
                      f"after {config.unroutable_keep_hours:g} h; `accept = \"routes\"` narrows this to what the "
                      "routes use")
    plain_ae, plain_pacs = (title.replace("`", "'") for title in (config.ae_title, config.pacs_ae_title))
    document = f"""# DICOM Conformance Statement: medchallenge gateway {__version__}

Written by `medchallenge gateway --conformance` from this site's configuration: it states what this gateway, as
configured, accepts and sends.

## 1 Overview

| Network service | SOP classes | User of service (SCU) | Provider of service (SCP) |
|---|---|---|---|
| Transfer | Storage SOP classes ({len(storage)}, section 4.2.1.3.2) | Yes: {", ".join(_name(u) for u in WRITTEN_SOP_CLASSES)} (results) | Yes |
| Verification | Verification | No | Yes |

No media interchange, query/retrieve, worklist, MPPS or storage commitment.

## 2 Table of contents

{{contents}}

## 3 Introduction

### 3.1 Revision history

{_table(("Document version", "Description"), REVISIONS)}

This statement is generated: it describes the configuration it was generated from, and changes when that does.

### 3.2 Audience

The hospital's PACS administrators, integration engineers and information-security officers who connect a PACS or
modality to this gateway, and who review what it accepts, what it sends back and how it is protected. Familiarity
with DICOM (PS3.2, PS3.4, PS3.7, PS3.8) is assumed.

### 3.3 Remarks

The gateway returns the results of research algorithms (challenge detectors), not a diagnosis: each result is a new
series, marked as made by a device (the route's algorithm), and unverified. Conformance does not guarantee
interoperation: test the connection with the site's own PACS (docs/orthanc.md shows one).

### 3.4 Definitions and abbreviations

- AE: Application Entity; AE title: its name in an association.
- SCP / SCU: Service Class Provider / User; the gateway is a Storage SCP for studies and a Storage SCU for results.
- Route: a rule of the configuration sending studies of given modalities and body parts to one algorithm.
- Operating point: the threshold at which an algorithm's probability is called a finding (section 8.1.1).
- SR: Structured Report; SEG: Segmentation; TID: template identifier (PS3.16); SCT: SNOMED CT; DCM: DICOM
  controlled terminology; LN: LOINC; UCUM: units of measure.
- TLS: Transport Layer Security; BCP 195: IETF Best Current Practice for TLS (RFC 9325).

### 3.5 References

- NEMA PS3 / ISO 12052, DICOM: PS3.2 (Conformance), PS3.3 (Information Object Definitions), PS3.4 (Service Class
  Specifications), PS3.5 (Data Structures and Encoding), PS3.7 (Message Exchange), PS3.8 (Network Communication
  Support), PS3.15 (Security and System Management Profiles), PS3.16 (Content Mapping Resource).
- IETF BCP 195 (RFC 9325) and RFC 8996 (deprecating TLS 1.0 and 1.1).
- The gateway's documentation: README.md ("In a hospital"), docs/orthanc.md, docs/scale.md.

## 4 Networking

### 4.1 Implementation model

#### 4.1.1 Application data flow

```
 PACS / modality                 gateway AE {plain_ae:<16}                 algorithm
 ---------------   C-STORE    ----------------------------   study's series   ---------------------
 send a study    ---------->  receive (SCP), hold the study ---------------->  job: one container,
                              until {config.study_quiet_seconds:g} s quiet, route it         no network
 PACS {plain_pacs:<16}   C-STORE    send results (SCU)         <----------------  output sockets
 store results   <----------  SR / SEG, or failure note       DICOM objects
```

#### 4.1.2 Functional definition of AEs

One Application Entity, {_code(config.ae_title)}. It accepts studies from the callers below (C-STORE SCP), holds each
study until no instance has arrived for {config.study_quiet_seconds:g} s, sends it to the detector its route names
(a container run as grand-challenge runs an algorithm, no network), and sends the detector's results, as new series
of the same study, to the PACS {_code(config.pacs_ae_title)} (C-STORE SCU). Results the PACS sends back are not
processed again.

#### 4.1.3 Sequencing of real-world activities

1. A caller opens an association and stores the instances of a study (any order, any number of associations).
2. {config.study_quiet_seconds:g} s after its last instance the study is closed: a later instance of the same study
   starts a new study (its results are computed again) or, if identical, is a duplicate.
3. The study's first series matching a route (Modality, Body Part Examined) goes to that route's algorithm; a study
   no route takes is set aside (unroutable).
4. The algorithm's outputs become DICOM objects (section 8), or, when the job fails, a failure note.
5. The gateway opens an association to the PACS and stores them; a study whose results are not all confirmed is
   tried again, at most {config.max_attempts} times. No storage commitment is asked.

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

Association rejections (A-ASSOCIATE-RJ: result, source, reason):

{_table(("When", "Result", "Source", "Reason"), ASSOCIATION_REJECTIONS)}

C-STORE responses of the SCP (an instance is checked and on disk before success is answered):

{_table(("Status", "Code", "When", "Behaviour"), [
    ("Success", "0000", "the instance is on disk (or is one of the gateway's own results coming back)",
     f"held for its study, routed {config.study_quiet_seconds:g} s after its last instance"),
    ("Refused: out of resources", "A700", f"over {limits.max_instance_bytes} bytes (a deflated one: inflated), a "
     f"header beyond its bounds, its study over {limits.max_study_bytes} bytes, the work folder over "
     f"{limits.work_quota_bytes} bytes, the disk full", "not stored; a study over its size is set aside"),
    ("Error: data set does not match SOP class", "A900", "no valid Study or SOP Instance UID (at most 64 "
     "characters)", "not stored"),
    ("Error: cannot understand", "C000", "the header cannot be parsed", "not stored"),
])}

Studies are routed by Modality and Body Part Examined:

{_table(("Route", "Modalities", "Body parts", "Interface", "Detector"), routes)}

###### 4.2.1.3.2 Accepted presentation contexts

The SCP accepts {acceptance}. Every storage SOP class below is accepted in each of these
{len(storage[0][1]) if storage else 0} transfer syntaxes:
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

How the PACS's C-STORE responses are treated:

{_table(("PACS status", "Behaviour"), [
    ("Success (0000)", "the result is recorded as sent and never sent again"),
    ("Warning (B000, B006, B007) or any failure, or no response within the DIMSE timeout", "the association is "
     f"released and the study's unsent results are sent again later, at most {config.max_attempts} attempts; then "
     "the study is set aside as failed"),
])}

### 4.3 Network interfaces

TCP/IP, IPv4 and IPv6, listening on {_code(config.host)} port {config.port}.

### 4.4 Configuration

{_table(("Application Entity", "Default AE title", "Port"),
        [("gateway (SCP)", _code(config.ae_title), config.port),
         ("PACS (remote SCP)", _code(config.pacs_ae_title), config.pacs_port)])}

## 5 Media interchange

Not supported: the gateway reads and writes no DICOM media (no DICOMDIR, no File-set Reader or Creator).

## 6 Support of character sets

Received instances are stored as received, in any character set. A created instance copies the patient and study
attributes of its source images unchanged and declares the source's Specific Character Set (0008,0005) (e.g. ISO_IR
192 for UTF-8 names); its own text (descriptions, code meanings, failure notes) is ASCII, valid in every one.

## 7 Security

### 7.1 Association level

Access: the caller list above (AE title and address; a caller outside it is rejected, permanent, calling AE title
not recognized). At most {limits.max_connections_per_address} connections from one address and
{limits.max_associations} associations at once.

### 7.2 Transport (TLS profile)

On the DICOM port: {tls}. Profile: the BCP 195 TLS Secure Transport Connection Profile (PS3.15 B.9), with TLS 1.0
and 1.1 refused as RFC 8996 asks; cipher suites: the defaults of Python's ssl module (OpenSSL), which exclude NULL,
export, RC4 and 3DES suites. To the PACS: {pacs_tls}.

### 7.3 Audit

Every association, study and result sent is written to the audit log ({_code(config.audit_log)}), one JSON line
each (docs/orthanc.md).

"""
    document += annexes()
    headings = HEADING.findall(document)
    contents = "\n".join(f"{'  ' * (len(level) - 2)}- {number} {title}" for level, number, title in headings)
    return document.replace("{contents}", contents, 1)
