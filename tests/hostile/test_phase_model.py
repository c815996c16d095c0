"""A model tarball is unpacked once per phase within a budget (issue 37 item 4, the model's part): a 2 MB tarball
that unpacks to 2 GiB is refused by the budget from its members' headers before anything is written, and refuses its
submission alone; an accepted model is unpacked once, whatever the number of cases, and mounted read-only into each
job instead of a copy per job."""

from __future__ import annotations

import gzip
import io
import json
import tarfile
from pathlib import Path

import pytest

from medchallenge.cli import main as medchallenge
from medchallenge.errors import InputError
from medchallenge.jobs import DockerImage, JobFolders, JobLimits
from medchallenge.jobs.model_tarball import MAX_MODEL_BYTES, unpack_model_once
from phase_helpers import build_image, phase_argv, save_image, synth_cohort

GIB = 1 << 30


def model_bomb(path: Path, size: int = 2 * GIB) -> Path:
    """A gzipped tarball of one member of `size` zero bytes, about 1/1000 of it (gzip members of 1 MiB of zeros
    concatenated: one gzip stream to a reader)."""
    info = tarfile.TarInfo("weights.bin")
    info.size = size
    zeros = gzip.compress(bytes(1 << 20), compresslevel=9, mtime=0)
    with open(path, "wb") as out:
        out.write(gzip.compress(info.tobuf(format=tarfile.GNU_FORMAT), mtime=0))
        for _ in range(size >> 20):
            out.write(zeros)
        out.write(gzip.compress(bytes(1024), mtime=0))
    return path


def model_tarball(path: Path, files: dict[str, bytes]) -> Path:
    with tarfile.open(path, "w:gz") as tar:
        for name, data in files.items():
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    return path


def test_a_model_bomb_is_refused_by_its_budget_before_anything_is_written(tmp_path, monkeypatch):
    bomb = model_bomb(tmp_path / "bomb.tar.gz")
    assert bomb.stat().st_size < 3 << 20
    target = tmp_path / "models" / "bomb"
    with pytest.raises(InputError, match=r"bomb\.tar\.gz: members of at least 2147483648 bytes, more than the job's "
                                         r"disk limit of 1073741824 bytes"):
        unpack_model_once(bomb, target, GIB)
    monkeypatch.setenv(MAX_MODEL_BYTES.variable, str(GIB))
    with pytest.raises(InputError, match=r"members of at least 2147483648 bytes, more than the limit of 1073741824"):
        unpack_model_once(bomb, target, 30 * GIB)
    assert list((tmp_path / "models").iterdir()) == []  # nothing unpacked, no partial folder left


@pytest.mark.parametrize("engine", ["docker", "podman"])
def test_a_shared_model_is_mounted_read_only_and_a_jobs_own_model_folder_writable(tmp_path, engine):
    for readonly, suffix in ((True, ",readonly"), (False, "")):
        folders = JobFolders(*(tmp_path / name for name in ("input", "output", "model", "tmp")),
                             model_readonly=readonly)
        command = DockerImage("team/algorithm:1", engine=engine).command(folders, JobLimits(), gpu=False, name="j")
        assert ("--mount", f"type=bind,source={tmp_path / 'model'},target=/opt/ml/model{suffix}") in \
            set(zip(command, command[1:]))


@pytest.mark.parametrize("engine", ["docker", "podman"])
def test_a_model_is_unpacked_once_per_phase_and_read_only_in_its_jobs(docker_compose, repo, tmp_path, capsys,
                                                                      request, engine):
    if engine == "podman":
        request.getfixturevalue("podman")
    cohort = synth_cohort(tmp_path / "cohort", 3)
    submissions = tmp_path / "submissions"
    submissions.mkdir()
    image = save_image(build_image(repo, "model-boxes"), submissions / "model-boxes.tar").name
    boxes = {"TST_001.nii.gz": [{"voxel_bbox": [1, 1, 1, 4, 4, 3], "probability": 0.9}]}
    model_tarball(submissions / "model.tar.gz", {"boxes.json": json.dumps(boxes).encode(),
                                                 "weights.bin": bytes(1 << 20)})
    model_bomb(submissions / "bomb.tar.gz")
    (submissions / "phase.toml").write_text(f'[[submission]]\nteam = "bomb"\nimage = "{image}"\n'
                                            'model = "bomb.tar.gz"\n\n'
                                            f'[[submission]]\nteam = "alpha"\nimage = "{image}"\n'
                                            'model = "model.tar.gz"\n')
    out = tmp_path / "out"
    assert medchallenge(phase_argv(submissions / "phase.toml", cohort, out, "--disk-gb", "1", "--engine", engine)) == 0
    bomb = json.loads((out / "submissions" / "bomb" / "submission.json").read_text())
    assert bomb["jobs"] == [] and bomb["refused"] == (
        "model bomb.tar.gz: members of at least 2147483648 bytes, more than the job's disk limit of 1073741824 bytes "
        "(where grand-challenge unpacks it)")
    assert [row["team"] for row in json.loads((out / "leaderboard.json").read_text())["teams"]] == ["alpha"]
    report = json.loads((out / "submissions" / "alpha" / "report.json").read_text())
    assert [job["status"] for job in report["jobs"]] == ["succeeded"] * 3  # each read the model's boxes
    (model,) = (out / "models").iterdir()
    assert sorted(p.name for p in model.iterdir()) == ["boxes.json", "weights.bin"]
    assert [p for p in out.glob("jobs/*/run/model")] == []  # no copy per job
    unpacked = sum(p.stat().st_size for p in out.rglob("*") if p.is_file() and not p.is_symlink())
    assert unpacked < 20 << 20  # the bomb never unpacked: the phase folder holds the cases, one model, results
    printed = capsys.readouterr()
    assert "Traceback" not in printed.err
