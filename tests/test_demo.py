"""`make demo`'s summary (medchallenge.demo): after the metrics table, one line per challenge whose evaluator wrote
review.html, naming where it is."""

from __future__ import annotations

from medchallenge.demo import metrics_folder, review_lines
from medchallenge.registry import CONFIGURATIONS_WITH_DATA
from medchallenge.review.evaluator_review import REVIEW_PAGE


def test_one_line_per_review_written_and_none_for_the_others(tmp_path):
    reviewed, scored_only, *_ = CONFIGURATIONS_WITH_DATA
    folder = metrics_folder(reviewed, tmp_path)
    folder.mkdir(parents=True)
    (folder / "metrics.json").write_text("{}")
    (folder / REVIEW_PAGE).write_text("<!doctype html>")
    metrics_folder(scored_only, tmp_path).mkdir(parents=True)
    (metrics_folder(scored_only, tmp_path) / "metrics.json").write_text("{}")
    assert review_lines(list(CONFIGURATIONS_WITH_DATA), tmp_path) == [
        f"{reviewed.title}: {tmp_path / reviewed.demo_folder / 'metrics' / REVIEW_PAGE}"]
