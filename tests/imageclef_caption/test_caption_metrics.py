"""ImageCLEFmed Caption metric functions: every rule of the 2021/2022 specs with hand-derived values, and BLEU and
ROUGE-1 checked against the installed libraries (NLTK 3.10.4's BLEU path is 3.7's; the tokeniser follows 3.7, not
the installed 3.10.4: tests/reference compares everything with the versions the official code ran)."""

from __future__ import annotations

import hashlib
import math
import random
import string
import sys
import warnings

import pytest

from medchallenge.metrics import imageclef_caption as m

STOPWORDS = m.load_stopwords()


# --- concept F1 -------------------------------------------------------------------------------------------------

def test_binary_f1_uses_sklearn_order_of_operations():
    # tp=2, fp=1, fn=0: p = 2/3, r = 1, F = (2*2/3*1)/(2/3+1) = 0.8
    assert m.binary_f1(2, 1, 0) == 0.8
    # tp=1, fp=0, fn=4: p = 1, r = 1/5 -> ((2.0*1)*0.2)/1.2 = 0.33333333333333337, while 2tp/(2tp+fp+fn) = 2/6
    # = 0.3333333333333333: sklearn's arithmetic differs in the last bit and is the one reproduced.
    assert m.binary_f1(1, 0, 4) == ((2.0 * 1.0) * 0.2) / (1.0 + 0.2) == 0.33333333333333337
    assert m.binary_f1(1, 0, 4) != 2 / 6
    assert m.binary_f1(0, 3, 2) == 0.0  # tp = 0 -> 0 (zero_division)


def test_2022_concepts_case_insensitive_and_stripped_tuples():
    # GT {C0040405, C0817096}; run "C0040405;c0817096 ;C0000001" read as stripped tuple -> tp 2, fp 1 -> 0.8
    assert m.concept_f1_2022(("C0040405", "C0817096"), ("C0040405", "c0817096", "C0000001")) == 0.8


def test_2022_empty_lists():
    empty_gt = ("",)  # `id\t` in the GT file
    assert m.concept_f1_2022(empty_gt, ("",)) == 1.0  # run `id|`: '' matches ''
    assert m.concept_f1_2022(empty_gt, ()) == 0.0  # run `id` (no bar): nothing predicted
    assert m.concept_f1_2022(empty_gt, ("C0000001",)) == 0.0
    assert m.concept_f1_2022(("C0000001",), ()) == 0.0
    assert m.concept_f1_2022(("C0000001",), ("",)) == 0.0  # '' is a false positive
    # '' plus the right concept: tp 1, fp 1 ('') -> p = 0.5, r = 1 -> (2*0.5*1)/1.5 = 0.6666666666666666
    assert m.concept_f1_2022(("C0000001",), ("C0000001", "")) == (2.0 * 0.5) / 1.5


def test_2021_concepts_whole_string_upper_no_strip():
    # "C1; C2" holds " C2", which is not "C2": tp 1 (C1), fp 1, fn 1 -> p = r = 0.5 -> F = 0.5
    assert m.concept_f1_2021("C1;C2", "c1; C2") == 0.5
    assert m.concept_f1_2021("C1;C2", "c1;c2") == 1.0
    assert m.concept_f1_2021("", "C1") is None  # empty GT: excluded from the mean
    assert m.concept_f1_2021("   ", "") is None
    assert m.concept_f1_2021("C1", "") == 0.0
    assert m.concept_f1_2021("C1", "  ") == 0.0


def test_mean_over_counted():
    # 2022: every image counts: (0.8 + 0 + 0.5 + 1 + 0) / 5 = 0.45999999999999996 (float sum in order)
    assert m.mean_over_counted([0.8, 0.0, 0.5, 1.0, 0.0], 5) == 0.45999999999999996
    # 2021: the None (empty GT) leaves the denominator: (0.8 + 0 + 0.5 + 0) / 4 = 0.325
    assert m.mean_over_counted([0.8, 0.0, 0.5, None, 0.0], 5) == 0.325
    assert m.mean_over_counted([None, None], 2) is None


def test_secondary_f1_restricted_to_subset():
    subset = frozenset({"C0000001", "C0000002"})
    # GT ∩ subset = {C1}; prediction ∩ subset = {C1, C2} (C9 ignored) -> tp 1, fp 1 -> 2/3
    assert m.secondary_concept_f1(("C0000001", "C0000009"), ("c0000001", "C0000002", "C0000009"), subset) == (
        (2.0 * 0.5) * 1.0) / 1.5
    assert m.secondary_concept_f1(("C0000009",), ("C0000001",), subset) is None  # nothing to validate: skipped


