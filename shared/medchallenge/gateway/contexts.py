"""The DICOM presentation contexts of the gateway, in one place: what its SCP accepts (every storage SOP class in any
transfer syntax pynetdicom knows, and Verification), what its SCU proposes to the PACS (the SOP classes its writers
produce: medchallenge.dicom.sr and .seg), and the transfer syntaxes proposed for them. The server, the PACS client and
the conformance statement (conformance.py) all read them from here."""

from __future__ import annotations

# What the writers produce: Comprehensive SR (TID 1500 measurement reports and failure notes) and Segmentation
COMPREHENSIVE_SR = "1.2.840.10008.5.1.4.1.1.88.33"
SEGMENTATION = "1.2.840.10008.5.1.4.1.1.66.4"
WRITTEN_SOP_CLASSES = (COMPREHENSIVE_SR, SEGMENTATION)
VERIFICATION = "1.2.840.10008.1.1"


def accepted_contexts() -> list[tuple[str, list[str]]]:
    """(abstract syntax, transfer syntaxes) of every context the SCP accepts, in pynetdicom's order."""
    from pynetdicom import ALL_TRANSFER_SYNTAXES, AllStoragePresentationContexts, DEFAULT_TRANSFER_SYNTAXES

    return [*((str(c.abstract_syntax), [str(t) for t in ALL_TRANSFER_SYNTAXES]) for c in AllStoragePresentationContexts),
            (VERIFICATION, [str(t) for t in DEFAULT_TRANSFER_SYNTAXES])]


def proposed_transfer_syntaxes() -> list[str]:
    """The transfer syntaxes the SCU proposes for each result's SOP class (pynetdicom's defaults)."""
    from pynetdicom import DEFAULT_TRANSFER_SYNTAXES

    return [str(t) for t in DEFAULT_TRANSFER_SYNTAXES]
