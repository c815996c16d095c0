"""A route's `max_parallel_jobs` (issue 31, throughput): the configuration's checks, the job-runner watcher and the
gateway running that many studies' jobs at once (shown by jobs that wait for each other, not by timing), each
study's results sent exactly once, one failing job failing alone, a full disk keeping only its own job queued, and
the jobs killed with the gateway run again, once, after its restart."""

from __future__ import annotations

import dataclasses
import errno
import json
import logging
import os
import signal
import subprocess
import sys
import threading
import time
from collections import Counter
from pathlib import Path

import pydicom
import pytest
from gateway_helpers import (OBJECT_CXR_INFERENCE, REPO, GatewayProcess, audit_lines, config_text, free_port,
                             route_text, send_files, states, wait_for)

from medchallenge.dicom.synthetic import SyntheticStudy, radiograph_dataset
from medchallenge.errors import InputError
from medchallenge.gateway import load_config
from medchallenge.gateway.image_routes import job_gpu, route_launcher
from medchallenge.inbox import watch_inbox
from medchallenge.io import write_dicom_atomic
from medchallenge.jobs import JobLimits
from medchallenge.jobs.launch import JobFolders
from medchallenge.synth.object_cxr_images import generate_image

TOGETHER = 3  # jobs that must run at the same time
# A radiograph job that fails at once when the radiograph is narrow, else waits (at most 120 s) until TOGETHER jobs
# have started and the test releases them, then runs the object-CXR algorithm.
DETECTOR = """
import os, pathlib, sys, time
import SimpleITK
marks = pathlib.Path({marks!r})
image = next(p for p in pathlib.Path(os.environ["INPUT_DIR"]).rglob("*") if p.suffix in (".mha", ".tif", ".tiff"))
if SimpleITK.ReadImage(str(image)).GetWidth() < 200:
    sys.exit("a failing job")
(marks / str(os.getpid())).touch()
deadline = time.monotonic() + 120
while len(list(marks.glob("[0-9]*"))) < {together} or not (marks / "release").exists():
    if time.monotonic() > deadline:
        sys.exit("the jobs did not run at the same time")
    time.sleep(0.05)
os.execv(sys.executable, [sys.executable, {inference!r}, "--device", "cpu"])
"""


def _config(tmp_path: Path, extra: str, gpu: str = "off") -> Path:
    path = tmp_path / "gateway.toml"
    path.write_text(config_text(tmp_path / "work", free_port(), free_port(), [sys.executable, "-c", "pass"])
                    + route_text("object-cxr", ["CR"], [], [sys.executable, "-c", "pass"]) + f'gpu = "{gpu}"\n' + extra)
    return path


def test_max_parallel_jobs_is_one_by_default_checked_and_a_gpu_route_runs_one_job(tmp_path, caplog):
    routes = {r.name: r for r in load_config(_config(tmp_path, "max_parallel_jobs = 4\n")).routes}
    assert routes["object-cxr"].max_parallel_jobs == 4 and routes["tb-caverns"].max_parallel_jobs == 1
    for value in ("0", "65", "-1", "2.5", "true", '"4"'):
        with pytest.raises(InputError, match=r"\[\[route\]\] 2: max_parallel_jobs = "):
            load_config(_config(tmp_path, f"max_parallel_jobs = {value}\n"))
    for gpu in ("on", "auto"):
        with caplog.at_level(logging.WARNING):
            caplog.clear()
            (route,) = [r for r in load_config(_config(tmp_path, "max_parallel_jobs = 2\n", gpu)).routes
                        if r.name == "object-cxr"]
        assert route.max_parallel_jobs == 1
        (line,) = [r.getMessage() for r in caplog.records]
        assert "[[route]] 2: max_parallel_jobs = 2 clipped to 1" in line and f"gpu = '{gpu}'" in line
    check = subprocess.run([sys.executable, "-m", "medchallenge.gateway", "--check", "--config",
                            str(_config(tmp_path, "max_parallel_jobs = 2\n", "on"))],
                           capture_output=True, text=True, env={**os.environ, "PYTHONPATH": str(REPO / "shared")})
    said = (check.stdout + check.stderr).splitlines()
    assert check.returncode == 0 and sum("clipped to 1" in line for line in said) == 1
    assert sum("configuration valid" in line for line in said) == 1 and len(said) == 2


