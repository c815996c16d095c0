"""The DICOM gateway against a PACS stand-in: a study in, its SR out; the same study twice, an unroutable study, a
broken series (its failure note in the PACS), the gateway killed while its detector runs; the configuration checked
at start."""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pydicom
import pytest
from pydicom.uid import ExplicitVRLittleEndian, ImplicitVRLittleEndian
from dicom_helpers import dciodvfy_errors
from gateway_helpers import (INFERENCE, REPO, FakePacs, GatewayProcess, config_text, free_port, send_files, states,
                             wait_for)

from medchallenge.dicom.series import find_series, select_study_series
from medchallenge.dicom.sr import read_box_report, read_failure_note, read_point_report
from medchallenge.gateway import WorkQueue, load_config, main
from medchallenge.errors import InputError
from medchallenge.io import write_dicom_atomic


def start(tmp_path: Path, pacs: FakePacs, command: list[str], quiet: float = 1.0) -> tuple[GatewayProcess, int, Path]:
    port = free_port()
    config = tmp_path / "gateway.toml"
    config.write_text(config_text(tmp_path / "work", port, pacs.port, command, quiet))
    return GatewayProcess(config, tmp_path / "gateway.log"), port, config


def test_studies_in_results_out_duplicates_unroutable_and_broken(tmp_path, pacs, studies):
    gateway, port, _ = start(tmp_path, pacs, [sys.executable, str(INFERENCE), "--device", "cpu"])
    work = tmp_path / "work"
    try:
        assert set(send_files(studies["tb"], port)) == {0}
        wait_for(lambda: len(pacs.received) == 1, 120, "the SR in the PACS")
        sr = pacs.received[0]
        source = pydicom.dcmread(studies["tb"][0])
        assert sr.Modality == "SR" and sr.StudyInstanceUID == source.StudyInstanceUID
        ((series, _),) = select_study_series(find_series(studies["root"] / "tb"), ("CT",))
        sr_path = tmp_path / "sr.dcm"
        sr.save_as(sr_path, enforce_file_format=True)
        findings = read_box_report(sr_path, series)
        # the study moves to sent/ just after its SR is stored in the PACS
        wait_for(lambda: any((work / "sent").glob("*/job.json")), 60, "the study in sent/")
        (job,) = [json.loads(p.read_text()) for p in (work / "sent").glob("*/job.json")]
        assert len(findings) == 1 and job["results"] == [sr.SOPInstanceUID] and job["sent"] == 1
        assert len(job["instances"]) == len(studies["tb"]) and not (work / "sent" / series.study_uid / "input").exists()

        assert set(send_files(studies["tb"], port)) == {0}  # the same study again
        wait_for(lambda: states(work)["duplicate"] == 1, 60, "the duplicate")
        assert set(send_files(studies["mr"], port)) == {0}
        wait_for(lambda: states(work)["unroutable"] == 1, 60, "the unroutable study")
        assert set(send_files(studies["broken"], port)) == {0}
        wait_for(lambda: states(work)["failed"] == 1 and len(pacs.received) == 2, 60, "the broken study's note")
        assert set(send_files(studies["broken"], port)) == {0}  # a failed study again: not run again
        wait_for(lambda: states(work)["duplicate"] == 2, 60, "the failed study again")
        # nothing sent twice; for the broken study a failure note, an SR with the error line, in that study
        assert len(pacs.received) == 2
        note = pacs.received[1]
        broken = pydicom.dcmread(studies["broken"][0])
        assert note.Modality == "SR" and note.StudyInstanceUID == broken.StudyInstanceUID
        assert note.CompletionFlag == "PARTIAL" and note.SeriesInstanceUID != broken.SeriesInstanceUID
        message = read_failure_note(note)  # fixed words and the study's UID; the detector's error in the log only
        assert message == ("AI detector tb-caverns could not process this study: the detector could not process the "
                           f"images of this study. Study {broken.StudyInstanceUID}; the details are in the "
                           "gateway's log.")
        referenced = note.CurrentRequestedProcedureEvidenceSequence[0].ReferencedSeriesSequence[0]
        assert len(referenced.ReferencedSOPSequence) == len(studies["broken"])
        note.save_as(tmp_path / "note.dcm", enforce_file_format=True)
        assert dciodvfy_errors(tmp_path / "note.dcm") == []
        assert states(work) == {"incoming": 0, "received": 0, "running": 0, "sent": 1, "failed": 1,
                                "unroutable": 1, "duplicate": 2}
        (error,) = [p.read_text() for p in (work / "failed").glob("*/error.txt")]
        assert "uneven slice spacing" in error and error.count("\n") == 1
        assert "no route takes this study (MR/BRAIN (5))" in next((work / "unroutable").glob("*/error.txt")).read_text()
    finally:
        assert gateway.stop() == 0
    log = (tmp_path / "gateway.log").read_text()
    assert "Traceback" not in log
    assert log.count("moved to failed") == 1 and log.count("moved to unroutable") == 1
    assert "all 40 instance(s) were processed before; not run again" in log


