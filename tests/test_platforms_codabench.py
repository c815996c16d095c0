"""Codabench bundles (make codabench): the bundle against the v2 competition.yaml format Codabench's unpacker reads
(codalab/codabench src/apps/competitions/unpackers/v2.py, documentation Yaml-Structure.md), and the scoring step run
with the real evaluator image as Codabench's compute worker runs it (compute_worker/compute_worker.py), whose
scores.json equals the evaluator's metrics.json."""

from __future__ import annotations

import json
import os
import shlex
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest
import yaml

from helpers import evaluator
from medchallenge.platforms import codabench
from medchallenge.registry import CONFIGURATIONS

TESTS = Path(__file__).resolve().parent
CONFIGS = {c.name: c for c in CONFIGURATIONS}
# compute_worker.py's cap_drop list for every container it runs
CAP_DROP = ("AUDIT_WRITE", "CHOWN", "DAC_OVERRIDE", "FOWNER", "FSETID", "KILL", "MKNOD", "NET_BIND_SERVICE", "NET_RAW",
            "SETFCAP", "SETGID", "SETPCAP", "SETUID", "SYS_CHROOT")


def example(tmp_path: Path, name: str) -> tuple[Path, Path]:
    """(ground truth, results folder) of the official example of configuration `name`."""
    if name == "tb-caverns":
        fixtures = TESTS / "tb_caverns" / "fixtures"
        gt, run = tmp_path / "gt", tmp_path / "run"
        gt.mkdir()
        run.mkdir()
        shutil.copy(fixtures / "gt.csv", gt / "gt_boxes.csv")
        shutil.copy(fixtures / "all_ids.csv", gt / "all_ids.csv")
        shutil.copy(fixtures / "pred.csv", run / "submission.txt")
        return gt, run
    return TESTS / "ribfrac" / "fixtures" / "gt", TESTS / "ribfrac" / "fixtures" / "pred"


def unpacked(bundle: Path, target: Path) -> dict:
    """The bundle extracted as Codabench's unpack_competition does, and its competition.yaml as it reads it."""
    with zipfile.ZipFile(bundle) as archive:
        archive.extractall(target)
    return yaml.load((target / "competition.yaml").read_text(), Loader=yaml.FullLoader)


def test_bundle_has_the_v2_format(tmp_path):
    """What Codabench's V2Unpacker requires, and every aggregate a column with the ranking metric first."""
    ground_truth, run = example(tmp_path, "ribfrac-legacy")
    bundle = codabench.bundle(CONFIGS["ribfrac-legacy"], ground_truth, run, tmp_path / "dist")
    assert bundle.name == "ribfrac-legacy.zip"
    root = tmp_path / "bundle"
    spec = unpacked(bundle, root)
    assert str(spec["version"]) == "2" and spec["title"]
    assert (root / spec["image"]).read_bytes().startswith(b"\x89PNG")
    for page in [*spec["pages"], {"file": spec["terms"]}]:
        assert (root / page["file"]).read_text().strip()
    assert spec["docker_image"] == codabench.codabench_image(CONFIGS["ribfrac-legacy"])
    tasks = {task["index"]: task for task in spec["tasks"]}
    assert [t for phase in spec["phases"] for t in phase["tasks"]] == [0] and spec["phases"][0]["start"]
    metadata = yaml.load((root / tasks[0]["scoring_program"] / "metadata.yaml").read_text(), Loader=yaml.FullLoader)
    assert "--scores /app/output/scores.json" in metadata["command"]
    assert sorted(p.name for p in (root / tasks[0]["reference_data"]).iterdir()) == sorted(
        p.name for p in ground_truth.iterdir())
    assert all(set(s["tasks"]) <= set(tasks) and (root / s["path"]).is_dir() for s in spec["solutions"])
    columns = spec["leaderboards"][0]["columns"]
    assert spec["leaderboards"][0]["key"] and [c["index"] for c in columns] == list(range(len(columns)))
    # each participant's best submission is shown without a click (Codabench's default, "Add", shows none)
    assert spec["leaderboards"][0]["submission_rule"] == "Force_Best"
    assert all(len(c["key"]) <= 36 and len(c["title"]) <= 36 for c in columns)  # Column.key/title max_length
    assert evaluator("ribfrac").main(["--branch", "legacy", "--input", str(run), "--ground-truth", str(ground_truth),
                                      "--output", str(tmp_path / "m"), "--no-progress", "--no-plots"]) == 0
    aggregates = json.loads((tmp_path / "m" / "metrics.json").read_text())["aggregates"]
    assert [c["key"] for c in columns] == ["froc_average", "macro_f1",
                                           *[k for k in aggregates if k not in ("froc_average", "macro_f1")]]


