"""`medchallenge gateway --conformance`: the DICOM Conformance Statement lists exactly the presentation contexts a
real gateway on loopback accepts, and exactly the SOP classes the result writers create."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import numpy as np
from dicom_helpers import write_tiny_series
from gateway_helpers import associate, start_gateway

from medchallenge.dicom.detectors import RIB_FRACTURE, TB_CAVERN, rib_fracture_type
from medchallenge.dicom.seg import SegmentFinding, label_segmentation
from medchallenge.dicom.series import find_series, select_study_series
from medchallenge.dicom.sr import BoxFinding, PointFinding, box_report, failure_note, point_report, value_report

# SOP classes a sender could propose that are no storage: a gateway must refuse them, the statement not list them
NOT_STORAGE = ("1.2.840.10008.5.1.4.31",  # Modality Worklist Information Model - FIND
               "1.2.840.10008.5.1.4.1.2.2.1",  # Study Root Query/Retrieve Information Model - FIND
               "1.2.840.10008.3.1.2.3.3")  # Modality Performed Procedure Step
MAX_CONTEXTS = 128  # presentation contexts one association may propose (odd IDs 1-255)


def table(statement: str, heading: str) -> list[list[str]]:
    """The rows of the first Markdown table after `heading` (its header and rule left out)."""
    lines = statement[statement.index(heading):].splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("|"))
    end = next((i for i in range(start, len(lines)) if not lines[i].startswith("|")), len(lines))
    return [[cell.strip() for cell in line.strip("|").split(" | ")] for line in lines[start + 2:end]]


def statement_of(config: Path) -> str:
    result = subprocess.run([sys.executable, "-m", "medchallenge.gateway", "--config", str(config), "--conformance"],
                            capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    return result.stdout


def accepted_by(port: int, abstract_syntaxes: list[str]) -> set[str]:
    """The abstract syntaxes a running gateway accepts, proposed in associations of at most MAX_CONTEXTS."""
    accepted = set()
    for start in range(0, len(abstract_syntaxes), MAX_CONTEXTS):
        association = associate(port, contexts=tuple(abstract_syntaxes[start:start + MAX_CONTEXTS]))
        assert association.is_established
        accepted |= {str(c.abstract_syntax) for c in association.accepted_contexts}
        association.release()
    return accepted


def test_the_statement_lists_exactly_what_a_running_gateway_accepts(tmp_path):
    from pynetdicom import AllStoragePresentationContexts

    gateway, port, config = start_gateway(tmp_path, pacs_port=1, command=[sys.executable, "-c", "pass"])
    try:
        statement = statement_of(config)
        listed = {row[1] for row in table(statement, "###### 4.2.1.3.2 Accepted presentation contexts")}
        proposed = sorted({str(c.abstract_syntax) for c in AllStoragePresentationContexts}
                          | {"1.2.840.10008.1.1", *NOT_STORAGE})
        assert accepted_by(port, proposed) == listed
    finally:
        gateway.stop()
    assert not listed & set(NOT_STORAGE) and "1.2.840.10008.1.1" in listed
    sop_classes = {row[1]: row for row in table(statement, "##### 4.2.1.1 SOP classes")}
    assert set(sop_classes) == listed
    assert "`GATEWAY`" in statement and "`SENDER`" in statement  # the configured titles, as configured


def test_the_statement_lists_exactly_the_sop_classes_the_writers_create(tmp_path):
    write_tiny_series(tmp_path / "ct", shape=(12, 10, 6))
    ((series, _),) = select_study_series(find_series(tmp_path / "ct"), ("CT",))
    labels = np.zeros((6, 10, 12), dtype=np.uint8)
    labels[1:3, 2:5, 3:7] = 1
    written = [box_report(series, [BoxFinding((1, 1, 1, 4, 4, 2), 0.9)], TB_CAVERN),
               box_report(series, [], TB_CAVERN),
               point_report(series, 0.5, [PointFinding(2.0, 3.0, 0.7)], TB_CAVERN),
               value_report(series, [(("x", "99X", "x"), 1.0)], [(("y", "99X", "y"), "text")], [], TB_CAVERN),
               failure_note([series], "tb-caverns", "the detector failed"),
               label_segmentation(series, labels, [SegmentFinding(1, rib_fracture_type(4), 0.9)], RIB_FRACTURE)]
    config = tmp_path / "gateway.toml"
    from gateway_helpers import config_text, free_port
    config.write_text(config_text(tmp_path / "work", free_port(), 1, [sys.executable, "-c", "pass"]))
    statement = statement_of(config)
    initiated = {row[1] for row in table(statement, "###### 4.2.1.4.1 Activity: send a study's results")}
    created = {row[1] for row in table(statement, "#### 8.1.1 Created SOP instances")}
    assert {str(ds.SOPClassUID) for ds in written} == initiated == created
    assert {str(ds.file_meta.TransferSyntaxUID) for ds in written} == {"1.2.840.10008.1.2.1"}  # sent as written
    assert "sent as written (Explicit VR Little Endian)" in " ".join(statement.split())
    scu = {row[1] for row in table(statement, "##### 4.2.1.1 SOP classes") if row[2] == "Yes"}
    assert scu == initiated
    charsets = {str(ds.get("SpecificCharacterSet", "")) for ds in written}
    sources = {str(header.get("SpecificCharacterSet", "")) for header in series.headers}
    assert "declares the source's Specific Character Set" in " ".join(statement.split())
    assert charsets <= sources | {""}, charsets


def test_the_gateway_identifies_itself_as_the_project_and_proposes_no_retired_transfer_syntax(tmp_path):
    """Its own Implementation Class UID (under 2.25) and version name, as the SCP answers and as the statement says;
    the SCU proposes no Explicit VR Big Endian (retired)."""
    from medchallenge.gateway.contexts import (EXPLICIT_VR_BIG_ENDIAN, IMPLEMENTATION_CLASS_UID,
                                               IMPLEMENTATION_VERSION_NAME, proposed_transfer_syntaxes)

    gateway, port, config = start_gateway(tmp_path, pacs_port=1, command=[sys.executable, "-c", "pass"])
    try:
        association = associate(port, contexts=("1.2.840.10008.1.1",))
        assert association.is_established
        answered = (association.acceptor.implementation_class_uid, association.acceptor.implementation_version_name)
        association.release()
    finally:
        gateway.stop()
    assert answered == (IMPLEMENTATION_CLASS_UID, IMPLEMENTATION_VERSION_NAME)
    assert IMPLEMENTATION_CLASS_UID.startswith("2.25.") and len(IMPLEMENTATION_CLASS_UID) <= 64
    statement = statement_of(config)
    assert IMPLEMENTATION_CLASS_UID in statement and IMPLEMENTATION_VERSION_NAME in statement
    assert EXPLICIT_VR_BIG_ENDIAN not in proposed_transfer_syntaxes() and proposed_transfer_syntaxes()


# PS3.2 Annex A's sections, in order, as the statement numbers them (the review: 1-8)
PS3_2_SECTIONS = ("## 1 Overview", "## 2 Table of contents", "## 3 Introduction", "### 3.1 Revision history",
                  "### 3.2 Audience", "### 3.3 Remarks", "### 3.4 Definitions and abbreviations", "### 3.5 References",
                  "## 4 Networking", "### 4.1 Implementation model", "#### 4.1.1 Application data flow",
                  "#### 4.1.2 Functional definition of AEs", "#### 4.1.3 Sequencing of real-world activities",
                  "### 4.2 AE specifications", "##### 4.2.1.1 SOP classes", "##### 4.2.1.2 Association policies",
                  "##### 4.2.1.3 Association acceptance policy", "##### 4.2.1.4 Association initiation policy",
                  "### 4.3 Network interfaces", "### 4.4 Configuration", "## 5 Media interchange",
                  "## 6 Support of character sets", "## 7 Security", "### 7.2 Transport (TLS profile)",
                  "## 8 Annexes", "### 8.1 IOD contents", "### 8.2 Data dictionary of private attributes",
                  "### 8.3 Coded terminology and templates", "### 8.4 Grayscale image consistency",
                  "### 8.5 Standard extended, specialized and private SOP classes",
                  "### 8.6 Private transfer syntaxes")


def test_the_statement_has_ps3_2_sections_in_order_with_their_contents_and_tables(tmp_path):
    from gateway_helpers import config_text

    from medchallenge.gateway import load_config
    from medchallenge.gateway.conformance import conformance_statement

    config = tmp_path / "gateway.toml"
    config.write_text(config_text(tmp_path / "work", 11112, 4242, ["true"]))
    statement = conformance_statement(load_config(config))
    lines = statement.splitlines()
    positions = [lines.index(heading) for heading in PS3_2_SECTIONS]  # each present as a heading line
    assert positions == sorted(positions)
    contents = statement[statement.index("## 2 Table of contents"):statement.index("## 3 Introduction")]
    for heading in PS3_2_SECTIONS:
        if heading.count("#") <= 4:
            assert f"- {heading.split(' ', 1)[1]}" in contents, heading
    assert "Not supported" in statement[statement.index("## 5 Media"):statement.index("## 6 ")]
    assert "BCP 195" in statement and "PS3.15 B.9" in statement
    for code in ("0000", "A700", "A900", "C000", "calling-AE-title-not-recognized", "local-limit-exceeded"):
        assert f"| {code} |" in statement or code in statement, code
    annex = statement[statement.index("## 8 Annexes"):]
    for term in ("| SCT | 19227008 | Foreign body |", "| DCM | 122411 | Threshold Value |",
                 "| 99MEDCHALLENGE | RIBFRAC-1 | Displaced rib fracture |", "| SR Document Content | M |",
                 "| Segmentation Image | M |", "(0008,0005)"):
        assert term in annex, term
    assert "```" in statement[statement.index("#### 4.1.1"):statement.index("#### 4.1.2")]  # the data-flow diagram


def test_accept_routes_takes_only_what_the_routes_use_and_rejects_the_rest_per_context(tmp_path):
    """`accept = "routes"`: the SCP accepts the routes' modalities' storage SOP classes (here CT, the tb-caverns
    route) in the transfer syntaxes read without a codec; MR is rejected in its presentation context (result 3,
    abstract syntax not supported), CT in JPEG Baseline only (result 4, transfer syntaxes not supported); the
    statement lists exactly what it accepts."""
    from pydicom.uid import ExplicitVRBigEndian, ExplicitVRLittleEndian, JPEGBaseline8Bit

    ct, mr = "1.2.840.10008.5.1.4.1.1.2", "1.2.840.10008.5.1.4.1.1.4"
    gateway, port, config = start_gateway(tmp_path, pacs_port=1, command=[sys.executable, "-c", "pass"],
                                          gateway_extra='accept = "routes"')
    try:
        association = associate(port, contexts=(ct, mr), transfer_syntaxes=[ExplicitVRLittleEndian])
        assert association.is_established
        assert [str(c.abstract_syntax) for c in association.accepted_contexts] == [ct]
        assert [(str(c.abstract_syntax), c.result) for c in association.rejected_contexts] == [(mr, 0x03)]
        association.release()
        association = associate(port, contexts=(ct,), transfer_syntaxes=[JPEGBaseline8Bit, ExplicitVRBigEndian])
        assert [(str(c.abstract_syntax), c.result) for c in association.rejected_contexts] == [(ct, 0x04)]
        association.abort()
        listed = {row[1] for row in table(statement_of(config), "###### 4.2.1.3.2 Accepted presentation contexts")}
        assert accepted_by(port, sorted({ct, mr, "1.2.840.10008.5.1.4.1.1.1", "1.2.840.10008.1.1"})) == listed
    finally:
        gateway.stop()
    assert listed == {ct, "1.2.840.10008.1.1"}


def test_accept_is_all_or_routes_whose_modalities_have_storage_sop_classes(tmp_path):
    import pytest
    from gateway_helpers import config_text

    from medchallenge.errors import InputError
    from medchallenge.gateway import load_config

    config = tmp_path / "gateway.toml"
    config.write_text(config_text(tmp_path / "work", 11112, 4242, ["true"], gateway_extra='accept = "some"'))
    with pytest.raises(InputError, match=r"\[gateway\]: accept = 'some': expected \"all\" or \"routes\""):
        load_config(config)
    mr = config_text(tmp_path / "work", 11112, 4242, ["true"], gateway_extra='accept = "routes"')
    config.write_text(mr.replace('modalities = ["CT"]', 'modalities = ["CT", "MR"]'))
    with pytest.raises(InputError, match="modalities CT, CR, DX; not MR"):
        load_config(config)
    config.write_text(mr)
    assert load_config(config).accept == "routes"
