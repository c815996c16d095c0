"""An organiser's evaluation container (issue 39): run through the one job runner under grand-challenge's conditions
on the evaluation input the emulator writes and the ground truth, its metrics.json read as hostile. Each way a
container goes wrong is one line, and the next evaluation is untouched: NaN and infinite scores (null, as
grand-challenge stores them, and a note), a 1 GiB metrics.json (refused before it is read), a 10,000-deep one, none,
a network attempt, writes outside /output, over its memory and its time limit. Its image (tests/job_images/evaluation)
is loaded from a `docker save` archive without a tag, under Docker and Podman. read_metrics over plain files, and
the flow through a local process, need no engine."""

from __future__ import annotations

import json
import math
import os
import re
import subprocess
import sys
import tarfile
import tracemalloc
from pathlib import Path

import pytest

from medchallenge.errors import InputError
from medchallenge.challenges.definition import EvaluationDefinition, PhaseLimits
from medchallenge.evaluation.container import (evaluation_image, evaluation_limits, load_evaluation_image,
                                               read_metrics, run_evaluation_container)
from medchallenge.grand_challenge.emulator import write_evaluation_input
from medchallenge.jobs import EmulationError, JobLimits, JobResult, LocalProcess, OutputResult, SocketValue
from medchallenge.jobs.outputs import read_outputs
from medchallenge.sockets import CT_IMAGE, Socket

EVALUATION = Path(__file__).resolve().parents[1] / "job_images" / "evaluation"
NODULE_VOLUME = Socket("nodule-volume", "Float", "Value", "nodule-volume.json", "Nodule Volume")
PREDICTED = {"case-1.mha": 2.0, "case-2.mha": 5.5}
TRUTH = {"case-1.mha": 1.5, "case-2.mha": 6.5}
SCORED = {"aggregates": {"mean_absolute_error": 0.75},
          "case": {"case-1.mha": {"absolute_error": 0.5}, "case-2.mha": {"absolute_error": 1.0}},
          "meta": {"cases": 2}}
PREFIX = f"mc-eval-{os.getpid()}"


def evaluation_input(folder: Path) -> Path:
    """Two succeeded jobs' outputs as the emulator lays them out for the evaluation (write_evaluation_input)."""
    jobs = []
    for number, (name, volume) in enumerate(PREDICTED.items(), start=1):
        image = SocketValue(100 + number, CT_IMAGE, image_pk=f"image-{number}", image_name=name)
        output = OutputResult(NODULE_VOLUME, value=SocketValue(200 + number, NODULE_VOLUME, value=volume))
        jobs.append(JobResult(pk=f"00000000-0000-4000-8000-00000000000{number}", status="succeeded", error=None,
                              exit_code=0, wall_seconds=1.0, peak_memory_bytes=None, gpu_passed=False, used_gpu=None,
                              inputs=[image], outputs=[output], limits=JobLimits()))
    write_evaluation_input(jobs, folder, 1_001_000)
    return folder


def ground_truth(folder: Path, behaviour: str | None = None) -> Path:
    folder.mkdir(parents=True)
    (folder / "truth.json").write_text(json.dumps(TRUTH))
    if behaviour is not None:
        (folder / "behaviour.txt").write_text(behaviour)
    return folder


# --- read_metrics over plain files ---------------------------------------------------------------------------------

def test_read_metrics_gives_the_object(tmp_path):
    (tmp_path / "metrics.json").write_text(json.dumps(SCORED))
    assert read_metrics(tmp_path / "metrics.json") == SCORED


def test_not_finite_numbers_become_null_as_grand_challenge_stores_them(tmp_path):
    path = tmp_path / "metrics.json"
    path.write_text('{"aggregates": {"dice": NaN, "hd95": Infinity, "low": -Infinity, "big": 1e400, '
                    f'"huge": {"9" * 400}, "fine": 1e300, "int": 12}}, "case": [{{"dice": NaN}}]}}')
    assert read_metrics(path) == {"aggregates": {"dice": None, "hd95": None, "low": None, "big": None, "huge": None,
                                                 "fine": 1e300, "int": 12}, "case": [{"dice": None}]}


