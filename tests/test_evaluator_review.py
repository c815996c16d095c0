"""The evaluator's review.html (medchallenge.review.evaluator_review): beside metrics.json, one offline page with a
figure per drawn case, worst first, and the convention check's line (read from the case images, also through
the command); participant text escaped; metrics.json the
same with and without it."""

from __future__ import annotations

import csv
import html
import importlib
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from medchallenge.review import evaluator_review
from medchallenge.review.evaluator_review import IMAGES_FOLDER, REVIEW_PAGE
from medchallenge.review.geometry import read_geometry
from test_review import synthesized, tb_boxes, write_tb_run

REPO = Path(__file__).resolve().parents[1]
TB_EVALUATOR = importlib.import_module("medchallenge.evaluators.tb_caverns").EVALUATOR
FIGURE = re.compile(r'<figure><a href="review/\d{3}-full\.png" title="full resolution"><img alt="[^"]*" '
                    r'src="data:image/png;base64,[A-Za-z0-9+/=]+"></a><figcaption>(.*?): '
                    r"(.*?)</figcaption></figure>")


@pytest.fixture(scope="module")
def tb(tmp_path_factory) -> Path:
    """Four synthetic CTs, their images also in the ground truth's images/ folder (the evaluator's default)."""
    root = synthesized(tmp_path_factory.mktemp("tb"), "tb-caverns", "--cases", "4", "--shape", "192", "192", "48",
                       "--seed", "3")
    shutil.copytree(root / "input", root / "ground_truth" / IMAGES_FOLDER)
    return root


def figures(page: str) -> list[tuple[str, str]]:
    """(case, caption) of every embedded figure, in page order."""
    return FIGURE.findall(page)


def run_in_process(predictions: Path, ground_truth: Path, output: Path, *options: str) -> None:
    assert TB_EVALUATOR.main(["--input", str(predictions), "--ground-truth", str(ground_truth), "--output",
                              str(output), "--no-progress", *options]) == 0


def test_review_page_has_one_figure_per_case_worst_first_and_leaves_metrics_unchanged(tb, tmp_path):
    boxes = tb_boxes(tb)
    missed = boxes[0][0]
    run = write_tb_run(tmp_path / "run", [b for b in boxes if b[0] != missed])  # one case missed: it scores 0
    run_in_process(run, tb / "ground_truth", tmp_path / "with")
    page = (tmp_path / "with" / REVIEW_PAGE).read_text()
    shown = figures(page)
    assert len(shown) == 4  # every case drawn (4 <= MAX_FIGURES), from the ground truth's images/
    scores = [float(caption.removeprefix("case score ")) for _, caption in shown]
    assert scores == sorted(scores) and scores[0] == 0.0 < scores[-1]
    assert html.unescape(shown[0][0]) == missed
    assert "Convention check: no simple transform" in page and "<script" not in page
    for number in range(1, 5):  # each thumbnail opens its figure at full resolution (192 voxels: the thumbnail's)
        full = (tmp_path / "with" / "review" / f"{number:03d}-full.png").read_bytes()
        assert full.startswith(b"\x89PNG") and len(full) >= len((tmp_path / "with" / "review" /
                                                               f"{number:03d}.png").read_bytes())
    run_in_process(run, tb / "ground_truth", tmp_path / "without", "--no-review")
    assert not (tmp_path / "without" / REVIEW_PAGE).exists()
    assert (tmp_path / "with" / "metrics.json").read_bytes() == (tmp_path / "without" / "metrics.json").read_bytes()
    # a run with --no-review into the same folder leaves no review of the previous run behind
    run_in_process(run, tb / "ground_truth", tmp_path / "with", "--no-review")
    assert not (tmp_path / "with" / REVIEW_PAGE).exists() and not (tmp_path / "with" / "review").exists()


