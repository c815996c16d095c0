"""The compose deployment as a Slurm submit host (compose.hospital-slurm.yaml over compose.hospital.yaml): the gateway
image's gateway-slurm stage carries Debian's Slurm client commands; with the site's slurm.conf and munge socket
mounted read-only, `gateway --check` passes a configuration with a Slurm route, and the image's `sbatch` submits a job
that this machine's Slurm (.ci/provision-slurm.sh) runs; without the override `--check` names every missing piece in
one line. (The gateway's own route jobs through Slurm: tests/e2e/test_gateway_slurm.py, from a host install.)"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

from gateway_helpers import REPO, wait_for

from medchallenge import __version__

VERSION = os.environ.get("MEDCHALLENGE_VERSION") or __version__
SLURM_ROUTE = """
[[route]]
name = "cxr-cluster"
modalities = ["DX"]
interface = "object-cxr"
image = "medchallenge/object-cxr-algorithm:0.1.0"
backend = "slurm"
timeout_seconds = 600
"""


def test_the_gateway_slurm_image_is_a_submit_host(docker_compose, slurm, tmp_path):
    data = tmp_path / "hospital"
    for folder in (data / "work", data / "inbox"):
        folder.mkdir(parents=True)
        folder.chmod(0o777)
    example = (REPO / "gateway" / "gateway.example.toml").read_text()
    config = tmp_path / "gateway.toml"
    config.write_text(example.replace('"/var/lib/medchallenge/work', f'"{data}/work') + SLURM_ROUTE)
    env = {**os.environ, "HOSPITAL_DATA": str(data), "GATEWAY_CONFIG": str(config),
           "COMPOSE_PROJECT_NAME": os.environ.get("COMPOSE_PROJECT_NAME", "medchallenge") + "-hospital-slurm"}

    def compose(*files: str, args: tuple[str, ...]) -> subprocess.CompletedProcess:
        command = ["docker", "compose", *(arg for f in files for arg in ("-f", str(REPO / f))), *args]
        return subprocess.run(command, env=env, capture_output=True, text=True, timeout=1800)

    both = ("compose.hospital.yaml", "compose.hospital-slurm.yaml")
    try:
        submit_from_the_image(compose, both, tmp_path, data)
    finally:
        compose(*both, args=("--profile", "hospital", "down", "--remove-orphans"))


def submit_from_the_image(compose, both: tuple[str, ...], tmp_path: Path, data: Path) -> None:
    """--check with and without the override, then sbatch from the image."""
    built = compose(*both, args=("build", "gateway"))
    assert built.returncode == 0, built.stderr[-2000:]
    checked = compose(*both, args=("run", "--rm", "gateway", "--check"))
    assert checked.returncode == 0 and "configuration valid (4 route(s))" in checked.stdout + checked.stderr, \
        checked.stderr[-2000:]
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


def _read(path: Path) -> str:
    try:
        return path.read_text()
    except OSError:
        return ""
