"""The synthetic caption figures: ids, ground-truth formats per edition, CUIs from the vocabulary, captions that
name exactly their figure's concepts, and files the evaluator reads as they are."""

from __future__ import annotations

import random
import re
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from medchallenge.formats import imageclef_caption as fmt
from medchallenge.synth.__main__ import main as synth
from medchallenge.synth.imageclef_caption_images import (
    SECONDARY_CONCEPTS,
    caption,
    figure_ids,
    generate_figure,
    sample_figure,
    vocabulary,
)

UMLS_CUI = re.compile(r"C\d{7}")


@pytest.fixture(scope="module", params=["2022", "2021"])
def cohort(request, tmp_path_factory) -> tuple[str, Path]:
    edition = request.param
    out = tmp_path_factory.mktemp(f"figures{edition}")
    assert synth(["imageclef-caption-images", "--edition", edition, "--out", str(out), "--images", "12",
                  "--seed", "5", "--secondary", "--contact-sheet"]) == 0
    return edition, out


def test_vocabulary_holds_real_cui_name_pairs_of_every_kind():
    concepts = vocabulary()
    assert concepts["C0040405"].name == "X-Ray Computed Tomography"
    assert concepts["C0024485"].name == "Magnetic Resonance Imaging"
    assert all(UMLS_CUI.fullmatch(cui) and c.phrases and all(c.phrases) for cui, c in concepts.items())
    assert {c.kind for c in concepts.values()} == {"modality", "region", "organ", "finding"}
    assert len({p.lower() for c in concepts.values() for p in c.phrases}) == sum(len(c.phrases) for c in concepts.values())


def test_ids_are_named_as_each_edition_names_them():
    assert figure_ids("2022", "valid", 2) == ["ImageCLEFmedCaption_2022_valid_000001",
                                              "ImageCLEFmedCaption_2022_valid_000002"]
    assert figure_ids("2021", "test", 2) == ["synpic60001", "synpic60002"]
    assert not set(figure_ids("2021", "train", 1000)) & set(figure_ids("2021", "valid", 1000))


def test_the_evaluator_reads_the_ground_truth_of_every_figure(cohort):
    edition, out = cohort
    ids = sorted(p.stem for p in (out / "input").glob("*.jpg"))
    assert ids == sorted(figure_ids(edition, "test", 12))
    concepts = fmt.read_concepts_ground_truth(out / "ground_truth" / fmt.CONCEPTS_GT, edition)
    captions = fmt.read_captions_ground_truth(out / "ground_truth" / fmt.CAPTIONS_GT, edition)
    assert sorted(concepts) == sorted(captions) == ids
    first_line = (out / "ground_truth" / fmt.CONCEPTS_GT).read_text().splitlines()[0]
    assert (first_line == "ID\tcuis") == (edition == "2022")  # 2022 skips a header line, 2021 has none
    delimiter = "|" if edition == "2022" else "\t"
    assert all(delimiter in line for line in (out / "ground_truth" / fmt.CAPTIONS_GT).read_text().splitlines())
    for value in concepts.values():
        cuis = value if edition == "2022" else value.split(";")
        assert cuis and set(cuis) <= set(vocabulary()) and len(set(cuis)) == len(cuis)
    assert ((out / "ground_truth" / fmt.SECONDARY_CONCEPTS).exists()) == (edition == "2022")
    assert (out / "contact_sheet.png").exists()


def test_figures_are_jpegs_of_varied_sizes_and_modes(cohort):
    _, out = cohort
    sizes, modes = set(), set()
    for path in (out / "input").glob("*.jpg"):
        with Image.open(path) as image:
            assert image.format == "JPEG"
            sizes.add(image.size)
            modes.add(image.mode)
            assert np.asarray(image).std() > 10  # something is drawn
    assert len(sizes) >= 8 and modes <= {"L", "RGB"}


def _without(text: str, phrases: list[str]) -> str:
    for phrase in sorted(phrases, key=len, reverse=True):
        text = re.sub(rf"\b{re.escape(phrase)}\b", " ", text, flags=re.I)
    return text


@pytest.mark.parametrize("edition", ["2022", "2021"])
def test_captions_name_every_concept_of_their_figure_and_no_other(edition):
    concepts = vocabulary()
    texts = []
    for index in range(400):
        rng = random.Random(index)
        figure = sample_figure(rng, "x", edition)
        text = caption(rng, figure, edition)
        texts.append(text)
        present = [p for cui in figure.concepts for p in concepts[cui].phrases]
        for cui in figure.concepts:
            assert any(re.search(rf"\b{re.escape(p)}\b", text, re.I) for p in concepts[cui].phrases), (cui, text)
        rest = _without(text, present)
        for cui, concept in concepts.items():
            if cui not in figure.concepts:
                assert not any(re.search(rf"\b{re.escape(p)}\b", rest, re.I) for p in concept.phrases), (cui, text)
        assert "|" not in text and "\t" not in text and "\n" not in text
    joined = " ".join(texts)  # the evaluator's pre-processing has something to do
    assert re.search(r"\d", joined) and "(" in joined and "." in joined
    assert all(c in joined for c in ("–", "“", "×", ";")) if edition == "2022" else ":" in joined
    assert len(set(texts)) > 300  # paraphrases, measurements, panels


def test_a_figure_is_the_same_for_the_same_seed_and_index():
    first = generate_figure("2022", "train", 3, 7, "a")
    again = generate_figure("2022", "train", 3, 7, "a")
    other = generate_figure("2022", "train", 4, 7, "a")
    assert first[2] == again[2] and np.array_equal(np.asarray(first[1]), np.asarray(again[1]))
    assert first[2] != other[2] or not np.array_equal(np.asarray(first[1]), np.asarray(other[1]))


def test_secondary_concepts_are_vocabulary_modalities_and_regions():
    kinds = {vocabulary()[cui].kind for cui in SECONDARY_CONCEPTS}
    assert kinds == {"modality", "region"}
