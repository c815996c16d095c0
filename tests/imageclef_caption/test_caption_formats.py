"""ImageCLEFmed Caption file formats: ground-truth readers and run validation as the official evaluators did."""

from __future__ import annotations

from pathlib import Path

import pytest

from medchallenge.errors import InputError
from medchallenge.formats import imageclef_caption as fmt

GT_IDS = {"img1": None, "img2": None, "img3": None}


def _write(tmp_path: Path, name: str, text: str) -> Path:
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return path


def _concepts_2022(tmp_path: Path, text: str):
    path = _write(tmp_path, "concepts.csv", text)
    rows = fmt.read_rows(path, fmt.PIPE)
    return fmt.validate_concept_run_2022(rows, GT_IDS, fmt.end_of_file(path, rows))


def _concepts_2021(tmp_path: Path, text: str, delimiter: str = fmt.TAB):
    path = _write(tmp_path, "concepts.csv", text)
    rows = fmt.read_rows(path, delimiter)
    return fmt.validate_concept_run_2021(rows, GT_IDS, fmt.end_of_file(path, rows))


def _captions(tmp_path: Path, text: str, delimiter: str = fmt.PIPE):
    path = _write(tmp_path, "captions.csv", text)
    rows = fmt.read_rows(path, delimiter)
    return fmt.validate_caption_run(rows, GT_IDS, fmt.end_of_file(path, rows), delimiter)


# --- ground truth -----------------------------------------------------------------------------------------------

def test_2022_concept_gt_skips_header_strips_and_keeps_empty(tmp_path):
    path = _write(tmp_path, "concepts.tsv", "ID\tcuis\nimg1\tC1; C2\nimg2\t\nimg3\tC3\tignored\nimg1\tC9\n")
    # header skipped; "C1; C2" stripped; `img2\t` -> ('',); a 3rd field ignored; a repeated id: last row wins
    assert fmt.read_concepts_ground_truth(path, "2022") == {"img1": ("C9",), "img2": ("",), "img3": ("C3",)}


def test_2022_concept_gt_first_line_is_always_a_header(tmp_path):
    path = _write(tmp_path, "concepts.tsv", "img1\tC1\nimg2\tC2\n")
    assert fmt.read_concepts_ground_truth(path, "2022") == {"img2": ("C2",)}


def test_2022_concept_gt_row_without_tab_is_an_error(tmp_path):
    path = _write(tmp_path, "concepts.tsv", "ID\tcuis\nimg1\tC1\nimg2\n")
    with pytest.raises(InputError, match=r"concepts.tsv: line 3: ground-truth row needs"):
        fmt.read_concepts_ground_truth(path, "2022")


def test_2021_concept_gt_no_header_id_alone_is_empty(tmp_path):
    path = _write(tmp_path, "concepts.tsv", "img1\tC1; C2\nimg2\nimg3\t\n")
    assert fmt.read_concepts_ground_truth(path, "2021") == {"img1": "C1; C2", "img2": "", "img3": ""}
    bad = _write(tmp_path, "bad.tsv", "img1\tC1\n\n")
    with pytest.raises(InputError, match=r"bad.tsv: line 2: .*found 0 fields"):
        fmt.read_concepts_ground_truth(bad, "2021")


def test_caption_gt_per_edition(tmp_path):
    path = _write(tmp_path, "captions.csv", 'img1|Axial CT | contrast\nimg2|"quoted"\nimg3|\n')
    # second '|' truncates; quotes are literal characters (QUOTE_NONE)
    assert fmt.read_captions_ground_truth(path, "2022") == {"img1": "Axial CT ", "img2": '"quoted"', "img3": ""}
    tsv = _write(tmp_path, "captions21.csv", "img1\tA|B\n")
    assert fmt.read_captions_ground_truth(tsv, "2021") == {"img1": "A|B"}
    with pytest.raises(InputError, match=r"line 1: ground-truth row needs 'ID<TAB>caption'"):
        fmt.read_captions_ground_truth(path, "2021")


# --- 2022 concept runs ------------------------------------------------------------------------------------------

def test_2022_concept_run_values(tmp_path):
    run = _concepts_2022(tmp_path, "img3|C0040405; c0040405\nimg1\nimg2|\n")
    # `C0040405;c0040405` differ before upper-casing: accepted; spaces after ';' stripped; `id` -> (), `id|` -> ('',)
    assert run == {"img3": ("C0040405", "c0040405"), "img1": (), "img2": ("",)}
    assert list(run) == ["img3", "img1", "img2"]  # submission order kept


@pytest.mark.parametrize("text, message", [
    ("img1|C1|C2\nimg2\nimg3\n", r"line 1: expected 'ID' or 'ID\|C1;C2;...' \(1 or 2 fields .*found 3"),
    ("img1\n\nimg2\nimg3\n", r"line 2: expected 'ID' or .*found 0"),
    ("img1\nimg9|C1\n", r"line 2: image ID 'img9' is not in the test set"),
    ("img1\nimg2\nimg1|C1\n", r"line 3: image ID 'img1' appears more than once \(first at .*line 1\)"),
    ("img1|C1;C2;C1\nimg2\nimg3\n", r"line 1: concept 'C1' is given more than once for image 'img1'"),
    ("img1|C1; C1\nimg2\nimg3\n", r"line 1: concept 'C1' is given more than once"),
    ("img1\nimg2\n", r"concepts.csv: line 2 \(end of file\): the run has 2 of the 3 test-set images;.*'img3'"),
    ("", r"line 0 \(end of file\): the run has 0 of the 3"),
])
def test_2022_concept_run_rejections(tmp_path, text, message):
    with pytest.raises(InputError, match=message):
        _concepts_2022(tmp_path, text)