def test_a_gpu_route_runs_one_job_per_gpu_of_its_devices_each_job_on_a_gpu_of_its_own(tmp_path, caplog):
    with caplog.at_level(logging.WARNING):
        (route,) = [r for r in load_config(_config(tmp_path, 'max_parallel_jobs = 3\ngpu_devices = ["0", "1"]\n',
                                                   "on")).routes if r.name == "object-cxr"]
    assert (route.max_parallel_jobs, route.gpu_devices) == (2, ("0", "1"))
    (line,) = [r.getMessage() for r in caplog.records]
    assert "max_parallel_jobs = 3 clipped to 2" in line and "gpu_devices (0, 1)" in line
    for extra, gpu in (('gpu_devices = ["0"]\n', "off"), ('gpu_devices = ["0", "0"]\n', "on"),
                       ('gpu_devices = ["../0"]\n', "on"), ('gpu_devices = [0]\n', "on")):
        with pytest.raises(InputError, match=r"\[\[route\]\] 2: gpu_devices"):
            load_config(_config(tmp_path, extra, gpu))
    taken, together = [], threading.Barrier(2, timeout=30)

    def job() -> None:
        with job_gpu(route) as devices:
            taken.append(devices)
            together.wait()  # both jobs hold a GPU at once: each a different one

    threads = [threading.Thread(target=job) for _ in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert sorted(taken) == [("0",), ("1",)]
    with job_gpu(route) as first, job_gpu(route) as second:  # given back after each job
        assert {first, second} == {("0",), ("1",)}
    with job_gpu(dataclasses.replace(route, gpu_devices=())) as devices:
        assert devices is None  # none named: the engine's choice, one job at a time
    image_route = dataclasses.replace(route, image="medchallenge/object-cxr-algorithm", command=())
    folders = JobFolders(*(tmp_path / name for name in ("input", "output", "model", "tmp")))
    command = route_launcher(image_route, ("1",)).command(folders, JobLimits(), True, "job")
    assert ("--gpus", '"device=1"') in set(zip(command, command[1:]))


def test_the_watcher_runs_jobs_at_once_a_failure_and_a_full_disk_each_only_their_own(tmp_path, caplog):
    inbox = tmp_path / "inbox"
    names = ("a", "b", "c", "fails", "disk-full")
    for name in names:
        (inbox / "pending" / name / "input").mkdir(parents=True)
    (inbox / "done").mkdir()
    together = threading.Barrier(TOGETHER, timeout=60)  # broken (and the jobs failed) unless a, b, c run at once
    attempts = Counter()

    def process(job: Path) -> None:
        attempts[job.name] += 1
        (job / "output").mkdir()
        if job.name == "fails":
            raise InputError("this job fails")
        if job.name == "disk-full" and attempts[job.name] == 1:
            raise OSError(errno.ENOSPC, "No space left on device")
        if job.name in "abc":
            together.wait()
        (job / "output" / "result.json").write_text("{}")

    stop = threading.Event()
    with caplog.at_level(logging.INFO, logger="medchallenge.inbox"):
        watcher = threading.Thread(target=watch_inbox, args=(inbox, process, stop.is_set, 0.2, TOGETHER + 1))
        watcher.start()
        try:
            wait_for(lambda: len(list((inbox / "done").iterdir())) == len(names), 120, "every job done")
        finally:
            stop.set()
            watcher.join(60)
    status = {job.name: json.loads((job / "status.json").read_text()) for job in (inbox / "done").iterdir()}
    assert status == {**{name: {"returncode": 0, "error": None} for name in ("a", "b", "c", "disk-full")},
                      "fails": {"returncode": 1, "error": "this job fails"}}
    assert attempts == {"a": 1, "b": 1, "c": 1, "fails": 1, "disk-full": 2}  # the others never queued again
    assert not together.broken and not watcher.is_alive()
    assert not any((inbox / "running").iterdir()) and not any((inbox / "pending").iterdir())
    assert sum("disk full" in r.getMessage() for r in caplog.records) == 1


def _radiograph_studies(root: Path, good: int) -> tuple[list[Path], Path]:
    """`good` CR studies of 256 px and one of 128 px, whose job fails (DETECTOR)."""
    def study(index: int, size: int) -> Path:
        radiograph = generate_image(5, index, size, positive_fraction=1.0)
        return write_dicom_atomic(root / f"cxr{index}" / "cxr.dcm", radiograph_dataset(
            radiograph.pixels, SyntheticStudy(f"parallel-{index}", f"PAR{index}")))

    return [study(index, 256) for index in range(good)], study(good, 128)


def _gateway_config(tmp_path: Path, pacs_port: int, port: int) -> Path:
    marks = tmp_path / "marks"
    marks.mkdir()
    detector = tmp_path / "detector.py"
    detector.write_text(DETECTOR.format(marks=str(marks), together=TOGETHER, inference=str(OBJECT_CXR_INFERENCE)))
    config = tmp_path / "gateway.toml"
    config.write_text(config_text(tmp_path / "work", port, pacs_port, [sys.executable, "-c", "pass"], quiet=0.5)
                      + route_text("object-cxr", ["CR"], [], [sys.executable, str(detector)])
                      + f"max_parallel_jobs = {TOGETHER}\n")
    return config


def _study_uid(path: Path) -> str:
    return str(pydicom.dcmread(path, stop_before_pixels=True).StudyInstanceUID)


def _sent_once(work: Path, pacs, uids: list[str]) -> None:
    """Each study of `uids` sent: its one result in the PACS, its UID once in the ledger and the audit log."""
    results = [ds for ds in pacs.received if not ds.SeriesDescription.endswith(": failed")]
    assert sorted(str(ds.StudyInstanceUID) for ds in results) == sorted(uids)
    ledger = (work / "sent-uids.txt").read_text().split()
    assert sorted(ledger) == sorted(set(ledger)) and {str(ds.SOPInstanceUID) for ds in results} <= set(ledger)
    sent = [line["study"] for line in audit_lines(work) if line["event"] == "study" and line["result"] == "sent"]
    assert sorted(sent) == sorted(uids)


def test_a_route_runs_its_studies_jobs_at_once_each_result_sent_once_a_failed_job_alone(tmp_path, pacs):
    port = free_port()
    config = _gateway_config(tmp_path, pacs.port, port)
    (tmp_path / "marks" / "release").touch()
    good, failing = _radiograph_studies(tmp_path, TOGETHER)
    gateway = GatewayProcess(config, tmp_path / "gateway.log")
    work = tmp_path / "work"
    try:
        gateway.wait_ready()
        assert send_files([*good, failing], port) == [0] * (TOGETHER + 1)  # one association: a burst
        wait_for(lambda: states(work)["sent"] + states(work)["failed"] == TOGETHER + 1, 300, "every study done")
        assert states(work)["sent"] == TOGETHER, (tmp_path / "gateway.log").read_text()
        wait_for(lambda: len(pacs.received) == TOGETHER + 1, 60, "the results and the failure note")
    finally:
        assert gateway.stop() == 0
    _sent_once(work, pacs, [_study_uid(p) for p in good])
    (note,) = [ds for ds in pacs.received if ds.SeriesDescription.endswith(": failed")]
    assert str(note.StudyInstanceUID) == _study_uid(failing)
    assert "a failing job" in (work / "failed" / _study_uid(failing) / "job" / "result.json").read_text()
    assert all(json.loads(p.read_text())["attempts"] == 1 for p in (work / "sent").glob("*/job.json"))


def test_jobs_running_at_once_when_the_gateway_is_killed_run_again_once_after_its_restart(tmp_path, pacs):
    port = free_port()
    config = _gateway_config(tmp_path, pacs.port, port)
    marks = tmp_path / "marks"
    good, _ = _radiograph_studies(tmp_path, TOGETHER)
    gateway = GatewayProcess(config, tmp_path / "gateway.log")
    work = tmp_path / "work"
    gateway.wait_ready()
    assert send_files(good, port) == [0] * TOGETHER
    wait_for(lambda: len(list(marks.iterdir())) == TOGETHER, 300, "the jobs running at once")
    assert states(work)["running"] == TOGETHER
    gateway.kill()
    for mark in list(marks.iterdir()):  # the jobs' processes, which the kill left waiting
        os.kill(int(mark.name), signal.SIGKILL)
    (marks / "release").touch()
    gateway = GatewayProcess(config, tmp_path / "gateway.log")
    try:
        wait_for(lambda: states(work)["sent"] + states(work)["failed"] == TOGETHER, 300, "the studies run again")
        assert states(work)["sent"] == TOGETHER, (tmp_path / "gateway.log").read_text()
        wait_for(lambda: len(pacs.received) == TOGETHER, 60, "their results")
        time.sleep(1)  # nothing more arrives
    finally:
        assert gateway.stop() == 0
    _sent_once(work, pacs, [_study_uid(p) for p in good])
    assert len(pacs.received) == TOGETHER and states(work)["running"] == states(work)["received"] == 0
    assert all(json.loads(p.read_text())["attempts"] == 2 for p in (work / "sent").glob("*/job.json"))
    assert (tmp_path / "gateway.log").read_text().count("was running when the gateway stopped; queued again") == 3
