"""A route's or a submission's image against the job runner with real Docker (issue 29): an image whose USER is
uid 0 under another spelling is refused before any job, as `USER root` is."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from medchallenge.jobs import DockerImage, EmulationError, run_job
from medchallenge.sockets import TB_CAVERN_BOXES

IMAGES = Path(__file__).resolve().parents[1] / "job_images"
# (USER, /etc/passwd a link): each one the engine runs as uid 0
ROOT_ALIASES = {"00": ("00", "no"), "0000-0": ("0000:0", "no"), "plus-0": ("+0", "no"), "toor": ("toor", "no"),
                "no-uid-field": ("evil", "no"), "linked-passwd": ("toor", "yes")}


def tag(variant: str) -> str:
    return f"medchallenge-test/root-alias:{variant}-{os.getpid()}"  # this run's own, removed after it


@pytest.fixture(scope="module")
def root_aliases(docker_compose):
    """Every variant built (one layer over the offline base), an honest one (USER user, uid 1000) and one whose
    USER is no user of the image."""
    variants = {**ROOT_ALIASES, "honest": ("user", "no"), "unknown": ("nosuch", "no")}
    for variant, (user, link) in variants.items():
        subprocess.run(["docker", "build", "--quiet", "--build-arg", f"USER_SPEC={user}", "--build-arg",
                        f"PASSWD_LINK={link}", "--tag", tag(variant), str(IMAGES / "root_alias")], check=True,
                       capture_output=True)
    yield
    subprocess.run(["docker", "image", "rm", "--force", *(tag(v) for v in variants)], capture_output=True)


@pytest.mark.parametrize("variant", ROOT_ALIASES)
def test_an_image_whose_user_the_engine_runs_as_uid_0_is_refused_before_any_job(root_aliases, tmp_path, variant):
    ran = subprocess.run(["docker", "run", "--rm", "--network", "none", tag(variant)], capture_output=True, text=True)
    assert ran.stdout.strip() == "0"  # the engine itself gives this USER uid 0
    with pytest.raises(EmulationError, match=r"The container runs as root \(USER '.*' is uid 0 in the image\)"):
        DockerImage(tag(variant)).check()
    with pytest.raises(EmulationError, match="runs as root"):
        run_job(tag(variant), [], [TB_CAVERN_BOXES], tmp_path / "job")
    assert not (tmp_path / "job").exists()  # refused before any job folder or container


def test_an_honest_user_passes_and_a_name_not_in_the_image_is_refused(root_aliases):
    assert subprocess.run(["docker", "run", "--rm", tag("honest")], capture_output=True, text=True).stdout == "1000\n"
    assert DockerImage(tag("honest")).check() == []
    leftover = subprocess.run(["docker", "ps", "--all", "--quiet", "--filter", "name=medchallenge-job-inspect"],
                              capture_output=True, text=True, check=True).stdout
    assert leftover == ""  # the container read for /etc/passwd is removed
    with pytest.raises(EmulationError, match=r"USER 'nosuch' is not in the image's /etc/passwd"):
        DockerImage(tag("unknown")).check()
