"""The job runner without Docker: model tarballs refused with one line, GC's output checks and wording, and a job
as a local process under its time and memory limits (the container conditions: tests/e2e/test_preflight.py)."""

from __future__ import annotations

import io
import json
import os
import re
import sys
import tarfile
from pathlib import Path

import pytest

from helpers import InProcessAlgorithm
from medchallenge.jobs import (DockerImage, EmulationError, Execution, JobFolders, JobLimits, LocalProcess,
                               SocketValue, extract_model, resolve_gpu, run_job)
from medchallenge.jobs.docker_run import _read_cpu_seconds, container_of, gpu_count, host_path, written_outside
from medchallenge.sockets import Socket

SCORE = Socket("score", "Float", "Value", "score.json")
NOTE = Socket("note", "String", "Value", "note.json")
TEXT_IN = Socket("age", "Integer", "Value", "age.json")


def tarball(path: Path, *members: tarfile.TarInfo) -> Path:
    with tarfile.open(path, "w:gz") as archive:
        ok = tarfile.TarInfo("weights.onnx")
        ok.size = 3
        archive.addfile(ok, io.BytesIO(b"abc"))
        for member in members:
            archive.addfile(member, io.BytesIO(b"x" * member.size) if member.isfile() else None)
    return path


def member(name: str, kind: bytes = tarfile.REGTYPE, link: str = "") -> tarfile.TarInfo:
    info = tarfile.TarInfo(name)
    info.type, info.linkname, info.size = kind, link, 1 if kind == tarfile.REGTYPE else 0
    return info


@pytest.mark.parametrize("bad, problem", [
    (member("link", tarfile.SYMTYPE, "/etc/passwd"), "member 2 is a link"),
    (member("hard", tarfile.LNKTYPE, "weights.onnx"), "member 2 is a link"),
    (member("../escape.txt"), r"member 2 is a path outside the model folder \(\.\.\)"),
    (member("/abs.txt"), "member 2 is an absolute path"),
    (member("pipe", tarfile.FIFOTYPE), "member 2 is a FIFO"),
    (member("dev", tarfile.CHRTYPE), "member 2 is a device"),
])
def test_a_model_tarball_with_a_link_escape_or_special_file_is_refused_with_one_line(tmp_path, bad, problem):
    target = tmp_path / "model"
    target.mkdir()
    with pytest.raises(EmulationError, match=f"^model model.tar.gz: {problem}; grand-challenge's model tarballs"):
        extract_model(tarball(tmp_path / "model.tar.gz", bad), target)
    assert not any(target.iterdir()) and not (tmp_path / "escape.txt").exists()


def test_a_good_model_tarball_is_extracted_and_a_non_tarball_is_one_line(tmp_path):
    extract_model(tarball(tmp_path / "model.tar.gz", member("sub/extra.bin")), tmp_path / "model")
    assert sorted(p.relative_to(tmp_path / "model").as_posix() for p in (tmp_path / "model").rglob("*")) == [
        "sub", "sub/extra.bin", "weights.onnx"]
    (tmp_path / "model.zip").write_bytes(b"PK\x03\x04 not a tarball")
    with pytest.raises(EmulationError, match=r"^model model.zip: not a readable tar or tar.gz file"):
        extract_model(tmp_path / "model.zip", tmp_path / "model2")


def writes(outputs: dict[str, str], link: str | None = None):
    def algorithm(job_input: Path, job_output: Path, model: Path) -> None:
        for name, text in outputs.items():
            (job_output / name).write_text(text)
        if link:
            (job_output / link).symlink_to("/etc/hostname")
    return InProcessAlgorithm(algorithm)


