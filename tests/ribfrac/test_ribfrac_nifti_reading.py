"""RibFrac volumes and folders read as the official code reads them (docs/metrics/ribfrac.md §1.1, §1.2): nibabel
3.2.2's checks of each NIfTI header field (the ones it refuses and the ones it ignores), NIfTI-2, extensions, the gzip
layer, and `NiiDataset`'s listing. One test per class of issue 40; the expected outcome of each is nibabel 3.2.2's
(tests/reference/test_ribfrac_volume_fuzz_reference.py checks the same classes against it at random)."""

from __future__ import annotations

import gzip
import json
import shutil
import struct
import zlib
from pathlib import Path

import nibabel as nib
import numpy as np
import pytest

from medchallenge.errors import InputError
from medchallenge.evaluators.ribfrac import collect_sources, main
from medchallenge.formats import ribfrac as formats
from medchallenge.synth.ribfrac import write_stored_nifti

OFFICIAL_FAILS = r"cannot read the volume \(nibabel: \w+\), so the official code fails"


def labels() -> np.ndarray:
    volume = np.zeros((6, 5, 4), np.uint8)
    volume[1:3, 1:3, 1:3], volume[4, 3, 2] = 1, 2
    return volume


def nifti1(volume: np.ndarray, **fields) -> bytearray:
    """A NIfTI-1 single file as nibabel writes it, then the given header fields set as raw values."""
    header = nib.Nifti1Header()
    header.set_data_dtype(volume.dtype)
    header.set_data_shape(volume.shape)
    header.set_qform(np.diag([0.7, 0.8, 1.25, 1.0]), 1)
    header.set_data_offset(352)
    for name, value in fields.items():
        header[name] = value
    return bytearray(header.binaryblock + b"\0" * 4 + volume.tobytes(order="F"))


def written(path: Path, data: bytes) -> Path:
    path.write_bytes(gzip.compress(bytes(data)) if path.name.endswith(".gz") else bytes(data))
    return path


def test_an_sform_with_shear_is_read_as_the_official_code_reads_it(tmp_path):
    """Item 2: qform_code 0, sform_code 1 with a shear of 1e-4: ITK refuses, nibabel never looks at the affine."""
    data = nifti1(labels(), qform_code=0, sform_code=1, srow_x=[0.7, 1e-4, 0, 0])
    assert np.array_equal(formats.read_label_volume(written(tmp_path / "s.nii.gz", data)), labels())


@pytest.mark.parametrize("magic", [b"n+2\0", b"nx1\0", b"\0\0\0\0", b"n+1x"])
def test_a_magic_other_than_n_plus_1_or_ni1_fails_as_in_nibabel(tmp_path, magic):
    """Item 5: nibabel 3.2.2 finds no image class for the file (ImageFileError) or refuses the header."""
    data = nifti1(labels())
    data[344:348] = magic
    with pytest.raises(InputError, match=OFFICIAL_FAILS):
        formats.read_label_volume(written(tmp_path / "m.nii", data))


@pytest.mark.parametrize("offset", [348, 349, 350, 351, 1, 347])
def test_vox_offset_below_352_fails_as_in_nibabel(tmp_path, offset):
    """Item 6: nibabel refuses a single-file NIfTI-1 whose voxels start before 352 (HeaderDataError); the project's
    own parser read 348-351 shifted."""
    data = nifti1(labels())
    struct.pack_into("<f", data, 108, float(offset))
    with pytest.raises(InputError, match=OFFICIAL_FAILS):
        formats.read_label_volume(written(tmp_path / "o.nii.gz", data))


def test_vox_offset_0_reads_the_header_bytes_as_voxels_as_nibabel_does(tmp_path):
    """Item 7: offset 0 is not checked; nibabel reads the voxels from byte 0, header included."""
    data = nifti1(labels())
    struct.pack_into("<f", data, 108, 0.0)
    expected = np.frombuffer(bytes(data[:labels().size]), np.uint8).reshape(labels().shape, order="F")
    assert np.array_equal(formats.read_label_volume(written(tmp_path / "z.nii", data)), expected)


