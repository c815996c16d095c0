"""ImageCLEFmed Caption 2021/2022 text pieces vs NLTK 3.7 and rouge-score 0.1.2 (Python 3.9): tokeniser (with Punkt
shown to find no candidate break), pre-processing of both editions, Snowball stemmer, BLEU, ROUGE-1, and the
per-image scores end to end, on random and adversarial captions (fixed seeds)."""

from __future__ import annotations

import random

import pytest

from medchallenge.metrics import imageclef_caption as m

pytestmark = pytest.mark.reference

STOPWORDS = m.load_stopwords()

DASHES = ["\u2010", "\u2011", "\u2012", "\u2013", "\u2014", "\u2015", "\u2212", "\u2e3a", "\u2e3b", "\ufe58",
          "\ufe63", "\uff0d", "--", "-"]
QUOTES = ["“", "”", "‘", "’", "«", "»", "„", "‚", "‹", "›", "〝", "〞", "＂", "＇", "´", "′", "″", "`", '"', "'", "''",
          "``"]
SPACES = [" ", " ", " ", "  ", "\t", "\n", "\r\n", "\x0b", "\x0c", "\x1c", "\x1f", "\x85", "\xa0", "\u1680",
          "\u2000", "\u2007", "\u200a", "\u2028", "\u2029", "\u202f", "\u205f", "\u3000"]
OTHERS = ["…", "...", "•", "·", "×", "°", "±", "µ", "²", "³", "½", "ⅷ", "٣", "\u0301", "\u0308", "\u200b", "\u200c",
          "\u200d", "\ufeff", "ß", "ı", "İ", "ǅ", "Σ", "ς", "ﬁ", "ﬀ", "Å", "Ω", "ẞ", "ŉ", "é", "中文", "🙂", "\u202e",
          "_", "·", "¿", "¡", "§", "¶"] + list("!\"#$%&'()*+,-./:;<=>?@[\\]^_`{|}~")
WORDS = ["cannot", "CANNOT", "CanNot", "gonna", "Gonna", "gotta", "gimme", "lemme", "wanna", "WANNA", "whaddya",
         "whatcha", "d'ye", "more'n", "'tis", "'twas", "don't", "can't", "won't", "isn't", "I'm", "you're", "we've",
         "they'll", "he'd", "o'clock", "rock'n'roll", "can", "not", "gon", "na", "x-ray", "X-ray", "3.5", "3,5", "10",
         "2022", "t2-weighted", "e.g.", "Dr.", "U.S.", "etc.", "?!", "the", "of", "a", "no", "both", "very", "don",
         "ll", "y", "computed", "tomography", "showing", "multiple", "lesions", "lesion", "mass", "left", "right",
         "lobe", "chest", "ct", "mri", "axial", "contrast", "enhanced", "arteriovenous", "malformation", "see",
         "arrow", "arrows", "fracture", "normal", "findings", "generously", "skies", "dying", "news", "succeeded",
         "yay", "ayyy", "ultrasound", "µm", "café", "Straße", "naïve"]


def caption(rng: random.Random) -> str:
    """A caption of 0-24 pieces (words, dashes, quotes, whitespace, symbols, ASCII punctuation), glued with
    nothing, whitespace, a dash or a quote."""
    kind = rng.random()
    if kind < 0.1:  # random code points from blocks assigned long before Unicode 13
        ranges = [(0x20, 0x2ff), (0x370, 0x52f), (0x2000, 0x206f), (0x2190, 0x22ff), (0x3000, 0x303f),
                  (0xff00, 0xffef), (0x4e00, 0x4e3f)]
        return "".join(chr(rng.randint(*rng.choice(ranges))) for _ in range(rng.randint(0, 20)))
    pool = rng.choice([WORDS, WORDS + DASHES + QUOTES, WORDS + OTHERS, WORDS + DASHES + QUOTES + OTHERS + SPACES])
    glue = [""] * 3 + SPACES * 3 + DASHES + QUOTES
    length = rng.choice([0, 1, 2, 3, rng.randint(0, 8), rng.randint(0, 24)])
    return "".join(rng.choice(pool) + rng.choice(glue) for _ in range(length))


def edited(text: str, rng: random.Random) -> str:
    """A run caption from a ground-truth caption: words dropped, repeated, swapped or inserted."""
    words = text.split(" ")
    out = []
    for word in words:
        if rng.random() < 0.15:
            continue
        out.append(word)
        if rng.random() < 0.1:
            out.append(rng.choice(WORDS + DASHES + QUOTES))
    if len(out) > 1 and rng.random() < 0.3:
        i = rng.randrange(len(out) - 1)
        out[i], out[i + 1] = out[i + 1], out[i]
    return " ".join(out)


