"""object-CXR evaluator (MIDL 2020): official FROC (froc.py) and ROC AUC, from run files or GC predictions.json.

Spec: docs/metrics/object-cxr.md (the rules of froc.py, the AUC, and what this evaluator does where froc.py crashes).

Stage 1 tests every predicted point against the objects of its image, in blocks of images (the per-case step of
`compute_records`, cacheable with --records and shardable with --shard); stage 2 sorts all points by probability
and walks the official FROC levels, computes the AUC, per-image counts, metrics.json and the two PNGs.
"""

from __future__ import annotations

import argparse
import dataclasses
import re
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath

import numpy as np

from ..bootstrap import resampled_ids
from ..contract import GC_LAYOUT, GCJob, match_jobs, name_list, read_json_file, read_predictions_json
from ..errors import InputError, note_or_refuse
from ..evaluator import CaseRecord, Cases, Evaluator, Summary
from ..formats.object_cxr import (
    Classification, GroundTruth, Localization, read_classification, read_ground_truth, read_localization,
)
from ..metrics import object_cxr as metrics
from ..sockets import CHEST_X_RAY, FOREIGN_OBJECT_LIKELIHOOD, FOREIGN_OBJECTS

GROUND_TRUTH_FILE = "annotations.csv"
CLASSIFICATION_FILE = "classification.csv"
LOCALIZATION_FILE = "localization.csv"
INPUT_SLUG = CHEST_X_RAY.slug
LIKELIHOOD_SLUG = FOREIGN_OBJECT_LIKELIHOOD.slug
POINTS_SLUG = FOREIGN_OBJECTS.slug
IMAGES_PER_RECORD = 4096


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--fps", default=",".join(f"{f:g}" for f in metrics.DEFAULT_FPS),
                        help="false positives per image of the FROC levels, comma separated (default: the released "
                             "froc.py's %(default)s; the challenge page's list is 1,2,4,8,16,32)")
    parser.add_argument("--polygon-rule", choices=metrics.POLYGON_RULES, default="skimage-0.16.2",
                        help="polygon boundary rule: scikit-image 0.16.2 as pinned by the organisers (default) or 0.19")
    parser.add_argument("--sklearn-auc", action="store_true",
                        help="compute the AUC with scikit-learn itself (slower import; same number)")


def parse_fps(text: str) -> list[float]:
    """`--fps 0.125,0.25` -> [0.125, 0.25] (float of each field, as froc.py); finite and distinct."""
    levels = []
    for token in text.split(","):
        try:
            level = float(token)
        except ValueError:
            raise InputError(f"--fps {text!r}: {token!r} is not a number") from None
        if not np.isfinite(level):
            raise InputError(f"--fps {text!r}: {token!r} is not finite")
        if level in levels:
            raise InputError(f"--fps {text!r}: level {token!r} given twice")
        levels.append(level)
    return levels


def level_key(level: float) -> str:
    """Aggregate name of a level: 0.125 -> sensitivity_at_fp_0.125, 8.0 -> sensitivity_at_fp_8."""
    text = str(int(level)) if level.is_integer() else repr(level)
    return f"sensitivity_at_fp_{text}"


@dataclass
class Submission:
    """Predictions aligned to the ground truth: every point with its image (-1: not in the ground truth)."""

    layout: str
    point_image: np.ndarray  # int64 per point, in file order (GC: ground-truth image order, then point order)
    probability: np.ndarray
    x: np.ndarray
    y: np.ndarray
    image_probability: np.ndarray  # float64 per ground-truth image
    notes: list[str] = field(default_factory=list)


def _find_file(folder: Path, name: str) -> Path:
    """`folder/name`, or the single `folder/*/name` (a prediction ZIP extracted with its folder)."""
    direct = folder / name
    if direct.is_file():
        return direct
    nested = sorted(folder.glob(f"*/{name}"))
    if len(nested) == 1:
        return nested[0]
    if nested:
        raise InputError(f"{folder}: several {name} files ({', '.join(str(p) for p in nested)})")
    raise InputError(f"{folder}: no {name} (and no predictions.json)")


def _unknown_images(kind: str, path: Path, names: list[str], strict: bool, scored_as: str) -> list[str]:
    """The note on rows for images not in the ground truth (`names`: image and line), or the --strict error."""
    if not names:
        return []
    return note_or_refuse(f"{path}: {len(names)} {kind} for images not in the ground truth ({name_list(names)})",
                          strict, scored_as)