@pytest.mark.parametrize("bitpix", [0, 16, 7, -8])
def test_bitpix_is_ignored_as_in_nibabel(tmp_path, bitpix):
    """Item 8: nibabel takes the voxel size from datatype alone."""
    data = nifti1(labels(), bitpix=bitpix)
    assert np.array_equal(formats.read_label_volume(written(tmp_path / "b.nii.gz", data)), labels())


@pytest.mark.parametrize("sizeof_hdr", [349, 540])
def test_a_nifti1_header_size_of_349_or_540_is_read(tmp_path, sizeof_hdr):
    """Item 9: nibabel knows the file by its magic and fixes sizeof_hdr (a warning, not an error)."""
    data = nifti1(labels())
    struct.pack_into("<i", data, 0, sizeof_hdr)
    assert np.array_equal(formats.read_label_volume(written(tmp_path / "h.nii", data)), labels())


def test_nifti2_files_are_read(tmp_path):
    """Item 9: NIfTI-2 is a legitimate format, which nibabel reads and ITK does not."""
    nib.Nifti2Image(labels(), np.eye(4)).to_filename(tmp_path / "n2.nii.gz")
    assert np.array_equal(formats.read_label_volume(tmp_path / "n2.nii.gz"), labels())


def test_a_qform_quaternion_longer_than_1_fails_as_in_nibabel(tmp_path):
    """Item 10: b² + c² + d² > 1 with qform_code > 0: nibabel computes the affine at load and fails."""
    data = nifti1(labels(), qform_code=1, quatern_b=0.8, quatern_c=0.8, quatern_d=0.8)
    with pytest.raises(InputError, match=OFFICIAL_FAILS):
        formats.read_label_volume(written(tmp_path / "q.nii.gz", data))
    # with qform_code 0 the quaternion is never read
    data = nifti1(labels(), qform_code=0, quatern_b=0.8, quatern_c=0.8, quatern_d=0.8)
    assert np.array_equal(formats.read_label_volume(written(tmp_path / "q0.nii.gz", data)), labels())


@pytest.mark.parametrize(("esize", "ecode", "fails"), [(4096, 6, True), (16, 6, False), (32, 2, False)])
def test_extension_blocks_as_nibabel_reads_them(tmp_path, esize, ecode, fails):
    """Item 11: an extension block longer than the file fails in nibabel; a well-formed one, DICOM (code 2) with
    content that is no DICOM included (kept as bytes, as nibabel 3.2.2 without pydicom does), is read past."""
    data = nifti1(labels())
    block = struct.pack("<ii", esize, ecode) + bytes.fromhex("4420823cfde6f1c2") * 3  # no DICOM: pydicom fails
    block = block[:max(16, min(esize, 32))].ljust(max(16, min(esize, 32)), b"\0")
    data = data[:348] + bytes([1, 0, 0, 0]) + block + data[352:]
    struct.pack_into("<f", data, 108, float(352 + len(block)))
    path = written(tmp_path / "e.nii", data)
    if fails:
        with pytest.raises(InputError, match=OFFICIAL_FAILS):
            formats.read_label_volume(path)
    else:
        assert np.array_equal(formats.read_label_volume(path), labels())


@pytest.mark.parametrize("layer", ["crc", "length", "header_checksum", "trailing_bytes"])
def test_gzip_layers_nibabel_never_checks_are_read(tmp_path, layer):
    """Item 12: nibabel reads the voxels it needs and stops: a wrong CRC-32 or length in the trailer, a wrong
    header checksum (FHCRC) and bytes after the member are never looked at. (Below 1,024 bytes its sniff of the
    header reads to the end of the stream, which checks the trailer: the fuzz covers both sizes.)"""
    volume = np.zeros((16, 16, 8), np.uint8)
    volume[2:5, 3:9, 1:4] = 1
    raw = bytes(nifti1(volume))
    head = bytearray(b"\x1f\x8b\x08\x00\x00\x00\x00\x00\x00\xff")
    if layer == "header_checksum":
        head[3] |= 2
        head += struct.pack("<H", (zlib.crc32(bytes(head)) & 0xFFFF) ^ 0x1234)
    trailer = struct.pack("<II", zlib.crc32(raw) ^ (1 if layer == "crc" else 0),
                          len(raw) + (7 if layer == "length" else 0))
    member = bytes(head) + zlib.compress(raw)[2:-4] + trailer + (b"junk" if layer == "trailing_bytes" else b"")
    (tmp_path / "g.nii.gz").write_bytes(member)
    assert np.array_equal(formats.read_label_volume(tmp_path / "g.nii.gz"), volume)


