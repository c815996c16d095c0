"""The review of a pre-flight (medchallenge.review): the convention check names the coordinate mistake that the
predictions were written with, and never one for correct predictions; the case figures are drawn worst first."""

from __future__ import annotations

import csv
import importlib
import re
import struct
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from medchallenge.evaluation import build_parser, score
from medchallenge.review import conventions, review_jobs
from medchallenge.review.geometry import read_geometry

PNG = b"\x89PNG\r\n\x1a\n"


def scored_run(challenge: str, predictions: Path, ground_truth: Path, output: Path):
    evaluator = importlib.import_module(f"medchallenge.evaluators.{challenge.replace('-', '_')}").EVALUATOR
    args = build_parser(evaluator).parse_args(["--input", str(predictions), "--ground-truth", str(ground_truth),
                                               "--output", str(output), "--no-progress"])
    return evaluator, score(evaluator, args)


def synthesized(root: Path, generator: str, *arguments: str) -> Path:
    """`python -m medchallenge.synth GENERATOR --out ROOT ARGUMENTS...`: the data of a review."""
    subprocess.run([sys.executable, "-m", "medchallenge.synth", generator, "--out", str(root), *arguments],
                   check=True, capture_output=True)
    return root


@pytest.fixture(scope="module")
def tb(tmp_path_factory) -> Path:
    return synthesized(tmp_path_factory.mktemp("tb"), "tb-caverns", "--cases", "4", "--shape", "192", "192", "48",
                       "--seed", "1")


def tb_boxes(tb: Path) -> list[tuple[str, list[int]]]:
    with open(tb / "ground_truth" / "gt_boxes.csv", newline="") as handle:
        return [(f"{row['id']}.nii.gz", [int(row[f"bbox_{c}"]) for c in ("X1", "Y1", "Z1", "X2", "Y2", "Z2")])
                for row in csv.DictReader(handle)]


def write_tb_run(folder: Path, boxes: list[tuple[str, list[int]]]) -> Path:
    folder.mkdir()
    (folder / "submission.txt").write_text("".join(f"{name},{','.join(map(str, box))}\n" for name, box in boxes))
    return folder


TB_MISTAKES = {
    "x and y are swapped": lambda b, size: [b[1], b[0], b[2], b[4], b[3], b[5]],
    "y is flipped": lambda b, size: [b[0], size[1] - b[4], b[2], b[3], size[1] - b[1], b[5]],
    "the last three numbers are read as width, height and depth, not corners":
        lambda b, size: [*b[:3], b[3] - b[0], b[4] - b[1], b[5] - b[2]],
    "they are read as millimetres, not voxel indices":
        lambda b, size: [round(v * s) for v, s in zip(b, (0.7, 0.7, 2.5) * 2)],
}


@pytest.mark.parametrize("mistake", sorted(TB_MISTAKES))
def test_tb_boxes_written_with_a_mistake_are_named(tb, tmp_path, mistake):
    boxes = tb_boxes(tb)
    assert len(boxes) >= 2
    size = read_geometry(tb / "input" / boxes[0][0]).size
    wrong = [(name, TB_MISTAKES[mistake](box, size)) for name, box in boxes]
    evaluator, scored = scored_run("tb-caverns", write_tb_run(tmp_path / "run", wrong), tb / "ground_truth",
                                   tmp_path / "out")
    review = review_jobs("tb-caverns", evaluator, scored, sorted((tb / "input").glob("*.nii.gz")))
    assert review.findings, f"no finding; map {scored.summary.aggregates['map']}"
    best = review.findings[0]
    assert best.description == mistake
    assert best.after == pytest.approx(1.0) and best.before < 0.8
    assert best.line().startswith(f"your boxes match the ground truth if {mistake}: map ")


def test_correct_tb_boxes_get_no_finding_and_figures_worst_first(tb, tmp_path):
    boxes = tb_boxes(tb)
    run = boxes[1:]  # the first ground-truth box missed: its case scores lowest
    evaluator, scored = scored_run("tb-caverns", write_tb_run(tmp_path / "run", run), tb / "ground_truth",
                                   tmp_path / "out")
    review = review_jobs("tb-caverns", evaluator, scored, sorted((tb / "input").glob("*.nii.gz")))
    assert review.findings == [] and "x and y are swapped" in review.tried
    assert len(review.figures) == 4 and all(f.png.startswith(PNG) for f in review.figures)
    assert review.figures[0].case.startswith(boxes[0][0].split(".")[0])
    assert review.figures[0].caption == "case score 0.000"


@pytest.fixture(scope="module")
def cxr(tmp_path_factory) -> Path:
    return synthesized(tmp_path_factory.mktemp("cxr"), "object-cxr-images", "--images", "12", "--size", "320",
                       "--seed", "3")