DETECTOR_KILLED_ONCE = """
import os, sys, time
runs = os.environ["RUNS_FILE"]
with open(runs, "a") as handle:
    handle.write("run\\n")
if sum(1 for _ in open(runs)) == 1:
    time.sleep(300)  # the first run hangs until the gateway is killed (and with it this process)
os.execv(sys.executable, [sys.executable, *sys.argv[1:]])
"""


def test_a_gateway_killed_while_its_detector_runs_finishes_the_study_after_restart(tmp_path, pacs, studies,
                                                                                   monkeypatch):
    wrapper = tmp_path / "detector.py"
    wrapper.write_text(DETECTOR_KILLED_ONCE)
    monkeypatch.setenv("RUNS_FILE", str(tmp_path / "runs.txt"))
    command = [sys.executable, str(wrapper), str(INFERENCE), "--device", "cpu"]
    gateway, port, config = start(tmp_path, pacs, command)
    work = tmp_path / "work"
    assert set(send_files(studies["tb"], port)) == {0}
    wait_for(lambda: states(work)["running"] == 1 and (tmp_path / "runs.txt").exists(), 60, "the detector run")
    gateway.kill()
    assert states(work)["running"] == 1 and not pacs.received
    restarted = GatewayProcess(config, tmp_path / "gateway.log")
    try:
        wait_for(lambda: states(work)["sent"] == 1, 120, "the study finished after the restart")
    finally:
        assert restarted.stop() == 0
    assert len(pacs.received) == 1 and (tmp_path / "runs.txt").read_text().count("run") == 2
    (job,) = [json.loads(p.read_text()) for p in (work / "sent").glob("*/job.json")]
    assert job["attempts"] == 2
    assert "was running when the gateway stopped; queued again" in (tmp_path / "gateway.log").read_text()


def test_results_confirmed_before_are_not_sent_again(tmp_path, pacs, studies):
    from medchallenge.gateway import Pacs

    config = tmp_path / "gateway.toml"
    config.write_text(config_text(tmp_path / "work", free_port(), pacs.port, ["true"]))
    queue = WorkQueue(tmp_path / "work")
    sender = Pacs(load_config(config))
    files = studies["mr"][:2]
    assert sender.send(queue, files) == 2
    assert sender.send(queue, files) == 0  # e.g. after a restart between sending and moving the study to sent/
    assert len(pacs.received) == 2 and queue.sent_uids() == {pydicom.dcmread(f).SOPInstanceUID for f in files}


@pytest.mark.parametrize("accepted", [None, ImplicitVRLittleEndian])
def test_a_result_goes_to_the_pacs_as_stored_or_converted_where_it_takes_another_transfer_syntax(
        tmp_path, studies, monkeypatch, accepted):
    """A result file is sent as it is stored (only its meta information read: its dataset is neither decoded nor
    encoded again); a PACS taking its SOP class only in another transfer syntax gets it converted, the same
    content."""
    from medchallenge.dicom.detectors import FOREIGN_OBJECT
    from medchallenge.dicom.series import read_headers
    from medchallenge.dicom.sr import PointFinding, point_report
    from medchallenge.gateway import Pacs

    (series,) = read_headers(studies["cxr"])
    points = [PointFinding(10.0, 20.0, 0.9), PointFinding(100.5, 30.25, 0.4)]
    result = write_dicom_atomic(tmp_path / "sr.dcm", point_report(series, 0.8, points, FOREIGN_OBJECT))
    expected = pydicom.dcmread(result)
    decoded = []
    dcmread = pydicom.dcmread
    monkeypatch.setattr(pydicom, "dcmread", lambda path, *args, **kwargs: decoded.append(path) or
                        dcmread(path, *args, **kwargs))
    pacs = FakePacs(transfer_syntaxes=accepted and [accepted])
    try:
        config = tmp_path / "gateway.toml"
        config.write_text(config_text(tmp_path / "work", free_port(), pacs.port, ["true"]))
        assert Pacs(load_config(config)).send(WorkQueue(tmp_path / "work"), [result]) == 1
    finally:
        pacs.close()
    (received,) = pacs.received
    assert received.file_meta.TransferSyntaxUID == (accepted or ExplicitVRLittleEndian)
    assert decoded == ([] if accepted is None else [result])
    assert received == expected and read_point_report(received)[1] == points


