"""`medchallenge gateway --conformance`: the DICOM Conformance Statement lists exactly the presentation contexts a
real gateway on loopback accepts, and exactly the SOP classes the result writers create."""

from __future__ import annotations

import re
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
    created = {row[1] for row in table(statement, "## 8 Annexes: created SOP instances")}
    assert {str(ds.SOPClassUID) for ds in written} == initiated == created
    assert {str(ds.file_meta.TransferSyntaxUID) for ds in written} == {"1.2.840.10008.1.2.1"}  # sent as written
    assert "sent as written (Explicit VR Little Endian)" in " ".join(statement.split())
    scu = {row[1] for row in table(statement, "##### 4.2.1.1 SOP classes") if row[2] == "Yes"}
    assert scu == initiated
    charsets = {str(ds.get("SpecificCharacterSet", "")) for ds in written}
    claimed = re.search(r"Created instances use (ISO_IR \d+)", statement).group(1)
    assert charsets <= {claimed, ""}, charsets


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
