"""The caption algorithm: reading every kind of figure, concept and caption selection by hand, then the real model
in batch mode (both editions' run files scored by the evaluator) and in grand-challenge mode through the emulator."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import SimpleITK as sitk
from PIL import Image

from medchallenge.algorithms.imageclef_caption import (
    ALGORITHM,
    MODEL_FILENAME,
    CaptionModel,
    Retrieval,
    choose_caption,
    read_figure,
    run_file_caption,
    run_files,
    select_concepts,
    to_uint8,
    bleu_matrix,
    FigureResult,
)
from medchallenge.algorithms.runner import Case, main
from medchallenge.errors import InputError
from medchallenge.metrics.imageclef_caption import caption_bleu, load_stopwords, preprocess_caption
from medchallenge.evaluators.imageclef_caption import main as evaluate
from medchallenge.synth.__main__ import main as synth

MODEL = Path(__file__).resolve().parents[2] / "algorithms" / "imageclef_caption" / "model" / MODEL_FILENAME
FIGURES = 8


def run_caption(argv: list[str]) -> int:
    """The caption algorithm through the runner, with the repository's model as the one baked into the image."""
    return main(ALGORITHM, argv, baked_model_dir=MODEL.parent)


@pytest.fixture(scope="module", params=["2022", "2021"])
def scored(request, tmp_path_factory) -> tuple[str, Path, dict]:
    """Figures of one edition, the algorithm's run files for them, and the evaluator's metrics of those."""
    edition = request.param
    root = tmp_path_factory.mktemp(f"caption{edition}")
    assert synth(["imageclef-caption-images", "--edition", edition, "--out", str(root), "--images", str(FIGURES),
                  "--seed", "77"]) == 0
    assert run_caption(["--input", str(root / "input"), "--output", str(root / "run"), "--edition", edition,
                        "--device", "cpu"]) == 0
    assert evaluate(["--edition", edition, "--input", str(root / "run"), "--ground-truth", str(root / "ground_truth"),
                     "--output", str(root / "metrics"), "--no-progress", "--no-plots", "--workers", "1"]) == 0
    return edition, root, json.loads((root / "metrics" / "metrics.json").read_text())


def test_to_uint8_stretches_16_bit_and_float_and_keeps_8_bit():
    assert to_uint8(np.array([[0, 4095]], np.uint16)).tolist() == [[0, 255]]
    assert to_uint8(np.array([[-1.0, np.nan, 1.0]], np.float32)).tolist() == [[0, 0, 255]]
    eight = np.array([[3, 200]], np.uint8)
    assert to_uint8(eight) is eight


@pytest.mark.parametrize("kind", ["L", "RGB", "CMYK", "P", "I;16", "RGBA"])
def test_every_figure_mode_is_read_as_rgb(tmp_path, kind):
    values = np.linspace(0, 255, 40 * 30).reshape(30, 40).astype(np.uint8)
    image = Image.fromarray(values).convert(kind if kind != "I;16" else "L")
    if kind == "I;16":
        image = Image.fromarray(values.astype(np.uint16) * 16)
        assert image.mode.startswith("I")
    path = tmp_path / ("figure.jpg" if kind in ("L", "RGB", "CMYK") else "figure.png")
    image.save(path)
    figure = read_figure(path)
    assert figure.mode == "RGB" and figure.size == (40, 30)
    grey = np.asarray(figure)[..., 0].astype(int)
    assert grey[0, 0] < 30 and grey[-1, -1] > 225  # dark to bright, 16-bit stretched to 8 bits


def test_a_grand_challenge_mha_is_read_through_simpleitk(tmp_path):
    rgb = sitk.GetImageFromArray(np.full((12, 20, 3), 90, np.uint8), isVector=True)
    sitk.WriteImage(rgb, str(tmp_path / "rgb.mha"))
    grey16 = sitk.GetImageFromArray(np.arange(240, dtype=np.uint16).reshape(1, 12, 20))  # 3-D, one slice
    sitk.WriteImage(grey16, str(tmp_path / "grey16.mha"))
    assert read_figure(tmp_path / "rgb.mha").size == (20, 12)
    assert np.asarray(read_figure(tmp_path / "grey16.mha"))[-1, -1].tolist() == [255, 255, 255]
    sitk.WriteImage(sitk.GetImageFromArray(np.zeros((3, 12, 20), np.uint8)), str(tmp_path / "volume.mha"))
    with pytest.raises(InputError, match="volume.mha: expected a 2-D figure"):
        read_figure(tmp_path / "volume.mha")


def test_an_unreadable_figure_is_an_input_error_naming_it(tmp_path):
    (tmp_path / "broken.jpg").write_bytes(b"\xff\xd8\xff\xe0 truncated")
    with pytest.raises(InputError, match="broken.jpg: cannot read the figure"):
        read_figure(tmp_path / "broken.jpg")