@pytest.mark.parametrize("content, error", [
    ("[1, 2]", " is not valid: it holds an array at its top level, not the object the leaderboard's paths start from"),
    ("0.5", " is not valid: it holds a number at its top level"),
    ('{"a": ', " is not valid json"),
    ('{"a": ' + "1" * 5000 + "}", " is not valid json"),  # beyond Python's 4,300 digits: a ValueError, not a crash
    ('{"a": ' * 10_000 + "}" * 10_000, ": JSON nested 10000 levels deep, more than the limit of 64 levels"),
])
def test_a_metrics_json_that_is_not_an_object_is_one_line(tmp_path, content, error):
    path = tmp_path / "metrics.json"
    path.write_text(content)
    with pytest.raises(InputError) as refused:
        read_metrics(path, "The output file 'metrics.json'")
    assert str(refused.value).startswith(f"The output file 'metrics.json'{error}") and "\n" not in str(refused.value)


def test_a_1_gib_metrics_json_is_refused_before_it_is_read(tmp_path):
    path = tmp_path / "metrics.json"
    with open(path, "wb") as handle:  # a valid start: read whole, it would fail as invalid JSON instead
        handle.write(b'{"aggregates": {"dice": 0.5}, "padding": "')
        handle.truncate(1 << 30)
    tracemalloc.start()
    try:
        with pytest.raises(InputError) as refused:
            read_metrics(path)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert str(refused.value) == (f"{path} is too large: 1073741824 bytes, more than 67108864 "
                                  "($MEDCHALLENGE_MAX_TEXT_BYTES sets it); not read")
    assert peak < 1 << 20  # nothing of it was read


def test_a_link_a_fifo_or_no_file_is_refused_unread(tmp_path):
    secret = tmp_path / "secret.json"
    secret.write_text('{"host": "file"}')
    (tmp_path / "link.json").symlink_to(secret)  # a container's link to a host file is never followed
    os.mkfifo(tmp_path / "fifo.json")  # nor does a FIFO block the reader
    for name, error in [("link.json", "is not a readable regular file"), ("fifo.json", "is not a regular file"),
                        ("none.json", "was not produced")]:
        with pytest.raises(InputError, match=f"^{re.escape(str(tmp_path / name))} {error}"):
            read_metrics(tmp_path / name)


def test_an_algorithm_s_json_output_of_a_5000_digit_number_fails_the_job_in_one_line(tmp_path):
    (tmp_path / "nodule-volume.json").write_text("1" * 5000)
    (result,) = read_outputs(tmp_path, (NODULE_VOLUME,), iter(range(1, 9)), tmp_path / "stored")
    assert result.error == "The output file 'nodule-volume.json' is not valid json"  # was: a ValueError traceback


# --- the flow through the job runner, as a local process (no engine) -----------------------------------------------

def local_evaluation() -> LocalProcess:
    return LocalProcess([sys.executable, str(EVALUATION / "evaluate.py")])


def test_a_ground_truth_tarball_is_unpacked_and_the_evaluation_scores_the_jobs(tmp_path):
    truth = ground_truth(tmp_path / "truth")
    archive = tmp_path / "ground_truth.tar.gz"
    with tarfile.open(archive, "w:gz") as tar:
        tar.add(truth / "truth.json", "truth.json")
    result = run_evaluation_container(local_evaluation(), evaluation_input(tmp_path / "input"), archive,
                                      tmp_path / "work")
    assert result.error is None and result.metrics == SCORED and result.duration_s > 0
    assert result.logs[0] == "scored 2 cases"
    assert result.to_json()["error"] is None and result.to_json()["logs"] == list(result.logs)
    assert (tmp_path / "work" / "ground-truth" / "truth.json").read_text() == json.dumps(TRUTH)