@pytest.mark.parametrize("outputs, link, error", [
    ({"score.json": "0.5", "note.json": '"fine"'}, None, None),
    ({"note.json": '"fine"'}, None, "Output file 'score.json' was not produced"),
    ({"scores.json": "0.5", "note.json": '"x"'}, None,
     r"Output file 'score.json' was not produced \(/output held instead: scores.json\)"),
    ({"score.json": "{'a': 1", "note.json": '"x"'}, None, "The output file 'score.json' is not valid json"),
    ({"score.json": '"high"', "note.json": '"x"'}, None,
     "The output file 'score.json' does not fulfill the schema of 'Float': the value is not of type 'number'"),
    ({"score.json": "NaN", "note.json": '"x"'}, None,  # GC parses NaN as null, which a Float schema refuses
     "The output file 'score.json' does not fulfill the schema of 'Float'"),
    ({"note.json": '"x"'}, "score.json", "Output file 'score.json' was not produced"),  # a link is not read
])
def test_output_sockets_are_validated_in_grand_challenge_s_words(tmp_path, outputs, link, error):
    result = run_job(writes(outputs, link), [SocketValue(1, TEXT_IN, value=42)], [SCORE, NOTE], tmp_path / "job")
    assert result.status == ("succeeded" if error is None else "failed")
    if error is None:
        assert [v.value for v in result.output_values] == [0.5, "fine"]
    else:
        assert "\n" not in result.error
        assert re.fullmatch(error + ".*", result.error), result.error
    assert json.loads((tmp_path / "job" / "input" / "inputs.json").read_text())[0]["value"] == 42
    assert (tmp_path / "job" / "input" / "age.json").read_text() == "42"


SCRIPT = """
import os, sys, time
mode = sys.argv[1]
if mode == "slow":
    time.sleep(60)
if mode == "memory":
    hoard = [bytearray(64 << 20) for _ in range(1000)]
if mode == "busy":  # a second of CPU time in a child it waits for, then a second asleep
    import subprocess
    burn = "import time\\nt = time.process_time()\\nwhile time.process_time() - t < 1: pass"
    subprocess.run([sys.executable, "-c", burn])
    time.sleep(1)
open(os.path.join(os.environ["OUTPUT_DIR"], "score.json"), "w").write("0.25")
"""


@pytest.mark.parametrize("mode, error", [
    ("ok", None),
    ("slow", r"Time limit exceeded \(the job ran longer than 1 s\)"),
    ("memory", r"The algorithm exited with status 1: MemoryError \(the job ran out of memory: it may use 0.5 GiB"),
])
def test_a_local_process_job_has_its_time_and_memory_limits(tmp_path, mode, error):
    (tmp_path / "algorithm.py").write_text(SCRIPT)
    result = run_job(LocalProcess([sys.executable, str(tmp_path / "algorithm.py"), mode]), [], [SCORE],
                     tmp_path / "job",
                     limits=JobLimits(memory_gb=1.5, time_limit_s=1 if mode == "slow" else 60))
    if error is None:
        assert result.succeeded and result.output_values[0].value == 0.25 and result.peak_memory_bytes > 1 << 20
    else:
        assert not result.succeeded and re.match(error, result.error), result.error
    assert any("not enforced: no network" in note for note in result.notes)


def test_a_local_process_job_reports_the_cpu_seconds_of_its_processes_not_its_wall_time_and_no_gpu_seconds(tmp_path):
    (tmp_path / "algorithm.py").write_text(SCRIPT)
    result = run_job(LocalProcess([sys.executable, str(tmp_path / "algorithm.py"), "busy"]), [], [SCORE],
                     tmp_path / "job", limits=JobLimits(memory_gb=1.5, time_limit_s=60))
    assert result.succeeded and result.wall_seconds > 2
    assert 0.9 < result.cpu_seconds < result.wall_seconds - 0.5, (result.cpu_seconds, result.wall_seconds)
    assert result.gpu_seconds == 0 and result.to_json()["cpu_seconds"] == round(result.cpu_seconds, 3)


