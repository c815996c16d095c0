"""A seeded DICOM fuzzer for the gateway (issue 22, part 7): valid synthetic studies, each given a few mutations (tags,
VRs, lengths, transfer syntaxes, pixel data, UIDs; issue 29: many tiny elements, nested or not, and deflate streams
padded, truncated, concatenated or random), written as files whose bytes are then sent as they are (chunked C-STORE,
no re-encoding by the sender). Also the writers of those hostile shapes for the tests and `make bench`."""

from __future__ import annotations

import io
import random
import shutil
import zlib
from collections import Counter
from pathlib import Path

import numpy as np
import pydicom
from pydicom.uid import (DeflatedExplicitVRLittleEndian, ExplicitVRBigEndian, ExplicitVRLittleEndian,
                         ImplicitVRLittleEndian, generate_uid)

DELETABLE = ("SeriesInstanceUID", "Modality", "BodyPartExamined", "Rows", "Columns", "PixelData",
             "ImagePositionPatient", "ImageOrientationPatient", "PixelSpacing", "BitsAllocated", "PatientName",
             "RescaleSlope", "SamplesPerPixel", "PhotometricRepresentation")
BAD_VALUES = (("SliceThickness", "abc"), ("ImagePositionPatient", ["1", "x"]), ("ImagePositionPatient", ["5"]),
              ("PixelSpacing", ["-1", "0"]), ("PixelSpacing", ["1e30", "1e30"]), ("NumberOfFrames", "many"),
              ("RescaleSlope", "nan"), ("GantryDetectorTilt", "inf"), ("Rows", 0), ("Columns", 65535),
              ("BitsAllocated", 32), ("BitsStored", 40), ("PatientName", "=cmd|' /C calc'!A0\u202e"),
              ("BodyPartExamined", "CHEST\\RIB"), ("Modality", "C\x00T"))
VRS = (b"UN", b"OB", b"SQ", b"DS", b"AT", b"XX")
SYNTAXES = (ImplicitVRLittleEndian, DeflatedExplicitVRLittleEndian, ExplicitVRBigEndian)
PIXEL_DATA_OW = b"\xe0\x7f\x10\x00OW\x00\x00"  # (7FE0,0010) OW, explicit little endian, a 4-byte length follows


def add_tiny_elements(ds, count: int, nested: bool = False) -> None:
    """`count` private UL elements (12 bytes each in explicit VR) in `ds`, or all in the one item of an undefined-length
    private sequence (parsed by pydicom as soon as it is read)."""
    target = pydicom.Dataset() if nested else ds
    for number in range(count):
        group, element = divmod(number, 0xF000)
        target.add_new((0x0019 + 2 * group) << 16 | (0x1000 + element), "UL", number)
    if nested:
        target.is_undefined_length_sequence_item = True
        ds.add_new(0x00171010, "SQ", [target])
        ds[0x00171010].is_undefined_length = True


