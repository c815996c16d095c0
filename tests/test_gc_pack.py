"""`make gc-pack`: ground-truth and model tarballs as grand-challenge extracts them, and the socket lists."""

from __future__ import annotations

import io
import json
import subprocess
import sys
import tarfile
from pathlib import Path

import pytest

from medchallenge.evaluators import tb_caverns as tb_evaluator
from medchallenge.grand_challenge.pack import PACKAGES, main, reproducible_tar_gz


@pytest.fixture(scope="module")
def tb_cohort(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("tb")
    subprocess.run([sys.executable, "-m", "medchallenge.synth", "tb-caverns", "--out", str(root), "--cases", "2",
                    "--seed", "3", "--shape", "96", "96", "24"], check=True, capture_output=True)
    return root


def extract_as_grand_challenge(archive: Path, target: Path) -> Path:
    """GC's extraction: tarfile with the "data" filter (no links, no absolute or parent paths)."""
    with tarfile.open(archive) as tar:
        tar.extractall(target, filter="data")
    return target


def tree(folder: Path) -> dict[str, bytes]:
    return {p.relative_to(folder).as_posix(): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


def test_tb_pack_extracts_to_what_the_evaluator_and_algorithm_read(tb_cohort, tmp_path, repo):
    model = repo / "algorithms" / "tb_caverns" / "model"
    assert main(["tb-caverns", "--ground-truth", str(tb_cohort / "ground_truth"), "--model", str(model),
                 "--out", str(tmp_path / "gc")]) == 0
    pack = tmp_path / "gc" / "tb-caverns"
    assert sorted(p.name for p in pack.iterdir()) == ["ground_truth.tar.gz", "model.tar.gz", "sockets.json"]
    ground_truth = extract_as_grand_challenge(pack / "ground_truth.tar.gz", tmp_path / "opt-ml-gt")
    assert tree(ground_truth) == tree(tb_cohort / "ground_truth")  # files at the top, as the evaluator reads them
    assert tree(extract_as_grand_challenge(pack / "model.tar.gz", tmp_path / "opt-ml-model")) == tree(model)
    sockets = json.loads((pack / "sockets.json").read_text())
    assert [(s["slug"], s["kind"], s["relative_path"]) for s in sockets["inputs"] + sockets["outputs"]] == [
        ("ct-image", "Image", "images/ct"), ("tb-cavern-boxes", "Anything", "tb-cavern-boxes.json")]
    # the extracted ground truth scores a submission as the original does
    predictions = tmp_path / "predictions"
    predictions.mkdir()
    (predictions / "submission.txt").write_text("TST_001.nii.gz,1,1,1,40,40,10\n")
    scores = []
    for gt in (tb_cohort / "ground_truth", ground_truth):
        out = tmp_path / f"metrics-{gt.name}"
        assert tb_evaluator.main(["--input", str(predictions), "--ground-truth", str(gt), "--output", str(out),
                                  "--no-progress"]) == 0
        scores.append(json.loads((out / "metrics.json").read_text())["aggregates"])
    assert scores[0] == scores[1]


def test_archives_are_reproducible_and_independent_of_time_and_owner(tmp_path):
    folder = tmp_path / "gt"
    (folder / "sub").mkdir(parents=True)
    (folder / "a.csv").write_text("x\n")
    (folder / "sub" / "b.txt").write_text("y\n")
    first = reproducible_tar_gz(folder)
    (folder / "a.csv").touch()
    folder.chmod(0o700)
    assert reproducible_tar_gz(folder) == first
    with tarfile.open(fileobj=io.BytesIO(first)) as tar:
        assert [(m.name, m.mode, m.uid, m.mtime) for m in tar.getmembers()] == [
            ("a.csv", 0o644, 0, 0), ("sub", 0o755, 0, 0), ("sub/b.txt", 0o644, 0, 0)]


def test_a_link_in_the_ground_truth_is_one_clear_line(tmp_path, capsys):
    folder = tmp_path / "gt"
    folder.mkdir()
    (folder / "annotations.csv").write_text("image_path,annotation\n")
    (folder / "link.csv").symlink_to("/etc/hostname")
    assert main(["object-cxr", "--ground-truth", str(folder), "--out", str(tmp_path / "gc")]) == 1
    error = capsys.readouterr().err.strip().splitlines()
    assert len(error) == 1 and "link.csv" in error[0] and "link" in error[0]
    assert not (tmp_path / "gc" / "object-cxr" / "ground_truth.tar.gz").exists()


@pytest.mark.parametrize("challenge", sorted(PACKAGES))
def test_ground_truth_without_what_the_evaluator_reads_is_refused(tmp_path, capsys, challenge):
    empty = tmp_path / "gt"
    empty.mkdir()
    assert main([challenge, "--ground-truth", str(empty), "--out", str(tmp_path / "gc")]) == 1
    error = capsys.readouterr().err.strip()
    assert "\n" not in error and PACKAGES[challenge].challenge.interface.ground_truth[0] in error


def test_all_packs_every_challenge_from_the_folders_compose_mounts(tmp_path, monkeypatch, repo):
    assert sorted(PACKAGES) == ["imageclef-caption-2021", "imageclef-caption-2022", "object-cxr", "ribfrac",
                                "tb-caverns"]
    for configuration in PACKAGES.values():
        folder = tmp_path / configuration.demo_folder
        folder.mkdir()
        for pattern in configuration.challenge.interface.ground_truth:
            (folder / pattern.replace("*", "case")).write_text("x\n")
        monkeypatch.setenv(configuration.service.mount("ground_truth").variable, str(folder))
    monkeypatch.chdir(repo)  # the model: the one in the repository, as compose.yaml mounts it
    assert main(["--all", "--out", str(tmp_path / "gc")]) == 0
    assert sorted(p.name for p in (tmp_path / "gc").iterdir()) == sorted(PACKAGES)
    for name in PACKAGES:  # a model tarball exactly for the challenges with an algorithm image
        algorithm = PACKAGES[name].challenge.algorithm is not None
        assert (tmp_path / "gc" / name / "model.tar.gz").is_file() == algorithm, name