def test_concepts_above_their_thresholds_in_vocabulary_order_else_the_best_one():
    concepts = ["C1", "C2", "C3"]
    assert select_concepts(np.array([0.6, 0.9, 0.2]), np.array([0.5, 0.5, 0.5]), concepts) == ["C1", "C2"]
    # probabilities that differ by float noise between devices give the same line
    assert (select_concepts(np.array([0.7, 0.7 + 1e-7, 0.2]), np.full(3, 0.5), concepts)
            == select_concepts(np.array([0.7 + 1e-7, 0.7, 0.2]), np.full(3, 0.5), concepts) == ["C1", "C2"])
    assert select_concepts(np.array([0.6, 0.9, 0.2]), np.array([0.7, 0.95, 0.1]), concepts) == ["C3"]
    assert select_concepts(np.array([0.1, 0.3, 0.2]), np.array([0.5, 0.5, 0.5]), concepts) == ["C2"]
    many = [f"C{k}" for k in range(150)]
    assert len(select_concepts(np.ones(150), np.zeros(150), many)) == 100
    rising = np.linspace(0.5, 1.0, 150)  # the 100 most probable are kept, in the vocabulary's order
    assert select_concepts(rising, np.zeros(150), many) == many[50:]


def _tokens(captions: list[str]) -> list[tuple[str, ...]]:
    return [tuple(preprocess_caption(c, load_stopwords())) for c in captions]


def test_the_bleu_matrix_is_the_official_per_figure_bleu_of_every_pair():
    captions = ["CT of the chest shows a nodule in the lung.", "CT of the chest shows a nodule.",
                "CT of the chest shows a nodule in the lung (arrow).", "MRI of the brain shows a mass.",
                "chest chest chest nodule nodule", "chest chest", "chest chest CT chest", "chest CT chest", "", "the of",
                "CT of the chest shows a nodule."]  # repeated captions: computed once, found in every row
    tokens = _tokens(captions)
    matrix = bleu_matrix(tokens)
    for h, hypothesis in enumerate(tokens):
        for r, reference in enumerate(tokens):
            assert matrix[h, r] == pytest.approx(caption_bleu(reference, hypothesis), rel=1e-12, abs=1e-300)
    assert matrix[0, 0] == 1.0 and matrix[3, 6] == 0.0 and matrix[8, 9] == 1.0  # two empty token lists: 1


def test_the_caption_with_the_best_expected_bleu_among_the_neighbours_wins():
    captions = ["CT of the chest shows a nodule in the lung.", "MRI of the brain shows a mass.",
                "CT of the chest shows a nodule in the lung (arrow).", "CT of the chest shows a small nodule.",
                "CT of the chest shows a nodule in the lung (arrowhead)."]
    concepts = [frozenset({"CT", "CHEST", "NODULE", "LUNG"}), frozenset({"MRI", "BRAIN", "MASS"}),
                frozenset({"CT", "CHEST", "NODULE", "LUNG"}), frozenset({"CT", "CHEST", "NODULE"}),
                frozenset({"CT", "CHEST", "NODULE", "LUNG"})]
    bleu = bleu_matrix(_tokens(captions))
    similarity = np.array([0.5, 0.95, 0.7, 0.9, 0.6])
    everything = np.arange(5)
    assert choose_caption(similarity, everything, concepts, bleu, frozenset(), Retrieval(1, 0.0, 0.0)) == 1
    # the 4 nearest: 1, 3, 2, 4; 2 and 4 differ in their last word only: each shares 4-grams with the other
    assert choose_caption(similarity, everything, concepts, bleu, frozenset(), Retrieval(4, 0.0, 0.0)) == 2
    by_concepts = Retrieval(2, 0.0, 1.0)  # the 2 nearest: 1 and 3; 3 holds the predicted concepts exactly
    assert choose_caption(similarity, everything, concepts, bleu, concepts[3], by_concepts) == 3
    subset = np.array([0, 1, 2])  # the bank restricted (to an edition): the matrix of the subset, in its order
    # pool 1, 2, 0: 0 ("... lung") is the better hypothesis against 2 ("... lung arrow") than 2 against 0 (brevity)
    assert choose_caption(similarity, subset, concepts, bleu[np.ix_(subset, subset)], frozenset(),
                          Retrieval(3, 0.0, 0.0)) == 0


def test_the_similarity_weight_lets_the_nearest_neighbours_outvote_a_larger_far_group():
    captions = ["CT of the chest shows a nodule in the lung.", "CT of the chest shows a nodule in the lung (arrow).",
                "MRI of the brain shows a mass in the brain.", "MRI of the brain shows a mass in the brain (arrow).",
                "MRI of the brain shows a mass in the brain (arrowhead)."]
    bleu = bleu_matrix(_tokens(captions))
    similarity = np.array([0.9, 0.88, 0.6, 0.58, 0.57])
    concepts = [frozenset()] * 5
    assert choose_caption(similarity, np.arange(5), concepts, bleu, frozenset(), Retrieval(5, 0.0, 0.0)) == 2
    assert choose_caption(similarity, np.arange(5), concepts, bleu, frozenset(), Retrieval(5, 40.0, 0.0)) == 0