def test_a_truncated_volume_fails_as_in_nibabel(tmp_path):
    data = nifti1(labels())[:-5]
    with pytest.raises(InputError, match=r"cannot read the voxels \(nibabel: \w+; the file is shorter"):
        formats.read_label_volume(written(tmp_path / "t.nii.gz", data))


def folders(tmp_path: Path, gt_ids: list[str], pred_ids: list[str]) -> tuple[Path, Path]:
    gt_dir, pred_dir = tmp_path / "gt", tmp_path / "pred"
    for case in gt_ids:
        write_stored_nifti(gt_dir / f"{case}-label.nii.gz", labels())
    pred_dir.mkdir()
    for case in pred_ids:
        write_stored_nifti(pred_dir / f"{case}.nii.gz", labels())
    (gt_dir / "info.csv").write_text("public_id,label_id,label_code\n" + "".join(
        f"{case},0,0\n{case},1,1\n{case},2,2\n" for case in gt_ids))
    (pred_dir / "pred.csv").write_text("public_id,label_id,confidence,label_code\n" + "".join(
        f"{case},1,0.9,1\n{case},2,0.8,2\n" for case in pred_ids))
    return gt_dir, pred_dir


def test_case_ids_that_sort_otherwise_in_the_two_folders_fail_as_the_official_assert(tmp_path):
    """Item 3: `RibFrac501-label.nii.gz` sorts before `RibFrac501-rescan-label.nii.gz`, `RibFrac501.nii.gz` after
    `RibFrac501-rescan.nii.gz`: the official sorted id lists differ (AssertionError)."""
    gt_dir, pred_dir = folders(tmp_path, ["RibFrac501", "RibFrac501-rescan"], ["RibFrac501", "RibFrac501-rescan"])
    assert list(formats.list_volumes(gt_dir)) == ["RibFrac501", "RibFrac501-rescan"]
    assert list(formats.list_volumes(pred_dir)) == ["RibFrac501-rescan", "RibFrac501"]
    with pytest.raises(InputError, match=r"pred: the case ids in the order of the sorted file names differ from the "
                                         r"ground truth's \(position 1: RibFrac501-rescan where the ground truth has "
                                         r"RibFrac501\): the official code fails its assert"):
        collect_sources(pred_dir, gt_dir)
    # ids that sort alike on both sides are scored
    shutil.rmtree(tmp_path / "gt"), shutil.rmtree(tmp_path / "pred")
    gt_dir, pred_dir = folders(tmp_path, ["RibFrac501", "RibFrac502"], ["RibFrac501", "RibFrac502"])
    assert collect_sources(pred_dir, gt_dir)[0] == ["RibFrac501", "RibFrac502"]


@pytest.mark.parametrize("name", ["extra.nii.gz", "RibFrac9.nii"])
def test_a_folder_named_like_a_volume_is_counted_as_the_official_listing_counts_it(tmp_path, name):
    """Item 4: `os.listdir` names ending in .nii/.nii.gz are volumes whatever they are: an extra one fails the
    official count assert."""
    gt_dir, pred_dir = folders(tmp_path, ["RibFrac501"], ["RibFrac501"])
    (pred_dir / name).mkdir()
    with pytest.raises(InputError, match=r"1 case\(s\) not in the ground truth"):
        collect_sources(pred_dir, gt_dir)


def test_a_folder_in_place_of_a_volume_fails_where_it_is_read(tmp_path):
    gt_dir, pred_dir = folders(tmp_path, ["RibFrac501"], [])
    (pred_dir / "RibFrac501.nii.gz").mkdir()
    volumes = formats.list_volumes(pred_dir)
    assert list(volumes) == ["RibFrac501"]
    with pytest.raises(InputError, match=OFFICIAL_FAILS):
        formats.read_label_volume(volumes["RibFrac501"])