# --- caption pre-processing -------------------------------------------------------------------------------------

def test_stopword_list_is_the_179_word_list():
    assert len(STOPWORDS) == 179
    assert {"can", "not", "no", "of", "the", "in", "a", "both", "very", "don", "ll", "re", "ve", "y"} <= STOPWORDS
    assert "wasn't" in STOPWORDS and "wasnt" not in STOPWORDS  # apostrophes are gone before the lookup
    assert "i'd" not in STOPWORDS  # one of the 19 words added to NLTK's list in 2025


def test_stopword_file_hash_checked(monkeypatch):
    path = m.resources.files("medchallenge").joinpath("data", m.STOPWORDS_FILE)
    assert hashlib.sha256(path.read_bytes()).hexdigest() == m.STOPWORDS_SHA256
    monkeypatch.setattr(m, "STOPWORDS_SHA256", "0" * 64)
    m.load_stopwords.cache_clear()
    try:
        with pytest.raises(RuntimeError, match="sha256"):
            m.load_stopwords()
    finally:
        monkeypatch.undo()
        m.load_stopwords.cache_clear()


@pytest.mark.parametrize("text, tokens", [
    ("X-ray", ["xray"]),  # punctuation inside words is deleted, no space inserted
    ("a 3.5 cm mass", ["35", "cm", "mass"]),  # "a" is a stop word; "3.5" -> "35"
    ("T2-weighted MRI.", ["t2weighted", "mri"]),
    ("Lesion cannot be excluded", ["lesion", "excluded"]),  # cannot -> can + not, both stop words
    ("gonna gotta gimme lemme", ["gon", "na", "got", "ta", "gim", "lem"]),  # "me" is a stop word
    ("wanna", ["wan", "na"]),  # at the end of the text (padded with a space) it splits
    ("wanna…", ["wanna…"]),  # "wanna" splits only before whitespace
    ("“Ring” sign ‘target’ «x» „y“", ["“", "ring", "”", "sign", "‘", "target", "’", "«", "x", "»", "„", "“"]),  # y: stop word
    ("5 µm deposit – left", ["5", "µm", "deposit", "–", "left"]),  # micro sign kept; the en dash stands alone
    # NLTK 3.7 does not split at the dashes U+2012-U+2015 (NLTK 3.10 does: three tokens)
    ("Arteriovenous malformation—see arrow", ["arteriovenous", "malformation—see", "arrow"]),
    ("T1‒T2 ―x", ["t1‒t2", "―x"]),
    ("wanna—", ["wanna—"]),  # "wanna" splits only before whitespace, and the dash is not padded
    ("No fracture; (normal) findings!", ["fracture", "normal", "findings"]),
    ("İ", ["i̇"]),  # Unicode lower-casing of the capital I with dot: i + combining dot
    ("", []),
    ("   ", []),
])
def test_preprocess_2022(text, tokens):
    assert m.preprocess_caption(text, STOPWORDS) == tokens


def test_preprocess_2021_applies_snowball_stemming():
    stem = m.snowball_stemmer()
    assert m.preprocess_caption("Computed tomography showing multiple lesions", STOPWORDS, stem) == [
        "comput", "tomographi", "show", "multipl", "lesion"]
    assert stem("generously") == "generous"  # Porter2 special-cased suffix handling


def test_bleu_of_a_caption_with_an_em_dash_follows_nltk_37():
    # NLTK 3.7 keeps "malformation—see" whole: 3 tokens, no 4-gram -> the tiny method0 score even for an exact copy;
    # NLTK 3.10 would give 5 tokens and BLEU 1.0 (the official scorers ran 3.7)
    tokens = m.preprocess_caption("Arteriovenous malformation—see arrow", STOPWORDS)
    assert tokens == ["arteriovenous", "malformation—see", "arrow"]
    assert m.caption_bleu(tokens, tokens) == 1.2213386697554703e-77


def test_treebank_rejects_unprocessed_text():
    with pytest.raises(ValueError):
        m.treebank_tokenize("x-ray")


# --- BLEU -------------------------------------------------------------------------------------------------------

