"""The DICOM presentation contexts of the gateway, in one place: what its SCP accepts (with `accept = "all"`, every
storage SOP class in any transfer syntax pynetdicom knows; with `accept = "routes"`, only the storage SOP classes of
the routes' modalities in the transfer syntaxes the gateway reads without a codec: the rest are rejected per
presentation context at association, result 3 "abstract syntax not supported" or 4 "transfer syntaxes not
supported"; and Verification), what its SCU proposes to the PACS (the SOP classes its writers
produce: medchallenge.dicom.sr and .seg), and the transfer syntaxes proposed for them (pynetdicom's defaults without the
retired Explicit VR Big Endian); and how the gateway identifies itself in both roles: its own Implementation Class
UID (under the UUID-derived root 2.25 of PS3.5 B.2, the decimal of UUID 8f15301a-d07f-46ac-95aa-ef83a715f802,
generated once for this project, so that no registration is needed) and version name. The server, the PACS client
and the conformance statement (conformance.py) all read them from here."""

from __future__ import annotations

# What the writers produce: Comprehensive SR (TID 1500 measurement reports and failure notes) and Segmentation
COMPREHENSIVE_SR = "1.2.840.10008.5.1.4.1.1.88.33"
SEGMENTATION = "1.2.840.10008.5.1.4.1.1.66.4"
WRITTEN_SOP_CLASSES = (COMPREHENSIVE_SR, SEGMENTATION)
VERIFICATION = "1.2.840.10008.1.1"
EXPLICIT_VR_BIG_ENDIAN = "1.2.840.10008.1.2.2"  # retired (PS3.5 A.3): never proposed
# the project's Implementation Class UID: 2.25.<a UUID as a decimal integer>, generated once; its last component is
# the implementation's version (1: medchallenge 0.1)
IMPLEMENTATION_CLASS_UID = "2.25.190189617311392151227705986302772377602.1"
IMPLEMENTATION_VERSION_NAME = "MEDCHALLENGE_0_1"  # at most 16 characters


def identify(ae) -> None:
    """The gateway's identity on a pynetdicom AE (SCP or SCU): the project's Implementation Class UID and version."""
    ae.implementation_class_uid = IMPLEMENTATION_CLASS_UID
    ae.implementation_version_name = IMPLEMENTATION_VERSION_NAME


# The storage SOP classes of the images each routable modality sends (single-frame: the series readers refuse
# multi-frame images), and the transfer syntaxes the gateway reads without a codec (`accept = "routes"`)
MODALITY_SOP_CLASSES = {
    "CT": ("1.2.840.10008.5.1.4.1.1.2",),  # CT Image Storage
    "CR": ("1.2.840.10008.5.1.4.1.1.1",),  # Computed Radiography Image Storage
    "DX": ("1.2.840.10008.5.1.4.1.1.1.1", "1.2.840.10008.5.1.4.1.1.1.1.1"),  # Digital X-Ray, presentation/processing
}
ROUTED_TRANSFER_SYNTAXES = ("1.2.840.10008.1.2", "1.2.840.10008.1.2.1",  # Implicit, Explicit VR Little Endian
                            "1.2.840.10008.1.2.1.99")  # Deflated Explicit VR Little Endian
ACCEPT = ("all", "routes")


def accepted_contexts(accept: str = "all", modalities: tuple[str, ...] = ()) -> list[tuple[str, list[str]]]:
    """(abstract syntax, transfer syntaxes) of every context the SCP accepts: `accept` "all", every storage SOP class
    in pynetdicom's order; "routes", those of `modalities` (the routes') in ROUTED_TRANSFER_SYNTAXES; then
    Verification."""
    from pynetdicom import ALL_TRANSFER_SYNTAXES, AllStoragePresentationContexts, DEFAULT_TRANSFER_SYNTAXES

    if accept == "routes":
        routed = {uid for modality in modalities for uid in MODALITY_SOP_CLASSES[modality]}
        storage = [(uid, list(ROUTED_TRANSFER_SYNTAXES))
                   for uid in (str(c.abstract_syntax) for c in AllStoragePresentationContexts) if uid in routed]
    else:
        storage = [(str(c.abstract_syntax), [str(t) for t in ALL_TRANSFER_SYNTAXES])
                   for c in AllStoragePresentationContexts]
    return [*storage, (VERIFICATION, [str(t) for t in DEFAULT_TRANSFER_SYNTAXES])]


def proposed_transfer_syntaxes() -> list[str]:
    """The transfer syntaxes the SCU proposes for each result's SOP class (pynetdicom's defaults, without the retired
    Explicit VR Big Endian)."""
    from pynetdicom import DEFAULT_TRANSFER_SYNTAXES

    return [str(t) for t in DEFAULT_TRANSFER_SYNTAXES if str(t) != EXPLICIT_VR_BIG_ENDIAN]