def repeated_id_folders(root: Path, ids: dict[str, str]) -> tuple[Path, Path]:
    """Folders with the volumes of `ids` (prediction file name -> case id of its CSV rows), the k-th ground truth
    and prediction masks differing with k (two fractures, of codes 1 and 2, in each ground truth), each id's rows
    written once."""
    gt_dir, pred_dir = root / "gt", root / "pred"
    pred_dir.mkdir(parents=True)
    gt_masks = [labels(), np.roll(labels(), 2, axis=0), labels()[:, ::-1].copy()]
    pred_masks = [labels(), labels()[::-1].copy(), np.zeros((6, 5, 4), np.uint8)]
    for k, name in enumerate(ids):
        write_stored_nifti(gt_dir / name.replace(".", "-label.", 1), gt_masks[k])
        write_stored_nifti(pred_dir / name, pred_masks[k])
    cases = dict.fromkeys(ids.values())
    (gt_dir / "info.csv").write_text("public_id,label_id,label_code\n" + "".join(
        f"{case},0,0\n{case},1,1\n{case},2,2\n" for case in cases))
    (pred_dir / "pred.csv").write_text("public_id,label_id,confidence,label_code\n" + "".join(
        f"{case},0,0.5,0\n{case},1,0.9,1\n{case},2,0.3,3\n" for case in cases))
    return gt_dir, pred_dir


def evaluated(gt_dir: Path, pred_dir: Path, out: Path, *extra: str) -> dict:
    assert main(["--input", str(pred_dir), "--ground-truth", str(gt_dir), "--output", str(out), "--no-progress",
                 "--no-plots", "--workers", "1", *extra]) == 0
    return json.loads((out / "metrics.json").read_text())


def test_one_case_id_of_two_volumes_in_both_folders_is_scored_pair_by_pair_as_the_official_code_does(tmp_path):
    """§7: `RibFrac1.nii` and `RibFrac1.nii.gz` in both folders: the official code pairs the sorted file lists by
    position and scores each pair as a case with all of RibFrac1's CSV rows (its FN rows counted twice, the number
    of cases 3): the same scores as two ids whose rows are copies."""
    gt_dir, pred_dir = repeated_id_folders(tmp_path / "repeated", {
        "RibFrac1.nii": "RibFrac1", "RibFrac1.nii.gz": "RibFrac1", "RibFrac2.nii.gz": "RibFrac2"})
    result = evaluated(gt_dir, pred_dir, tmp_path / "out")
    assert list(result["case"]) == ["RibFrac1/RibFrac1.nii", "RibFrac1/RibFrac1.nii.gz", "RibFrac2"]
    assert result["meta"]["details"]["num_cases"] == 3
    assert any("1 case id(s) named by several volumes in both folders (RibFrac1; paired by position in the sorted "
               "file lists: RibFrac1-label.nii with RibFrac1.nii, RibFrac1-label.nii.gz with RibFrac1.nii.gz)" in note
               for note in result["meta"]["notes"])
    apart = evaluated(*repeated_id_folders(tmp_path / "apart", {
        "RibFrac1.nii": "RibFrac1", "RibFrac1b.nii.gz": "RibFrac1b", "RibFrac2.nii.gz": "RibFrac2"}),
        tmp_path / "apart-out")
    assert result["aggregates"] == apart["aggregates"]
    assert result["meta"]["details"]["confusion_matrix"] == apart["meta"]["details"]["confusion_matrix"]
    with pytest.raises(InputError, match=r"case id\(s\) named by several volumes in both folders .*--strict refuses"):
        collect_sources(pred_dir, gt_dir, strict=True)


def test_one_case_id_of_two_volumes_in_one_folder_only_fails_as_the_official_count_assert(tmp_path):
    gt_dir, pred_dir = repeated_id_folders(tmp_path, {"RibFrac1.nii": "RibFrac1", "RibFrac1.nii.gz": "RibFrac1"})
    (pred_dir / "RibFrac1.nii").unlink()
    with pytest.raises(InputError, match=r"pred: 1 volumes where the ground truth has 2 \(case ids named by another "
                                         r"number of volumes: RibFrac1 \(1 here, 2 in the ground truth\)\): the "
                                         r"official code fails its assert that the counts are equal"):
        collect_sources(pred_dir, gt_dir)