def test_2022_more_than_100_concepts(tmp_path):
    hundred = ";".join(f"C{i:07d}" for i in range(100))
    assert len(_concepts_2022(tmp_path, f"img1|{hundred}\nimg2\nimg3\n")["img1"]) == 100
    with pytest.raises(InputError, match=r"line 2: 101 concepts for image 'img2'; at most 100"):
        _concepts_2022(tmp_path, f"img1\nimg2|{hundred};C9999999\nimg3\n")


# --- 2021 concept runs ------------------------------------------------------------------------------------------

def test_2021_concept_run_values(tmp_path):
    run = _concepts_2021(tmp_path, "img1\tC1; C2\nimg2\nimg3\t\n")
    assert run == {"img1": "C1; C2", "img2": "", "img3": ""}
    assert _concepts_2021(tmp_path, "img1|C1\nimg2|\nimg3\n", fmt.PIPE) == {"img1": "C1", "img2": "", "img3": ""}


@pytest.mark.parametrize("text, message", [
    ("img1\tC1\n\n", r"line 2: blank line"),
    ("img1\tC1\tC2\n", r"line 1: more than 2 fields"),
    ("img9\tC1\n", r"line 1: image ID 'img9' is not in the test set"),
    ("img1\tC1;C1\n", r"line 1: concept 'C1' is given more than once"),
    ("img1\tC1\nimg1\tC2\n", r"line 2: image ID 'img1' appears more than once"),
    ("img1\nimg2\tC1\nimg3\n", r"line 1: an image ID without a concept field before any line with one crashes"),
    ("img1\tC1\nimg2\tC2\n", r"line 2 \(end of file\): the run has 2 of the 3"),
])
def test_2021_concept_run_rejections(tmp_path, text, message):
    with pytest.raises(InputError, match=message):
        _concepts_2021(tmp_path, text)


def test_2021_concept_limit_is_1286(tmp_path):
    many = ";".join(f"C{i:07d}" for i in range(101))  # over the 2022 limit, fine in 2021
    assert _concepts_2021(tmp_path, f"img1\t{many}\nimg2\t\nimg3\t\n")["img1"] == many
    with pytest.raises(InputError, match=r"1287 concepts .* at most 1286"):
        _concepts_2021(tmp_path, "img1\t" + ";".join(f"C{i:07d}" for i in range(1287)) + "\n")


# --- caption runs -----------------------------------------------------------------------------------------------

def test_caption_run_values(tmp_path):
    run = _captions(tmp_path, "img2|Axial CT | contrast\nimg1|\nimg3|x-ray\n")
    assert run == {"img2": "Axial CT ", "img1": "", "img3": "x-ray"}  # `id|`: empty caption allowed


@pytest.mark.parametrize("text, message", [
    ("img1\nimg2|a\nimg3|b\n", r"line 1: expected 'ID\|caption' \(at least 2 fields\), found 1"),
    ("img1|a\n\nimg2|b\nimg3|c\n", r"line 2: expected .*found 0"),
    ("img1|a\nimg4|b\n", r"line 2: image ID 'img4' is not in the test set"),
    ("img1|a\nimg1|b\n", r"line 2: image ID 'img1' appears more than once"),
    ("img1|a\n", r"line 1 \(end of file\): the run has 1 of the 3 test-set images; .*missing 'img2', 'img3'"),
])
def test_caption_run_rejections(tmp_path, text, message):
    with pytest.raises(InputError, match=message):
        _captions(tmp_path, text)


def test_run_file_problems_name_the_file(tmp_path):
    with pytest.raises(InputError, match=r"nothere.csv: file not found"):
        fmt.read_rows(tmp_path / "nothere.csv", fmt.PIPE)
    path = tmp_path / "latin1.csv"
    path.write_bytes("img1|caf\xe9\n".encode("latin-1"))
    with pytest.raises(InputError, match=r"latin1.csv: not UTF-8 text"):
        fmt.read_rows(path, fmt.PIPE)


def test_detect_run_delimiter(tmp_path):
    assert fmt.detect_run_delimiter(_write(tmp_path, "a.csv", "img1\tC1|x\n")) == fmt.TAB
    assert fmt.detect_run_delimiter(_write(tmp_path, "b.csv", "img1\nimg2|C1\tx\n")) == fmt.PIPE
    assert fmt.detect_run_delimiter(_write(tmp_path, "c.csv", "img1\n")) == fmt.PIPE


def test_missing_list_is_capped(tmp_path):
    ids = {f"i{n}": None for n in range(9)}
    path = _write(tmp_path, "captions.csv", "i0|x\n")
    rows = fmt.read_rows(path, fmt.PIPE)
    with pytest.raises(InputError, match=r"missing 'i1', 'i2', 'i3', 'i4', 'i5' and 3 more$"):
        fmt.validate_caption_run(rows, ids, fmt.end_of_file(path, rows), fmt.PIPE)