def _image_probabilities(classification: Classification, gt: GroundTruth,
                         strict: bool) -> tuple[np.ndarray, list[str]]:
    """One probability per ground-truth image (§6, joined by image_path). Rows for other images are left out of
    the AUC (noted); a ground-truth image without a probability is an error."""
    known = set(gt.image_paths)
    unknown = [f"{p} (line {n})" for p, n in classification.line_numbers.items() if p not in known]
    notes = _unknown_images("row(s)", classification.path, unknown, strict,
                            "left out of the AUC, which is over the ground-truth images joined by image path")
    missing = [p for p in gt.image_paths if p not in classification.probability]
    if missing:
        raise InputError(f"{classification.path}: no probability for {len(missing)} of {len(gt.image_paths)} "
                         f"ground-truth images ({name_list(missing)})")
    probability = np.fromiter((classification.probability[p] for p in gt.image_paths), dtype=np.float64,
                              count=len(gt.image_paths))
    return probability, notes


def read_run_files(input_dir: Path, gt: GroundTruth, strict: bool = False) -> Submission:
    """The official layout: classification.csv and localization.csv in the input folder."""
    classification = read_classification(_find_file(input_dir, CLASSIFICATION_FILE))
    localization = read_localization(_find_file(input_dir, LOCALIZATION_FILE))
    image_probability, unknown_notes = _image_probabilities(classification, gt, strict)
    index = {p: i for i, p in enumerate(gt.image_paths)}
    line_image = np.fromiter((index.get(p, -1) for p in localization.line_image_paths), dtype=np.int64,
                             count=len(localization.line_image_paths))
    point_image = np.repeat(line_image, localization.triples_per_line)
    unknown_lines = np.flatnonzero(line_image < 0).tolist()
    unknown = [f"{localization.line_image_paths[k]} (line {localization.line_numbers[k]})" for k in unknown_lines]
    unknown_notes += _unknown_images(
        "line(s)", localization.path, unknown, strict,
        f"their {int(np.count_nonzero(point_image < 0))} point(s) count as false positives and the images do not "
        "add to the image count, as in the official froc.py")
    return Submission("run files", point_image, localization.probability, localization.x, localization.y,
                      image_probability, classification.notes + localization.notes + unknown_notes
                      + _non_finite_notes(localization, strict))


def _non_finite_notes(localization: Localization, strict: bool) -> list[str]:
    """froc.py reads `nan`/`inf` with float() and compares them: a point with a NaN or infinite coordinate is inside
    nothing, an infinite probability ranks first/last, NaN probabilities go where Python's sort puts them."""
    values = np.column_stack([localization.probability, localization.x, localization.y])
    bad = np.flatnonzero(~np.isfinite(values).all(axis=1))
    if not len(bad):
        return []
    line_of_point = np.repeat(localization.line_numbers, localization.triples_per_line)
    lines = list(dict.fromkeys(f"line {line}" for line in line_of_point[bad].tolist()))
    message = f"{localization.path.name}: {len(bad)} point(s) with a NaN or infinite value ({name_list(lines)})"
    return note_or_refuse(message, strict, "scored as froc.py compares them (such coordinates are inside no object; "
                          "probabilities ranked as Python's sort ranks them)")


def _number(value, where: str) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not np.isfinite(value):
        raise InputError(f"{where}: expected a finite number, got {value!r}")
    return float(value)


# Uploads that grand-challenge converts (panimg 0.15.2) keeping a geometry of their own: DICOM (PixelSpacing,
# ImagePositionPatient), MetaImage, NIfTI, NRRD, TIFF. Their spacing and origin are not in predictions.json.
GEOMETRY_UPLOAD_SUFFIXES = (".dcm", ".dicom", ".mha", ".mhd", ".nii", ".nii.gz", ".nrrd", ".tif", ".tiff", ".svs",
                            ".ndpi", ".zip")
PANIMG_DICOM_NAME = re.compile(r"[0-9.]+-[0-9]+")  # panimg names a DICOM upload <StudyInstanceUID>-<index>


def _check_pixel_geometry(job: GCJob, path: Path) -> None:
    """Points are world coordinates (mm) of the input image; refuse uploads whose spacing/origin are unknown here.

    JPEG and PNG uploads (and files without a known suffix, which only panimg's fallback builder reads) become 2-D
    images with spacing 1, origin 0 and identity direction, so world x, y are pixel column, row: used as they are.
    """
    name = job.case_name(INPUT_SLUG)
    base = PurePosixPath(name.replace("\\", "/")).name
    if base.lower().endswith(GEOMETRY_UPLOAD_SUFFIXES) or PANIMG_DICOM_NAME.fullmatch(base):
        raise InputError(f"{path}: job {job.pk}: input image {name!r} is not a JPEG/PNG upload; grand-challenge keeps "
                         "its pixel spacing and origin, which predictions.json does not carry, so the points (mm) "
                         "cannot be mapped to pixels: upload the test images as JPEG or PNG")