@pytest.mark.parametrize("edit, message", [
    (lambda t: t.replace('port = 11112', 'port = 70000'), "[gateway]: port = 70000: expected 1 to 65535"),
    (lambda t: t.replace('ae_title = "GATEWAY"', 'ae_title = "A_VERY_LONG_AE_TITLE"'), "ae_title = 'A_VERY_LONG_AE_TITLE'"),
    (lambda t: t.replace('modalities = ["CT"]', 'modalities = []'), "[[route]] 1: modalities = []: expected a non-empty"),
    (lambda t: t.replace('[pacs]', '[pacs]\nretries = 3'), "[pacs]: unknown key(s) retries"),
    (lambda t: t.replace('host = "127.0.0.1"\nport = 4242', ''), "[pacs]: missing key 'host'"),
    (lambda t: t.replace('study_quiet_seconds = 1.0', 'study_quiet_seconds = "soon"'), "study_quiet_seconds = 'soon': expected"),
    (lambda t: t + "[[route\n", "not valid TOML"),
    (lambda t: t.replace('command = ["true"]', ''), "[[route]] 1: give image (a Docker image"),
    (lambda t: t.replace('command = ["true"]', 'command = ["true"]\nimage = "x"'), "[[route]] 1: give image"),
    (lambda t: t.replace('interface = "tb-caverns"', ''), "[[route]] 1: missing key 'interface'"),
    (lambda t: t.replace('interface = "tb-caverns"', 'interface = "caverns"'),
     "[[route]] 1: interface = 'caverns': no DICOM mapping for its output sockets"),
    (lambda t: t.replace('timeout_seconds = 300', 'timeout_seconds = 0'), "[[route]] 1: timeout_seconds = 0"),
])
def test_configuration_errors_are_one_line_at_start(tmp_path, capsys, edit, message):
    text = config_text(tmp_path / "work", 11112, 4242, ["true"])
    path = tmp_path / "gateway.toml"
    path.write_text(edit(text))
    assert main(["--config", str(path), "--check"]) == 1
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith(f"error: {path}") and message in err
    path.write_text(text)
    assert main(["--config", str(path), "--check"]) == 0
    with pytest.raises(InputError, match="cannot read the configuration"):
        load_config(tmp_path / "missing.toml")


def test_a_job_runner_killed_mid_study_finishes_it_after_restart(tmp_path, pacs, studies):
    """The compose `hospital` layout: the gateway hands the study through the route's inbox to the job-runner
    service (here running the algorithm as a local process job), which is killed during the job and restarted."""
    port, inbox = free_port(), tmp_path / "inbox"
    config = tmp_path / "gateway.toml"
    config.write_text(config_text(tmp_path / "work", port, pacs.port, [sys.executable, str(INFERENCE), "--device",
                                                                        "cpu"]) + f'inbox = "{inbox}"\n')
    env = {**os.environ, "PYTHONPATH": str(REPO / "shared")}
    runner_command = [sys.executable, "-m", "medchallenge.gateway", "--config", str(config), "--job-runner"]
    gateway = GatewayProcess(config, tmp_path / "gateway.log")
    runner_log = open(tmp_path / "job-runner.log", "a")
    runner = subprocess.Popen(runner_command, env=env, stdout=runner_log, stderr=subprocess.STDOUT)
    try:
        assert set(send_files(studies["tb"], port)) == {0}
        wait_for(lambda: (inbox / "running").is_dir() and any((inbox / "running").iterdir()), 60, "the job running")
        runner.kill()
        runner.wait(timeout=60)
        assert not pacs.received
        runner = subprocess.Popen(runner_command, env=env, stdout=runner_log, stderr=subprocess.STDOUT)
        wait_for(lambda: len(pacs.received) == 1, 120, "the SR after the job runner's restart")
        wait_for(lambda: states(tmp_path / "work")["sent"] == 1, 30, "the study sent")
    finally:
        runner.terminate()
        runner.wait(timeout=60)
        assert gateway.stop() == 0
    assert pacs.received[0].Modality == "SR"
    assert all(not any((inbox / state).iterdir()) for state in ("pending", "running", "done"))
    assert "Traceback" not in (tmp_path / "gateway.log").read_text()
    assert "was running when the watcher stopped; queued again" in (tmp_path / "job-runner.log").read_text()


