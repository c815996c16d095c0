"""The evaluator's review: `review.html` beside metrics.json, one offline page (no script, the PNGs embedded) with
the aggregates, the evaluator's notes, the convention check and the case figures, worst first, drawn by the same
`review_jobs` as pre-flight's and a phase's reports, each figure at full resolution in `review/` beside it (a click on
its thumbnail). It is written when case images are given: `--images DIR`, the
folder compose.yaml mounts at EVALUATOR_IMAGES where it holds anything (the challenge's input/), or an `images/`
folder in the ground truth (where grand-challenge's evaluator, which gets no arguments and no such mount, finds them;
an empty one asks for what needs no image); `--review` asks for it without images, `--no-review` never. The review is
an aid: a failure to draw it is a logged warning, and it never changes metrics.json."""

from __future__ import annotations

import argparse
import contextlib
import logging
import os
import stat
from pathlib import Path
from typing import Any

from ..contract import EVALUATOR_IMAGES
from ..io import write_text_atomic
from .page import review_page
from .preflight import review_jobs, write_figures

log = logging.getLogger("medchallenge.review")
REVIEW_PAGE = "review.html"
FIGURE_FOLDER = "review"  # the figures' PNGs, beside review.html
IMAGES_FOLDER = "images"  # the case images inside the ground truth, where --images is not given
MOUNTED_IMAGES = Path(EVALUATOR_IMAGES)  # compose.yaml's mount of the challenge's input/
NO_IMAGES = (f"no case images (--images DIR, a non-empty {EVALUATOR_IMAGES}, or an {IMAGES_FOLDER}/ folder in the "
             "ground truth): TB and object-CXR cases are not drawn, caption cases without their figure, RibFrac masks "
             "on a blank view")


def add_review_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--images", type=Path, default=None, metavar="DIR",
                        help=f"the case images: write {REVIEW_PAGE} (the case figures and the convention check) "
                             f"with them (default: {EVALUATOR_IMAGES} where it holds anything, as compose.yaml "
                             f"mounts the challenge's input/ there, else the ground truth's {IMAGES_FOLDER}/ folder "
                             "where there is one)")
    choice = parser.add_mutually_exclusive_group()
    choice.add_argument("--review", dest="review", action="store_const", const=True, default=None,
                        help=f"write {REVIEW_PAGE} also without case images (what needs none: caption concepts, "
                             "RibFrac masks)")
    choice.add_argument("--no-review", dest="review", action="store_const", const=False,
                        help=f"do not write {REVIEW_PAGE}, even with case images")


def _holds_anything(folder: Path) -> bool:
    """Whether `folder` is there with an entry in it (there but not listable counts: the review then says so)."""
    try:
        with os.scandir(folder) as entries:
            return next(entries, None) is not None
    except (FileNotFoundError, NotADirectoryError):
        return False
    except OSError:
        return True


def images_folder(args: argparse.Namespace) -> Path | None:
    """The case images' folder: --images, else MOUNTED_IMAGES where it holds anything (an empty mount is a compose
    run without images), else the ground truth's IMAGES_FOLDER where there is one (an empty one asks for the review
    of what needs no image); None without."""
    if args.images is not None:
        return args.images
    if _holds_anything(MOUNTED_IMAGES):
        return MOUNTED_IMAGES
    in_ground_truth = args.ground_truth / IMAGES_FOLDER
    return in_ground_truth if in_ground_truth.is_dir() else None


def review_wanted(args: argparse.Namespace) -> bool:
    """--review or --no-review where given, else whether there are case images (images_folder)."""
    if args.review is not None:
        return args.review
    return images_folder(args) is not None


def case_images(folder: Path | None) -> tuple[list[Path], list[str]]:
    """The regular files directly in the images folder (symbolic links and anything else are skipped) and notes on
    what was not found or skipped."""
    if folder is None:
        return [], [NO_IMAGES]
    try:
        entries = sorted(folder.iterdir())
    except OSError as exc:
        log.warning("warning: %s: the case images cannot be listed (%s); %s is drawn without them", folder,
                    exc.strerror or exc, REVIEW_PAGE)
        return [], [f"{folder}: the case images cannot be listed ({exc.strerror or exc}); {NO_IMAGES}"]
    files = [path for path in entries if not path.name.startswith(".") and stat.S_ISREG(path.lstat().st_mode)]
    skipped = len(entries) - len(files)
    return files, [f"{folder}: {skipped} entries skipped (hidden, links or not regular files)"] if skipped else []


def remove_review(output: Path) -> None:
    """The previous run's review.html and figures gone (only files of the figures' names: the folder is removed when
    that leaves it empty), so that a run without a review leaves none of an older one."""
    (output / REVIEW_PAGE).unlink(missing_ok=True)
    folder = output / FIGURE_FOLDER
    if folder.is_dir() and not folder.is_symlink():
        for path in folder.glob("[0-9][0-9][0-9]*.png"):
            path.unlink(missing_ok=True)
        with contextlib.suppress(OSError):
            folder.rmdir()


def write_review(evaluator: Any, scored: Any, images: Path | None, output: Path) -> Path | None:
    """review.html in `output` for `scored` (medchallenge.evaluation.Scored) with the case images in `images`
    (images_folder); None where it could not be drawn."""
    try:
        files, notes = case_images(images)
        review = review_jobs(evaluator.challenge, evaluator, scored, files)
        review.notes[:0] = notes
        data = review.to_json(FIGURE_FOLDER)
        write_figures(output, data["figures"], review.figures)
        figures = {entry["file"]: figure.png for entry, figure in zip(data["figures"], review.figures)}
        title = f"Review of the {evaluator.challenge} predictions ({scored.cases.layout}, {len(scored.case)} cases)"
        page = review_page(title, scored.summary.aggregates, [*scored.meta["notes"], *scored.meta["warnings"]], data,
                           figures)
        write_text_atomic(output / REVIEW_PAGE, page)
    except Exception as exc:  # noqa: BLE001 - the review is an aid: metrics.json is written without it
        log.warning("warning: %s not written: %s: %s", REVIEW_PAGE, type(exc).__name__, exc)
        return None
    for line in data["conventions"]:
        log.info("convention check: %s", line)
    return output / REVIEW_PAGE
