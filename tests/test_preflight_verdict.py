"""Pre-flight's verdict includes its own checks: a report whose jobs all succeeded is ready only when no check fired
(the convention check, a value the hospital gateway would refuse, an evaluator's warning); otherwise amber, with the
reason first, in preflight.json, on the terminal's last line and at the top of the page."""

from __future__ import annotations

import re

from medchallenge.jobs import JobLimits
from medchallenge.preflight.page import render_page
from medchallenge.preflight.run import GATEWAY_REFUSES, check_warnings, terminal_table, verdict

SWAPPED = "your points match the ground truth if x and y are swapped: froc 0.000 -> 0.524"


def job(case: str, status: str = "succeeded", notes: tuple[str, ...] = ()) -> dict:
    return {"case": case, "pk": case, "status": status, "error": None if status == "succeeded" else "boom",
            "exit_code": 0, "wall_seconds": 1.0, "peak_memory_bytes": 1 << 24, "cpu_seconds": 0.5, "gpu_seconds": 0.0,
            "gpu_passed": False, "used_gpu": None, "inputs": [], "outputs": [], "notes": list(notes),
            "stdout_tail": [], "stderr_tail": []}


def data(jobs: list[dict], conventions: tuple[str, ...] = (), warnings: tuple[str, ...] = ()) -> dict:
    """A pre-flight report as run.report builds it, of `jobs` scored with `conventions` found."""
    evaluation = {"evaluator": "medchallenge.evaluators.object_cxr", "edition": None, "scored_as_missing": [],
                  "error": None, "aggregates": {"froc": 0.0}, "intervals": {}, "num_cases": len(jobs), "notes": [],
                  "warnings": list(warnings), "metrics": "evaluation/metrics.json",
                  "review": {"conventions": list(conventions), "transforms_tried": ["x and y are swapped"],
                             "figures": [], "notes": []}}
    failed = sum(j["status"] == "failed" for j in jobs)
    found = check_warnings(jobs, evaluation)
    limits = JobLimits()
    return {"tool": "medchallenge preflight", "challenge": "object-cxr", "image": "team/algorithm:1", "model": None,
            "ready": not failed and not found, "warnings": found,
            "summary": {"num_jobs": len(jobs), "num_succeeded": len(jobs) - failed, "num_failed": failed,
                        "total_wall_seconds": 2.0, "max_wall_seconds": 1.0, "total_cpu_seconds": 1.0,
                        "total_gpu_seconds": 0.0, "max_peak_memory_bytes": 1 << 24, "gpu_passed": False,
                        "used_gpu": False},
            "limits": {**limits.to_json(), "cpus": 2, "cpus_asked": None, "gc_instance": "ml.m5.large",
                       "gc_instance_vcpus": 2},
            "conditions": [], "image_notes": [], "jobs": jobs, "evaluation": evaluation}


def verdict_paragraph(page: str) -> str:
    return re.search(r'<p class="verdict (\w+)">([^<]*)</p>', page).groups()


def test_a_convention_finding_makes_every_succeeded_job_amber_with_the_reason_first():
    report = data([job("08001.jpg"), job("08002.jpg")], conventions=(SWAPPED,))
    assert not report["ready"] and report["warnings"] == [f"convention check: {SWAPPED}"]
    assert verdict(report) == ("warning", f"check first: convention check: {SWAPPED}")
    last = terminal_table(report).splitlines()[-1]
    assert last == f"2/2 jobs succeeded; NOT ready, check first: convention check: {SWAPPED}"
    level, shown = verdict_paragraph(render_page(report))
    assert level == "warning" and shown.startswith("Not ready, check first: convention check: your points match")


def test_every_warning_is_listed_the_convention_check_first_then_refused_values_then_the_evaluators():
    refused = f"{GATEWAY_REFUSES}: object-cxr-points: points[0]: outside the 1024x1024 image"
    report = data([job("08001.jpg", notes=(refused,)), job("08002.jpg")], conventions=(SWAPPED,),
                  warnings=("2 images without a prediction scored as empty",))
    assert report["warnings"] == [f"convention check: {SWAPPED}", f"08001.jpg: {refused}",
                                  "2 images without a prediction scored as empty"]
    assert verdict(report)[1].endswith("(and 2 more warning(s))")
    page = render_page(report)
    assert page.count("<li>") >= 3 and '<ul id="warnings">' in page


def test_only_a_report_where_no_check_fired_is_ready_and_a_failed_job_stays_red():
    ready = data([job("08001.jpg")])
    assert ready["ready"] and verdict(ready) == ("ready", "every job succeeded and no check fired")
    assert terminal_table(ready).endswith("1/1 jobs succeeded; ready to upload")
    assert verdict_paragraph(render_page(ready))[0] == "ready"
    failed = data([job("08001.jpg", "failed"), job("08002.jpg")], conventions=(SWAPPED,))
    assert verdict(failed) == ("failed", "1 of 2 jobs failed")
    assert terminal_table(failed).endswith("NOT ready: see the errors above")