def test_cli_names_flipped_boxes_and_escapes_participant_text(tb, tmp_path):
    width = read_geometry(tb / "input" / tb_boxes(tb)[0][0]).size[0]
    flipped = [(name, [width - b[3], b[1], b[2], width - b[0], b[4], b[5]]) for name, b in tb_boxes(tb)]
    hostile = "<img src=x onerror=alert(1)>.nii.gz"  # an unknown case name: the evaluator warns, naming it
    run = write_tb_run(tmp_path / "run", [*flipped, (hostile, [1, 2, 3, 4, 5, 6])])
    ground_truth = tmp_path / "ground_truth"  # without images/: they come from --images
    shutil.copytree(tb / "ground_truth", ground_truth, ignore=shutil.ignore_patterns(IMAGES_FOLDER))
    result = subprocess.run([sys.executable, str(REPO / "evaluators" / "tb_caverns" / "evaluate.py"), "--input",
                             str(run), "--ground-truth", str(ground_truth), "--output", str(tmp_path / "out"),
                             "--images", str(tb / "input"), "--no-progress"],
                            capture_output=True, text=True, env={**os.environ, "PYTHONPATH": str(REPO / "shared")})
    assert result.returncode == 0, result.stderr
    page = (tmp_path / "out" / REVIEW_PAGE).read_text()
    line = re.search(r'<p class="convention">(.*?)</p>', page)
    assert line and line.group(1).startswith("your boxes match the ground truth if x is flipped: map ")
    assert "convention check: your boxes match the ground truth if x is flipped: map " in result.stdout
    assert len(figures(page)) == 4
    assert "<img src=x" not in page and html.escape("<img src=x onerror=alert(1)>") in page
    metrics = (tmp_path / "out" / "metrics.json").read_bytes()
    run_in_process(run, ground_truth, tmp_path / "plain", "--no-review")
    assert (tmp_path / "plain" / "metrics.json").read_bytes() == metrics


def test_the_mounted_images_folder_is_the_default_and_its_absence_is_no_review(tb, tmp_path, monkeypatch):
    """compose.yaml mounts the challenge's input/ at EVALUATOR_IMAGES: review.html is drawn from it. Grand-challenge
    mounts nothing there, and an empty mount is a compose run without images: no review.html, not a word."""
    ground_truth = tmp_path / "ground_truth"  # without images/
    shutil.copytree(tb / "ground_truth", ground_truth, ignore=shutil.ignore_patterns(IMAGES_FOLDER))
    run = write_tb_run(tmp_path / "run", tb_boxes(tb))
    monkeypatch.setattr(evaluator_review, "MOUNTED_IMAGES", tb / "input")
    run_in_process(run, ground_truth, tmp_path / "mounted")
    assert len(figures((tmp_path / "mounted" / REVIEW_PAGE).read_text())) == 4
    (tmp_path / "empty").mkdir()
    for mounted in (tmp_path / "absent", tmp_path / "empty"):
        monkeypatch.setattr(evaluator_review, "MOUNTED_IMAGES", mounted)
        run_in_process(run, ground_truth, tmp_path / mounted.name)
        assert sorted(p.name for p in (tmp_path / mounted.name).iterdir()) == ["metrics.json"]
        metrics = (tmp_path / mounted.name / "metrics.json").read_bytes()
        assert metrics == (tmp_path / "mounted" / "metrics.json").read_bytes()


def test_missing_images_folder_is_a_note_not_a_failure(tb, tmp_path):
    run = write_tb_run(tmp_path / "run", tb_boxes(tb))
    run_in_process(run, tb / "ground_truth", tmp_path / "out", "--images", str(tmp_path / "nowhere"))
    page = (tmp_path / "out" / REVIEW_PAGE).read_text()
    assert figures(page) == [] and "cannot be listed" in page
    assert "the convention check needs their sizes and was not run" in page
    assert "Convention check: no simple transform" not in page  # not claimed: nothing was tried


def test_caption_review_asked_for_without_images_draws_the_concepts_worst_first(tmp_path):
    root = synthesized(tmp_path / "cap", "imageclef-caption-images", "--edition", "2022", "--images", "4",
                       "--seed", "2")
    with open(root / "ground_truth" / "concepts.tsv", newline="") as handle:
        concepts = {row[0]: row[1] for row in csv.reader(handle, delimiter="\t") if row[0] != "ID"}
    ids = sorted(concepts)
    run = tmp_path / "run"
    run.mkdir()
    (run / "concepts.csv").write_text("".join(f"{i}|{'C9999999' if n == 1 else concepts[i]}\n"
                                              for n, i in enumerate(ids)))
    evaluator = importlib.import_module("medchallenge.evaluators.imageclef_caption").EVALUATOR
    argv = ["--edition", "2022", "--input", str(run), "--ground-truth", str(root / "ground_truth"), "--output",
            str(tmp_path / "out"), "--no-progress"]
    assert evaluator.main(argv) == 0
    assert not (tmp_path / "out" / REVIEW_PAGE).exists()  # no case images, not asked for: no review, no cost
    assert evaluator.main([*argv, "--review"]) == 0
    page = (tmp_path / "out" / REVIEW_PAGE).read_text()
    shown = figures(page)
    assert [case for case, _ in shown][0] == ids[1] and shown[0][1] == "concept_f1 0.000"
    assert len(shown) == len(ids) and "no case images" in page
