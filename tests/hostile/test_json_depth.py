"""JSON from outside nested beyond MEDCHALLENGE_MAX_JSON_DEPTH is refused with one line naming the file before the
parser recurses into it (issue 29, item 7: 100,000 levels ended in a RecursionError traceback); every JSON reader of
outside input goes through limits.load_json."""

from __future__ import annotations

import argparse
import json

import pytest

from helpers import InProcessAlgorithm, evaluator, evaluator_argv, one_error_line
from medchallenge.errors import InputError
from medchallenge.jobs import SocketValue, run_job
from medchallenge.limits import MAX_JSON_DEPTH, json_depth, load_json
from medchallenge.sockets import Socket

DEEP = "[" * 100_000 + "]" * 100_000


def test_depth_is_counted_outside_strings():
    assert json_depth('{"a": "[[[{{", "b\\"[[": [[1, {"c": "]]]"}]]}') == 4
    assert json_depth("0.5") == 0 and json_depth("[]") == 1 and json_depth(DEEP) == 100_000
    # closing brackets inside a string do not hide the nesting after it
    assert json_depth('["' + "]" * 1000 + '", ' + "[" * 70 + "]" * 70 + "]") == 71


def test_load_json_reads_up_to_the_limit_and_refuses_beyond(monkeypatch):
    limit = MAX_JSON_DEPTH.value()
    assert load_json("[" * limit + "]" * limit, "x.json") == json.loads("[" * limit + "]" * limit)
    with pytest.raises(InputError, match=rf"^x.json: JSON nested {limit + 1} levels deep, more than the limit of "
                                         rf"{limit} levels of nesting \(\${MAX_JSON_DEPTH.variable} sets it\)$"):
        load_json("[" * (limit + 1) + "]" * (limit + 1), "x.json")
    monkeypatch.setenv(MAX_JSON_DEPTH.variable, "1000000")  # above what the parser can recurse: still one line
    with pytest.raises(InputError, match=r"^x.json: JSON nested 100000 levels deep, more than the parser can read"):
        load_json(DEEP, "x.json")


@pytest.mark.parametrize("name", ["tb-caverns", "ribfrac", "object-cxr", "imageclef-caption"])
def test_every_evaluator_refuses_a_deeply_nested_predictions_json_in_one_line(inputs, tmp_path, capsys, name):
    predictions = tmp_path / "predictions"
    predictions.mkdir()
    (predictions / "predictions.json").write_text(DEEP)
    assert evaluator(name).main(evaluator_argv(inputs, name, tmp_path / "out", predictions)) == 1
    line = one_error_line(capsys)
    assert line.startswith(f"error: {predictions / 'predictions.json'}: JSON nested 100000 levels deep"), line
    assert not (tmp_path / "out" / "metrics.json").exists()


def test_a_deeply_nested_job_output_json_is_refused_in_one_line(tmp_path, capsys):
    from medchallenge.synth.object_cxr import run as synth

    out = tmp_path / "cohort"
    synth(argparse.Namespace(out=out, images=6, points=2, positive_fraction=0.5, layout="gc", seed=3))
    predictions, ground_truth = out / "predictions", out / "ground_truth"
    argv = ["--input", str(predictions), "--ground-truth", str(ground_truth), "--output", str(tmp_path / "out"),
            "--no-progress", "--no-plots"]
    assert evaluator("object-cxr").main(argv) == 0  # the honest layout is scored
    capsys.readouterr()
    points = sorted(predictions.glob("*/output/foreign-objects.json"))[0]
    points.write_text('{"points": ' + DEEP + "}")
    assert evaluator("object-cxr").main(argv) == 1
    line = one_error_line(capsys)
    assert line.startswith(f"error: {points}: JSON nested 100001 levels deep, more than the limit"), line


def test_a_tb_job_output_json_nested_deeply_is_refused_in_one_line(inputs, tmp_path, capsys):
    predictions = tmp_path / "predictions"
    case = "TST_001.nii.gz"
    output = predictions / "job-1" / "output" / "tb-cavern-boxes.json"
    output.parent.mkdir(parents=True)
    output.write_text('{"boxes": ' + DEEP + "}")
    interface = {"slug": "tb-cavern-boxes", "kind": "Anything", "super_kind": "File",
                 "relative_path": "tb-cavern-boxes.json"}
    job = {"pk": "job-1", "status": "Succeeded",
           "inputs": [{"interface": {"slug": "ct-image", "kind": "Image", "super_kind": "Image",
                                     "relative_path": "images/ct"}, "image": {"pk": "x", "name": case}}],
           "outputs": [{"interface": interface, "value": None, "file": None, "image": None}]}
    (predictions / "predictions.json").write_text(json.dumps([job]))
    assert evaluator("tb-caverns").main(evaluator_argv(inputs, "tb-caverns", tmp_path / "out", predictions)) == 1
    line = one_error_line(capsys)
    assert line.startswith(f"error: {output}: JSON nested 100001 levels deep"), line


@pytest.mark.parametrize("levels", [100, 100_000])
def test_a_job_writing_deeply_nested_output_json_fails_with_the_limit_named(tmp_path, levels):
    socket = Socket("boxes", "Anything", "Value", "boxes.json")

    def algorithm(job_input, job_output, model):
        (job_output / "boxes.json").write_text("[" * levels + "]" * levels)

    result = run_job(InProcessAlgorithm(algorithm), [SocketValue(1, Socket("age", "Integer", "Value", "age.json"),
                                                                 value=42)], [socket], tmp_path / "job")
    assert result.status == "failed"
    assert result.error == (f"The output file 'boxes.json': JSON nested {levels} levels deep, more than the limit "
                            f"of {MAX_JSON_DEPTH.value()} levels of nesting (${MAX_JSON_DEPTH.variable} sets it)")


def test_a_gateway_configuration_nested_deeply_is_one_line(tmp_path, capsys):
    from medchallenge.gateway import main

    path = tmp_path / "gateway.toml"
    path.write_text("[gateway]\nports = " + DEEP + "\n")
    assert main(["--config", str(path), "--check"]) == 1
    assert one_error_line(capsys) == f"error: {path}: not valid TOML (arrays or tables nested too deeply)"
