"""What a phase keeps is its organiser's (issue 37 item 3, the part outside Slurm): a task spec cannot name the
program a node runs as its engine; OUT and everything the phase creates under it are the owner's only whatever the
umask (here 002, where folders would be group-writable), through the local backend and Slurm (whose jobs take the
submitting umask); after a job, its folders are writable by no one else."""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
from pathlib import Path

import pytest

from medchallenge.cli import main as medchallenge
from phase_helpers import build_image, phase_argv, save_image, synth_cohort


def test_a_task_spec_naming_a_program_as_its_engine_runs_nothing(tmp_path):
    marker = tmp_path / "ran"
    evil = tmp_path / "evil"
    evil.write_text(f"#!/bin/sh\ntouch {marker}\necho sha256:{'ab' * 32}\n")
    evil.chmod(0o755)
    out = tmp_path / "out"
    spec = {"version": 1, "job_id": "0" * 32, "out": str(out), "challenge": "tb-caverns", "engine": str(evil),
            "python": sys.executable, "image": {"ref": "x:1", "archive": None, "digest": f"sha256:{'ab' * 32}"},
            "run_image": f"sha256:{'ab' * 32}", "inputs": [], "outputs": [], "sockets": [], "model": None,
            "limits": {"memory_gb": 2, "time_limit_s": 60, "cpus": 1, "disk_gb": 1}, "gpu": False,
            "resources": {}, "work_dir": str(out / "jobs" / ("0" * 32)), "pk_base": 16}
    (tmp_path / "spec.json").write_text(json.dumps(spec))
    done = subprocess.run([sys.executable, "-m", "medchallenge.phase.task", str(tmp_path / "spec.json")],
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 2 and not marker.exists()
    assert done.stderr.strip().splitlines()[-1] == \
        f"error: {tmp_path / 'spec.json'}: its engine is not one of docker, podman"


def writable_by_others(out: Path) -> list[str]:
    """What under OUT (OUT too) a uid other than its owner could write, or reach when OUT is not the owner's only."""
    found = [] if stat.S_IMODE(out.stat().st_mode) == 0o700 else ["OUT itself"]
    for root, folders, files in os.walk(out):
        for name in folders + files:
            path = Path(root) / name
            mode = path.lstat().st_mode
            if not stat.S_ISLNK(mode) and mode & 0o022:
                found.append(f"{path.relative_to(out)} {stat.S_IMODE(mode):o}")
    return found


@pytest.mark.parametrize(("engine", "backend"), [("docker", "local"), ("podman", "local"), ("docker", "slurm")])
def test_out_and_all_under_it_are_the_owners_only_under_umask_002(docker_compose, repo, tmp_path, request, engine,
                                                                  backend):
    if engine == "podman":
        request.getfixturevalue("podman")
    if backend == "slurm":
        request.getfixturevalue("slurm")
    image = build_image(repo, "ok")
    cohort = synth_cohort(tmp_path / "cohort", 1)
    submissions = tmp_path / "submissions"
    submissions.mkdir()
    save_image(image, submissions / "ok.tar")
    (submissions / "phase.toml").write_text('[[submission]]\nteam = "alpha"\nimage = "ok.tar"\n')
    out = tmp_path / "out"
    previous = os.umask(0o002)
    try:
        assert medchallenge(phase_argv(submissions / "phase.toml", cohort, out, "--engine", engine,
                                           "--backend", backend)) == 0
    finally:
        os.umask(previous)
    report = json.loads((out / "submissions" / "alpha" / "report.json").read_text())
    assert [job["status"] for job in report["jobs"]] == ["succeeded"]  # the container could write its output
    assert writable_by_others(out) == []
    assert {stat.S_IMODE(p.stat().st_mode) for p in out.glob("tasks/*.json")} == {0o600}
    (job,) = out.glob("jobs/*/run")
    assert {name: stat.S_IMODE((job / name).stat().st_mode) & 0o022 for name in ("output", "model", "tmp")} == \
        {"output": 0, "model": 0, "tmp": 0}