@contextlib.contextmanager
def gateway_and_job_runner(tmp_path: Path, config_text_: str, inbox: bool):
    """A gateway of `config_text_` and, with `inbox`, the job-runner service its route hands the study to (the
    route's `inbox` added); both stopped at the end."""
    config = tmp_path / "gateway.toml"
    config.write_text(config_text_ + (f'inbox = "{tmp_path / "inbox"}"\n' if inbox else ""))
    env = {**os.environ, "PYTHONPATH": str(REPO / "shared")}
    runner = subprocess.Popen([sys.executable, "-m", "medchallenge.gateway", "--config", str(config), "--job-runner"],
                              env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL) if inbox else None
    gateway = GatewayProcess(config, tmp_path / "gateway.log")
    try:
        yield gateway
    finally:
        if runner is not None:
            runner.terminate()
            runner.wait(timeout=60)
        assert gateway.stop() == 0


@pytest.mark.parametrize("inbox", [False, True])
def test_a_job_over_its_time_limit_gets_the_time_out_note(tmp_path, pacs, studies, inbox):
    """The route's job (here, through the job-runner service too) killed at its time limit: the time-out note."""
    port = free_port()
    text = config_text(tmp_path / "work", port, pacs.port, [sys.executable, "-c", "import time; time.sleep(120)"])
    with gateway_and_job_runner(tmp_path, text.replace("timeout_seconds = 300", "timeout_seconds = 2"), inbox):
        assert set(send_files(studies["tb"], port)) == {0}
        wait_for(lambda: len(pacs.received) == 1, 120, "the time-out note")
    assert "the detector did not finish within its time limit" in read_failure_note(pacs.received[0])
    (error,) = [p.read_text() for p in (tmp_path / "work" / "failed").glob("*/error.txt")]
    assert error == "detector tb-caverns ran over 2 s\n"


def test_the_hospital_compose_file_and_the_example_configuration_agree():
    from test_registry import compose_services

    from medchallenge import __version__

    config = load_config(REPO / "gateway" / "gateway.example.toml")
    services = compose_services((REPO / "compose.hospital.yaml").read_text())
    assert set(services) == {"gateway", "job-runner"}
    gateway, runner = services["gateway"], services["job-runner"]
    assert "networks: [pacs]" in gateway and "network_mode: none" not in gateway
    assert not any("docker.sock" in line for line in gateway)  # the gateway never holds the Docker socket
    assert "network_mode: none" in runner and "- ${DOCKER_SOCKET:-/var/run/docker.sock}:/var/run/docker.sock" in runner
    assert 'group_add: ["${DOCKER_GID:-nogroup}"]' in runner  # compose commands work without it (logs, ps)
    assert all("profiles: [hospital]" in lines for lines in services.values())
    inbox = "- ${HOSPITAL_DATA:-./hospital}/inbox:/var/lib/medchallenge/inbox"
    assert inbox in gateway and inbox in runner
    # the built-in routes: the project's own algorithm images, handed to the job runner through the mounted inbox
    assert sorted(r.interface for r in config.routes) == ["object-cxr", "ribfrac", "tb-caverns"]
    for route in config.routes:
        assert route.image == f"medchallenge/{route.interface}-algorithm:{__version__}"
        assert route.inbox == Path("/var/lib/medchallenge/inbox") / route.name


def test_the_job_runner_runs_every_job_requeues_an_interrupted_one_and_reports_failures(tmp_path, studies):
    from medchallenge.gateway.job_runner import run_route_job
    from medchallenge.inbox import watch_inbox

    inbox = tmp_path / "inbox"
    config = tmp_path / "gateway.toml"
    config.write_text(config_text(tmp_path / "work", 11112, 4242, [sys.executable, str(INFERENCE), "--device", "cpu"]))
    (route,) = load_config(config).routes
    # a job runner killed while running "interrupted" (the TB study, half its output written)
    for state, job, files in (("pending", "bad", studies["broken"]), ("running", "interrupted", studies["tb"]),
                              ("pending", "good", studies["tb"])):
        (inbox / state / job / "input").mkdir(parents=True)
        for path in files:
            (inbox / state / job / "input" / path.name).write_bytes(path.read_bytes())
    (inbox / "running" / "interrupted" / "output").mkdir()
    (inbox / "running" / "interrupted" / "output" / "half-written.json").write_text("{")
    watch_inbox(inbox, lambda job: run_route_job(route, job), stop=lambda: not any((inbox / "pending").iterdir()))
    assert sorted(p.name for p in (inbox / "done").iterdir()) == ["bad", "good", "interrupted"]
    assert not any((inbox / "running").iterdir())
    bad = json.loads((inbox / "done" / "bad" / "status.json").read_text())
    assert bad["returncode"] == 1 and "uneven slice spacing" in bad["error"]
    for job in ("good", "interrupted"):
        assert json.loads((inbox / "done" / job / "status.json").read_text()) == {"returncode": 0, "error": None}
        assert len(list((inbox / "done" / job / "output" / "dicom").glob("*.dcm"))) == 1
        assert sorted(p.name for p in (inbox / "done" / job / "job").iterdir()) == ["result.json"]
    assert not (inbox / "done" / "interrupted" / "output" / "half-written.json").exists()