def inside_polygon(vertices: np.ndarray) -> tuple[float, float]:
    """A point well inside a polygon (a wire's outline is a ring: the mean of its vertices lies outside)."""
    from matplotlib.path import Path as Outline

    outline = Outline(vertices)
    (x0, y0), (x1, y1) = vertices.min(axis=0), vertices.max(axis=0)
    for x in np.arange(x0, x1, 0.5):
        for y in np.arange(y0, y1, 0.5):
            if all(outline.contains_point((x + dx, y + dy)) for dx in (-1, 0, 1) for dy in (-1, 0, 1)):
                return float(x), float(y)
    raise AssertionError("no point inside the polygon")


def write_cxr_run(cxr: Path, folder: Path, change) -> Path:
    """Points at the centres of the ground-truth objects and ten weak ones in a corner, written through
    `change(x, y, width, height)`."""
    from medchallenge.formats.object_cxr import read_ground_truth

    gt = read_ground_truth(next((cxr / "ground_truth").glob("*.csv")))
    folder.mkdir()
    classification, localization = ["image_path,prediction"], ["image_path,prediction"]
    for index, path in enumerate(gt.image_paths):
        width, height = read_geometry(cxr / "input" / Path(path).name).size
        points = []
        for k in np.flatnonzero(gt.object_image == index):
            if np.isnan(gt.boxes[k]).any():
                start, stop = gt.vertex_start[k], gt.vertex_start[k + 1]
                x, y = inside_polygon(np.column_stack([gt.vertices_x[start:stop], gt.vertices_y[start:stop]]))
            else:
                x, y = (gt.boxes[k][0] + gt.boxes[k][2]) / 2, (gt.boxes[k][1] + gt.boxes[k][3]) / 2
            points.append("0.9 %.4f %.4f" % change(x, y, width, height))
        # ten unlikely false positives in the corner, so that every FROC level (up to 8 per image) is reached
        points.extend("0.1 %.4f %.4f" % change(3.0, 3.0 + k, width, height) for k in range(10))
        classification.append(f"{path},{0.9 if points else 0.1}")
        localization.append(f"{path},{';'.join(points)}")
    (folder / "classification.csv").write_text("\n".join(classification) + "\n")
    (folder / "localization.csv").write_text("\n".join(localization) + "\n")
    return folder


CXR_MISTAKES = {
    "x and y are swapped": lambda x, y, w, h: (y, x),
    "x is flipped": lambda x, y, w, h: (w - x, y),
    "they are read as fractions of the image size, not pixels": lambda x, y, w, h: (x / w, y / h),
}


@pytest.mark.parametrize("mistake", sorted(CXR_MISTAKES))
def test_object_cxr_points_written_with_a_mistake_are_named(cxr, tmp_path, mistake):
    run = write_cxr_run(cxr, tmp_path / "run", CXR_MISTAKES[mistake])
    evaluator, scored = scored_run("object-cxr", run, cxr / "ground_truth", tmp_path / "out")
    review = review_jobs("object-cxr", evaluator, scored, sorted((cxr / "input").glob("*.jpg")))
    assert review.findings and review.findings[0].description == mistake, review.findings
    assert review.findings[0].after == pytest.approx(1.0)
    assert review.findings[0].line().startswith(f"your points match the ground truth if {mistake}: froc ")


def test_correct_object_cxr_points_get_no_finding(cxr, tmp_path):
    run = write_cxr_run(cxr, tmp_path / "run", lambda x, y, w, h: (x, y))
    evaluator, scored = scored_run("object-cxr", run, cxr / "ground_truth", tmp_path / "out")
    assert scored.summary.aggregates["froc"] == pytest.approx(1.0)
    review = review_jobs("object-cxr", evaluator, scored, sorted((cxr / "input").glob("*.jpg")))
    assert review.findings == []
    assert review.figures and all(f.png.startswith(PNG) for f in review.figures)


@pytest.fixture(scope="module")
def ribfrac(tmp_path_factory) -> Path:
    return synthesized(tmp_path_factory.mktemp("ribfrac"), "ribfrac-ct", "--cases", "2", "--shape", "112", "112",
                       "40", "--seed", "1")


