"""Benchmark: a thousand real jobs through this machine's Slurm (issue 42, section 4), resumed once midway.

Two submissions (bench_phase's CPU-light image, reads a small CT and waits 0.5 s, built twice with different labels
so that the two are two images and their jobs are not shared) x CASES small synthetic TB CTs (64 x 64 x 16) through
`medchallenge phase run --backend slurm --max-parallel 2` with Docker. Once half of the jobs have a state, the
`phase run` is interrupted (SIGINT, as Ctrl-C) while the arrays go on in Slurm, then the same command is run again
to resume. Measured: the phase's wall time and jobs per minute (all jobs over the tasks' span: the first task's start
to the last one's end), slurmctld's CPU seconds over the run (from /proc: the controller's share of the cluster's
work), and that every job ran exactly once (each task logs `job <id>: <status>` once into its Slurm log; a job
logged twice ran twice) and has a final state. Loads the shared cluster for tens of minutes: run it alone
(`benchmarks/run.py --only slurm_scale`). Returns {"skipped": reason} without Slurm or Docker.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections import Counter
from datetime import datetime
from pathlib import Path

from bench_phase import COMMON, ROOT, _cohort

CASES = int(os.environ.get("MEDCHALLENGE_SLURM_SCALE_CASES", "500"))
IMAGE = "mc-test-h42-slurm-scale"
# the task's last line, `job <id>: succeeded` or `job <id>: failed: <error>` (not the job runner's `... in 1.2 s`)
TASK_LINE = re.compile(r"^job ([0-9a-f]{32}): (?:succeeded|failed)(?::.*)?$", re.MULTILINE)


def _build(team: str) -> str:
    """The CPU-light image, labelled with `team`: another image ID per team."""
    tag = f"{IMAGE}:{team}"
    subprocess.run(["docker", "build", "--quiet", "--build-arg", "BEHAVIOUR=ok", "--label",
                    f"mc-test-h42-slurm-scale={team}", "--tag", tag, str(ROOT / "tests" / "job_images" / "broken")],
                   check=True, capture_output=True)
    return tag


def _controller_cpu_seconds() -> float | None:
    """slurmctld's CPU time so far (user + system), or None where it is not on this machine."""
    found = subprocess.run(["pgrep", "-x", "slurmctld"], capture_output=True, text=True).stdout.split()
    if not found:
        return None
    fields = Path(f"/proc/{found[0]}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _why_still_running(process: subprocess.Popen) -> str:
    """What a `phase run` that outlived its Ctrl-C is doing: its Python stack (py-spy, where installed) and its
    process tree."""
    parts = []
    spy = shutil.which("py-spy") or str(Path(sys.executable).with_name("py-spy"))
    if Path(spy).exists():
        parts.append(subprocess.run([spy, "dump", "--pid", str(process.pid)], capture_output=True, text=True).stdout)
    tree = subprocess.run(["ps", "-eo", "pid,ppid,etime,args", "--forest"], capture_output=True, text=True).stdout
    parts.append("\n".join(line for line in tree.splitlines() if "medchallenge" in line or "sbatch" in line
                           or "squeue" in line or "sacct" in line))
    return "\n".join(parts)


def _states(out: Path) -> list[dict]:
    return [json.loads(p.read_text()) for p in out.glob("jobs/*/state.json")]


def run() -> dict:
    if shutil.which("sbatch") is None or not subprocess.run(["sinfo", "--noheader", "--format=%t"],
                                                            capture_output=True, text=True).stdout.strip():
        return {"skipped": "no Slurm cluster (make slurm)"}
    if shutil.which("docker") is None or subprocess.run(["docker", "info"], capture_output=True).returncode != 0:
        return {"skipped": "no Docker engine"}
    tags = [_build(team) for team in ("first", "second")]
    with tempfile.TemporaryDirectory(prefix="bench_slurm_scale_") as tmp:
        tmp = Path(tmp)
        cohort = _cohort(tmp / "cohort", CASES)
        toml = tmp / "submissions.toml"
        toml.write_text("".join(f'[[submission]]\nteam = "team-{k}"\nimage = "{tag}"\n\n'
                                for k, tag in enumerate(tags)))
        out = tmp / "out"
        command = [sys.executable, "-m", "medchallenge.cli", "phase", "run", "--challenge", "tb-caverns",
                   "--submissions", str(toml), "--cases", str(cohort / "input"), "--ground-truth",
                   str(cohort / "ground_truth"), "--output", str(out), *COMMON, "--backend", "slurm",
                   "--max-parallel", "2"]
        cpu_before, load_before = _controller_cpu_seconds(), os.getloadavg()[0]
        started = time.perf_counter()
        first = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        while first.poll() is None and len(list(out.glob("jobs/*/state.json"))) < CASES:  # half of 2 x CASES
            time.sleep(5)
        interrupted_at = len(list(out.glob("jobs/*/state.json")))
        first.send_signal(signal.SIGINT)
        try:
            first_stderr = first.communicate(timeout=300)[1]
        except subprocess.TimeoutExpired:
            why = _why_still_running(first)
            first.kill()
            raise RuntimeError(f"phase run still running 300 s after Ctrl-C:\n{why}") from None
        resumed = subprocess.run(command, capture_output=True, text=True)
        seconds = time.perf_counter() - started
        cpu_after, load_after = _controller_cpu_seconds(), os.getloadavg()[0]
        if resumed.returncode != 0:
            raise RuntimeError(f"the resumed phase run failed: {(resumed.stdout + resumed.stderr)[-2000:]}\n"
                               f"first run: {first_stderr[-1000:]}")
        states = _states(out)
        runs = Counter(match.group(1) for log in out.glob("logs/*.out")
                       for match in TASK_LINE.finditer(log.read_text(errors="replace")))
    span = (max(datetime.fromisoformat(s["finished"]) for s in states)
            - min(datetime.fromisoformat(s["started"]) for s in states)).total_seconds()
    jobs = 2 * CASES
    return {
        "jobs": jobs, "cases": CASES, "submissions": 2, "parallel": 2, "engine": "docker",
        "interrupted_after_states": interrupted_at,
        "phase_seconds": round(seconds, 1),
        "jobs_per_minute_phase": round(60 * jobs / seconds, 2),
        "jobs_per_minute_tasks_span": round(60 * jobs / span, 2),
        "slurmctld_cpu_seconds": None if cpu_before is None else round(cpu_after - cpu_before, 2),
        "slurmctld_cpu_share_of_one_core": None if cpu_before is None else round((cpu_after - cpu_before) / seconds, 4),
        "load_average_1min_before_after": [round(load_before, 2), round(load_after, 2)],
        "final_states": sum(s.get("status") in ("succeeded", "failed") for s in states),
        "jobs_run_once": sum(count == 1 for count in runs.values()),
        "jobs_run_more_than_once": sorted(job for job, count in runs.items() if count > 1),
        "every_job_ran_once": len(runs) == jobs and all(count == 1 for count in runs.values()),
    }


if __name__ == "__main__":
    print(json.dumps(run(), indent=1))
