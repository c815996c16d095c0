"""The pre-flight report as one self-contained HTML page (inline CSS, no script, nothing fetched), drawn from
preflight.json's content. Everything the container or the participant wrote (case names, errors, log lines) is
escaped."""

from __future__ import annotations

from collections.abc import Mapping
from html import escape
from typing import Any

from ..review.page import BASE_STYLE, review_section
from ..review.page import STYLE as REVIEW_STYLE

STYLE = BASE_STYLE + """
.succeeded { background: #dff3e3; }
.failed { background: #f9dcdc; }
.verdict { font-size: 20px; padding: 8px 12px; display: inline-block; }
.verdict.ready { background: #dff3e3; }
.verdict.warning { background: #ffe3a3; }
.verdict.failed { background: #f9dcdc; }
pre { background: #f6f6f6; padding: 8px; font-size: 12px; overflow-x: auto; }
""" + REVIEW_STYLE


def _text(value: Any) -> str:
    return "–" if value is None else escape(str(value))


def _mib(value: int | None) -> str:
    return "–" if value is None else f"{value / (1 << 20):.0f} MiB"


def _seconds(value: float | None) -> str:
    return "–" if value is None else f"{value:.2f}"


def _gpu(job: dict[str, Any]) -> str:
    if not job["gpu_passed"]:
        return "not passed"
    return {True: "used", False: "passed, not used", None: "passed (use not measurable)"}[job["used_gpu"]]


def job_rows(data: dict[str, Any]) -> str:
    rows = []
    for job in data["jobs"]:
        outputs = "<br>".join(f"{escape(o['relative_path'])}: " + ("valid" if o["valid"] else escape(o["error"]))
                              for o in job["outputs"]) or "–"
        rows.append(f'<tr class="{job["status"]}"><td>{escape(job["case"])}</td><td>{job["status"]}</td>'
                    f'<td class="number">{job["wall_seconds"]:.2f}</td>'
                    f'<td class="number">{_seconds(job["cpu_seconds"])}</td>'
                    f'<td class="number">{_seconds(job["gpu_seconds"])}</td>'
                    f'<td class="number">{_mib(job["peak_memory_bytes"])}</td><td>{_gpu(job)}</td>'
                    f'<td>{outputs}</td><td>{_text(job["error"])}</td></tr>')
    return "".join(rows)


def job_logs(data: dict[str, Any]) -> str:
    """The last log lines of every failed job, and the notes of every job."""
    parts = []
    for job in data["jobs"]:
        if job["status"] == "failed":
            log = "\n".join(["--- stdout", *job["stdout_tail"], "--- stderr", *job["stderr_tail"]])
            parts.append(f'<details class="log" open><summary>{escape(job["case"])}: last log lines</summary>'
                         f"<pre>{escape(log)}</pre></details>")
        for note in job["notes"]:
            parts.append(f"<p>{escape(job['case'])}: {escape(note)}</p>")
    return "".join(parts)


def evaluation_section(evaluation: dict[str, Any] | None) -> str:
    if evaluation is None:
        return "<h2>Scores</h2><p>Not scored: no --ground-truth given.</p>"
    if evaluation["error"]:
        return f'<h2>Scores</h2><p class="failed">The evaluator refused the jobs: {escape(evaluation["error"])}</p>'
    rows = []
    for key, value in evaluation["aggregates"].items():
        interval = evaluation["intervals"].get(key)
        ci = f"{interval['low']:.4f} – {interval['high']:.4f}" if interval else "–"
        level = f"{interval['level']:.0%} ({interval['n']} resamples)" if interval else "–"
        rows.append(f'<tr><td>{escape(key)}</td><td class="number">{value:.4f}</td><td class="number">{ci}</td>'
                    f"<td>{level}</td></tr>")
    notes = "".join(f"<li>{escape(n)}</li>" for n in [*evaluation["notes"], *evaluation["warnings"]])
    return (f"<h2>Scores ({escape(evaluation['evaluator'])}, {evaluation['num_cases']} cases)</h2>"
            f'<table id="scores"><tr><th>aggregate</th><th>value</th><th>bootstrap interval</th><th>level</th></tr>'
            f"{''.join(rows)}</table>" + (f"<ul>{notes}</ul>" if notes else ""))