def write_ribfrac_run(ribfrac: Path, folder: Path, change) -> Path:
    """The ground-truth masks as predictions (confidence 0.9, the true types), each mask written through `change`
    (an array z, y, x)."""
    import SimpleITK as sitk

    folder.mkdir()
    rows = ["public_id,label_id,confidence,label_code"]
    with open(ribfrac / "ground_truth" / "ribfrac-info.csv", newline="") as handle:
        for row in csv.DictReader(handle):
            confidence = "0" if row["label_id"] == "0" else "0.9"
            rows.append(f"{row['public_id']},{row['label_id']},{confidence},{row['label_code']}")
    (folder / "predictions.csv").write_text("\n".join(rows) + "\n")
    for truth in (ribfrac / "ground_truth").glob("*-label.nii.gz"):
        image = sitk.ReadImage(str(truth))
        changed = sitk.GetImageFromArray(np.ascontiguousarray(change(sitk.GetArrayFromImage(image))))
        changed.CopyInformation(image)
        sitk.WriteImage(changed, str(folder / truth.name.replace("-label", "")))
    return folder


@pytest.mark.parametrize("mistake", ["x is flipped", "x and y are swapped"])
def test_ribfrac_masks_written_with_a_mistake_are_named(ribfrac, tmp_path, mistake):
    change = {"x is flipped": lambda a: a[:, :, ::-1], "x and y are swapped": lambda a: np.swapaxes(a, 1, 2)}[mistake]
    run = write_ribfrac_run(ribfrac, tmp_path / "run", change)
    evaluator, scored = scored_run("ribfrac", run, ribfrac / "ground_truth", tmp_path / "out")
    cases = sorted((ribfrac / "input").glob("*.nii.gz"))
    review = review_jobs("ribfrac", evaluator, scored, cases)
    assert review.findings and review.findings[0].description == mistake, review.findings
    assert review.findings[0].line().startswith(f"your masks match the ground truth if {mistake}: froc_average ")
    missed = [int(total) - int(hit) for hit, total in
              (re.match(r"(\d+) of (\d+) fractures hit", f.caption).groups() for f in review.figures)]
    assert len(missed) == 2 and missed[0] >= missed[1] >= 0 and missed[0] > 0  # worst first
    correct = write_ribfrac_run(ribfrac, tmp_path / "correct", lambda a: a)
    evaluator, scored = scored_run("ribfrac", correct, ribfrac / "ground_truth", tmp_path / "out2")
    assert review_jobs("ribfrac", evaluator, scored, cases).findings == []


def test_caption_figures_show_the_worst_figures_first(tmp_path):
    root = synthesized(tmp_path / "cap", "imageclef-caption-images", "--edition", "2022", "--images", "5",
                       "--seed", "1")
    concepts = {}
    with open(root / "ground_truth" / "concepts.tsv", newline="") as handle:
        for row in csv.reader(handle, delimiter="\t"):
            concepts[row[0]] = row[1]
    ids = sorted(i for i in concepts if i != "ID")
    run = tmp_path / "run"
    run.mkdir()
    # every image right but the third, whose concepts are all wrong (with a `$`: drawn as text, not as mathtext)
    (run / "concepts.csv").write_text("".join(f"{i}|{'C9999999;$x$' if n == 2 else concepts[i]}\n"
                                              for n, i in enumerate(ids)))
    evaluator = importlib.import_module("medchallenge.evaluators.imageclef_caption").EVALUATOR
    args = build_parser(evaluator).parse_args(["--edition", "2022", "--input", str(run), "--ground-truth",
                                               str(root / "ground_truth"), "--output", str(tmp_path / "out"),
                                               "--no-progress"])
    scored = score(evaluator, args)
    review = review_jobs("imageclef-caption", evaluator, scored, sorted((root / "input").glob("*.jpg")))
    assert review.findings == [] and review.tried == [] and review.notes == []
    assert [f.case for f in review.figures][0] == ids[2] and review.figures[0].caption == "concept_f1 0.000"
    assert len(review.figures) == len(ids) and all(f.png.startswith(PNG) for f in review.figures)


def test_a_costly_evaluator_is_checked_on_its_first_cases_and_drawn_without_images(ribfrac, tmp_path, monkeypatch):
    monkeypatch.setattr(conventions, "MAX_CHECKED_COSTLY_CASES", 1)
    run = write_ribfrac_run(ribfrac, tmp_path / "run", lambda a: a[:, :, ::-1])
    evaluator, scored = scored_run("ribfrac", run, ribfrac / "ground_truth", tmp_path / "out")
    review = review_jobs("ribfrac", evaluator, scored, [])  # no case images: the masks on a blank view
    assert review.findings and review.findings[0].description == "x is flipped"
    assert review.findings[0].line().endswith(" (the first 1 of 2 cases)")
    assert len(review.figures) == 2 and all(f.png.startswith(PNG) for f in review.figures)


@pytest.fixture(scope="module")
def cxr_1024(tmp_path_factory) -> Path:
    return synthesized(tmp_path_factory.mktemp("cxr1024"), "object-cxr-images", "--images", "6", "--size", "1024",
                       "--seed", "4")


