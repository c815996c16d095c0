"""The review of scored predictions (a pre-flight's or a phase's jobs, or the evaluator's input): the convention
check and, per case, a figure with the predictions and the ground truth, worst-scoring cases first (at most
`MAX_FIGURES`). Without a case's image, a caption case is drawn without its figure and a RibFrac case's masks on a
blank view; TB and object-CXR cases need their images (and the convention check their sizes)."""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from ..contract import case_key
from ..imaging import open_picture, read_image
from ..io import atomic_output
from .conventions import Finding, check_conventions, checked_transforms, needs_image_sizes
from .figures import ct_boxes_png, ct_masks_png, figure_concepts_png, radiograph_points_png
from .geometry import Geometry, read_geometry

log = logging.getLogger("medchallenge.review")
MAX_FIGURES = 12
CAPTION_IMAGE_SIDE = 1024  # a caption case's figure is drawn at most this many pixels on its longer side


@dataclass(frozen=True)
class CaseFigure:
    case: str
    caption: str  # its score, as the page shows it
    png: bytes  # the thumbnail the page shows
    full_png: bytes  # the same figure at the image's full resolution, opened by a click on the thumbnail


@dataclass
class Review:
    findings: list[Finding] = field(default_factory=list)
    tried: list[str] = field(default_factory=list)
    figures: list[CaseFigure] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    heading: str | None = None  # the page's heading of the figures; None: the built-ins' (ground truth and predictions)

    def to_json(self, figure_folder: str) -> dict[str, Any]:
        """preflight.json's `review`: the findings as lines, the figures as file names under `figure_folder` (the
        thumbnail `NNN.png`, the full resolution `NNN-full.png`), the heading where it is not the built-ins'."""
        data = {"conventions": [f.line() for f in self.findings], "transforms_tried": self.tried,
                "figures": [{"case": f.case, "caption": f.caption, "file": f"{figure_folder}/{n:03d}.png",
                             "full_file": f"{figure_folder}/{n:03d}-full.png"}
                            for n, f in enumerate(self.figures, start=1)],
                "notes": self.notes}
        return data if self.heading is None else {**data, "heading": self.heading}


def write_figures(folder: Path, entries: list[dict[str, Any]], figures: list[CaseFigure]) -> None:
    """Each figure's thumbnail and full-resolution PNG under `folder`, as `Review.to_json`'s entries name them."""
    for entry, figure in zip(entries, figures):
        for name, png in ((entry["file"], figure.png), (entry["full_file"], figure.full_png)):
            with atomic_output(folder / name, "wb") as handle:
                handle.write(png)


def _volume(path: Path) -> np.ndarray:
    """A case's CT (array z, y, x), read after the project's header and size checks."""
    import SimpleITK as sitk

    return sitk.GetArrayFromImage(read_image(path, "case image"))


def _tb_figures(cases: Any, records: Mapping[str, Any], files: Mapping[str, Path], evaluator: Any) -> list[CaseFigure]:
    scores = evaluator.unit_scores(cases, records, "map")
    figures = []
    for case_id in sorted((i for i in scores if case_key(i) in files), key=lambda i: scores[i])[:MAX_FIGURES]:
        volume = _volume(files[case_key(case_id)])
        boxes = cases.sources
        caption = f"case score {scores[case_id]:.3f}"
        figures.append(CaseFigure(case_id, caption, *ct_boxes_png(
            volume, boxes.ground_truth.get(case_id, []), boxes.predictions.get(case_id, []), caption)))
    return figures


def _radiograph(path: Path) -> np.ndarray:
    """The radiograph in grey, at its full resolution."""
    with open_picture(path) as image:
        return np.asarray(image.convert("L"))


def _cxr_figures(cases: Any, case: Mapping[str, dict], files: Mapping[str, Path]) -> list[CaseFigure]:
    from ..formats.object_cxr import ELLIPSE, POLYGON, RECTANGLE

    gt, submission = cases.gt, cases.submission

    def badness(path: str) -> tuple[int, float]:
        row = case[path]
        return (row["num_objects"] - row["num_objects_hit"], abs(float(row["num_objects"] > 0) - row["probability"]))

    figures = []
    for path in sorted((p for p in gt.image_paths if case_key(p) in files), key=badness, reverse=True)[:MAX_FIGURES]:
        index = gt.image_paths.index(path)
        image = _radiograph(files[case_key(path)])
        objects = []
        for k in np.flatnonzero(gt.object_image == index):
            if gt.object_type[k] in (RECTANGLE, ELLIPSE):
                objects.append(("rectangle" if gt.object_type[k] == RECTANGLE else "ellipse", gt.boxes[k]))
            elif gt.object_type[k] == POLYGON:
                start, stop = gt.vertex_start[k], gt.vertex_start[k + 1]
                objects.append(("polygon", np.column_stack([gt.vertices_x[start:stop], gt.vertices_y[start:stop]])))
        chosen = submission.point_image == index
        points = list(zip(submission.probability[chosen].tolist(), submission.x[chosen].tolist(),
                          submission.y[chosen].tolist()))
        row = case[path]
        caption = (f"{row['num_objects_hit']} of {row['num_objects']} objects hit, "
                   f"probability {row['probability']:.2f}")
        figures.append(CaseFigure(path, caption, *radiograph_points_png(image, objects, points, caption)))
    return figures


