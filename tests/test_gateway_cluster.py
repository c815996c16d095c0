"""A gateway route with backend = "slurm" in the configuration: its [route.slurm] table read and checked, and `--check`
naming in one line each piece of a Slurm submit host that is missing (gateway/submit_host.py). (Its studies through a
real Slurm: tests/e2e/test_gateway_slurm.py.)"""

from __future__ import annotations

import json
import socket
import threading
from pathlib import Path

import pytest
from gateway_helpers import config_text

from medchallenge.gateway import cluster, load_config, main
from medchallenge.gateway.config import SlurmRoute
from medchallenge.phase.layout import PhaseLayout

SLURM_ROUTE = """
[[route]]
name = "cxr-cluster"
modalities = ["CR"]
interface = "object-cxr"
image = "team/cxr:1"
backend = "slurm"
gpu = "on"
memory_gb = 4
timeout_seconds = 600

[route.slurm]
partition = "gpu"
account = "radiology"
gpus = 2
cpus = 4
extra = ["--qos=clinical"]
max_resubmissions = 3
"""


@pytest.fixture
def slurm_commands(tmp_path, monkeypatch):
    """A Slurm submit host as `--check` sees it: Slurm's client commands on PATH (stand-ins: `--check` only looks
    for them), a slurm.conf (SLURM_CONF) naming munge's socket, and that socket."""
    bin_folder = tmp_path / "bin"
    bin_folder.mkdir()
    for command in ("sbatch", "squeue", "scontrol"):
        (bin_folder / command).write_text("#!/bin/sh\nexit 0\n")
        (bin_folder / command).chmod(0o755)
    monkeypatch.setenv("PATH", str(bin_folder))
    munge = socket.socket(socket.AF_UNIX)
    munge.bind(str(tmp_path / "munge.socket"))
    (tmp_path / "slurm.conf").write_text(f"ClusterName=site\nAuthInfo=socket={tmp_path / 'munge.socket'}\n")
    monkeypatch.setenv("SLURM_CONF", str(tmp_path / "slurm.conf"))
    yield
    munge.close()


def write_config(tmp_path, route: str = SLURM_ROUTE):
    path = tmp_path / "gateway.toml"
    path.write_text(config_text(tmp_path / "work", 11112, 4242, ["true"]) + route)
    return path


def test_a_slurm_route_is_read_with_its_cluster_options(tmp_path):
    local, cluster = load_config(write_config(tmp_path)).routes
    assert local.slurm is None  # the default backend: local
    assert cluster.slurm == SlurmRoute(partition="gpu", account="radiology", gpus=2, cpus=4.0,
                                       extra=("--qos=clinical",), max_resubmissions=3)
    default = load_config(write_config(tmp_path, SLURM_ROUTE.split("[route.slurm]")[0])).routes[1].slurm
    assert default == SlurmRoute(gpus=1)  # gpu = "on": one GPU, the cluster's partition and account


@pytest.mark.parametrize("edit, message", [
    (lambda t: t.replace('backend = "slurm"', 'backend = "kubernetes"'),
     "[[route]] 2: backend = 'kubernetes': expected one of local, slurm"),
    (lambda t: t.replace('backend = "slurm"', ''), '[[route]] 2: a [route.slurm] table is for backend = "slurm"'),
    (lambda t: t.replace('image = "team/cxr:1"', 'command = ["true"]'),
     '[[route]] 2: backend = "slurm" runs an image (not a command)'),
    (lambda t: t.replace('image = "team/cxr:1"', 'image = "team/cxr:1"\ninbox = "/srv/inbox"'),
     "without an inbox"),
    (lambda t: t.replace("gpus = 2", "gpus = 0"), "[route.slurm]: gpus = 0: expected 0 to 64, at least 1"),
    (lambda t: t.replace('gpu = "on"', 'gpu = "off"'), "[route.slurm]: gpus = 2: expected"),
    (lambda t: t.replace("gpus = 2", "nodes = 3"), "[route.slurm]: unknown key(s) nodes"),
    (lambda t: t.replace('"--qos=clinical"', '"qos=clinical"'), "[route.slurm]: extra: 'qos=clinical': not an "
                                                                "sbatch option a site sets"),
    (lambda t: t.replace('"--qos=clinical"', '"--export=ALL,LD_PRELOAD=/x"'), "[route.slurm]: extra: "
     "'--export=ALL,LD_PRELOAD=/x': not an sbatch option a site sets"),
    (lambda t: t.replace("max_resubmissions = 3", 'job_name_prefix = "a/b"'), "[route.slurm]: job_name_prefix: a job "
                                                                              "name prefix is 1-32 letters"),
    (lambda t: t.replace("max_resubmissions = 3", "max_resubmissions = -1"), "max_resubmissions = -1: expected"),
    (lambda t: t.replace("cpus = 4", "cpus = 0"), "[route.slurm]: cpus = 0: expected a positive number"),
])
def test_slurm_route_mistakes_are_one_line(tmp_path, capsys, slurm_commands, edit, message):
    path = write_config(tmp_path)
    assert main(["--config", str(path), "--check"]) == 0
    path.write_text(edit(path.read_text()))
    assert main(["--config", str(path), "--check"]) == 1
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith(f"error: {path}") and message in err