def _read_points(job: GCJob) -> list[tuple[float, float, float]]:
    """(probability, x, y) in pixels of each point of the job's "Multiple points" output, in order."""
    path = job.output(POINTS_SLUG).path
    if not path.is_file():
        raise InputError(f"{path}: output '{POINTS_SLUG}' of job {job.pk} not found")
    document = read_json_file(path)
    if not isinstance(document, dict) or not isinstance(document.get("points"), list):
        raise InputError(f"{path}: expected a 'Multiple points' object with a 'points' list")
    _check_pixel_geometry(job, path)
    triples = []
    for k, element in enumerate(document["points"]):
        where = f"{path}: points[{k}]"
        if not isinstance(element, dict) or not isinstance(element.get("point"), list) \
                or len(element["point"]) not in (2, 3):
            raise InputError(f"{where}: expected {{'point': [x, y, z], 'probability': p}}")
        if "probability" not in element:
            raise InputError(f"{where}: no probability (needed to rank the points for FROC)")
        x, y = (_number(v, f"{where}.point") for v in element["point"][:2])
        triples.append((_number(element["probability"], f"{where}.probability"), x, y))
    return triples


def read_gc_predictions(jobs: list[GCJob], gt: GroundTruth, strict: bool = False) -> Submission:
    """GC layout: per job a bare-float likelihood and a "Multiple points" JSON, matched to the ground truth by the
    input image's name without folders and suffix (`08001.png` -> ground-truth row `test/08001.jpg`).

    Points [x, y, z] are taken as pixel coordinates (JPEG/PNG uploads become images with spacing 1 and origin 0);
    the points are ordered by ground-truth row, then by their order in the JSON (the tie order of the FROC sort).
    An image without a successful job gets probability 0 and no points (noted; --strict refuses it).
    """
    match = match_jobs(jobs, INPUT_SLUG, gt.image_paths, strict=strict, ground_truth=str(gt.path))
    notes = match.missing_notes("scored as probability 0 and no points (froc.py has no rule for a missing "
                                "prediction; the AUC needs one probability per image)")
    image_probability = np.zeros(len(gt.image_paths), dtype=np.float64)
    point_image: list[int] = []
    triples: list[tuple[float, float, float]] = []
    for index, image_path in enumerate(gt.image_paths):
        job = match.jobs.get(image_path)
        if job is None:
            continue
        path = job.output(LIKELIHOOD_SLUG).path
        if not path.is_file():
            raise InputError(f"{path}: output '{LIKELIHOOD_SLUG}' of job {job.pk} not found")
        image_probability[index] = _number(read_json_file(path), str(path))
        points = _read_points(job)
        triples.extend(points)
        point_image.extend([index] * len(points))
    values = np.asarray(triples, dtype=np.float64).reshape(-1, 3)
    return Submission(GC_LAYOUT, np.asarray(point_image, dtype=np.int64), values[:, 0].copy(),
                      values[:, 1].copy(), values[:, 2].copy(), image_probability, notes)


@dataclass
class HitTestInput:
    """Everything stage 1 needs, picklable: objects and points grouped by image."""

    objects: metrics.Objects
    point_start: np.ndarray  # points of image i: positions point_start[i]:point_start[i+1] of the arrays below
    point_index: np.ndarray  # global point number (file order)
    point_image: np.ndarray
    x: np.ndarray
    y: np.ndarray
    polygon_rule: str


def prepare_hit_tests(gt: GroundTruth, submission: Submission, polygon_rule: str) -> HitTestInput:
    n_images = len(gt.image_paths)
    objects = metrics.group_objects(gt.object_image, gt.object_type, gt.boxes, gt.vertex_start,
                                    gt.vertices_x, gt.vertices_y, n_images)
    order = np.argsort(submission.point_image, kind="stable")
    image = submission.point_image[order]
    return HitTestInput(objects, np.searchsorted(image, np.arange(n_images + 1)), order, image,
                        submission.x[order], submission.y[order], polygon_rule)


