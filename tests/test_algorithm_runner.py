"""The algorithm runner with a tiny fake challenge: a word counter whose "model" is a text file."""

from __future__ import annotations

import json
import logging
import re
from dataclasses import replace
from pathlib import Path

import pytest

from medchallenge.algorithms.runner import Algorithm, Case, main
from medchallenge.errors import InputError
from medchallenge.sockets import Interface, Socket

TEXT = Socket("text-image", "Image", "Image", "images/text")
WEIGHT = Socket("weight", "Float", "Value", "weight.json")
WORDS = Socket("word-count", "Integer", "Value", "word-count.json")
MODEL_FILE = "words.model"
UPLOAD_NAME = "doc1.txt"


class WordCounter:
    """Counts a case's words, times its weight when the interface has one; a case reading `fail` is bad input."""

    def __init__(self, model_path: Path, device: str):
        self.provider = f"{model_path.read_text()}-{device}"

    def predict(self, case: Case) -> int:
        path = case.inputs[TEXT.slug]
        text = path.read_text()
        if text == "fail":
            raise InputError(f"{path}: cannot read")
        weight = json.loads(case.inputs[WEIGHT.slug].read_text()) if WEIGHT.slug in case.inputs else 1
        return len(text.split()) * weight


WORD_COUNTER = Algorithm(
    description="word counter",
    interfaces=(Interface((TEXT,), (WORDS,), ()), Interface((TEXT, WEIGHT), (WORDS,), ())),
    model_file=MODEL_FILE,
    load_model=WordCounter,
    case_patterns=("*.txt",),
    gc_outputs=lambda n: {WORDS.slug: n},
    case_outputs=lambda case, n: {f"{case.name}.json": {"case": case.name, "words": n}},
    run_files=lambda results: {"run.csv": "".join(f"{case.name},{n}\n" for case, n in results)},
    describe=lambda n: f"{n} word(s)",
)


@pytest.fixture
def baked(tmp_path, monkeypatch) -> Path:
    """The model folder of the image (`baked`), with no model folder in the environment."""
    for variable in ("MODEL_DIR", "HOLOSCAN_MODEL_PATH", "MEDCHALLENGE_DEVICE"):
        monkeypatch.delenv(variable, raising=False)
    (tmp_path / "baked").mkdir()
    (tmp_path / "baked" / MODEL_FILE).write_text("baked")
    return tmp_path / "baked"


def run(argv: list[str], baked_dir: Path, algorithm: Algorithm = WORD_COUNTER) -> int:
    return main(algorithm, argv, baked_model_dir=baked_dir)


def progress(caplog) -> list[str]:
    """The log's messages, timings as `T`."""
    return [re.sub(r"in \d+\.\d s", "in T s", message) for message in caplog.messages]


def write_cases(folder: Path, texts: dict[str, str]) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    for name, text in texts.items():
        (folder / name).write_text(text)
    return folder


def write_job(job: Path, values: dict[Socket, str]) -> Path:
    """A GC job's /input: each socket's file at its relative path (images as `<pk>.mha`), and inputs.json."""
    entries = []
    for socket, text in values.items():
        image = socket.super_kind == "Image"
        path = job / socket.relative_path / "0b1c2d3e.mha" if image else job / socket.relative_path
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
        entries.append({"pk": 1, "interface": socket.serialize(), "value": None if image else json.loads(text),
                        "file": None, "image": {"pk": "0b1c2d3e", "name": UPLOAD_NAME} if image else None})
    (job / "inputs.json").write_text(json.dumps(entries))
    return job


def error_lines(capsys) -> list[str]:
    return [line for line in capsys.readouterr().err.splitlines() if line.startswith("error:")]


def leftovers(folder: Path) -> list[str]:
    """Temporary files of interrupted atomic writes."""
    return [p.name for p in folder.rglob("*.part")]


def test_batch_mode_writes_per_case_files_then_the_run_file(tmp_path, baked, caplog):
    caplog.set_level(logging.INFO)
    cases = write_cases(tmp_path / "input", {"b.txt": "three little words", "a.txt": "two words", "notes.md": "x"})
    assert run(["--input", str(cases), "--output", str(tmp_path / "out"), "--device", "cpu"], baked) == 0
    assert (tmp_path / "out" / "run.csv").read_text() == "a.txt,2\nb.txt,3\n"  # cases in name order
    assert json.loads((tmp_path / "out" / "b.txt.json").read_text()) == {"case": "b.txt", "words": 3}
    assert sorted(p.name for p in (tmp_path / "out").iterdir()) == ["a.txt.json", "b.txt.json", "run.csv"]
    assert f"model {baked / MODEL_FILE}, provider baked-cpu" in caplog.messages
    assert [m for m in progress(caplog) if m.startswith("[")] == ["[1/2] a.txt: 2 word(s) in T s",
                                                                  "[2/2] b.txt: 3 word(s) in T s"]