@pytest.mark.parametrize("files, seconds", [
    ({"cpuacct.usage": "1500000000\n"}, 1.5),  # cgroup v1: nanoseconds
    ({"cpu.stat": "usage_usec 2250000\nuser_usec 2000000\nsystem_usec 250000\n"}, 2.25),  # v2: microseconds
    ({"cpu.stat": "nr_periods 0\n"}, None),
    ({}, None),  # the container's cgroup gone with its last process
])
def test_a_container_s_cpu_seconds_are_read_from_its_cgroup_v1_or_v2(tmp_path, files, seconds):
    for name, text in files.items():
        (tmp_path / name).write_text(text)
    assert _read_cpu_seconds(tmp_path) == seconds


RUNNER_KILLED = """
import sys
from pathlib import Path
from medchallenge.jobs import LocalProcess, run_job
job = "import os, time; open(os.path.join(os.environ['HOME'], 'pid'), 'w').write(str(os.getpid())); time.sleep(120)"
run_job(LocalProcess([sys.executable, "-c", job]), [], [], Path(sys.argv[1]))
"""


def test_a_local_process_job_dies_with_its_runner_and_has_its_home_in_the_job_folder(tmp_path):
    import signal
    import subprocess
    import time

    (tmp_path / "runner.py").write_text(RUNNER_KILLED)
    runner = subprocess.Popen([sys.executable, str(tmp_path / "runner.py"), str(tmp_path / "job")])
    pid_file = tmp_path / "job" / "tmp" / "pid"  # HOME (and TMPDIR) is the job's own /tmp
    deadline = time.monotonic() + 60
    while not (pid_file.exists() and pid_file.read_text()) and time.monotonic() < deadline:
        time.sleep(0.1)
    job = int(pid_file.read_text())
    runner.send_signal(signal.SIGKILL)
    runner.wait(timeout=60)

    def alive(pid: int) -> bool:
        try:
            return " (Z) " not in Path(f"/proc/{pid}/stat").read_text().split(")", 1)[1][:5] + " "
        except FileNotFoundError:
            return False
    deadline = time.monotonic() + 10
    while alive(job) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not alive(job)


MOUNTINFO = """\
75 60 0:52 / / ro,relatime - overlay overlay rw,lowerdir=/var/lib/docker/overlay2/l/X
93 75 254:0 /var/lib/docker/containers/{id}/hostname /etc/hostname rw,relatime - ext4 /dev/vda rw
94 75 254:0 /srv/hospital/inbox /var/lib/medchallenge/inbox rw,relatime - ext4 /dev/vda rw
"""


def test_a_job_runner_in_a_container_gives_the_engine_host_paths_through_its_own_mounts(tmp_path):
    container = "2599dfc906edacad6506c79496eb9e1655b82a5a5fbeb4eca11712dab288ab74"
    assert container_of(MOUNTINFO.format(id=container)) == container
    assert container_of("93 75 254:0 /etc/hostname /etc/hostname rw - ext4 /dev/vda rw") is None  # a host
    mounts = ((Path("/var/lib/medchallenge/inbox/team-x"), Path("/mnt/fast/team-x")),  # deepest first
              (Path("/var/lib/medchallenge/inbox"), Path("/srv/hospital/inbox")),
              (Path("/etc/medchallenge/gateway.toml"), Path("/etc/medchallenge-gateway.toml")))
    job = Path("/var/lib/medchallenge/inbox/ribfrac/running/1.2.3/job/run/input")
    assert host_path(job, mounts) == Path("/srv/hospital/inbox/ribfrac/running/1.2.3/job/run/input")
    assert host_path(Path("/var/lib/medchallenge/inbox/team-x/running/9/job"), mounts) == \
        Path("/mnt/fast/team-x/running/9/job")
    assert host_path(tmp_path, None) == tmp_path.resolve()  # on a host: the path itself
    for outside in ("/var/lib/medchallenge/inboxes/x", "/tmp/job"):  # a prefix is no parent
        with pytest.raises(EmulationError, match=rf"^{outside}: not in a folder mounted from the Docker host into "
                                                 "this job runner's container"):
            host_path(Path(outside), mounts)


