"""A job writing without bound (issue 29): what it writes to /output, /tmp and /opt/ml/model is bounded by its disk
limit (the gateway's `work_quota_mib`), no file it writes passes that limit, and an output is size-checked before
it is copied (a sparse 5 GiB output image is refused without a byte copied). As a local process, through a
gateway route, and in a container with real Docker (tests/job_images/disk)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from medchallenge.dicom.synthetic import SyntheticStudy, write_ct_series
from medchallenge.errors import InputError
from medchallenge.gateway.config import Route
from medchallenge.gateway.image_routes import run_image_route
from medchallenge.jobs import JobLimits, LocalProcess, run_job
from medchallenge.sockets import RIB_FRACTURE_INSTANCES

WRITER = Path(__file__).resolve().parents[1] / "job_images" / "disk"
LIMIT_GB = 32 / 1024  # 32 MiB
HINT = "no file the job writes may be larger than its disk limit of 32 MiB (RLIMIT_FSIZE)"
STOPPED = "The job wrote more than its disk limit of 32 MiB to /output, /tmp and /opt/ml/model, and was stopped"


def local_writer(behaviour: str, monkeypatch) -> LocalProcess:
    monkeypatch.setenv("BEHAVIOUR", behaviour)
    return LocalProcess([sys.executable, str(WRITER / "write.py")])


def files_written(job: Path) -> int:
    return sum(1 for folder in ("output", "tmp") for _ in (job / folder).glob("fill-*"))


def test_a_local_job_filling_the_disk_is_stopped_at_its_disk_limit(tmp_path, monkeypatch):
    result = run_job(local_writer("fill-disk", monkeypatch), [], [], tmp_path / "job",
                     limits=JobLimits(disk_gb=LIMIT_GB))
    assert result.status == "failed" and result.error == STOPPED
    assert files_written(tmp_path / "job") < 2 * 512  # stopped long before its 1 GiB (today: all of it written)


def test_no_file_a_job_writes_can_pass_its_disk_limit(tmp_path, monkeypatch):
    result = run_job(local_writer("large-file", monkeypatch), [], [], tmp_path / "job",
                     limits=JobLimits(disk_gb=LIMIT_GB))
    assert result.status == "failed" and result.error.endswith(f"OSError: [Errno 27] File too large ({HINT})")
    assert (tmp_path / "job" / "tmp" / "large").stat().st_size <= 32 << 20


def test_a_sparse_5_gib_output_image_is_refused_before_it_is_copied(tmp_path, monkeypatch):
    result = run_job(local_writer("sparse-output", monkeypatch), [], [RIB_FRACTURE_INSTANCES], tmp_path / "job")
    assert result.error == ("Output directory 'images/rib-fracture-instances' holds 5368709120 bytes, more than an "
                            "image of 268435456 voxels ($MEDCHALLENGE_MAX_VOXELS sets it) of 8 bytes; not copied")
    assert not list((tmp_path / "job").glob("stored/**/*.mha"))  # today: copied whole (5 GiB written), then refused


def test_a_gateway_route_s_job_is_bounded_by_the_disk_limit_it_is_given(tmp_path, monkeypatch):
    study = tmp_path / "study"
    volume = np.random.default_rng(3).integers(-1000, 1500, size=(16, 12, 6)).astype(np.int16)
    write_ct_series(study / "input", volume, np.diag([0.75, 0.75, 1.25, 1.0]), SyntheticStudy("disk", "PAT_DISK"))
    monkeypatch.setenv("BEHAVIOUR", "fill-disk")
    route = Route("lungs", ("CT",), (), "generic", 60, command=(sys.executable, str(WRITER / "write.py")),
                  input_socket="ct-image", outputs=(("volume-ml", "Float"),))
    with pytest.raises(InputError) as failed:
        run_image_route(route, study, disk_gb=LIMIT_GB)  # the gateway's work_quota_mib
    assert str(failed.value) == f"detector lungs failed: {STOPPED}"
    assert not (study / "job" / "run").exists() and (study / "job" / "result.json").exists()


def test_a_gateway_job_writes_at_most_the_work_quota(tmp_path, pacs, studies):
    from gateway_helpers import send_files, start_gateway, states, wait_for

    limits = "max_instance_mib = 1\nmax_study_mib = 8\nwork_quota_mib = 32\n"
    command = ["env", "BEHAVIOUR=fill-disk", sys.executable, str(WRITER / "write.py")]
    gateway, port, _ = start_gateway(tmp_path, pacs.port, command, gateway_extra=limits)
    work = tmp_path / "work"
    try:
        assert set(send_files(studies["tb"], port)) == {0}
        wait_for(lambda: states(work)["failed"] == 1, 120, "the study failed")
    finally:
        assert gateway.stop() == 0
    (error,) = [p.read_text() for p in (work / "failed").glob("*/error.txt")]
    assert error == f"detector tb-caverns failed: {STOPPED}\n"  # today: 1 GiB written into the work folder


@pytest.fixture(scope="module")
def writer_images(docker_compose):
    tags = {behaviour: f"medchallenge-test/disk-writer:{behaviour}-{os.getpid()}"  # this run's own
            for behaviour in ("fill-disk", "large-file")}
    for behaviour, tag in tags.items():
        subprocess.run(["docker", "build", "--quiet", "--build-arg", f"BEHAVIOUR={behaviour}", "--tag", tag,
                        str(WRITER)], check=True, capture_output=True)
    yield tags
    subprocess.run(["docker", "image", "rm", "--force", *tags.values()], capture_output=True)


def test_a_container_filling_the_disk_is_stopped_and_no_file_passes_the_limit(writer_images, tmp_path):
    filled = run_job(writer_images["fill-disk"], [], [], tmp_path / "fill", limits=JobLimits(disk_gb=LIMIT_GB))
    assert filled.status == "failed" and filled.error == STOPPED
    assert files_written(tmp_path / "fill") < 2 * 512
    large = run_job(writer_images["large-file"], [], [], tmp_path / "large", limits=JobLimits(disk_gb=LIMIT_GB))
    assert large.status == "failed" and large.error.endswith(f"OSError: [Errno 27] File too large ({HINT})")
    assert (tmp_path / "large" / "tmp" / "large").stat().st_size <= 32 << 20
