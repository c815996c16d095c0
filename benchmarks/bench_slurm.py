"""Benchmark: a challenge phase through the Slurm backend (`medchallenge phase run --backend slurm`) against the local
backend, on the one-node Slurm of .ci/provision-slurm.sh.

bench_phase's CPU-light image (tests/job_images/broken, BEHAVIOUR=ok: reads the CT, waits 0.5 s) on its small
synthetic TB CTs: jobs per minute through Slurm (2 tasks at once: --max-parallel 2, 1 CPU each on this 2-core node)
and through the local backend with --jobs 2, the whole phase timed (conversion, submission, scheduling, evaluation and
leaderboard included), and what Slurm adds per job over the local backend; per job, the task's time beyond a bare
`docker run` of the same image on the same input; and the same phase through Slurm with Podman as the engine (the
image loaded from its archive once). Returns {"skipped": reason} without Slurm.
"""

from __future__ import annotations

import json
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from bench_phase import CASES, COMMON, _bare_docker_run, _build, _cohort, _task_seconds


def _phase(submissions: Path, cohort: Path, out: Path, *options: str) -> float:
    started = time.perf_counter()
    subprocess.run([sys.executable, "-m", "medchallenge.cli", "phase", "run", "--challenge", "tb-caverns",
                    "--submissions", str(submissions), "--cases", str(cohort / "input"), "--ground-truth",
                    str(cohort / "ground_truth"), "--output", str(out), *COMMON, *options], check=True,
                   capture_output=True)
    return time.perf_counter() - started


def run() -> dict:
    if shutil.which("sbatch") is None or not subprocess.run(["sinfo", "--noheader", "--format=%t"],
                                                            capture_output=True, text=True).stdout.strip():
        return {"skipped": "no Slurm cluster (make slurm)"}
    light = _build("ok")
    with tempfile.TemporaryDirectory(prefix="bench_slurm_") as tmp:
        tmp = Path(tmp)
        cohort = _cohort(tmp / "cohort", CASES)
        one = tmp / "one.toml"
        one.write_text(f'[[submission]]\nteam = "light"\nimage = "{light}"\n')
        local = _phase(one, cohort, tmp / "local", "--jobs", "2")
        slurm = _phase(one, cohort, tmp / "slurm", "--backend", "slurm", "--max-parallel", "2")
        task, container = _task_seconds(tmp / "slurm")
        bare = _bare_docker_run(light, tmp / "slurm")
        archive = tmp / "light.tar"
        subprocess.run(["docker", "save", "--output", str(archive), light], check=True)
        subprocess.run(["podman", "rmi", "--force", light], capture_output=True)
        (tmp / "podman.toml").write_text('[[submission]]\nteam = "light"\nimage = "light.tar"\n')
        podman = _phase(tmp / "podman.toml", cohort, tmp / "podman", "--backend", "slurm", "--max-parallel", "2",
                        "--engine", "podman")
        podman_task, podman_container = _task_seconds(tmp / "podman")
    overhead = statistics.median(task) - bare
    return {
        "image": f"{light} (CPU-light: reads the CT, waits 0.5 s)", "cases": CASES, "parallel": 2,
        "jobs_per_minute": {"local_jobs_2": round(60 * CASES / local, 2), "slurm_docker": round(60 * CASES / slurm, 2),
                            "slurm_podman": round(60 * CASES / podman, 2)},
        "phase_seconds": {"local_jobs_2": round(local, 1), "slurm_docker": round(slurm, 1),
                          "slurm_podman_with_load": round(podman, 1)},
        "bare_docker_run_seconds": round(bare, 3),
        "slurm_task_seconds_median": round(statistics.median(task), 3),
        "slurm_container_seconds_median": round(statistics.median(container), 3),
        "slurm_task_overhead_per_job_seconds": round(overhead, 3),
        "slurm_task_overhead_share_of_a_30s_job": round(overhead / 30, 3),
        "slurm_extra_seconds_per_job_over_local": round((slurm - local) / CASES, 3),
        "podman_task_seconds_median": round(statistics.median(podman_task), 3),
        "podman_container_seconds_median": round(statistics.median(podman_container), 3),
    }


if __name__ == "__main__":
    print(json.dumps(run(), indent=1))