ADVERSARIAL = ["", " ", "\t\n", "\u3000", "a", ".", "...", "—", "malformation—see", "Arteriovenous malformation—see arrow",
               "wanna", "wanna ", "wanna—", "wanna–x", "wanna\u00a0x", "wanna\x1cx", "wanna…", "wanna“", "cannot",
               "xcannot", "cannotx", "can not", "²cannot", "\u0301cannot", "x\u200dcannot", "ǅcannot", "٣gonna",
               "½gonna", "gonna“", "“gonna”", "„cannot“", "«gimme»", "‘lemme’", "cannot—gonna", "CANNOT‒GOTTA",
               "wan\u00adna", "x-ray—ct", "3.5—4.5 cm", "T2‐weighted", "T2‑weighted", "e.g. — see", "Dr. Who?! Yes.",
               "one. two? three! four", "“Ring” sign ‘target’ «x» „y“", "İstanbul", "ﬁbrosis", "ΣΑΣ", "ẞ"]
ADVERSARIAL += DASHES + QUOTES + SPACES + OTHERS + [a + b for a in ["wanna", "cannot", "x"]
                                                    for b in DASHES + QUOTES + SPACES + OTHERS]


def captions(count: int, seed: int) -> list[str]:
    rng = random.Random(seed)
    return ADVERSARIAL + [caption(rng) for _ in range(count)]


def caption_pairs(count: int, seed: int) -> list[tuple[str, str]]:
    rng = random.Random(seed)
    pairs = [(text, text) for text in ADVERSARIAL] + [(text, "") for text in ADVERSARIAL[:20]]
    pairs += [("", text) for text in ADVERSARIAL[:20]]
    for _ in range(count):
        gt = caption(rng)
        pairs.append((gt, edited(gt, rng) if rng.random() < 0.8 else caption(rng)))
    return pairs


def test_word_tokenize_matches_nltk37(py39, record):
    texts = captions(4000, seed=801)
    reference = py39.run("word_tokenize", texts)
    mismatches = []
    for text, expected in zip(texts, reference):
        cleaned = text.lower().translate(m.ASCII_PUNCTUATION_DELETION)
        if m.treebank_tokenize(cleaned) != expected["tokens"]:
            mismatches.append((text, m.treebank_tokenize(cleaned), expected["tokens"]))
    candidates = sum(1 for expected in reference if expected["punkt_candidates"])
    record("caption word_tokenize", py39, len(texts), mismatches, punkt_candidate_breaks=candidates)
    assert candidates == 0  # Punkt never had a decision to make: its English model cannot matter


def test_preprocessing_matches_official_steps(py39, record):
    texts = captions(3000, seed=802)
    inputs = [{"text": text, "stem": stem} for text in texts for stem in (False, True)]
    reference = py39.run("preprocess", inputs, stopwords=sorted(STOPWORDS))
    stem = m.snowball_stemmer()
    mismatches = [(item, ours, expected) for item, expected in zip(inputs, reference)
                  if (ours := m.preprocess_caption(item["text"], STOPWORDS, stem if item["stem"] else None)) != expected]
    record("caption preprocess 2021+2022", py39, len(inputs), mismatches)


SUFFIXES = ["ational", "tional", "enci", "anci", "izer", "bli", "alli", "entli", "eli", "ousli", "ization", "ation",
            "ator", "alism", "iveness", "fulness", "ousness", "aliti", "iviti", "biliti", "logi", "fulli", "lessli",
            "li", "icate", "ative", "alize", "iciti", "ical", "ful", "ness", "al", "ance", "ence", "er", "ic", "able",
            "ible", "ant", "ement", "ment", "ent", "ism", "ate", "iti", "ous", "ive", "ize", "ion", "sion", "tion", "e",
            "ll", "ed", "edly", "ing", "ingly", "eed", "eedly", "s", "ss", "us", "ies", "ied", "'s", "'s'", "'", "’s",
            "y", "yy", "ly", "ously", "ful", "sses"]
STEMS = ["gener", "commun", "arsen", "comput", "tomograph", "lesi", "sky", "ski", "dy", "ly", "ty", "id", "gent",
         "ugl", "earl", "onl", "singl", "new", "how", "atla", "cosmo", "bia", "ande", "inn", "out", "cann", "herr",
         "earr", "proc", "exc", "succ", "hop", "happ", "bay", "boy", "say", "ayy", "yo", "y", "a", "ab", "abc",
         "fibros", "contrast", "enhanc", "malform", "arteriovenous", "ultrasound", "caf", "naï", "straß", "µ", "35"]


