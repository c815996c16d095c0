"""Tiny upload files of every 2-D kind (JPEG, PNG, DICOM radiographs), made at test time with Pillow and pydicom."""

from __future__ import annotations

from pathlib import Path

import numpy as np

HEIGHT, WIDTH = 6, 8
RGB = np.random.default_rng(0).integers(0, 256, (HEIGHT, WIDTH, 3), dtype=np.uint8)
GREY16 = (np.arange(HEIGHT * WIDTH, dtype=np.uint16).reshape(HEIGHT, WIDTH) * 50)  # 0 .. 2350, 12 bits stored


def pil_image(kind: str):
    from PIL import Image

    return {
        "rgb": lambda: Image.fromarray(RGB),
        "grey": lambda: Image.fromarray(RGB[..., 0]),
        "grey-alpha": lambda: Image.fromarray(np.dstack([RGB[..., 0], RGB[..., 1]]), mode="LA"),
        "grey16": lambda: Image.fromarray(GREY16 * 20),
        "palette": lambda: Image.fromarray(RGB).convert("P"),
        "rgba": lambda: Image.fromarray(np.dstack([RGB, RGB[..., :1]])),
    }[kind]()


def write_jpeg(path: Path, kind: str = "rgb") -> Path:
    pil_image(kind).save(path, format="JPEG", quality=95)
    return path


def write_png(path: Path, kind: str = "rgb") -> Path:
    pil_image(kind).save(path, format="PNG")
    return path


def write_dicom(path: Path, *, modality: str = "DX", monochrome1: bool = False, pixel_spacing=None,
                imager_pixel_spacing=None, position=None, study_uid: str = "1.2.826.0.1.3680043.2.1125.1") -> Path:
    """A single-frame CR/DX radiograph, 16-bit allocated, 12 bits stored, GREY16 as pixel data."""
    from pydicom.dataset import FileDataset, FileMetaDataset
    from pydicom.uid import ExplicitVRLittleEndian, generate_uid

    meta = FileMetaDataset()
    meta.MediaStorageSOPClassUID = {"DX": "1.2.840.10008.5.1.4.1.1.1.1", "CR": "1.2.840.10008.5.1.4.1.1.1"}[modality]
    meta.MediaStorageSOPInstanceUID = generate_uid()
    meta.TransferSyntaxUID = ExplicitVRLittleEndian
    ds = FileDataset(str(path), {}, file_meta=meta, preamble=b"\0" * 128)
    ds.SOPClassUID, ds.SOPInstanceUID = meta.MediaStorageSOPClassUID, meta.MediaStorageSOPInstanceUID
    ds.StudyInstanceUID, ds.SeriesInstanceUID = study_uid, generate_uid()
    ds.Modality, ds.PatientID, ds.InstanceNumber = modality, "ANON", 1
    ds.Rows, ds.Columns = GREY16.shape
    ds.SamplesPerPixel, ds.BitsAllocated, ds.BitsStored, ds.HighBit, ds.PixelRepresentation = 1, 16, 12, 11, 0
    ds.PhotometricInterpretation = "MONOCHROME1" if monochrome1 else "MONOCHROME2"
    if pixel_spacing is not None:
        ds.PixelSpacing = list(pixel_spacing)
    if imager_pixel_spacing is not None:
        ds.ImagerPixelSpacing = list(imager_pixel_spacing)
    if position is not None:
        ds.ImagePositionPatient = list(position)
        ds.ImageOrientationPatient = [1, 0, 0, 0, 1, 0]
    ds.PixelData = GREY16.tobytes()
    ds.save_as(str(path), enforce_file_format=True)
    return path