def _ribfrac_figures(cases: Any, records: Mapping[str, Any], files: Mapping[str, Path]) -> list[CaseFigure]:
    import SimpleITK as sitk

    def missed_and_false(case_id: str) -> tuple[int, int]:
        record = records[case_id]
        return (sum(not g["hit"] for g in record.ground_truth), sum(d["hit_label"] == 0 for d in record.detections))

    figures = []
    shown = [i for i in cases.ids if i in records]
    for case_id in sorted(shown, key=missed_and_false, reverse=True)[:MAX_FIGURES]:
        source = cases.sources[case_id]
        truth = sitk.GetArrayFromImage(sitk.ReadImage(str(source.gt_volume)))
        volume = _volume(files[case_id]) if case_id in files else np.zeros(truth.shape, np.int16)
        predicted = (np.zeros_like(truth) if source.pred_volume is None
                     else sitk.GetArrayFromImage(sitk.ReadImage(str(source.pred_volume))))
        missed, false = missed_and_false(case_id)
        record = records[case_id]
        caption = f"{record.num_gt - missed} of {record.num_gt} fractures hit, {false} false positive(s)"
        figures.append(CaseFigure(case_id, caption, *ct_masks_png(volume, truth, predicted, caption)))
    return figures


def _caption_figures(cases: Any, records: Mapping[str, Any], files: Mapping[str, Path],
                     evaluator: Any) -> list[CaseFigure]:
    inputs = cases.inputs
    metric = "concept_f1" if inputs.concepts_gt is not None else "bleu"
    scores = evaluator.unit_scores(cases, records, metric) or {}
    figures = []
    for case_id in sorted(scores, key=lambda i: scores[i])[:MAX_FIGURES]:
        pixels = None
        if case_id in files:
            with open_picture(files[case_id]) as opened:
                image = opened.convert("L")
                image.thumbnail((CAPTION_IMAGE_SIDE, CAPTION_IMAGE_SIDE))
                pixels = np.asarray(image)
        caption = f"{metric} {scores[case_id]:.3f}"
        figures.append(CaseFigure(case_id, caption, *figure_concepts_png(
            pixels, (inputs.concepts_gt or {}).get(case_id, ()), (inputs.concept_run or {}).get(case_id, ()),
            (inputs.captions_gt or {}).get(case_id), (inputs.caption_run or {}).get(case_id), caption)))
    return figures


FIGURES: dict[str, Callable[..., list[CaseFigure]]] = {
    "tb-caverns": lambda scored, files, evaluator: _tb_figures(scored.cases, scored.records, files, evaluator),
    "object-cxr": lambda scored, files, evaluator: _cxr_figures(scored.cases, scored.case, files),
    "ribfrac": lambda scored, files, evaluator: _ribfrac_figures(scored.cases, scored.records, files),
    "imageclef-caption": lambda scored, files, evaluator: _caption_figures(scored.cases, scored.records, files,
                                                                           evaluator),
}


def uploaded_case_id(name: str) -> str:
    """The case id an uploaded file stands for: its name without folders and image suffix, and for a RibFrac CT
    without `-image` (`RibFrac501-image.nii.gz` is case RibFrac501)."""
    key = case_key(name)
    return key.removesuffix("-image")


def review_jobs(challenge: str, evaluator: Any, scored: Any, case_files: list[Path]) -> Review:
    """The review of `scored` (medchallenge.evaluation.Scored of the jobs' predictions), whose cases were uploaded
    from `case_files`. A case whose image cannot be read gets a note instead of a figure."""
    files = {uploaded_case_id(path.name): path for path in case_files}
    review = Review(tried=checked_transforms(challenge))
    if review.tried and not files and needs_image_sizes(challenge):
        review.tried = []
        review.notes.append("no case images: the convention check needs their sizes and was not run")
    if review.tried:
        geometry: dict[str, Geometry] = {}
        for key, path in files.items():
            try:
                geometry[key] = read_geometry(path)
            except Exception as exc:  # noqa: BLE001 - one unreadable header costs its case's transforms only
                review.notes.append(f"{path.name}: header not readable ({type(exc).__name__}); the convention "
                                    "check leaves its predictions as they are")
        review.findings = check_conventions(challenge, evaluator, scored.cases, geometry, scored.summary.aggregates)
    if challenge not in FIGURES:  # a defined challenge: its pictures come from its sockets' kinds (review.kinds)
        review.notes.append(f"no figures of its own for {challenge}: pre-flight draws them from its sockets' kinds")
        return review
    try:
        review.figures = FIGURES[challenge](scored, files, evaluator)
    except Exception as exc:  # noqa: BLE001 - the figures are an aid: the report is written without them
        log.warning("review figures not drawn: %s", exc)
        review.notes.append(f"no figures: {type(exc).__name__} while drawing them")
    return review