def test_check_names_each_missing_piece_of_a_submit_host_in_one_line(tmp_path, capsys, monkeypatch):
    """A host without Slurm: the commands, slurm.conf and munge's socket, each named, in one line; `--conformance`
    of the same configuration needs none of them (a reviewer's laptop)."""
    monkeypatch.setenv("PATH", str(tmp_path / "no-slurm"))
    monkeypatch.setenv("SLURM_CONF", str(tmp_path / "no-slurm.conf"))
    monkeypatch.setattr("medchallenge.gateway.submit_host.DEFAULT_MUNGE_SOCKET", tmp_path / "munge.socket.2")
    path = write_config(tmp_path)
    assert main(["--config", str(path), "--check"]) == 1
    err = capsys.readouterr().err
    assert err == (f'error: {path}: route(s) cxr-cluster: backend = "slurm" needs a Slurm submit host here: '
                   f'no sbatch on PATH; no squeue on PATH; no scontrol on PATH; no slurm.conf at '
                   f'{tmp_path / "no-slurm.conf"} (mount the site\'s read-only there, or set SLURM_CONF); no munge '
                   f'socket at {tmp_path / "munge.socket.2"} (mount the host\'s /run/munge read-only) (docs/scale.md, '
                   '"A gateway route on the cluster")\n')
    assert main(["--config", str(path), "--conformance"]) == 0
    assert "cxr-cluster" in capsys.readouterr().out
    path.write_text(path.read_text().split("\n[[route]]\nname = \"cxr-cluster\"")[0])  # no route on the cluster
    assert main(["--config", str(path), "--check"]) == 0


def test_check_names_what_a_host_with_slurm_commands_still_lacks(tmp_path, capsys, monkeypatch, slurm_commands):
    (tmp_path / "slurm.conf").write_text("ClusterName=site\n")  # munge's default socket, absent here
    monkeypatch.setattr("medchallenge.gateway.submit_host.DEFAULT_MUNGE_SOCKET", tmp_path / "absent.socket")
    path = write_config(tmp_path)
    assert main(["--config", str(path), "--check"]) == 1
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and f"submit host here: no munge socket at {tmp_path / 'absent.socket'}" in err
    (tmp_path / "slurm.conf").write_text(f"AuthInfo=socket={tmp_path / 'munge.socket'}\n")
    monkeypatch.setattr("medchallenge.gateway.submit_host.filesystem_type", lambda folder: "tmpfs")
    marker = tmp_path / ".dockerenv"  # Docker's mark of a container: absent, then present
    monkeypatch.setattr("medchallenge.gateway.submit_host.CONTAINER_MARKERS", (marker,))
    assert main(["--config", str(path), "--check"]) == 0  # a host's tmpfs: a node on this host sees it
    marker.touch()
    assert main(["--config", str(path), "--check"]) == 1
    assert "is in this container's own tmpfs, which no node sees" in capsys.readouterr().err


def test_a_submission_without_its_slurm_id_is_the_job_of_its_name_or_none(monkeypatch):
    """The record written before sbatch: a restart finds the job by its name, or drops the entry (never submitted)."""
    known = {"site-gw-cxr-a": ["17", "21"]}  # Slurm's job names: the route's prefix and the record's name
    monkeypatch.setattr(cluster, "jobs_named", lambda name: known.get(name, []))
    record = {"task": "t", "submissions": [{"name": "gw-cxr-0", "slurm_job_id": "9", "end": "cancelled"},
                                           {"name": "gw-cxr-a", "slurm_job_id": None, "end": None}]}
    backend = cluster.SlurmBackend(PhaseLayout(Path("/nonexistent")), job_name_prefix="site-")
    cluster.take_up_unrecorded(record, False, backend)
    assert [s["slurm_job_id"] for s in record["submissions"]] == ["9", "21"]
    record["submissions"].append({"name": "gw-cxr-b", "slurm_job_id": None, "end": None})
    cluster.take_up_unrecorded(record, False, backend)
    assert [s["name"] for s in record["submissions"]] == ["gw-cxr-0", "gw-cxr-a"]


def test_a_finished_job_slurm_has_forgotten_is_taken_up_by_its_state(tmp_path, monkeypatch):
    """The gateway stopped between the record and the Slurm id, and stayed down past Slurm's MinJobAge while the job
    ran to its end: the restart takes the job's final state (no second submission, no internal error)."""
    monkeypatch.setattr(cluster, "jobs_named", lambda name: [])
    monkeypatch.setattr(cluster, "active_jobs", lambda ids: pytest.fail(f"waited for {ids}"))
    monkeypatch.setattr(cluster, "write_task", lambda *args: pytest.fail("submitted again"))
    route = load_config(write_config(tmp_path)).routes[1]
    study = tmp_path / "work" / "running" / "study-1"
    study.mkdir(parents=True)
    layout = cluster.cluster_layout(study)
    layout.state("t").parent.mkdir(parents=True)
    layout.state("t").write_text('{"status": "succeeded"}')
    record = {"task": "t", "submissions": [{"name": "gw-cxr-a", "slurm_job_id": None, "end": None}]}
    cluster._await_job(route, study, None, layout, 1.0, record, threading.Event())
    assert record["submissions"] == [{"name": "gw-cxr-a", "slurm_job_id": None, "end": "succeeded"}]
    assert json.loads((study / cluster.RECORD).read_text()) == record