def test_a_definition_s_evaluation_gives_its_image_and_its_limits():
    assert evaluation_image(EvaluationDefinition(image="organiser/evaluation:1")) == "organiser/evaluation:1"
    with pytest.raises(EmulationError, match="^evaluation tb-caverns: a built-in evaluator, not an evaluation"):
        evaluation_image(EvaluationDefinition(builtin="tb-caverns"))
    assert evaluation_limits(PhaseLimits()) == JobLimits(memory_gb=8, time_limit_s=3600)  # grand-challenge's
    assert evaluation_limits(PhaseLimits(evaluation_memory_gb=16, evaluation_time_limit_s=600)) == JobLimits(
        memory_gb=16, time_limit_s=600)


def test_a_ground_truth_tarball_with_a_link_or_an_unreadable_file_is_refused_before_the_evaluation(tmp_path):
    archive = tmp_path / "ground_truth.tar.gz"
    with tarfile.open(archive, "w:gz") as tar:
        link = tarfile.TarInfo("truth.json")
        link.type, link.linkname = tarfile.SYMTYPE, "/etc/passwd"
        tar.addfile(link)
    eval_input = evaluation_input(tmp_path / "input")
    with pytest.raises(EmulationError, match=r"^ground truth ground_truth\.tar\.gz: member 1 is a link; "
                                             r"grand-challenge's ground truth tarballs hold regular files"):
        run_evaluation_container(local_evaluation(), eval_input, archive, tmp_path / "work")
    truth = ground_truth(tmp_path / "truth")
    os.chmod(truth / "truth.json", 0o600)
    with pytest.raises(EmulationError, match=r"truth\.json is not readable by the evaluation's user \(mode 0600\)"):
        run_evaluation_container(local_evaluation(), eval_input, truth, tmp_path / "work-2")
    assert not (tmp_path / "work-2" / "job").exists()  # nothing ran


# --- the container, under Docker and Podman --------------------------------------------------------------------------

@pytest.fixture(scope="module")
def evaluation_archive(docker_compose, tmp_path_factory) -> Path:
    """The evaluation image as an organiser uploads it (`docker save`), its build's tag removed again."""
    tag = f"{PREFIX}/evaluation:build"
    subprocess.run(["docker", "build", "--quiet", "--tag", tag, str(EVALUATION)], check=True, capture_output=True)
    archive = tmp_path_factory.mktemp("evaluation-image") / "evaluation.tar"
    try:
        subprocess.run(["docker", "save", "--output", str(archive), tag], check=True, capture_output=True)
    finally:
        subprocess.run(["docker", "image", "rm", tag], capture_output=True)
    return archive


@pytest.fixture(scope="module")
def loaded_image(evaluation_archive) -> str:
    """The archive loaded into Docker by its ID, without a tag; removed after."""
    image = load_evaluation_image(evaluation_archive, "docker")
    yield image
    subprocess.run(["docker", "image", "rm", image], capture_output=True)


def run(image: str, tmp_path: Path, name: str, behaviour: str | None = None, engine: str = "docker",
        limits: JobLimits | None = None):
    return run_evaluation_container(image, evaluation_input(tmp_path / f"{name}-input"),
                                    ground_truth(tmp_path / f"{name}-truth", behaviour), tmp_path / name,
                                    engine=engine, name_prefix=PREFIX, **({"limits": limits} if limits else {}))


def leftover_containers(engine: str = "docker") -> list[str]:
    listed = subprocess.run([engine, "ps", "--all", "--quiet", "--filter", f"name={PREFIX}"], capture_output=True,
                            text=True, check=True)
    return listed.stdout.split()


def test_the_archive_is_loaded_without_a_tag_and_its_id_is_what_runs(loaded_image, evaluation_archive):
    inspected = subprocess.run(["docker", "image", "inspect", "--format", "{{json .RepoTags}}", loaded_image],
                               capture_output=True, text=True, check=True)
    assert json.loads(inspected.stdout) == [] and loaded_image.startswith("sha256:")
    assert evaluation_image(EvaluationDefinition(archive=evaluation_archive)) == loaded_image  # loaded once