def test_run_file_captions_hold_no_special_character():
    assert run_file_caption("A 2–3 cm “ring-enhancing” lesion | 12 × 9 mm\tµ café\n") == (
        'A 2-3 cm "ring-enhancing" lesion 12 x 9 mm u cafe')


def test_run_files_have_every_figure_once_with_its_id():
    cases = [Case("synpic1.jpg", {}), Case("ImageCLEFmedCaption_2022_test_000002.PNG", {})]
    files = run_files([(cases[0], FigureResult(["C0040405", "C0817096"], "CT of the chest.")),
                       (cases[1], FigureResult(["C0024485"], ""))])
    assert files["concepts.csv"] == "synpic1|C0040405;C0817096\nImageCLEFmedCaption_2022_test_000002|C0024485\n"
    assert files["captions.csv"] == "synpic1|CT of the chest.\nImageCLEFmedCaption_2022_test_000002|\n"


def test_two_files_of_one_figure_id_are_refused():
    result = FigureResult(["C0040405"], "CT.")
    with pytest.raises(InputError, match="figure ID 'synpic1' names more than one input file"):
        run_files([(Case("synpic1.jpg", {}), result), (Case("synpic1.png", {}), result)])


def test_batch_run_files_are_scored_by_the_evaluator(scored):
    edition, root, metrics = scored
    ids = sorted(p.stem for p in (root / "input").glob("*.jpg"))
    for name in ("concepts.csv", "captions.csv"):
        lines = (root / "run" / name).read_text(encoding="ascii").splitlines()
        assert sorted(line.split("|")[0] for line in lines) == ids
        assert all(line.count("|") == 1 for line in lines)
    for line in (root / "run" / "concepts.csv").read_text().splitlines():
        concepts = line.split("|")[1].split(";")
        assert 1 <= len(concepts) <= 100 and len(set(concepts)) == len(concepts)
    aggregates = metrics["aggregates"]
    assert 0.0 <= aggregates["concept_f1"] <= 1.0 and 0.0 <= aggregates["bleu"] <= 1.0
    assert metrics["meta"]["options"]["edition"] == edition
    assert sorted(metrics["case"]) == ids


def test_each_edition_gets_the_captions_of_its_own_bank(scored):
    edition, root, _ = scored
    model = CaptionModel(MODEL, "cpu", edition)
    own = {run_file_caption(model.captions[i]) for i in model.candidates}
    predicted = [line.split("|", 1)[1] for line in (root / "run" / "captions.csv").read_text().splitlines()]
    assert set(predicted) <= own


def test_gc_mode_writes_the_sockets_the_evaluator_reads_and_matches_batch_mode(scored, tmp_path):
    edition, root, _ = scored
    figure = sorted((root / "input").glob("*.jpg"))[0]
    job = tmp_path / "input"
    (job / "images" / "medical-image").mkdir(parents=True)
    sitk.WriteImage(sitk.ReadImage(str(figure)), str(job / "images" / "medical-image" / "0b1c.mha"))
    (job / "inputs.json").write_text(json.dumps([{
        "pk": 1, "interface": {"slug": "medical-image", "kind": "Image", "super_kind": "Image",
                               "relative_path": "images/medical-image"},
        "value": None, "file": None, "image": {"pk": "0b1c", "name": figure.name}}]))
    assert run_caption(["--input", str(job), "--output", str(tmp_path / "output"), "--edition", edition,
                        "--device", "cpu"]) == 0
    concepts = json.loads((tmp_path / "output" / "umls-concepts.json").read_text())
    caption = json.loads((tmp_path / "output" / "caption.json").read_text())
    batch = {line.split("|")[0]: line.split("|")[1] for line in (root / "run" / "concepts.csv").read_text().splitlines()}
    captions = {line.split("|")[0]: line.split("|")[1] for line in (root / "run" / "captions.csv").read_text().splitlines()}
    assert ";".join(concepts) == batch[figure.stem] and caption == captions[figure.stem]


def test_the_edition_comes_from_the_environment(scored, tmp_path, monkeypatch):
    edition, root, _ = scored
    monkeypatch.setenv("CAPTION_EDITION", edition)
    assert run_caption(["--input", str(root / "input"), "--output", str(tmp_path / "run"), "--device", "cpu"]) == 0
    assert (tmp_path / "run" / "captions.csv").read_text() == (root / "run" / "captions.csv").read_text()
    monkeypatch.setenv("CAPTION_EDITION", "2020")
    assert run_caption(["--input", str(root / "input"), "--output", str(tmp_path / "bad")]) == 1


