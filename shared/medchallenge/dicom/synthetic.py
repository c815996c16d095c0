"""Synthetic DICOM CT series from a volume and its NIfTI affine, and CR chest radiographs from their pixels (for
tests, the demo and the gateway's PACS tests).

Realistic tags: patient, study and series modules with UIDs derived from a seed (the same seed gives the same
UIDs), CT Image module (KVP, kernel, rescale slope/intercept: values stored as unsigned HU + 1024), and the geometry
of the NIfTI (RAS) converted to DICOM's LPS: ImagePositionPatient per slice, ImageOrientationPatient, PixelSpacing.
Files are named after their SOP Instance UID, so the file name says nothing about the slice order.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np

from ..io import write_dicom_atomic

RAS_TO_LPS = np.diag([-1.0, -1.0, 1.0])
CT_IMAGE_STORAGE = "1.2.840.10008.5.1.4.1.1.2"
CR_IMAGE_STORAGE = "1.2.840.10008.5.1.4.1.1.1"
RESCALE_INTERCEPT = -1024


@dataclass(frozen=True)
class SyntheticStudy:
    """Who and what a synthetic study is about; the UIDs derive from `key` (stable for a seed and case)."""

    key: str
    patient_id: str
    patient_name: str = "SYNTHETIC^PATIENT"
    body_part: str = "CHEST"
    study_description: str = "CT CHEST (synthetic)"
    study_date: str = "20260101"

    def uid(self, what: str) -> str:
        from pydicom.uid import generate_uid

        return generate_uid(entropy_srcs=[self.key, what])


def lps_geometry(affine: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(origin, axes (3x3, columns = voxel steps of i, j, k), spacing) in LPS mm from a RAS voxel->world affine."""
    lps = RAS_TO_LPS @ np.asarray(affine, dtype=np.float64)[:3]
    axes = lps[:, :3]
    return lps[:, 3], axes, np.linalg.norm(axes, axis=0)


def base_dataset(study: SyntheticStudy, sop_class: str, sop_uid: str, modality: str, series_description: str):
    """A dataset with the file meta, SOP common, patient, general study, series and equipment modules."""
    from pydicom.dataset import Dataset, FileMetaDataset
    from pydicom.uid import ExplicitVRLittleEndian, PYDICOM_IMPLEMENTATION_UID

    ds = Dataset()
    ds.file_meta = FileMetaDataset()
    ds.file_meta.MediaStorageSOPClassUID = sop_class
    ds.file_meta.MediaStorageSOPInstanceUID = sop_uid
    ds.file_meta.TransferSyntaxUID = ExplicitVRLittleEndian
    ds.file_meta.ImplementationClassUID = PYDICOM_IMPLEMENTATION_UID
    ds.SpecificCharacterSet = "ISO_IR 100"
    ds.SOPClassUID, ds.SOPInstanceUID = sop_class, sop_uid
    ds.StudyDate = ds.SeriesDate = ds.ContentDate = study.study_date
    ds.StudyTime = ds.SeriesTime = ds.ContentTime = "120000"
    ds.AccessionNumber = study.patient_id.replace("_", "")[:16]
    ds.Modality = modality
    ds.Manufacturer = "medchallenge synthetic"
    ds.ReferringPhysicianName = ""
    ds.StudyDescription = study.study_description
    ds.SeriesDescription = series_description
    ds.PatientName, ds.PatientID = study.patient_name, study.patient_id
    ds.PatientBirthDate, ds.PatientSex = "19700101", "O"
    ds.BodyPartExamined = study.body_part
    ds.StudyInstanceUID, ds.SeriesInstanceUID = study.uid("study"), study.uid("series")
    ds.StudyID, ds.SeriesNumber = "1", 1
    return ds


def ras_affine(spacing: tuple[float, float, float], origin_lps: tuple[float, float, float]) -> np.ndarray:
    """The NIfTI (RAS) affine of a volume with identity direction in LPS (as SimpleITK writes NIfTI)."""
    affine = np.diag([-spacing[0], -spacing[1], spacing[2], 1.0])
    affine[:3, 3] = [-origin_lps[0], -origin_lps[1], origin_lps[2]]
    return affine