class BatchedWordCounter(WordCounter):
    """A word counter that predicts all cases at once (`predict_all`), each count times 10 to tell it apart."""

    seen: list[list[str]] = []

    def predict(self, case: Case) -> int:
        raise AssertionError("batch mode must use predict_all")

    def predict_all(self, cases: list[Case]):
        BatchedWordCounter.seen.append([case.name for case in cases])
        return (10 * WordCounter.predict(self, case) for case in cases)


def test_batch_mode_uses_predict_all_when_the_model_has_it(tmp_path, baked):
    cases = write_cases(tmp_path / "input", {"b.txt": "three little words", "a.txt": "two words"})
    algorithm = replace(WORD_COUNTER, load_model=BatchedWordCounter)
    assert run(["--input", str(cases), "--output", str(tmp_path / "out")], baked, algorithm) == 0
    assert (tmp_path / "out" / "run.csv").read_text() == "a.txt,20\nb.txt,30\n"
    assert BatchedWordCounter.seen == [["a.txt", "b.txt"]]


def test_batch_mode_without_cases_is_one_error_line(tmp_path, baked, capsys):
    cases = write_cases(tmp_path / "input", {"notes.md": "x"})
    assert run(["--input", str(cases), "--output", str(tmp_path / "out")], baked) == 1
    assert error_lines(capsys) == [f"error: {cases}: no *.txt files (and no inputs.json)"]


@pytest.mark.parametrize("name", ["a,1\nforged.txt", "tab\there.txt", "x,y.txt"])
def test_case_names_that_would_forge_run_file_lines_are_refused(tmp_path, baked, capsys, name):
    csv_safe = replace(WORD_COUNTER, name_forbidden=",")
    cases = write_cases(tmp_path / "input", {name: "two words", "b.txt": "x"})
    assert main(csv_safe, ["--input", str(cases), "--output", str(tmp_path / "out")], baked) == 1
    [line] = error_lines(capsys)
    assert "which the run file cannot carry" in line
    assert not (tmp_path / "out").exists() or not list((tmp_path / "out").iterdir())  # refused before any work


def test_gc_mode_dispatches_on_the_set_of_input_sockets(tmp_path, baked, caplog):
    caplog.set_level(logging.INFO)
    one = write_job(tmp_path / "one", {TEXT: "two words"})
    two = write_job(tmp_path / "two", {WEIGHT: "10", TEXT: "two words"})
    for job, words in ((one, 2), (two, 20)):
        assert run(["--input", str(job), "--output", str(job / "output")], baked) == 0
        assert [p.name for p in (job / "output").iterdir()] == ["word-count.json"]
        assert json.loads((job / "output" / "word-count.json").read_text()) == words
    assert f"0b1c2d3e.mha: 20 word(s) in T s -> {two / 'output' / 'word-count.json'}" in progress(caplog)


def test_gc_mode_names_the_case_after_the_upload(tmp_path, baked):
    seen = []

    class RecordingWordCounter(WordCounter):
        def predict(self, case: Case) -> int:
            seen.append(case)
            return super().predict(case)

    job = write_job(tmp_path / "job", {TEXT: "one"})
    assert run(["--input", str(job), "--output", str(tmp_path / "out")], baked,
               replace(WORD_COUNTER, load_model=RecordingWordCounter)) == 0
    assert seen == [Case(UPLOAD_NAME, {TEXT.slug: job / "images" / "text" / "0b1c2d3e.mha"})]


