"""The AIcrowd evaluator folder (medchallenge aicrowd-evaluator) driven as AIcrowd's local evaluation drives it
(AIcrowd/aicrowd-example-evaluator: construct the class with the answer files, call `_evaluate(client_payload,
_context)`): its scores are the official examples' numbers and the evaluator's own metrics.json; refused submissions
raise with the evaluator's error line; hostile zips are refused before anything is extracted."""

from __future__ import annotations

import importlib.util
import json
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from helpers import evaluator, evaluator_argv
from medchallenge.platforms.aicrowd import CONFIGURATION_NAMES, SubmissionRefused, write_evaluator_folder
from medchallenge.platforms.submissions import SubmissionFormat, check_zip, place_submission

TESTS = Path(__file__).resolve().parent
ZIPPED = SubmissionFormat("", ("a.csv", "b.csv"), "", "x")


def evaluator_class(folder: Path):
    """The class of a generated evaluator.py, imported as AIcrowd imports it."""
    spec = importlib.util.spec_from_file_location(f"aicrowd_{folder.name}", folder / "evaluator.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.AIcrowdEvaluator


def generated(tmp_path: Path, config: str, task: str | None = None):
    """The class of the evaluator folder of `config` (a stand-in wheel: the package under test is installed)."""
    wheel = tmp_path / "medchallenge-0.1.0-py3-none-any.whl"
    wheel.write_bytes(b"stand-in")
    folder = write_evaluator_folder(CONFIGURATION_NAMES[config], tmp_path / f"{config}-{task}", task, wheel=wheel)
    return evaluator_class(folder)


def evaluate(cls, ground_truth: Path, submission: Path) -> dict:
    payload = {"submission_file_path": str(submission), "aicrowd_submission_id": 1, "aicrowd_participant_id": 2}
    return cls(str(ground_truth))._evaluate(payload, {})


def zipped(folder: Path, target: Path, prefix: str = "") -> Path:
    with zipfile.ZipFile(target, "w") as archive:
        for path in sorted(folder.iterdir()):
            archive.write(path, prefix + path.name)
    return target


def caption_example(tmp_path: Path, edition: str) -> tuple[Path, Path, Path, Path]:
    """Ground truth, concept run, caption run and fixtures folder of the official caption example of `edition`."""
    fixtures = TESTS / "imageclef_caption" / "fixtures" / f"imageclef_caption_{edition}"
    gt = tmp_path / f"gt{edition}"
    gt.mkdir()
    captions = "caption_gt.csv" if edition == "2022" else "caption_gt.tsv"
    shutil.copy(fixtures / "concept_gt.tsv", gt / "concepts.tsv")
    shutil.copy(fixtures / captions, gt / "captions.csv")
    concept_run = fixtures / ("concept_pred.csv" if edition == "2022" else "concept_pred.tsv")
    return gt, concept_run, fixtures / captions.replace("_gt", "_pred"), fixtures


def test_official_examples(tmp_path):
    """TB caverns, RibFrac legacy (a zip of masks and CSV) and both caption tasks of both editions: AIcrowd's score
    and secondary are the official evaluators' numbers."""
    tb = TESTS / "tb_caverns" / "fixtures"
    tb_gt = tmp_path / "tb_gt"
    tb_gt.mkdir()
    shutil.copy(tb / "gt.csv", tb_gt / "gt_boxes.csv")
    shutil.copy(tb / "all_ids.csv", tb_gt / "all_ids.csv")
    result = evaluate(generated(tmp_path, "tb-caverns"), tb_gt, tb / "pred.csv")
    assert result["score"] == json.loads((tb / "expected_output.json").read_text())["score"]
    assert result["score_secondary"] == 0.0 and result["meta"]["map"] == result["score"]

    ribfrac = TESTS / "ribfrac" / "fixtures"
    official = json.loads((ribfrac / "expected_output_legacy.json").read_text())["results"]
    result = evaluate(generated(tmp_path, "ribfrac-legacy"), ribfrac / "gt",
                      zipped(ribfrac / "pred", tmp_path / "ribfrac.zip", prefix="my-run/"))
    assert result["score"] == official["detection"]["average_recall"]
    assert result["score_secondary"] == official["classification"]["macro_average_F1"]

    for edition in ("2021", "2022"):
        gt, concept_run, caption_run, fixtures = caption_example(tmp_path, edition)
        concept = json.loads((fixtures / "expected_concept.json").read_text())
        caption = json.loads((fixtures / "expected_caption.json").read_text())
        result = evaluate(generated(tmp_path, f"imageclef-caption-{edition}", "concept-detection"), gt, concept_run)
        assert (result["score"], result["score_secondary"]) == (concept["score"], 0.0)
        result = evaluate(generated(tmp_path, f"imageclef-caption-{edition}", "caption-prediction"), gt, caption_run)
        assert (result["score"], result["score_secondary"]) == (caption["score"], caption.get("score_secondary", 0.0))


@pytest.mark.parametrize("name", ["tb-caverns", "ribfrac", "object-cxr", "imageclef-caption"])
def test_synthetic_runs_score_as_the_evaluator(inputs, tmp_path, name):
    """Every challenge on its small synthetic cohort: score, secondary and meta are the metrics.json aggregates of
    the evaluator command run on the same files."""
    predictions, ground_truth = inputs[name]
    assert evaluator(name).main(evaluator_argv(inputs, name, tmp_path / "direct")) == 0
    aggregates = json.loads((tmp_path / "direct" / "metrics.json").read_text())["aggregates"]
    config = next(c for c in CONFIGURATION_NAMES.values() if c.challenge.name == name and c.challenge.default == c)
    for submission_format in config.challenge.submissions:
        if submission_format.zipped:
            submission = zipped(predictions, tmp_path / "submission.zip")
        else:
            submission = next(p for p in sorted(predictions.iterdir()) if p.suffix in (".txt", ".csv")
                              and p.name in (submission_format.files[0], "submission.txt"))
        cls = generated(tmp_path, config.name, submission_format.task or None)
        result = evaluate(cls, ground_truth, submission)
        expected = {key: aggregates[key] for key in result["meta"]}
        assert result["meta"] == expected and submission_format.primary in expected
        assert result["score"] == aggregates[submission_format.primary]
        assert result["score_secondary"] == aggregates.get(submission_format.secondary, 0.0)


def test_refused_submission_raises_the_evaluator_error_line(tmp_path, capsys):
    tb = TESTS / "tb_caverns" / "fixtures"
    gt, run = tmp_path / "gt", tmp_path / "run"
    gt.mkdir()
    run.mkdir()
    shutil.copy(tb / "gt.csv", gt / "gt_boxes.csv")
    shutil.copy(tb / "all_ids.csv", gt / "all_ids.csv")
    (run / "submission.txt").write_text("TST_001.nii.gz,1,2,3\n")
    assert evaluator("tb-caverns").main(["--input", str(run), "--ground-truth", str(gt), "--output",
                                         str(tmp_path / "out"), "--no-progress", "--no-plots"]) == 1
    direct = capsys.readouterr().err.strip().splitlines()[-1].replace(f"{run}/", "")
    with pytest.raises(SubmissionRefused) as refused:
        evaluate(generated(tmp_path, "tb-caverns"), gt, run / "submission.txt")
    assert str(refused.value) == direct and direct.startswith("error: submission.txt: line 1:")
    with pytest.raises(SubmissionRefused, match="^error: .*not a zip file"):
        evaluate(generated(tmp_path, "ribfrac"), TESTS / "ribfrac" / "fixtures" / "gt", run / "submission.txt")


def test_generated_folder_and_wheel(tmp_path):
    """The folder AIcrowd's README asks for, with the project's real wheel and its self-test data."""
    gt, concept_run, _, _ = caption_example(tmp_path, "2022")
    folder = write_evaluator_folder(CONFIGURATION_NAMES["imageclef-caption-2022"], tmp_path / "folder",
                                    "concept-detection", ground_truth=gt, sample=concept_run)
    names = {p.relative_to(folder).as_posix() for p in folder.rglob("*") if p.is_file()}
    assert {"evaluator.py", "__init__.py", "aicrowd.json", "README.md", "requirements.txt", "constraints.txt",
            "data/ground_truth/concepts.tsv", "data/sample_concepts.csv"} <= names
    wheel = next(folder.glob("wheels/medchallenge-*.whl"))
    with zipfile.ZipFile(wheel) as archive:
        assert "medchallenge/platforms/aicrowd.py" in archive.namelist()
    version = wheel.name.split("-")[1]
    assert (f"--find-links wheels\nmedchallenge[caption,plots,lemmatize]=={version}\n"
            in (folder / "requirements.txt").read_text())
    # pip finds the wheel and the constraints from any directory (AIcrowd's, or an organiser's shell elsewhere)
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    report = subprocess.run([sys.executable, "-m", "pip", "install", "--dry-run", "--ignore-installed", "--no-deps", "--no-index",
                             "--quiet", "--report", "-", "-r", str(folder / "requirements.txt")], cwd=elsewhere,
                            capture_output=True, text=True, timeout=300)
    assert report.returncode == 0, report.stderr
    [install] = json.loads(report.stdout)["install"]
    assert install["download_info"]["url"] == (folder / "wheels" / wheel.name).resolve().as_uri()
    assert json.loads((folder / "aicrowd.json").read_text())["evaluator_class"] == "AIcrowdEvaluator"
    cls = evaluator_class(folder)
    assert evaluate(cls, folder / "data" / "ground_truth", folder / "data" / "sample_concepts.csv")["score"] > 0
    with pytest.raises(Exception, match="choose a task"):
        write_evaluator_folder(CONFIGURATION_NAMES["imageclef-caption-2022"], tmp_path / "x", None)


def _zip_with(path: Path, name: str, data: bytes = b"x", mode: int = 0o100644) -> Path:
    info = zipfile.ZipInfo(name)
    info.external_attr = mode << 16
    with zipfile.ZipFile(path, "w") as archive:
        archive.writestr("a.csv", b"ok")
        archive.writestr(info, data)
    return path


@pytest.mark.filterwarnings("ignore:Duplicate name")
@pytest.mark.parametrize("name, mode, message", [
    ("link.csv", 0o120777, "a symbolic link"),
    ("../b.csv", 0o100644, "'..'"),
    ("/etc/b.csv", 0o100644, "an absolute member name"),
    ("fifo", 0o010644, "a special file"),
    ("a.csv", 0o100644, "the members 'a.csv' and 'a.csv' both name 'a.csv'"),
])
def test_hostile_zips_refused_before_extraction(tmp_path, name, mode, message):
    archive = _zip_with(tmp_path / "s.zip", name, mode=mode)
    with pytest.raises(Exception, match=message):
        place_submission(ZIPPED, archive, tmp_path / "out")
    assert not (tmp_path / "out").exists()


def test_zip_size_limits(tmp_path, monkeypatch):
    """An unpacked size over the limit is refused from the declared sizes, and a member whose data inflates beyond
    its declared size (a forged header) while decompressing, both before anything is written."""
    big = tmp_path / "big.zip"
    with zipfile.ZipFile(big, "w", zipfile.ZIP_DEFLATED) as archive:
        archive.writestr("a.csv", b"0" * 5000)
    monkeypatch.setenv("MEDCHALLENGE_MAX_SUBMISSION_BYTES", "4000")
    with pytest.raises(Exception, match="5000 bytes.*MEDCHALLENGE_MAX_SUBMISSION_BYTES"):
        place_submission(ZIPPED, big, tmp_path / "out")
    monkeypatch.delenv("MEDCHALLENGE_MAX_SUBMISSION_BYTES")
    forged = bytearray(big.read_bytes())
    for signature, offset in ((b"PK\x03\x04", 22), (b"PK\x01\x02", 24)):  # uncompressed size: 5000 -> 10
        at = forged.index(signature) + offset
        assert int.from_bytes(forged[at:at + 4], "little") == 5000
        forged[at:at + 4] = (10).to_bytes(4, "little")
    (tmp_path / "forged.zip").write_bytes(bytes(forged))
    with pytest.raises(Exception, match="forged.zip: (not a readable zip|the member 'a.csv' inflates)"):
        check_zip(tmp_path / "forged.zip")
    with pytest.raises(Exception):
        place_submission(ZIPPED, tmp_path / "forged.zip", tmp_path / "out")
    assert not (tmp_path / "out").exists()