def test_files_written_outside_the_mounts_are_the_leaves_of_docker_diff():
    diff = "C /home\nC /home/user\nA /home/user/x.json\nA /opt\nA /opt/ml\nA /opt/ml/model\nA /input\nA /output\n" \
           "C /etc\nA /etc/evil\nA /tmp"
    assert written_outside(diff) == ["/etc/evil", "/home/user/x.json"]


def test_limits_refuse_nonsense_and_name_what_grand_challenge_would_not_accept():
    with pytest.raises(EmulationError, match="must be more than the 1 GB"):
        JobLimits(memory_gb=1)
    assert JobLimits().differences_from_gc() == [] and JobLimits().instance(False) == ("ml.m7i.large", 2)
    assert JobLimits(memory_gb=16).instance(True) == ("ml.g4dn.xlarge", 4)
    assert JobLimits(time_limit_s=5).differences_from_gc() == ["time limit 5 s is outside grand-challenge's "
                                                                "300-86400 s"]


def test_the_docker_command_carries_grand_challenge_s_conditions_and_the_gpu_when_asked(tmp_path):
    folders = JobFolders(*(tmp_path / name for name in ("input", "output", "model", "tmp")))
    image = DockerImage("team/algorithm:1")
    command = image.command(folders, JobLimits(memory_gb=16), gpu=False, name="job")
    assert command[-1] == "team/algorithm:1"  # no command or arguments: the image's entrypoint and cmd
    pairs = set(zip(command, command[1:]))
    assert {("--network", "none"), ("--cap-drop", "ALL"), ("--memory", str(16 << 30)),
            ("--memory-swap", str(16 << 30)), ("--ulimit", f"data={15 << 30}:{15 << 30}"),
            ("--shm-size", str(8 << 30)), ("--env", "LOG_LEVEL=INFO"), ("--env", "PYTHONUNBUFFERED=1")} <= pairs
    assert ("--mount", f"type=bind,source={tmp_path / 'input'},target=/input,readonly") in pairs
    assert ("--mount", f"type=bind,source={tmp_path / 'output'},target=/output") in pairs
    assert "--gpus" not in command and "--user" not in command and "--entrypoint" not in command
    gpu_command = image.command(folders, JobLimits(memory_gb=16), gpu=True, name="job")
    assert ("--gpus", "1") in set(zip(gpu_command, gpu_command[1:]))
    assert ("--cpus", f"{min(4, os.cpu_count())}") in set(zip(gpu_command, gpu_command[1:]))  # ml.g4dn.xlarge


class GpuLauncher:
    """A launcher with GPUs: its job takes 3 s with the GPUs DockerImage gives a job."""

    description = "GPU test launcher"

    def check(self) -> list[str]:
        return []

    def gpu_available(self) -> bool:
        return True

    def launch(self, folders, limits, gpu, name):
        (folders.output / "score.json").write_text("1")
        return Execution(exit_code=0, wall_seconds=3.0, gpus=gpu_count(gpu))


@pytest.mark.parametrize("given, gpu, seconds", [("", "on", 3.0), ("0,1", "on", 6.0), ("2", "on", 3.0),
                                                 ("0,1", "off", 0.0)])
def test_a_job_s_gpu_seconds_are_its_wall_seconds_times_the_gpus_slurm_or_cuda_gave_it(tmp_path, monkeypatch,
                                                                                        given, gpu, seconds):
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    monkeypatch.setenv("SLURM_JOB_GPUS", given)
    result = run_job(GpuLauncher(), [], [SCORE], tmp_path / "job", gpu=gpu)
    assert result.succeeded and result.gpu_seconds == seconds and result.to_json()["gpu_seconds"] == seconds


def test_gpu_on_without_a_gpu_is_refused_before_the_job_and_auto_runs_without(tmp_path):
    launcher = writes({"score.json": "1", "note.json": '"x"'})
    with pytest.raises(EmulationError, match="--gpu on: no GPU"):
        resolve_gpu("on", launcher)
    result = run_job(launcher, [], [SCORE, NOTE], tmp_path / "job", gpu="auto")
    assert result.succeeded and not result.gpu_passed