def test_a_gateway_killed_while_receiving_a_study_processes_it_once_when_the_pacs_sends_it_again(tmp_path, pacs,
                                                                                                  studies):
    # the quiet period starts again at the restart; the PACS sends the study again within it
    gateway, port, config = start(tmp_path, pacs, [sys.executable, str(INFERENCE), "--device", "cpu"], quiet=5.0)
    work = tmp_path / "work"
    half = studies["tb"][: len(studies["tb"]) // 2]
    assert set(send_files(half, port)) == {0}
    gateway.kill()  # before the quiet period ended: the study is incomplete in incoming/
    (received,) = (work / "incoming").iterdir()
    assert len(list((received / "input").glob("*.dcm"))) == len(half)
    (received / "input" / ".1.2.3.dcm.abc.part").write_bytes(b"an instance being written when the gateway died")
    an_hour_ago = time.time() - 3600  # the gateway was down for an hour: that is no quiet time of the study
    os.utime(received, (an_hour_ago, an_hour_ago))
    restarted = GatewayProcess(config, tmp_path / "gateway.log")
    try:
        assert set(send_files(studies["tb"], port)) == {0}  # the PACS sends the whole study again
        wait_for(lambda: states(work)["sent"] == 1, 120, "the study sent")
    finally:
        assert restarted.stop() == 0
    assert len(pacs.received) == 1 and states(work)["duplicate"] == 0 and states(work)["failed"] == 0
    (job,) = [json.loads(p.read_text()) for p in (work / "sent").glob("*/job.json")]
    assert len(job["instances"]) == len(studies["tb"]) and job["attempts"] == 1
    assert not list(work.rglob("*.part"))


@pytest.mark.parametrize("inbox", [False, True])
def test_a_failed_job_s_record_is_kept_with_the_study(tmp_path, pacs, studies, inbox):
    """The job crashes (here, through the job-runner service too): failed/<study>/ holds error.txt and the record
    it points to, job/result.json, with the container's last lines."""
    port = free_port()
    crash = [sys.executable, "-c", "import sys; sys.exit('RuntimeError: the model file weights.onnx is missing')"]
    with gateway_and_job_runner(tmp_path, config_text(tmp_path / "work", port, pacs.port, crash), inbox):
        assert set(send_files(studies["tb"], port)) == {0}
        wait_for(lambda: len(pacs.received) == 1, 120, "the failure note")
    (failed,) = (tmp_path / "work" / "failed").iterdir()
    assert (failed / "error.txt").read_text() == \
        "detector tb-caverns failed: The algorithm exited with status 1 (its last log lines: job/result.json)\n"
    record = json.loads((failed / "job" / "result.json").read_text())
    assert record["status"] == "failed"
    assert record["stderr_tail"][-1].endswith("RuntimeError: the model file weights.onnx is missing")


def test_a_job_runner_without_the_docker_socket_s_group_says_what_to_set(tmp_path, monkeypatch):
    """In compose.hospital.yaml without DOCKER_GID the job runner may not use the socket: one line naming it."""
    from medchallenge.errors import InputError
    from medchallenge.jobs import docker_run

    fake = tmp_path / "bin"
    fake.mkdir()
    (fake / "docker").write_text("#!/bin/sh\necho 'permission denied while trying to connect to the Docker daemon "
                                 "socket at unix:///var/run/docker.sock' >&2\nexit 1\n")
    (fake / "docker").chmod(0o755)
    monkeypatch.setenv("PATH", f"{fake}:{os.environ['PATH']}")
    monkeypatch.setattr(docker_run, "container_of", lambda mountinfo: "0123456789abcdef")
    with pytest.raises(InputError, match=r"may not use the Docker socket \(permission denied\): set DOCKER_GID"):
        docker_run.host_mounts.__wrapped__()  # not its cache, which earlier jobs of this process filled