def stem_words(count: int, seed: int) -> list[str]:
    rng = random.Random(seed)
    words = [stem + suffix for stem in STEMS for suffix in [""] + SUFFIXES]
    for _ in range(count):
        kind = rng.random()
        if kind < 0.4:
            words.append(rng.choice(STEMS) + "".join(rng.choice(SUFFIXES) for _ in range(rng.randint(1, 3))))
        elif kind < 0.7:
            words.append("".join(rng.choice("aeiouybcdlmnrstgy'’") for _ in range(rng.randint(1, 12))))
        else:
            words.append("".join(rng.choice("aeiouyY") for _ in range(rng.randint(1, 8))) + rng.choice(SUFFIXES))
    return words + [word.upper() for word in words[:200]] + ["", "y", "Y", "yy", "'", "’", "''s"]


def test_snowball_stemmer_matches_nltk37(py39, record):
    words = stem_words(3000, seed=803)
    reference = py39.run("stem", words)
    stem = m.snowball_stemmer()
    mismatches = [(word, stem(word), expected) for word, expected in zip(words, reference) if stem(word) != expected]
    record("snowball stem (2021)", py39, len(words), mismatches)


TOKENS = ["ct", "mri", "chest", "mass", "lesion", "left", "right", "lobe", "35", "cm", "µm", "xray", "“", "—", "a"]


def token_pairs(count: int, seed: int) -> list[tuple[list[str], list[str]]]:
    """Reference/hypothesis token lists: exact copies, edits (drop, repeat, swap, insert), short and empty ones."""
    rng = random.Random(seed)
    pairs = [([], []), ([], ["ct"]), (["ct"], []), (["ct"], ["ct"]), (["a", "b"], ["a", "b"])]
    pairs += [(list("abcdefgh"[:n]), list("abcdefgh"[:k])) for n in range(9) for k in range(9)]
    for _ in range(count):
        vocabulary = TOKENS[:rng.randint(2, len(TOKENS))]
        reference = [rng.choice(vocabulary) for _ in range(rng.choice([rng.randint(0, 6), rng.randint(0, 60)]))]
        hypothesis = [token for token in reference if rng.random() < rng.choice([0.5, 0.9, 1.0])]
        hypothesis += [rng.choice(vocabulary) for _ in range(rng.randint(0, 5))]
        if rng.random() < 0.3 and len(hypothesis) > 1:
            i = rng.randrange(len(hypothesis) - 1)
            hypothesis[i], hypothesis[i + 1] = hypothesis[i + 1], hypothesis[i]
        pairs.append((reference, hypothesis) if rng.random() < 0.8 else (hypothesis, reference))
    return pairs


def test_bleu_matches_nltk37(py39, record):
    pairs = token_pairs(5000, seed=804)
    reference = py39.run("bleu", pairs)
    mismatches = [(pair, m.caption_bleu(*pair), expected) for pair, expected in zip(pairs, reference)
                  if m.caption_bleu(*pair) != expected]
    record("caption BLEU", py39, len(pairs), mismatches)


def test_rouge_tokenizer_and_rouge1_match_rouge_score_0_1_2(py39, record):
    texts = captions(2000, seed=805)
    reference_tokens = py39.run("rouge_tokenize", texts)
    mismatches = [(text, m.rouge_tokenize(text), expected) for text, expected in zip(texts, reference_tokens)
                  if m.rouge_tokenize(text) != expected]
    pairs = caption_pairs(2000, seed=806) + [(" ".join(a), " ".join(b)) for a, b in token_pairs(2000, seed=807)]
    pairs = [pair for pair in pairs if pair != ("", "")]  # the scorer is not called there (both empty -> 1)
    reference_f = py39.run("rouge1", pairs)
    mismatches += [(pair, m.rouge1_fmeasure(*pair), expected) for pair, expected in zip(pairs, reference_f)
                   if m.rouge1_fmeasure(*pair) != expected]
    record("ROUGE-1 tokenizer + F", py39, len(texts) + len(pairs), mismatches)


def test_per_image_caption_scores_end_to_end(py39, record):
    pairs = caption_pairs(3000, seed=808)
    reference = py39.run("caption_image", pairs, stopwords=sorted(STOPWORDS))
    stem = m.snowball_stemmer()
    mismatches = []
    for (gt, run), expected in zip(pairs, reference):
        gt22, run22 = m.preprocess_caption(gt, STOPWORDS), m.preprocess_caption(run, STOPWORDS)
        ours = {"bleu_2022": m.caption_bleu(gt22, run22), "rouge1_2022": m.caption_rouge1(gt22, run22),
                "bleu_2021": m.caption_bleu(m.preprocess_caption(gt, STOPWORDS, stem),
                                            m.preprocess_caption(run, STOPWORDS, stem))}
        if ours != expected:
            mismatches.append(((gt, run), ours, expected))
    nonzero = sum(1 for expected in reference if expected["bleu_2022"] > 1e-10)
    record("caption per-image scores", py39, len(pairs), mismatches, bleu_above_1e_10=nonzero)
