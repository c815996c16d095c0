"""The compose deployment as a Slurm submit host (compose.hospital-slurm.yaml over compose.hospital.yaml): the gateway
image's gateway-slurm stage carries Debian's Slurm client commands; with the site's slurm.conf and munge socket
mounted read-only, `gateway --check` passes a configuration with a Slurm route that names the nodes' Python
(node_python), and the image's `sbatch` submits a job that this machine's Slurm (.ci/provision-slurm.sh) runs;
without the override, or without node_python, `--check` names every missing piece in one line. End to end: a
radiograph sent to the compose-deployed gateway (on the host's network, compose.hospital-slurm-hostnet.yaml: this
machine's slurmctld listens on 127.0.0.1) goes to its Slurm route, runs as a Slurm job on this one-node cluster with
the test's own Python as the nodes' (on the node's disk), and comes back to the PACS as an SR. (The gateway's route
jobs through Slurm in more cases: tests/e2e/test_gateway_slurm.py, from a host install.)"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from gateway_helpers import REPO, FakePacs, copy_study, free_port, send_files, states, wait_for
from pydicom.uid import generate_uid
from test_external_images import docker_images  # noqa: F401 (the fixture building the images)
from test_gateway_images import forge_model, gateway_config, image_route

from medchallenge import __version__
from medchallenge.dicom.sr import read_point_report

VERSION = os.environ.get("MEDCHALLENGE_VERSION") or __version__
SLURM = ("compose.hospital.yaml", "compose.hospital-slurm.yaml")
HOST_NETWORK = (*SLURM, "compose.hospital-slurm-hostnet.yaml")
# this test's Python is the nodes' too: the one node is this machine, and it has medchallenge
NODE_PYTHON = f'node_python = "{sys.executable}"\n'
SLURM_ROUTE = """
[[route]]
name = "cxr-cluster"
modalities = ["DX"]
interface = "object-cxr"
image = "medchallenge/object-cxr-algorithm:0.1.0"
backend = "slurm"
timeout_seconds = 600
[route.slurm]
"""


class Compose:
    """`docker compose -f FILE...` of the hospital deployment in a project of its own, with the test's folders."""

    def __init__(self, data: Path, config: Path):
        self.env = {**os.environ, "HOSPITAL_DATA": str(data), "GATEWAY_CONFIG": str(config),
                    "MEDCHALLENGE_UID": str(os.getuid()), "MEDCHALLENGE_GID": str(os.getgid()),
                    "COMPOSE_PROJECT_NAME": os.environ.get("COMPOSE_PROJECT_NAME", "medchallenge") + "-hospital-slurm"}

    def __call__(self, *files: str, args: tuple[str, ...]) -> subprocess.CompletedProcess:
        command = ["docker", "compose", *(arg for f in files for arg in ("-f", str(REPO / f))), *args]
        return subprocess.run(command, env=self.env, capture_output=True, text=True, timeout=1800)


def hospital_data(tmp_path: Path) -> Path:
    data = tmp_path / "hospital"
    for folder in (data / "work", data / "inbox", data / "models"):
        folder.mkdir(parents=True)
        folder.chmod(0o777)
    return data


@pytest.fixture(scope="module")
def gateway_slurm_image(docker_images, slurm, tmp_path_factory) -> None:  # noqa: F811
    """The gateway-slurm image of this checkout, built once."""
    root = tmp_path_factory.mktemp("gateway-slurm-image")
    built = Compose(hospital_data(root), root / "gateway.toml")(*SLURM, args=("build", "gateway"))
    assert built.returncode == 0, built.stderr[-2000:]


def test_the_gateway_slurm_image_is_a_submit_host(gateway_slurm_image, tmp_path):
    data = hospital_data(tmp_path)
    example = (REPO / "gateway" / "gateway.example.toml").read_text()
    config = tmp_path / "gateway.toml"
    config.write_text(example.replace('"/var/lib/medchallenge/work', f'"{data}/work') + SLURM_ROUTE + NODE_PYTHON)
    compose = Compose(data, config)
    try:
        submit_from_the_image(compose, config, tmp_path, data)
    finally:
        compose(*SLURM, args=("--profile", "hospital", "down", "--remove-orphans"))


