"""Pre-flight's pictures from the sockets' kinds (issue 39 section 2): a challenge defined only by its sockets gets,
per case, the input image with a predicted Segmentation and boxes drawn over it (the slice with most foreground of
a 3-D image), worst cases first where per-case scores order them, and one plain line per socket whose kind has no
picture."""

from __future__ import annotations

import io
import json
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import SimpleITK as sitk
from PIL import Image

from helpers import InProcessAlgorithm
from medchallenge.jobs import JobResult, run_job, upload_case
from medchallenge.review.kinds import NoPicture, chosen_slice, kind_figures, kind_review
from medchallenge.review.page import review_section
from medchallenge.review.preflight import CaseFigure
from medchallenge.sockets import Socket

CT = Socket("chest-ct", "Image", "Image", "images/chest-ct")
MASK = Socket("nodule-mask", "Segmentation", "Image", "images/nodule-mask")
BOXES = Socket("nodule-boxes", "Multiple 2D bounding boxes", "File", "nodule-boxes.json")
REMARK = Socket("remark", "String", "Value", "remark.json")
NODULE_SLICE = 5  # of the 8 slices: where the predicted nodule is


@dataclass
class Job:
    case: Path
    result: JobResult


def synthetic_ct(path: Path) -> Path:
    """An 8 x 40 x 48 CT (z, y, x) of 0.8 x 0.8 x 2 mm voxels, a bright nodule at slice 5, rows 14-21, columns
    20-29."""
    array = np.full((8, 40, 48), -800, np.int16)
    array[:, 5:35, 6:42] = 40  # the body
    array[NODULE_SLICE, 14:22, 20:30] = 300
    image = sitk.GetImageFromArray(array)
    image.SetSpacing((0.8, 0.8, 2.0))
    image.SetOrigin((-20.0, -15.0, 100.0))
    sitk.WriteImage(image, str(path))
    return path


def nodule_algorithm(job_input: Path, job_output: Path, model: Path) -> None:
    """The nodule as a uint8 mask, its box in world mm on its slice, and a remark."""
    (ct_file,) = (job_input / CT.relative_path).iterdir()
    image = sitk.ReadImage(str(ct_file))
    mask = (sitk.GetArrayFromImage(image) > 200).astype(np.uint8)
    labels = sitk.GetImageFromArray(mask)
    labels.CopyInformation(image)
    (job_output / MASK.relative_path).mkdir(parents=True)
    sitk.WriteImage(labels, str(job_output / MASK.relative_path / "mask.mha"))
    corners = [list(image.TransformContinuousIndexToPhysicalPoint((x, y, NODULE_SLICE)))
               for x, y in ((19.5, 13.5), (29.5, 13.5), (29.5, 21.5), (19.5, 21.5))]
    boxes = {"type": "Multiple 2D bounding boxes", "version": {"major": 1, "minor": 0},
             "boxes": [{"name": "nodule", "corners": corners, "probability": 0.8}]}
    (job_output / BOXES.relative_path).write_text(json.dumps(boxes))
    (job_output / REMARK.relative_path).write_text(json.dumps("one nodule"))


def run_cases(tmp_path: Path, names: list[str]) -> list[Job]:
    jobs = []
    for name in names:
        case = synthetic_ct(tmp_path / f"{name}.mha")
        value = upload_case(case, tmp_path / "storage").value(1, CT)
        result = run_job(InProcessAlgorithm(nodule_algorithm), [value], [MASK, BOXES, REMARK],
                         tmp_path / "jobs" / name, pk=f"pk-{name}")
        assert result.succeeded, result.error
        jobs.append(Job(case, result))
    return jobs


def red_pixels(png: bytes) -> np.ndarray:
    rgb = np.asarray(Image.open(io.BytesIO(png)).convert("RGB")).astype(int)
    return (rgb[..., 0] > 150) & (rgb[..., 1] < 90) & (rgb[..., 2] < 90)


def test_a_segmentation_and_boxes_are_drawn_over_the_slice_with_the_nodule(tmp_path):
    jobs = run_cases(tmp_path, ["case-a", "case-b"])
    items = kind_figures(jobs, [CT], [MASK, BOXES, REMARK], order=["case-b"], captions={"case-b": "dice 0.41"})
    no_pictures = [item for item in items if isinstance(item, NoPicture)]
    figures = [item for item in items if isinstance(item, CaseFigure)]
    assert [n.line() for n in no_pictures] == ["remark: no picture for kind String"]
    assert [f.case for f in figures] == ["case-b.mha", "case-a.mha"]  # the worst named first
    assert figures[0].caption == "dice 0.41; slice 6 of 8" and figures[1].caption == "slice 6 of 8"
    for figure in figures:
        assert figure.png.startswith(b"\x89PNG") and figure.full_png.startswith(b"\x89PNG")
    # the nodule's outline (the mask, red) lies where the nodule is: 20-29 of 48 columns, 14-21 of 40 rows
    red = red_pixels(figures[0].full_png)
    rows, columns = np.nonzero(red[int(red.shape[0] * 0.1):])  # below the title band
    assert red.sum() > 50
    height = red.shape[0] * 0.9
    assert 0.3 < columns.mean() / red.shape[1] < 0.6 and 0.3 < rows.mean() / height < 0.6


def test_the_slice_is_the_one_with_most_foreground_else_the_middle():
    from medchallenge.review.kinds import Layer

    volume = np.zeros((9, 4, 4))
    volume[2, :2, :2] = 1
    volume[6, :, :] = 1
    assert chosen_slice([Layer(MASK, "tab:red", volume=volume)], 9) == 6
    assert chosen_slice([Layer(BOXES, "tab:red", shapes=[])], 9) == 4
    points = [(np.array([[1.0, 1.0, 2.2], [2.0, 2.0, 1.8]]), True, 1.0)]
    assert chosen_slice([Layer(BOXES, "tab:red", shapes=points)], 9) == 2


def test_a_challenge_without_drawn_kinds_says_so_per_socket_and_the_page_shows_it(tmp_path):
    review = kind_review([], [CT], [REMARK, Socket("score", "Float", "Value", "score.json")])
    assert review.figures == [] and review.notes == ["remark: no picture for kind String",
                                                     "score: no picture for kind Float"]
    section = review_section(review.to_json("review"), {})
    assert "no picture for kind String" in section and "KeyError" not in section
    assert "each output socket in its colour" in section and "ground truth" not in section


def test_the_built_ins_review_json_and_heading_are_unchanged():
    from medchallenge.review.preflight import Review

    assert "heading" not in Review().to_json("review")
    assert "<h2>What the algorithm did (worst-scoring cases first; green: ground truth, red: predictions)</h2>" in \
        review_section(Review(notes=["x"]).to_json("review"), {})


def test_per_case_scores_order_the_cases_worst_first_either_way():
    from medchallenge.review.kinds import worst_first

    scores = {"a": 0.9, "b": 0.2, "c": float("nan"), "d": 0.5}
    assert worst_first(scores) == ["b", "d", "a"]  # Dice: low is bad
    assert worst_first(scores, higher_is_better=False) == ["a", "d", "b"]  # HD95: high is bad


def test_the_built_ins_review_of_a_challenge_it_has_no_figures_for_says_so_without_a_key_error():
    from types import SimpleNamespace

    from medchallenge.review.preflight import review_jobs

    review = review_jobs("lung-nodules", None, SimpleNamespace(), [])
    assert review.figures == [] and review.notes == [
        "no figures of its own for lung-nodules: pre-flight draws them from its sockets' kinds"]