def test_an_unknown_interface_is_one_error_line(tmp_path, baked, capsys):
    job = write_job(tmp_path / "job", {WEIGHT: "2"})
    assert run(["--input", str(job), "--output", str(tmp_path / "out")], baked) == 1
    assert error_lines(capsys) == [f"error: {job / 'inputs.json'}: input sockets ['weight'] match no interface of "
                                   "this algorithm (expected ['text-image'] or ['text-image', 'weight'])"]
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize(("flag", "variable", "used"), [
    ("with", "with", "flag"),  # --model beats $MODEL_DIR
    ("without", "with", "baked"),  # --model without the file: the baked model, $MODEL_DIR is not consulted
    (None, "with", "variable"),  # $MODEL_DIR beats the baked model
    (None, "without", "baked"),
    (None, None, "baked"),  # /opt/ml/model holds no words.model here
])
def test_model_location_precedence(tmp_path, baked, monkeypatch, caplog, flag, variable, used):
    caplog.set_level(logging.INFO)
    folders = {}
    for name, state in (("flag", flag), ("variable", variable)):
        if state is not None:
            folders[name] = tmp_path / name
            folders[name].mkdir()
            if state == "with":
                (folders[name] / MODEL_FILE).write_text(name)
    if variable is not None:
        monkeypatch.setenv("MODEL_DIR", str(folders["variable"]))
    cases = write_cases(tmp_path / "input", {"a.txt": "a"})
    argv = ["--input", str(cases), "--output", str(tmp_path / "out")]
    assert run(argv + (["--model", str(folders["flag"])] if flag else []), baked) == 0
    model = folders[used] / MODEL_FILE if used != "baked" else baked / MODEL_FILE
    assert f"model {model}, provider {used}-auto" in caplog.messages


def test_no_model_anywhere_is_one_error_line(tmp_path, capsys):
    cases = write_cases(tmp_path / "input", {"a.txt": "a"})
    code = run(["--input", str(cases), "--output", str(tmp_path / "out"), "--model", str(tmp_path / "none")],
               tmp_path / "baked")
    assert code == 1
    assert error_lines(capsys) == [f"error: {MODEL_FILE}: no model file in {tmp_path / 'none'} or "
                                   f"{tmp_path / 'baked'}"]


def test_device_from_the_flag_or_the_environment(tmp_path, baked, monkeypatch, caplog, capsys):
    caplog.set_level(logging.INFO)
    cases = write_cases(tmp_path / "input", {"a.txt": "a"})
    argv = ["--input", str(cases), "--output", str(tmp_path / "out")]
    monkeypatch.setenv("MEDCHALLENGE_DEVICE", "cuda")
    assert run(argv, baked) == 0 and run(argv + ["--device", "cpu"], baked) == 0
    assert [m.rsplit(" ", 1)[1] for m in caplog.messages if m.startswith("model ")] == ["baked-cuda", "baked-cpu"]
    monkeypatch.setenv("MEDCHALLENGE_DEVICE", "gpu")
    assert run(argv, baked) == 1
    assert error_lines(capsys) == ["error: MEDCHALLENGE_DEVICE='gpu': expected one of auto, cpu, cuda"]


def test_a_failing_case_leaves_complete_files_and_no_run_file(tmp_path, baked, capsys):
    cases = write_cases(tmp_path / "input", {"a.txt": "two words", "b.txt": "fail"})
    assert run(["--input", str(cases), "--output", str(tmp_path / "out")], baked) == 1
    assert error_lines(capsys) == [f"error: {cases / 'b.txt'}: cannot read"]
    assert sorted(p.name for p in (tmp_path / "out").iterdir()) == ["a.txt.json"]
    assert json.loads((tmp_path / "out" / "a.txt.json").read_text()) == {"case": "a.txt", "words": 2}


def test_a_failed_write_leaves_the_previous_file_and_no_temporary_file(tmp_path, baked):
    cases = write_cases(tmp_path / "input", {"a.txt": "two words"})
    out = write_cases(tmp_path / "out", {"run.csv": "from an earlier run\n"})
    unencodable = replace(WORD_COUNTER, run_files=lambda results: {"run.csv": "a.txt,2\n\ud800"})
    with pytest.raises(UnicodeEncodeError):
        run(["--input", str(cases), "--output", str(out)], baked, unencodable)
    assert (out / "run.csv").read_text() == "from an earlier run\n" and leftovers(out) == []


def test_a_non_finite_gc_output_is_not_written(tmp_path, baked):
    job = write_job(tmp_path / "job", {TEXT: "two words"})
    not_a_number = replace(WORD_COUNTER, gc_outputs=lambda n: {WORDS.slug: float("nan")})
    with pytest.raises(ValueError, match="non-finite"):
        run(["--input", str(job), "--output", str(tmp_path / "out")], baked, not_a_number)
    assert not (tmp_path / "out" / WORDS.relative_path).exists() and leftovers(tmp_path) == []