def insert_tiny_elements(path: Path, count: int) -> Path:
    """`count` private UL elements (12 bytes each) inserted as raw bytes before the pixel data of the explicit VR
    little endian file `path` (millions in seconds, where pydicom would take minutes and gigabytes)."""
    data = path.read_bytes()
    at = data.rindex(b"\xe0\x7f\x10\x00")
    elements = np.zeros(count, dtype=[("group", "<u2"), ("element", "<u2"), ("vr", "S2"), ("length", "<u2"),
                                      ("value", "<u4")])
    number = np.arange(count)
    elements["group"], elements["element"] = 0x0029 + 2 * (number // 0xF000), 0x1000 + number % 0xF000
    elements["vr"], elements["length"], elements["value"] = b"UL", 4, number
    path.write_bytes(data[:at] + elements.tobytes() + data[at:])
    return path


def write_deflated_zeros(path: Path, ds, pixel_bytes: int) -> Path:
    """`ds` (its pixel data replaced) as a deflated Part-10 file whose pixel data is `pixel_bytes` zero bytes, deflated
    as a stream (never whole in memory) and followed by data after its end, as pydicom pads an odd stream."""
    from pydicom.filebase import DicomBytesIO, DicomFileLike
    from pydicom.filewriter import write_dataset, write_file_meta_info

    if "PixelData" in ds:
        del ds.PixelData
    ds.file_meta.TransferSyntaxUID = DeflatedExplicitVRLittleEndian
    body = DicomBytesIO()
    body.is_little_endian, body.is_implicit_VR = True, False
    write_dataset(body, ds)
    deflater = zlib.compressobj(9, zlib.DEFLATED, -zlib.MAX_WBITS)
    with open(path, "wb") as out:
        out.write(b"\0" * 128 + b"DICM")
        write_file_meta_info(DicomFileLike(out), ds.file_meta)
        size = out.write(deflater.compress(body.getvalue() + PIXEL_DATA_OW + pixel_bytes.to_bytes(4, "little")))
        zeros = bytes(1 << 20)
        for start in range(0, pixel_bytes, len(zeros)):
            size += out.write(deflater.compress(zeros[: min(len(zeros), pixel_bytes - start)]))
        size += out.write(deflater.flush())
        out.write(b"\0" if size % 2 else b"\0\0")
    return path


STREAM_MUTATIONS = ("intact", "padded", "truncated", "concatenated", "random", "bit_flip")


def mutate_stream(rng: random.Random, stream: bytes, kind: str) -> bytes:
    """A deflate stream mutated as `kind` says: data after its end (padded: random bytes; concatenated: a second
    stream), cut short, replaced by random bytes or with a bit flipped."""
    if kind == "padded":
        return stream + rng.randbytes(rng.choice((1, 2, rng.randrange(1, 1 << 16))))
    if kind == "truncated":
        return stream[: rng.randrange(len(stream))]
    if kind == "concatenated":
        return stream + stream
    if kind == "random":
        return rng.randbytes(len(stream))
    if kind == "bit_flip" and stream:
        at = rng.randrange(len(stream))
        return stream[:at] + bytes([stream[at] ^ 1 << rng.randrange(8)]) + stream[at + 1:]
    return stream


def data_offset(path: Path) -> int:
    """Where the data set starts in a Part-10 file (after the preamble and the file meta group)."""
    meta = pydicom.filereader.read_file_meta_info(path)
    return 132 + 12 + int(meta.FileMetaInformationGroupLength)


def write(ds, path: Path) -> bool:
    """`ds` as a Part-10 file in its transfer syntax (big endian through dcmwrite), else in explicit little endian;
    False when pydicom cannot write it at all."""
    big_endian = ds.file_meta.TransferSyntaxUID == ExplicitVRBigEndian
    for attempt in range(2):
        try:
            if big_endian and attempt == 0:
                pydicom.dcmwrite(path, ds, implicit_vr=False, little_endian=False, enforce_file_format=True)
            else:
                ds.save_as(path, enforce_file_format=True)
            return True
        except Exception:
            ds.file_meta.TransferSyntaxUID = ExplicitVRLittleEndian
    return False


class StudyFuzzer:
    """Mutated copies of base studies; `counts` tallies the mutations made."""

    def __init__(self, seed: int, bases: list[list[Path]]):
        self.rng = random.Random(seed)
        self.seed = seed
        self.bases = bases
        self.counts: Counter[str] = Counter()
        self.made = 0

    def uid(self, *what) -> str:
        return generate_uid(entropy_srcs=[str(self.seed), str(self.made), *map(str, what)])

    def study(self, folder: Path) -> list[Path]:
        """One mutated study under `folder`: its files (values pydicom would refuse are set and written as they
        are)."""
        with pydicom.config.disable_value_validation():
            return self._study(folder)

    def _study(self, folder: Path) -> list[Path]:
        self.made += 1
        base = self.rng.choice(self.bases)
        study_uid, series_uid = self.uid("study"), self.uid("series")
        datasets = []
        for number, path in enumerate(base):
            ds = pydicom.dcmread(path)
            ds.StudyInstanceUID, ds.SeriesInstanceUID = study_uid, series_uid
            ds.SOPInstanceUID = ds.file_meta.MediaStorageSOPInstanceUID = self.uid("instance", number)
            datasets.append(ds)
        byte_mutations = []
        for _ in range(self.rng.randint(1, 3)):
            kind = self.rng.choice(("delete_tag", "bad_value", "uids", "pixel_data", "transfer_syntax", "vr",
                                    "length", "truncate", "bit_flips", "tiny_elements", "deflate_stream"))
            self.counts[kind] += 1
            if kind in ("vr", "length", "truncate", "bit_flips", "deflate_stream"):
                byte_mutations.append(kind)
            else:
                getattr(self, kind)(datasets)
        folder.mkdir(parents=True)
        files = []
        for ds in datasets:
            path = folder / f"{len(files)}.dcm"
            if not write(ds, path):  # a mutation pydicom cannot write: the base instance instead, noted
                self.counts["unwritable"] += 1
                shutil.copy(self.rng.choice(base), path)
            files.append(path)
        for kind in byte_mutations:
            getattr(self, kind)(self.rng.choice(files))
        return files

    # --- data set mutations (on some or all instances) ------------------------------------------------------
    def some(self, datasets: list) -> list:
        return datasets if self.rng.random() < 0.3 else self.rng.sample(datasets, self.rng.randint(1, len(datasets)))

    def delete_tag(self, datasets: list) -> None:
        keyword = self.rng.choice(DELETABLE)
        for ds in self.some(datasets):
            if keyword in ds:
                delattr(ds, keyword)

    def bad_value(self, datasets: list) -> None:
        keyword, value = self.rng.choice(BAD_VALUES)
        for ds in self.some(datasets):
            try:
                setattr(ds, keyword, value)
            except ValueError:  # not a number where pydicom converts: the text as an LO element of that tag
                tag = pydicom.datadict.tag_for_keyword(keyword)
                ds[tag] = pydicom.DataElement(tag, "LO", "\\".join(value) if isinstance(value, list) else value)

    def uids(self, datasets: list) -> None:
        choice = self.rng.randrange(5)
        for ds in self.some(datasets):
            if choice == 0:
                ds.StudyInstanceUID = "1.2." + "9" * 70  # too long
            elif choice == 1:
                ds.StudyInstanceUID = "1.2.abc"
            elif choice == 2:
                ds.SOPInstanceUID = datasets[0].SOPInstanceUID  # duplicates within the study
            elif choice == 3:
                ds.SeriesInstanceUID = self.uid("shared-series-of-every-study-of-this-seed")
            else:
                ds.StudyInstanceUID = self.uid("another-study", self.rng.random())  # one study split in two

    def pixel_data(self, datasets: list) -> None:
        choice = self.rng.randrange(3)
        for ds in self.some(datasets):
            if "PixelData" not in ds:
                continue
            data = bytes(ds.PixelData)
            if choice == 0:
                ds.PixelData = data[: len(data) // 2]
            elif choice == 1:
                ds.PixelData = data * 8
            else:
                ds.PixelData = np.frombuffer(self.rng.randbytes(len(data)), np.uint8).tobytes()
                ds.Rows = int(ds.Rows) * 2

    def tiny_elements(self, datasets: list) -> None:
        """One instance given many tiny private elements (about or over the gateway's header bounds), nested or not."""
        add_tiny_elements(self.rng.choice(datasets), self.rng.choice((1_000, 60_000, 110_000)),
                          nested=self.rng.random() < 0.5)

    def transfer_syntax(self, datasets: list) -> None:
        syntax = self.rng.choice(SYNTAXES)
        for ds in self.some(datasets):
            ds.file_meta.TransferSyntaxUID = syntax

    # --- byte mutations (on one written file, after its file meta) -----------------------------------------------
    def vr(self, path: Path) -> None:
        data = bytearray(path.read_bytes())
        start = data_offset(path)
        positions = [i for i in range(start, len(data) - 6, 2) if data[i + 4:i + 6].isalpha()
                     and data[i + 4:i + 6].isupper()]
        for i in self.rng.sample(positions, min(3, len(positions))):
            data[i + 4:i + 6] = self.rng.choice(VRS)
        path.write_bytes(bytes(data))

    def length(self, path: Path) -> None:
        data = bytearray(path.read_bytes())
        start = data_offset(path)
        for _ in range(3):
            at = self.rng.randrange(start, max(start + 1, len(data) - 4))
            data[at:at + 4] = self.rng.choice((b"\xff\xff\xff\xff", b"\xff\xff\x00\x00", b"\x00\x00\x00\x7f"))
        path.write_bytes(bytes(data))

    def deflate_stream(self, path: Path) -> None:
        """The file deflated (by pydicom, padded to even length), then its deflate stream mutated: data after its
        end, cut short, concatenated, random or a bit flipped."""
        try:
            ds = pydicom.dcmread(path)
        except Exception:  # an earlier byte mutation made it unreadable: left as it is
            return
        ds.file_meta.TransferSyntaxUID = DeflatedExplicitVRLittleEndian
        if not write(ds, path) or ds.file_meta.TransferSyntaxUID != DeflatedExplicitVRLittleEndian:
            return
        kind = self.rng.choice(STREAM_MUTATIONS)
        self.counts[f"deflate_stream {kind}"] += 1
        data = path.read_bytes()
        start = data_offset(path)
        path.write_bytes(data[:start] + mutate_stream(self.rng, data[start:], kind))

    def truncate(self, path: Path) -> None:
        data = path.read_bytes()
        start = data_offset(path)
        path.write_bytes(data[: self.rng.randrange(start, len(data))])

    def bit_flips(self, path: Path) -> None:
        data = bytearray(path.read_bytes())
        start = data_offset(path)
        for _ in range(10):
            at = self.rng.randrange(start, len(data))
            data[at] ^= 1 << self.rng.randrange(8)
        path.write_bytes(bytes(data))