HOSTILE = {  # behaviour: (its one line, its limits)
    "huge": (r"The output file 'metrics\.json' is larger than 67108864 bytes \(\$MEDCHALLENGE_MAX_TEXT_BYTES sets "
             r"it\)$", None),
    "deep": (r"The output file 'metrics\.json': JSON nested 10001 levels deep, more than the limit of 64 levels of "
             r"nesting", None),
    "list": (r"The output file 'metrics\.json' is not valid: it holds an array at its top level", None),
    "none": (r"Output file 'metrics\.json' was not produced \(/output held instead: scores\.json\)$", None),
    "network": (r"The evaluation exited with status 1: socket\.gaierror: .*\(the job tried to reach the network; "
                r"grand-challenge jobs have none", None),
    "memory": (r"The container was killed as it exceeded its memory limit \(1\.25 GB\)$", JobLimits(memory_gb=1.25)),
    "slow": (r"Time limit exceeded \(the job ran longer than 2 s\)$", JobLimits(time_limit_s=2)),
}


@pytest.mark.parametrize("behaviour", HOSTILE)
def test_a_hostile_evaluation_is_one_line_and_the_next_one_is_untouched(loaded_image, tmp_path, behaviour):
    pattern, limits = HOSTILE[behaviour]
    hostile = run(loaded_image, tmp_path, "hostile", behaviour, limits=limits)
    assert hostile.metrics is None and re.match(pattern, hostile.error), hostile.error
    assert "\n" not in hostile.error and len(hostile.error) < 600
    if behaviour == "huge":  # refused by its size: read, the NUL bytes after its start would be invalid JSON
        assert (tmp_path / "hostile" / "job" / "output" / "metrics.json").stat().st_blocks < 1024
    after = run(loaded_image, tmp_path, "after")
    assert after.error is None and after.metrics == SCORED and after.logs == ("scored 2 cases",)
    assert not leftover_containers()


def test_not_finite_scores_are_null_with_one_note(loaded_image, tmp_path):
    result = run(loaded_image, tmp_path, "nan", "not-finite")
    assert result.error is None
    assert result.metrics["aggregates"]["mean_absolute_error"] is None
    assert result.metrics["case"]["case-1.mha"]["absolute_error"] is None
    assert math.isclose(result.metrics["case"]["case-2.mha"]["absolute_error"], 1.0)
    (note,) = [n for n in result.notes if "not finite" in n]
    assert note.endswith("so no score there: aggregates.mean_absolute_error, case.case-1.mha.absolute_error")


def test_writes_outside_output_are_refused_or_discarded_and_said(loaded_image, tmp_path):
    result = run(loaded_image, tmp_path, "outside", "outside")
    assert result.error is None and result.metrics["aggregates"] == SCORED["aggregates"]
    # /input and the ground truth are read-only, the image's own folder is root's
    assert result.metrics["meta"]["refused"] == {"input": True, "ground_truth": True, "image": True}
    assert ("the job wrote 1 file(s) outside /output and /tmp, which grand-challenge discards: /home/user/cache.json"
            in result.notes)
    assert not list((tmp_path / "outside").rglob("cache.json"))  # not collected anywhere
    assert sorted(p.name for p in (tmp_path / "outside-input").iterdir()) == sorted(
        ["inputs.json", "predictions.json", *(f"00000000-0000-4000-8000-00000000000{n}" for n in (1, 2))])


def test_podman_loads_the_archive_and_runs_the_evaluation_as_docker_does(evaluation_archive, podman, tmp_path):
    image = load_evaluation_image(evaluation_archive, "podman")
    try:
        result = run(image, tmp_path, "podman", engine="podman")
        assert result.error is None and result.metrics == SCORED
        network = run(image, tmp_path, "podman-network", "network", engine="podman")
        assert re.match(HOSTILE["network"][0], network.error), network.error
        assert not leftover_containers("podman")
    finally:
        subprocess.run(["podman", "image", "rm", image], capture_output=True)