def ct_datasets(volume_xyz: np.ndarray, affine: np.ndarray, study: SyntheticStudy, modality: str = "CT"):
    """One pydicom Dataset per slice k of an (x, y, z) int16 HU volume (rows = y, columns = x)."""
    origin, axes, spacing = lps_geometry(affine)
    row_direction, column_direction = axes[:, 0] / spacing[0], axes[:, 1] / spacing[1]
    frame_uid = study.uid("frame-of-reference")
    stored = np.clip(volume_xyz.astype(np.int32) - RESCALE_INTERCEPT, 0, 4095).astype(np.uint16)
    for k in range(volume_xyz.shape[2]):
        ds = base_dataset(study, CT_IMAGE_STORAGE, study.uid(f"instance-{k}"), modality, "synthetic chest CT")
        ds.ImageType = ["ORIGINAL", "PRIMARY", "AXIAL"]
        ds.SliceThickness = f"{spacing[2]:.4g}"
        ds.KVP = "120"
        ds.ConvolutionKernel = "STANDARD"
        ds.PatientPosition = "FFS"
        ds.AcquisitionNumber, ds.InstanceNumber = 1, k + 1
        position = origin + k * axes[:, 2]
        ds.ImagePositionPatient = [f"{v:.6g}" for v in position]
        ds.ImageOrientationPatient = [f"{v:.6g}" for v in (*row_direction, *column_direction)]
        ds.FrameOfReferenceUID = frame_uid
        ds.PositionReferenceIndicator = ""
        ds.SliceLocation = f"{position[2]:.6g}"
        ds.SamplesPerPixel, ds.PhotometricInterpretation = 1, "MONOCHROME2"
        ds.Rows, ds.Columns = volume_xyz.shape[1], volume_xyz.shape[0]
        ds.PixelSpacing = [f"{spacing[1]:.6g}", f"{spacing[0]:.6g}"]
        ds.BitsAllocated, ds.BitsStored, ds.HighBit, ds.PixelRepresentation = 16, 12, 11, 0
        ds.RescaleIntercept, ds.RescaleSlope, ds.RescaleType = str(RESCALE_INTERCEPT), "1", "HU"
        ds.WindowCenter, ds.WindowWidth = "-600", "1500"
        ds.PixelData = np.ascontiguousarray(stored[:, :, k].T).tobytes()
        yield ds


def radiograph_dataset(pixels: np.ndarray, study: SyntheticStudy, view: str = "PA"):
    """A CR chest radiograph (CR Image Storage) of 8-bit grey `pixels` (rows, columns), displayed as stored."""
    ds = base_dataset(study, CR_IMAGE_STORAGE, study.uid("instance-0"), "CR", f"synthetic chest X-ray {view}")
    ds.ImageType = ["ORIGINAL", "PRIMARY"]
    ds.ViewPosition = view
    ds.PatientOrientation = ["L", "F"] if view in ("PA", "AP") else ""
    ds.InstanceNumber = 1
    ds.SamplesPerPixel, ds.PhotometricInterpretation = 1, "MONOCHROME2"
    ds.Rows, ds.Columns = pixels.shape
    ds.BitsAllocated, ds.BitsStored, ds.HighBit, ds.PixelRepresentation = 8, 8, 7, 0
    ds.PixelData = np.ascontiguousarray(pixels, dtype=np.uint8).tobytes()
    return ds


def write_ct_series(folder: Path, volume_xyz: np.ndarray, affine: np.ndarray, study: SyntheticStudy) -> list[Path]:
    """Write the series into `folder` (one `<SOPInstanceUID>.dcm` per slice, each atomically); return the paths."""
    return [write_dicom_atomic(Path(folder) / f"{ds.SOPInstanceUID}.dcm", ds)
            for ds in ct_datasets(volume_xyz, affine, study)]