def block_ids(n_images: int) -> list[str]:
    """Stage-1 case ids: blocks of IMAGES_PER_RECORD ground-truth images (`images-000001-004096`, 1-based)."""
    return [f"images-{a + 1:06d}-{min(a + IMAGES_PER_RECORD, n_images):06d}"
            for a in range(0, n_images, IMAGES_PER_RECORD)]


@dataclass
class BlockHits(CaseRecord):
    """Stage 1 for one block of images: the (point, object) pairs where a point lies inside an object (§3)."""

    point: list[int]
    object: list[int]


@dataclass(kw_only=True)
class PointCases(Cases):
    """Blocks of images as stage-1 cases, and what stage 2 needs: ground truth, submission, options."""

    sources: HitTestInput
    gt: GroundTruth
    submission: Submission
    fps: list[float]
    polygon_rule: str
    sklearn_auc: bool

    def with_points(self, x: np.ndarray, y: np.ndarray) -> PointCases:
        """The same cases with the submission's points moved (the review's convention check), hit tests redone."""
        moved = dataclasses.replace(self.submission, x=x, y=y)
        return dataclasses.replace(self, submission=moved, sources=prepare_hit_tests(self.gt, moved,
                                                                                     self.polygon_rule))

    def options(self) -> dict:
        return {"fps": self.fps, "polygon_rule": self.polygon_rule,
                "auc": "scikit-learn" if self.sklearn_auc else "numpy, identical to scikit-learn roc_curve + auc"}


@dataclass(kw_only=True)
class FrocSummary(Summary):
    """Stage 2's results, with the FROC walk's counts and the ROC curve for the figures."""

    false_positive_sorted: np.ndarray
    new_hits: np.ndarray
    froc: metrics.FrocResult
    roc: metrics.RocResult


def read(args: argparse.Namespace) -> PointCases:
    """Ground truth and submission (run files or GC layout), the points grouped by image for the hit tests."""
    fps = parse_fps(args.fps)
    gt_path = args.ground_truth if args.ground_truth.is_file() else args.ground_truth / GROUND_TRUTH_FILE
    gt = read_ground_truth(gt_path, args.strict)
    jobs = read_predictions_json(args.input)
    submission = (read_gc_predictions(jobs, gt, args.strict) if jobs is not None
                  else read_run_files(args.input, gt, args.strict))
    return PointCases(ids=block_ids(len(gt.image_paths)),
                      sources=prepare_hit_tests(gt, submission, args.polygon_rule), layout=submission.layout,
                      notes=gt.notes + submission.notes, gt=gt, submission=submission, fps=fps,
                      polygon_rule=args.polygon_rule, sklearn_auc=args.sklearn_auc)


def evaluate_case(data: HitTestInput, block_id: str) -> BlockHits:
    """Stage 1: the hit tests of one block of images."""
    first, last = (int(v) for v in block_id.split("-")[1:])
    start, stop = data.point_start[first - 1], data.point_start[last]
    point, obj = metrics.hit_pairs(data.point_image[start:stop], data.x[start:stop], data.y[start:stop],
                                   data.objects, data.polygon_rule)
    return BlockHits(data.point_index[start + point].tolist(), obj.tolist())


def _malformed_objects_note(gt: GroundTruth, submission: Submission, order: np.ndarray, walked: int) -> list[str]:
    """froc.py fails (ValueError) when its walk tests a point against a malformed object (§3: a rectangle or
    ellipse unpacks 4 coordinates, a polygon reshapes them into pairs): an error if the walk's first `walked`
    points reach one's image, else a note (the object is counted and never hit)."""
    if not gt.malformed:
        return []
    malformed_image = np.zeros(len(gt.image_paths) + 1, dtype=bool)  # last entry: images not in the ground truth
    malformed_image[gt.object_image[list(gt.malformed)]] = True
    tested = np.flatnonzero(malformed_image[submission.point_image[order[:walked]]])
    if len(tested):
        rank = int(tested[0])
        image = int(submission.point_image[order[rank]])
        obj = min(k for k in gt.malformed if gt.object_image[k] == image)
        raise InputError(f"{gt.path}: {gt.malformed[obj]}; froc.py fails when it tests a point against it, as its "
                         f"walk does here (the point ranked {rank + 1} of {len(order)} by probability, on "
                         f"{gt.image_paths[image]!r})")
    listed = "; ".join(list(gt.malformed.values())[:3])
    more = f" and {len(gt.malformed) - 3} more" if len(gt.malformed) > 3 else ""
    return [f"{gt.path.name}: {len(gt.malformed)} malformed object(s) ({listed}{more}): froc.py fails only when its "
            "walk tests a point of their image, which it does not for this submission; counted as objects that are "
            "never hit"]