@pytest.mark.parametrize(("change", "named"), [
    # the realistic mistake: points left in the 512-pixel frame of the network's input of a 1024-pixel radiograph
    (lambda x, y, w, h: (x * 512 / w, y * 512 / h), r"they are in a 512-pixel frame \(a network's input size\), not "
                                                    "the image's pixels"),
    (lambda x, y, w, h: (x * 0.37, y * 0.37), r"they are scaled by 0\.3[67]\d* \(multiplied by 2\.[67]\d*, the factor "
                                              "that fits best\\)"),
])
def test_object_cxr_points_at_another_scale_are_named_with_the_scale(cxr_1024, tmp_path, change, named):
    run = write_cxr_run(cxr_1024, tmp_path / "run", change)
    evaluator, scored = scored_run("object-cxr", run, cxr_1024 / "ground_truth", tmp_path / "out")
    review = review_jobs("object-cxr", evaluator, scored, sorted((cxr_1024 / "input").glob("*.jpg")))
    [finding] = review.findings
    assert re.fullmatch(named, finding.description) and finding.before < 0.2 and finding.after > 0.9
    assert re.fullmatch(r"your points match the ground truth if .*: froc 0\.\d{3} -> (0\.9\d\d|1\.000)",
                        finding.line())


def test_object_cxr_points_in_the_right_frame_get_no_scale_finding(cxr_1024, tmp_path):
    run = write_cxr_run(cxr_1024, tmp_path / "run", lambda x, y, w, h: (x, y))
    evaluator, scored = scored_run("object-cxr", run, cxr_1024 / "ground_truth", tmp_path / "out")
    review = review_jobs("object-cxr", evaluator, scored, sorted((cxr_1024 / "input").glob("*.jpg")))
    assert review.findings == [] and conventions.SCALE_TRIED in review.tried
    assert {"they count pixels from 1, not 0", "they are read as millimetres, not pixels"} <= set(review.tried)
    # each figure opens at the radiograph's full resolution; its thumbnail is a page's width
    width = read_geometry(cxr_1024 / "input" / review.figures[0].case).size[0]
    assert png_width(review.figures[0].full_png) >= width and 300 <= png_width(review.figures[0].png) <= 500


def png_width(png: bytes) -> int:
    return struct.unpack(">I", png[16:20])[0]  # the IHDR chunk's width


def test_tb_boxes_in_world_coordinates_are_named(tb, tmp_path):
    """Boxes written in the CT's world millimetres (an origin away from 0, x and y pointing the other way, as a
    DICOM-derived NIfTI has them) are named as world coordinates, through each image's own header."""
    import SimpleITK as sitk

    images = tmp_path / "images"
    images.mkdir()
    for path in (tb / "input").glob("*.nii.gz"):
        image = sitk.ReadImage(str(path))
        image.SetOrigin((180.0, 150.0, -420.0))
        image.SetDirection((-1.0, 0.0, 0.0, 0.0, -1.0, 0.0, 0.0, 0.0, 1.0))
        sitk.WriteImage(image, str(images / path.name))
    geometry = {name: read_geometry(images / name) for name, _ in tb_boxes(tb)}

    def world(name: str, box: list[int]) -> list[int]:
        corners = [geometry[name].origin[a] + geometry[name].direction[4 * a] * geometry[name].spacing[a] * v
                   for a, v in zip((0, 1, 2, 0, 1, 2), box)]
        return [round(v) for v in corners]

    wrong = [(name, world(name, box)) for name, box in tb_boxes(tb)]
    evaluator, scored = scored_run("tb-caverns", write_tb_run(tmp_path / "run", wrong), tb / "ground_truth",
                                   tmp_path / "out")
    review = review_jobs("tb-caverns", evaluator, scored, sorted(images.glob("*.nii.gz")))
    assert review.findings and review.findings[0].description.startswith("they are world coordinates (the image's "
                                                                         "origin, spacing and direction)")
    assert review.findings[0].after > 0.9 and review.findings[0].before <= 0.5


def test_tb_boxes_in_a_network_frame_are_named_with_the_frame(tb, tmp_path):
    size = read_geometry(tb / "input" / tb_boxes(tb)[0][0]).size  # 192 x 192 x 48
    frame = (128, 128, 32)
    wrong = [(name, [round(v * f / s) for v, f, s in zip(box, frame * 2, size * 2)]) for name, box in tb_boxes(tb)]
    evaluator, scored = scored_run("tb-caverns", write_tb_run(tmp_path / "run", wrong), tb / "ground_truth",
                                   tmp_path / "out")
    review = review_jobs("tb-caverns", evaluator, scored, sorted((tb / "input").glob("*.nii.gz")))
    [finding] = review.findings
    assert finding.description.startswith(("they are in a ", "they are scaled by ")) and finding.after > 0.9