def test_bleu_hand_values():
    # reference a b c d e, hypothesis a b c d: p1..p4 = 4/4, 3/3, 2/2, 1/1; BP = exp(1 - 5/4)
    assert m.sentence_bleu("a b c d e".split(), "a b c d".split()) == math.exp(1 - 5 / 4) == 0.7788007830714049
    # exact 3-token match: p1 = p2 = p3 = 1, p4 has no 4-gram -> sys.float_info.min; BP = exp(0) = 1
    assert m.caption_bleu(["axial", "ct", "scan"], ["axial", "ct", "scan"]) == 1.2213386697554703e-77
    assert 1.2213386697554703e-77 == math.exp(0.25 * math.log(sys.float_info.min))
    # no shared unigram -> 0 exactly, also when one side is empty
    assert m.caption_bleu(["a"], ["b"]) == 0.0
    assert m.caption_bleu(["a", "b"], []) == 0.0
    assert m.caption_bleu([], ["a"]) == 0.0
    assert m.caption_bleu([], []) == 1.0  # both empty -> 1
    # longer hypothesis: BP = 1; ref a b, hyp a b c: p1 = 2/3, p2 = 1/2, p3 = p4 = min float
    expected = math.exp(math.fsum([0.25 * math.log(2 / 3), 0.25 * math.log(1 / 2),
                                   0.25 * math.log(sys.float_info.min), 0.25 * math.log(sys.float_info.min)]))
    assert m.sentence_bleu(["a", "b"], ["a", "b", "c"]) == expected
    # clipping: hyp "a a a a" vs ref "a b c d": p1 = 1/4, higher orders 0 -> min float
    assert m.sentence_bleu(list("abcd"), list("aaaa")) == math.exp(
        math.fsum([0.25 * math.log(1 / 4)] + [0.25 * math.log(sys.float_info.min)] * 3))


def _random_token_pairs(count: int, seed: int = 3):
    rng = random.Random(seed)
    words = ["ct", "mri", "chest", "mass", "lesion", "left", "right", "lobe", "35", "cm", "µm", "xray", "“", "no"]
    for _ in range(count):
        ref = [rng.choice(words) for _ in range(rng.randint(0, 14))]
        hyp = [w for w in ref if rng.random() < 0.8] + [rng.choice(words) for _ in range(rng.randint(0, 4))]
        if rng.random() < 0.3:
            rng.shuffle(hyp)
        yield ref, hyp


def test_bleu_equals_nltk_sentence_bleu():
    from nltk.translate.bleu_score import SmoothingFunction, sentence_bleu

    smoothing = SmoothingFunction().method0
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for ref, hyp in _random_token_pairs(3000):
            if not ref and not hyp:
                continue
            assert m.sentence_bleu(ref, hyp) == sentence_bleu([ref], hyp, smoothing_function=smoothing), (ref, hyp)


# --- ROUGE-1 ----------------------------------------------------------------------------------------------------

def test_rouge1_hand_values():
    # target a b c, prediction a b d d: overlap 2, P = 2/4, R = 2/3, F = 2PR/(P+R)
    assert m.rouge1_fmeasure("a b c", "a b d d") == 2 * 0.5 * (2 / 3) / (0.5 + 2 / 3) == 0.5714285714285715
    assert m.rouge_tokenize("5 µm t2weighted “ring” é") == ["5", "m", "t2weighted", "ring"]
    assert m.caption_rouge1([], []) == 1.0  # both empty -> 1
    assert m.caption_rouge1(["µ"], ["µ"]) == 0.0  # non-empty, but nothing survives rouge's tokeniser -> 0
    assert m.caption_rouge1(["mass"], []) == 0.0


def test_rouge1_equals_rouge_score():
    from rouge_score.rouge_scorer import RougeScorer

    scorer = RougeScorer(["rouge1"], use_stemmer=False)
    for ref, hyp in _random_token_pairs(2000, seed=11):
        target, prediction = " ".join(ref), " ".join(hyp)
        if not target and not prediction:
            continue
        assert m.rouge1_fmeasure(target, prediction) == scorer.score(target, prediction)["rouge1"].fmeasure


# --- aggregates -------------------------------------------------------------------------------------------------

def test_caption_aggregates():
    # BLEU: sum in order then divide by len(GT): (0.1 + 0.2 + 0.3) / 3 with float additions
    assert m.sum_then_divide([0.1, 0.2, 0.3], 3) == ((0.1 + 0.2) + 0.3) / 3
    # ROUGE: np.mean (pairwise summation); on 6 values it is the plain left-to-right sum / 6
    values = [0.7058823529411764, 0.6666666666666666, 0.7999999999999999, 1.0, 0.0, 1.0]
    assert m.numpy_mean(values) == 0.695424836601307
    assert string.punctuation == m.string.punctuation  # the 32 ASCII characters the official code deleted