def _per_image(gt: GroundTruth, submission: Submission, hit_point: np.ndarray, hit_object: np.ndarray,
               false_positive: np.ndarray) -> dict[str, dict]:
    """metrics.json `case`: per ground-truth image its counts over all its points (not cut at the last level)."""
    n = len(gt.image_paths)
    known = submission.point_image >= 0
    objects = np.bincount(gt.object_image, minlength=n)
    points = np.bincount(submission.point_image[known], minlength=n)
    fps = np.bincount(submission.point_image[known & false_positive], minlength=n)
    detected = np.bincount(gt.object_image[np.unique(hit_object)], minlength=n)
    columns = zip(gt.image_paths, objects.tolist(), submission.image_probability.tolist(), points.tolist(),
                  detected.tolist(), fps.tolist())
    return {path: {"num_objects": o, "probability": p, "num_points": k, "num_objects_hit": d,
                   "num_false_positives": f}
            for path, o, p, k, d, f in columns}


def _roc(has_object: np.ndarray, probability: np.ndarray, use_sklearn: bool) -> metrics.RocResult:
    result = metrics.roc_auc(has_object, probability)
    if use_sklearn and not result.notes:
        from sklearn.metrics import auc, roc_curve

        fpr, tpr, _ = roc_curve(has_object, probability)
        result = metrics.RocResult(fpr, tpr, float(auc(fpr, tpr)))
    return result


def aggregate(cases: PointCases, records: dict[str, BlockHits]) -> FrocSummary:
    """Stage 2: the official FROC walk over all points by probability (§4), the AUC (§6), per-image counts."""
    gt, submission = cases.gt, cases.submission
    hit_point = np.concatenate([np.asarray(r.point, dtype=np.int64) for r in records.values()]
                               or [np.empty(0, dtype=np.int64)])
    hit_object = np.concatenate([np.asarray(r.object, dtype=np.int64) for r in records.values()]
                                or [np.empty(0, dtype=np.int64)])
    order = metrics.sort_by_probability(submission.probability)
    false_positive_sorted, new_hits = metrics.walk_counts(order, hit_point, hit_object, gt.num_object)
    froc = metrics.froc_levels(false_positive_sorted, new_hits, gt.num_image, gt.num_object, cases.fps)
    malformed_notes = _malformed_objects_note(gt, submission, order, froc.walked)
    has_object = np.bincount(gt.object_image, minlength=len(gt.image_paths)) > 0
    roc = _roc(has_object, submission.image_probability, cases.sklearn_auc)
    false_positive = np.empty_like(false_positive_sorted)
    false_positive[order] = false_positive_sorted
    details = {
        "num_images": len(gt.image_paths),
        "num_ground_truth_lines": gt.num_image,
        "num_objects": gt.num_object,
        "num_points": int(len(order)),
        "num_false_positives": int(np.count_nonzero(false_positive_sorted)),
        "num_objects_hit": int(len(np.unique(hit_object))),
        "froc_levels": [{"fp_per_image": f, "sensitivity": s, "reached": r}
                        for f, s, r in zip(froc.fps, froc.sensitivities, froc.reached)],
    }
    return FrocSummary(
        aggregates={"auc": roc.auc, "froc": froc.froc,
                    **{level_key(f): s for f, s in zip(froc.fps, froc.sensitivities)}},
        details=details, notes=malformed_notes + froc.notes + roc.notes,
        case=_per_image(gt, submission, hit_point, hit_object, false_positive),
        false_positive_sorted=false_positive_sorted, new_hits=new_hits, froc=froc, roc=roc,
    )


def bootstrap_units(cases: PointCases) -> list[str]:
    """The bootstrap's unit is a ground-truth image (stage 1's cases are blocks of images)."""
    return cases.gt.image_paths