def test_an_unreadable_figure_in_batch_mode_is_one_error_line(tmp_path, capsys):
    (tmp_path / "input").mkdir()
    Image.new("L", (30, 20), 128).save(tmp_path / "input" / "synpic1.jpg")
    (tmp_path / "input" / "synpic2.png").write_bytes(b"not a png at all")
    assert run_caption(["--input", str(tmp_path / "input"), "--output", str(tmp_path / "out"), "--device", "cpu"]) == 1
    errors = [line for line in capsys.readouterr().err.splitlines() if line.startswith("error:")]
    assert len(errors) == 1 and "synpic2.png" in errors[0] and "cannot read" in errors[0]
    assert not (tmp_path / "out" / "concepts.csv").exists()


def test_a_figure_name_with_a_delimiter_is_refused_before_any_work(tmp_path, capsys):
    (tmp_path / "input").mkdir()
    Image.new("L", (30, 20)).save(tmp_path / "input" / "a|b.jpg")
    assert run_caption(["--input", str(tmp_path / "input"), "--output", str(tmp_path / "out")]) == 1
    assert "rename the case" in capsys.readouterr().err


def test_device_cuda_is_strict_where_onnx_runtime_offers_no_cuda(tmp_path, capsys):
    import onnxruntime

    if "CUDAExecutionProvider" in onnxruntime.get_available_providers():
        pytest.skip("this ONNX Runtime offers CUDA")
    (tmp_path / "input").mkdir()
    Image.new("L", (30, 20)).save(tmp_path / "input" / "synpic1.jpg")
    assert run_caption(["--input", str(tmp_path / "input"), "--output", str(tmp_path / "out"), "--device", "cuda"]) == 1
    assert "--device cuda" in capsys.readouterr().err


def test_entry_script_logs_the_provider(tmp_path):
    Image.new("RGB", (64, 48), (10, 200, 30)).save(tmp_path / "synpic5.jpg")
    done = subprocess.run([sys.executable, str(MODEL.parents[1] / "inference.py"), "--input", str(tmp_path),
                           "--output", str(tmp_path / "o"), "--device", "cpu"], capture_output=True, text=True,
                          timeout=120)
    assert done.returncode == 0, done.stderr
    assert "CPUExecutionProvider" in done.stdout and done.stderr == ""
    assert (tmp_path / "o" / "concepts.csv").read_text().startswith("synpic5|C")


def test_a_jpeg_is_read_with_the_pixels_of_grand_challenge_s_mha(tmp_path):
    """GC mode reads panimg's MHA of the upload; batch mode the JPEG itself: the same pixels, so the same answer."""
    from medchallenge.grand_challenge.emulator import upload_case

    pytest.importorskip("panimg")
    rng = np.random.default_rng(3)
    Image.fromarray(rng.integers(0, 256, (300, 420, 3), dtype=np.uint8)).save(tmp_path / "synpic1.jpg", quality=80)
    uploaded = upload_case(tmp_path / "synpic1.jpg", tmp_path / "store")
    assert np.array_equal(np.asarray(read_figure(tmp_path / "synpic1.jpg")), np.asarray(read_figure(uploaded.file)))


def test_grand_challenge_emulation_scores_as_batch_mode(tmp_path, repo):
    """Each figure uploaded (panimg converts the JPEG to an MHA), one job each with the local runner; the evaluator
    gives the grand-challenge layout the same aggregates as the batch run files."""
    pytest.importorskip("panimg")
    from medchallenge.grand_challenge.emulator import ALGORITHMS, emulate, find_cases, local_launcher

    root = tmp_path / "cohort"
    assert synth(["imageclef-caption-images", "--edition", "2022", "--out", str(root), "--images", "3",
                  "--seed", "78"]) == 0
    spec = ALGORITHMS["imageclef-caption"]
    eval_input = emulate(spec, find_cases(spec, root / "input"), tmp_path / "gc", local_launcher(spec, repo))
    assert run_caption(["--input", str(root / "input"), "--output", str(tmp_path / "batch"), "--device", "cpu"]) == 0
    aggregates = []
    for predictions in (eval_input, tmp_path / "batch"):
        out = tmp_path / f"metrics-{predictions.name}"
        assert evaluate(["--edition", "2022", "--input", str(predictions), "--ground-truth",
                         str(root / "ground_truth"), "--output", str(out), "--no-progress", "--no-plots",
                         "--workers", "1", "--strict"]) == 0
        aggregates.append(json.loads((out / "metrics.json").read_text()))
    assert aggregates[0]["meta"]["layout"] == "grand-challenge predictions.json"
    assert aggregates[0]["aggregates"] == aggregates[1]["aggregates"]
