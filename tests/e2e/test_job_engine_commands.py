"""The engine commands one job costs (each a start of the `docker` program, and the engine's work behind it): a
job's container is checked, run attached (its end, status and log lines in one command), asked how it ended and
removed, its cgroup found where the engine's previous container's was, with its measures and its log as before."""

from __future__ import annotations

import os
import shutil
import stat
from pathlib import Path

from e2e.test_preflight import cohort, images, tag  # noqa: F401 (fixtures)

from medchallenge.jobs import DockerImage, run_job, upload_case
from medchallenge.sockets import CT_IMAGE, TB_CAVERN_BOXES

LOGGING_DOCKER = """#!/bin/sh
echo "$1 $2" >> "{log}"
exec "{docker}" "$@"
"""


def test_a_job_takes_four_engine_commands_and_keeps_its_measures_and_log(images, cohort, tmp_path,  # noqa: F811
                                                                         monkeypatch):
    docker, log = shutil.which("docker"), tmp_path / "commands.log"
    wrapper = tmp_path / "bin" / "docker"
    wrapper.parent.mkdir()
    wrapper.write_text(LOGGING_DOCKER.format(log=log, docker=docker))
    wrapper.chmod(wrapper.stat().st_mode | stat.S_IXUSR)
    monkeypatch.setenv("PATH", f"{wrapper.parent}{os.pathsep}{os.environ['PATH']}")
    case = sorted((cohort / "input").glob("*.nii.gz"))[0]
    ct = upload_case(case, tmp_path / "storage")
    results = []
    for index in range(2):  # the first job finds where this engine puts a container's cgroup; the second knows
        log.unlink(missing_ok=True)
        results.append(run_job(DockerImage(tag("busy"), list_writes=False), [ct.value(1, CT_IMAGE)], [TB_CAVERN_BOXES],
                               tmp_path / f"job{index}"))
    commands = [line.split()[0] + (" inspect" if line.startswith("image") else "")
                for line in Path(log).read_text().splitlines()]
    assert commands == ["image inspect", "run", "inspect", "rm"], commands
    for result in results:
        assert result.succeeded, result.error
        assert 0.5 < result.cpu_seconds <= result.wall_seconds and result.peak_memory_bytes > 1 << 20
        assert result.stdout_tail and result.exit_code == 0
        assert not (result.folder / "container.id").exists()