def _copies(draw: np.ndarray, owner: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Items (objects or points) of the images drawn: an item of an image drawn k times has k copies, none if it is
    not drawn, and an item of no image (owner -1: a point of an image not in the ground truth) one. Returns, in
    (item, copy) order, each copy's item and new image (-1: none), and each item's first copy number."""
    order = np.argsort(draw, kind="stable")  # draw positions grouped by the image drawn
    start = np.searchsorted(draw[order], np.arange(len(draw) + 1))
    times = np.diff(start)
    known = owner >= 0
    per_item = np.where(known, times[np.where(known, owner, 0)], 1)
    item = np.repeat(np.arange(len(owner)), per_item)
    first = np.cumsum(per_item) - per_item
    copy = np.arange(len(item)) - first[item]
    new_image = np.full(len(item), -1, dtype=np.int64)
    of_image = known[item]
    new_image[of_image] = order[start[owner[item[of_image]]] + copy[of_image]]
    return item, new_image, first


def resample(cases: PointCases, records: dict[str, BlockHits],
             draw: np.ndarray) -> tuple[PointCases, dict[str, BlockHits]]:
    """The bootstrap's unit is an image: the ground truth and submission of the drawn images, each drawn image a new
    image with copies of its objects and points (in file order, copies of one point side by side, so the walk's
    tie order is the file order), and the hits between copies. Points of images not in the ground truth stay in
    every resample (false positives of no image); an image listed on two lines of annotations.csv counts once per
    draw."""
    gt, submission = cases.gt, cases.submission
    drawn = resampled_ids(gt.image_paths, draw)
    objects, object_image, first_object = _copies(draw, gt.object_image)
    points, point_image, first_point = _copies(draw, submission.point_image)
    vertex_count = np.diff(gt.vertex_start)[objects]
    vertex_start = np.concatenate([[0], np.cumsum(vertex_count)]).astype(np.int64)
    vertices = np.repeat(gt.vertex_start[objects] - vertex_start[:-1], vertex_count) + np.arange(vertex_start[-1])
    resampled_gt = dataclasses.replace(
        gt, image_paths=[new for new, _ in drawn], num_image=len(drawn), object_image=object_image,
        object_type=gt.object_type[objects], boxes=gt.boxes[objects], vertex_start=vertex_start,
        vertices_x=gt.vertices_x[vertices], vertices_y=gt.vertices_y[vertices],
        malformed={new: gt.malformed[old] for new, old in enumerate(objects.tolist()) if old in gt.malformed})
    resampled_submission = dataclasses.replace(
        submission, point_image=point_image, probability=submission.probability[points], x=submission.x[points],
        y=submission.y[points], image_probability=submission.image_probability[draw])
    hit_point = np.concatenate([np.asarray(r.point, dtype=np.int64) for r in records.values()] or [np.empty(0, int)])
    hit_object = np.concatenate([np.asarray(r.object, dtype=np.int64) for r in records.values()]
                                or [np.empty(0, int)])
    times = np.bincount(draw, minlength=len(gt.image_paths))[gt.object_image[hit_object]]
    pair = np.repeat(np.arange(len(hit_point)), times)
    copy = np.arange(len(pair)) - (np.cumsum(times) - times)[pair]
    hits = BlockHits(first_point[hit_point[pair]] + copy, first_object[hit_object[pair]] + copy)
    return dataclasses.replace(cases, gt=resampled_gt, submission=resampled_submission), {"resampled": hits}


def write_figures(folder: Path, cases: PointCases, records: dict[str, BlockHits], summary: FrocSummary) -> None:
    """froc.png (sensitivity against false positives per image, the levels marked) and roc.png."""
    from ..plots import plot_froc, plot_roc

    froc, roc = summary.froc, summary.roc
    rate, sensitivity = metrics.froc_curve(summary.false_positive_sorted, summary.new_hits, cases.gt.num_image,
                                           cases.gt.num_object)
    plot_froc(folder / "froc.png", rate, sensitivity, froc.fps, froc.sensitivities,
              title=f"object-CXR FROC = {froc.froc:.4f} ({cases.polygon_rule} polygons)",
              xlabel="false positives per image")
    plot_roc(folder / "roc.png", roc.fpr, roc.tpr, roc.auc, title="object-CXR ROC: foreign object present")


EVALUATOR = Evaluator(
    challenge="object-cxr",
    description=__doc__,
    strict_help="refuse predictions for images not in the ground truth (froc.py scores their points as false "
                "positives), NaN/infinite localization values (froc.py compares them), GC images without a "
                "successful job, and ground-truth objects froc.py never hits (empty, of unknown type, or malformed)",
    record=BlockHits,
    read=read,
    evaluate_case=evaluate_case,
    aggregate=aggregate,
    add_arguments=add_arguments,
    write_figures=write_figures,
    figures=("froc.png", "roc.png"),
    unit="image blocks",
    cheap_cases=True,
    bootstrap_units=bootstrap_units,
    bootstrap_unit="images",
    resample=resample,
    ranking=("auc", "froc"),
)
main = EVALUATOR.main