def verdict(data: dict[str, Any]) -> tuple[str, str]:
    """(level, words) of a report: `ready` (every job succeeded, scored, no check fired), `warning` (the jobs
    succeeded but a check fired: its reason first) or `failed` (a job failed or the evaluator refused the jobs)."""
    summary, warnings = data["summary"], data.get("warnings", [])
    if summary["num_failed"]:
        return "failed", f"{summary['num_failed']} of {summary['num_jobs']} jobs failed"
    if data["evaluation"] and data["evaluation"]["error"]:
        return "failed", "the evaluator refused the jobs"
    if warnings:
        more = f" (and {len(warnings) - 1} more warning(s))" if len(warnings) > 1 else ""
        return "warning", f"check first: {warnings[0]}{more}"
    return "ready", "every job succeeded and no check fired"


def render_page(data: dict[str, Any], figures: Mapping[str, bytes] | None = None) -> str:
    """The page of a pre-flight, or of a phase's submission (`data["team"]`: a report of its jobs, not advice), with
    the review's figures (`figures`: their bytes by file name)."""
    summary, limits = data["summary"], data["limits"]
    team = data.get("team")
    title = (f"Submission {escape(team)}: {escape(data['image'])}" if team else
             f"Pre-flight of {escape(data['image'])}")
    level, words = verdict(data)
    shown = (words[0].upper() + words[1:] if team else
             {"ready": "Ready to upload: ", "warning": "Not ready, ", "failed": "Not ready: "}[level] + words)
    warnings = "".join(f"<li>{escape(w)}</li>" for w in data.get("warnings", []))
    conditions = "".join(f"<tr><td>{escape(c['condition'])}</td><td>{escape(c['how'])}</td>"
                         f"<td>{escape(c['source'])}</td></tr>" for c in data["conditions"])
    image_notes = "".join(f"<li>{escape(n)}</li>" for n in data["image_notes"])
    return f"""<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<title>{title} ({escape(data['challenge'])})</title>
<style>{STYLE}</style>
</head>
<body>
<h1>{title} for {escape(data['challenge'])}</h1>
<p class="verdict {level}">{escape(shown)}</p>
{f'<ul id="warnings">{warnings}</ul>' if warnings else ''}
<p>{summary['num_succeeded']} of {summary['num_jobs']} jobs succeeded; {summary['total_wall_seconds']:.1f} s in all,
{summary['max_wall_seconds']:.1f} s the longest; CPU {_seconds(summary['total_cpu_seconds'])} s, GPU
{_seconds(summary['total_gpu_seconds'])} s in all; peak memory {_mib(summary['max_peak_memory_bytes'])};
limits {limits['memory_gb']:g} GB and {limits['time_limit_s']:g} s per job (grand-challenge's instance
{escape(limits['gc_instance'])}, {limits['gc_instance_vcpus']} vCPUs); model {_text(data['model'])}.</p>
{f'<ul>{image_notes}</ul>' if image_notes else ''}
<h2>Jobs</h2>
<table id="jobs"><tr><th>case</th><th>status</th><th>seconds</th><th>CPU seconds</th><th>GPU seconds</th>
<th>peak memory</th><th>GPU</th>
<th>output sockets</th><th>error (grand-challenge's words)</th></tr>{job_rows(data)}</table>
{job_logs(data)}
{evaluation_section(data['evaluation'])}
{review_section((data['evaluation'] or {}).get('review'), figures or {})}
<h2>Conditions the jobs ran under</h2>
<table id="conditions"><tr><th>condition</th><th>as grand-challenge</th><th>source</th></tr>{conditions}</table>
<p>{escape(data['tool'])}</p>
</body>
</html>
"""