def submit_from_the_image(compose: Compose, config: Path, tmp_path: Path, data: Path) -> None:
    """--check with and without the override and node_python, then sbatch from the image."""
    checked = compose(*SLURM, args=("run", "--rm", "gateway", "--check"))
    output = checked.stdout + checked.stderr
    assert checked.returncode == 0 and "configuration valid (4 route(s))" in output, checked.stderr[-2000:]
    assert f"route cxr-cluster: its Slurm jobs run {sys.executable} on the nodes, which no submit host sees" in output
    config.write_text(config.read_text().replace(NODE_PYTHON, ""))
    unset = compose(*SLURM, args=("run", "--rm", "gateway", "--check"))
    assert unset.returncode != 0 and ("route(s) cxr-cluster without [route.slurm] node_python would run this "
                                      "container's /opt/venv/bin/python3, which no node has") in unset.stderr
    assert compose("compose.hospital.yaml", args=("build", "gateway")).returncode == 0
    plain = compose("compose.hospital.yaml", args=("run", "--rm", "gateway", "--check"))
    line = [text for text in plain.stderr.splitlines() if text.startswith("error:")]
    assert plain.returncode != 0 and len(line) == 1
    for piece in ("no sbatch on PATH", "no slurm.conf at /etc/slurm/slurm.conf", "no munge socket at",
                  f"work_dir {data}/work is in this container's own"):
        assert piece in line[0], line[0]
    out = tmp_path / "job"
    out.mkdir()
    out.chmod(0o777)
    submitted = subprocess.run(
        ["docker", "run", "--rm", "--network", "host", "--user", f"{os.getuid()}:{os.getgid()}",
         "-v", "/etc/slurm:/etc/slurm:ro", "-v", "/run/munge:/run/munge:ro", "-v", f"{out}:{out}", "--workdir",
         str(out), "--entrypoint", "sbatch", f"medchallenge/gateway-slurm:{VERSION}", "--parsable",
         f"--output={out}/job.out", "--wrap", "echo submitted from the gateway image"],
        capture_output=True, text=True, timeout=120)
    assert submitted.returncode == 0 and submitted.stdout.strip().isdigit(), submitted.stderr
    try:
        wait_for(lambda: "submitted from the gateway image" in _read(out / "job.out"), 600, "the job's output")
    finally:
        subprocess.run(["scancel", submitted.stdout.strip()], capture_output=True)


def test_a_radiograph_sent_to_the_compose_gateway_s_slurm_route_comes_back_as_an_sr(
        gateway_slurm_image, docker_images, studies, tmp_path):  # noqa: F811
    data = hospital_data(tmp_path)
    pacs, port = FakePacs(), free_port()
    model = forge_model("object-cxr", data / "models" / "cxr-model.tar.gz")  # on the shared filesystem
    config = tmp_path / "gateway.toml"
    config.write_text(gateway_config(data / "work", port, pacs.port)
                      + image_route("cxr-cluster", ["CR", "DX"], [], docker_images["forge-object-cxr"], "object-cxr",
                                    model)
                      + f'backend = "slurm"\n[route.slurm]\ncpus = 1\njob_name_prefix = "pacs-"\n{NODE_PYTHON}')
    compose = Compose(data, config)
    work = data / "work"
    try:
        started = compose(*HOST_NETWORK, args=("--profile", "hospital", "up", "-d", "gateway"))
        assert started.returncode == 0, started.stderr[-2000:]
        wait_for(lambda: "listening on" in compose(*HOST_NETWORK, args=("logs", "gateway")).stdout, 120,
                 "the gateway to listen")
        uid = generate_uid()
        files = copy_study(studies["cxr"], tmp_path / "study", StudyInstanceUID=uid)
        assert set(send_files(files, port)) == {0}
        wait_for(lambda: states(work)["sent"] == 1, 600, "the study sent")
        (sr,) = wait_for(lambda: [ds for ds in pacs.received if str(ds.StudyInstanceUID) == uid], 60, "the SR")
        assert read_point_report(sr) == (0.5, [])  # the forge template's value
        (record,) = work.glob("sent/*/slurm.json")
        (submission,) = json.loads(record.read_text())["submissions"]
        assert submission["end"] == "succeeded" and submission["slurm_job_id"].isdigit()
        assert json.loads(next(work.glob("sent/*/job/result.json")).read_text())["status"] == "succeeded"
    finally:
        print(compose(*HOST_NETWORK, args=("logs", "gateway")).stdout[-5000:])  # shown where the test fails
        compose(*HOST_NETWORK, args=("--profile", "hospital", "down", "--remove-orphans"))
        pacs.close()
        for record in work.glob("*/*/slurm.json"):  # nothing of a failed test left in Slurm
            for submission in json.loads(record.read_text())["submissions"]:
                subprocess.run(["scancel", f"--name=pacs-{submission['name']}"], check=False)


def _read(path: Path) -> str:
    try:
        return path.read_text()
    except OSError:
        return ""