def worker_scoring(bundle: Path, results: Path, work: Path) -> Path:
    """Codabench's compute worker scoring a results submission; the scoring output folder.

    As compute_worker.py does: the prediction step copies a submission without metadata into its output and adds
    the `metadata` file (exit code, times), which becomes the scoring step's input/res; the scoring step mounts the
    scoring program at /app/program (working directory), input (ref: reference data, res: the results) at
    /app/input, the output, shared and data folders, drops its capability list, sets no-new-privileges and no user,
    and runs metadata.yaml's command as the container command of the competition's docker_image."""
    spec = unpacked(bundle, work / "bundle")
    task = spec["tasks"][0]
    run = work / "run"
    for folder in ("program", "input", "output", "shared", "data"):
        os.makedirs(run / folder)
    shutil.copytree(work / "bundle" / task["scoring_program"], run / "program", dirs_exist_ok=True)
    shutil.copytree(work / "bundle" / task["reference_data"], run / "input" / "ref")
    shutil.copytree(results, run / "input" / "res")
    (run / "input" / "res" / "metadata").write_text("elapsedTime: null\nexitCode: null\ningestionElapsedTime: "
                                                    "null\ningestionExitCode: null\n")
    metadata = yaml.load((run / "program" / "metadata.yaml").read_text(), Loader=yaml.FullLoader)
    command = metadata["command"]
    for variable, value in (("$input", "/app/input"), ("$output", "/app/output"), ("$program", "/app/program"),
                            ("$hidden", "/app/input/ref"), ("$shared", "/app/shared"),
                            ("$predictions", "/app/input/res")):
        command = command.replace(variable, value)
    docker = ["docker", "run", "--rm", "--name", f"h25-platforms-codabench-{os.getpid()}", "--workdir",
              "/app/program", "-e", "PYTHONUNBUFFERED=1", "--security-opt", "no-new-privileges", "--userns", "host",
              *(f"--cap-drop={cap}" for cap in CAP_DROP),
              "-v", f"{run / 'program'}:/app/program:z", "-v", f"{run / 'output'}:/app/output:z",
              "-v", f"{run / 'data'}:/app/data:ro", "-v", f"{run / 'shared'}:/app/shared",
              "-v", f"{run / 'input'}:/app/input", spec["docker_image"], *shlex.split(command)]
    result = subprocess.run(docker, capture_output=True, text=True)
    assert result.returncode == 0, result.stderr[-3000:]
    return run / "output"


@pytest.mark.parametrize("name", ["tb-caverns", "ribfrac-legacy"])
def test_codabench_worker_scores_with_the_evaluator_image(docker_compose, tmp_path, name):
    configuration = CONFIGS[name]
    docker_compose("build", configuration.service.name)
    codabench.build_image(configuration)
    ground_truth, results = example(tmp_path, name)
    bundle = codabench.bundle(configuration, ground_truth, results, tmp_path / "dist")
    output = worker_scoring(bundle, results, tmp_path / "work")
    scores = json.loads((output / "scores.json").read_text())
    metrics = json.loads((output / "metrics.json").read_text())
    assert scores == metrics["aggregates"] and metrics["meta"]["options"]
    columns = unpacked(bundle, tmp_path / "again")["leaderboards"][0]["columns"]
    assert [c["key"] for c in columns] == [*[k for k in ("froc_average", "macro_f1", "map") if k in scores],
                                           *[k for k in scores if k not in ("froc_average", "macro_f1", "map")]]
    if name == "ribfrac-legacy":
        official = json.loads((TESTS / "ribfrac" / "fixtures" / "expected_output_legacy.json").read_text())["results"]
        assert scores["froc_average"] == official["detection"]["average_recall"]
        assert scores["macro_f1"] == official["classification"]["macro_average_F1"]
        assert metrics["meta"]["options"]["branch"] == "legacy"
    else:
        assert scores["map"] == json.loads((TESTS / "tb_caverns" / "fixtures" / "expected_output.json").read_text())[
            "score"]


def test_bundles_on_a_fresh_clone_say_what_to_run(tmp_path):
    """Without the demo data (a fresh clone: no `make demo` yet) and no folders given: one line naming what to run."""
    env = {k: v for k, v in os.environ.items() if not k.endswith(("_GROUND_TRUTH", "_PREDICTIONS"))}
    for module in ("medchallenge.platforms.codabench", "medchallenge.grand_challenge.pack"):
        result = subprocess.run([sys.executable, "-m", module, "--all", "--out", str(tmp_path / "out")], cwd=tmp_path,
                                env=env, capture_output=True, text=True, timeout=120)
        assert result.returncode == 1
        assert result.stderr.count("\n") == 1 and result.stderr.startswith("error: ./demo/"), result.stderr
        assert "run `make demo` first" in result.stderr and "_GROUND_TRUTH" in result.stderr
        assert not (tmp_path / "out").exists() or not any((tmp_path / "out").iterdir())
