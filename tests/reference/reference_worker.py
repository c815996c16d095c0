"""The reference side of tests/reference: runs INSIDE a reference virtual environment (Python 3.9 or 3.7, the libraries
of requirements/reference-py*.txt), never imports medchallenge, and calls the libraries exactly as the official
scorers did (docs/metrics/*.md). Reads one job {"piece": name, "inputs": [...], "options": {...}} as JSON on stdin
and writes {"outputs": [...], "versions": {...}} as JSON on stdout, one output per input. Python 3.7 syntax.
"""

import json
import string
import sys
import warnings

PUNCTUATION_DELETION = str.maketrans("", "", string.punctuation)


def _nltk():
    """NLTK 3.7 with `word_tokenize` runnable without nltk_data.

    `word_tokenize` = Punkt `sent_tokenize` (model `tokenizers/punkt/english.pickle` from nltk_data, which cannot be
    installed here: only PyPI is reachable) + NLTKWordTokenizer per sentence. The model is replaced by an untrained
    PunktSentenceTokenizer (same 3.7 code, empty parameters). The model's parameters (abbreviations, collocations,
    sentence starters, orthographic context) are read only when deciding a candidate break, and a candidate needs
    one of . ? ! (PunktLanguageVars.sent_end_chars): `punkt_candidates` reports how many the text has, and the
    tests require 0 for every input, so the English model could not have changed any result.
    """
    import nltk.tokenize
    from nltk.tokenize.punkt import PunktSentenceTokenizer

    untrained = PunktSentenceTokenizer()
    nltk.tokenize.load = lambda resource_url: untrained
    return nltk, untrained


def word_tokenize(inputs, options):
    nltk, punkt = _nltk()
    outputs = []
    for text in inputs:
        cleaned = text.lower().translate(PUNCTUATION_DELETION)
        outputs.append({"tokens": nltk.tokenize.word_tokenize(cleaned),
                        "punkt_candidates": len(punkt._match_potential_end_contexts(cleaned))})
    return outputs


def _official_words(text, stops, stemmer):
    """The official caption pre-processing: steps 1-5 of imageclef-caption-2022.md §2.2, and of
    imageclef-caption-2021.md §2.2 with stemming."""
    import nltk

    text = text.lower()
    text = text.translate(PUNCTUATION_DELETION)
    words = nltk.tokenize.word_tokenize(text)
    words = [word for word in words if word.lower() not in stops]
    if stemmer is not None:
        words = [stemmer.stem(word) for word in words]
    return words


def preprocess(inputs, options):
    from nltk.stem.snowball import SnowballStemmer

    _nltk()
    stops = set(options["stopwords"])
    stemmer = SnowballStemmer("english")
    return [_official_words(item["text"], stops, stemmer if item["stem"] else None) for item in inputs]


def stem(inputs, options):
    from nltk.stem.snowball import SnowballStemmer

    stemmer = SnowballStemmer("english")
    return [stemmer.stem(word) for word in inputs]


def _official_bleu(reference, candidate):
    from nltk.translate.bleu_score import SmoothingFunction, sentence_bleu

    if len(reference) == 0 and len(candidate) == 0:
        return 1
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return sentence_bleu([reference], candidate, smoothing_function=SmoothingFunction().method0)


def bleu(inputs, options):
    return [_official_bleu(reference, candidate) for reference, candidate in inputs]


def _rouge_scorer():
    from rouge_score import rouge_scorer

    return rouge_scorer.RougeScorer(["rouge1"], use_stemmer=False)


def rouge1(inputs, options):
    scorer = _rouge_scorer()
    return [scorer.score(target, prediction)["rouge1"].fmeasure for target, prediction in inputs]


def rouge_tokenize(inputs, options):
    from rouge_score import tokenize

    return [tokenize.tokenize(text, None) for text in inputs]


def caption_image(inputs, options):
    """Per-image scores of both editions from the raw captions: BLEU 2022, ROUGE-1 2022, BLEU 2021 (stemmed)."""
    from nltk.stem.snowball import SnowballStemmer

    _nltk()
    stops = set(options["stopwords"])
    stemmer = SnowballStemmer("english")
    scorer = _rouge_scorer()
    outputs = []
    for gt, run in inputs:
        reference, candidate = _official_words(gt, stops, None), _official_words(run, stops, None)
        target, prediction = " ".join(reference), " ".join(candidate)
        rouge = 1 if not target and not prediction else scorer.score(target, prediction)["rouge1"].fmeasure
        outputs.append({
            "bleu_2022": _official_bleu(reference, candidate),
            "rouge1_2022": rouge,
            "bleu_2021": _official_bleu(_official_words(gt, stops, stemmer), _official_words(run, stops, stemmer)),
        })
    return outputs


def _f1(truth, predicted):
    """The official per-image F1: y_true/y_pred over the sorted union, sklearn binary f1_score."""
    from sklearn.metrics import f1_score

    union = sorted(set(truth + predicted))
    y_true = [int(concept in truth) for concept in union]
    y_pred = [int(concept in predicted) for concept in union]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return float(f1_score(y_true, y_pred, average="binary"))


def concept_f1_2022(inputs, options):
    """imageclef-caption-2022.md §1.2, one image: tuples of stripped concepts, upper-cased; every image counts."""
    outputs = []
    for ground_truth, prediction in inputs:
        predicted = tuple(concept.upper() for concept in prediction)
        truth = tuple(concept.upper() for concept in ground_truth)
        outputs.append(None if len(truth) == 0 else _f1(truth, predicted))
    return outputs


def concept_f1_2021(inputs, options):
    """imageclef-caption-2021.md §1.2, one image: whole fields upper-cased, split on ';' unstripped; empty GT ->
    excluded (None)."""
    outputs = []
    for ground_truth, prediction in inputs:
        predicted, truth = prediction.upper(), ground_truth.upper()
        truth = [] if truth.strip() == "" else truth.split(";")
        predicted = [] if predicted.strip() == "" else predicted.split(";")
        outputs.append(None if len(truth) == 0 else _f1(tuple(truth), tuple(predicted)))
    return outputs


def roc_auc(inputs, options):
    import numpy as np
    from sklearn.metrics import auc, roc_curve

    outputs = []
    for item in inputs:
        fpr, tpr, _ = roc_curve(np.asarray(item["y"]), np.asarray(item["p"], dtype=np.float64))
        outputs.append({"fpr": fpr.tolist(), "tpr": tpr.tolist(), "auc": float(auc(fpr, tpr))})
    return outputs


def argsort(inputs, options):
    import numpy as np

    return [np.argsort(np.asarray(values, dtype=np.float64)).tolist() for values in inputs]


def points_in_poly(inputs, options):
    import numpy as np
    from skimage.measure import points_in_poly as official

    outputs = []
    for item in inputs:
        vertices = np.asarray(item["vertices"], dtype=np.float64).reshape(-1, 2)
        points = np.asarray(item["points"], dtype=np.float64).reshape(-1, 2)
        outputs.append([bool(inside) for inside in official(points, vertices)])
    return outputs


PIECES = {function.__name__: function for function in (
    word_tokenize, preprocess, stem, bleu, rouge1, rouge_tokenize, caption_image, concept_f1_2022, concept_f1_2021,
    roc_auc, argsort, points_in_poly)}


def _encoded(value):
    """A parsed cell for JSON, exactly: ints and floats as text (repr keeps -0.0 and the last bit)."""
    if isinstance(value, str):
        return ["str", value]
    if isinstance(value, (bool, __import__("numpy").bool_)):
        return ["bool", bool(value)]
    if isinstance(value, float) or hasattr(value, "dtype") and value.dtype.kind == "f":
        return ["float", repr(float(value))]
    return ["int", str(int(value))]


def pandas_columns(inputs, options):
    """pandas 1.4.4 `read_csv` with its defaults, as the RibFrac evaluation calls it: per input (columns of equal
    length, the cells as written) one CSV, every field quoted so the tokenizer hands each cell over as it is;
    per column its dtype and values."""
    import csv
    import io

    import pandas as pd

    outputs = []
    for columns in inputs:
        buffer = io.StringIO()
        writer = csv.writer(buffer, quoting=csv.QUOTE_ALL, lineterminator="\n")
        writer.writerow(["c%d" % k for k in range(len(columns))])
        writer.writerows(zip(*columns))
        frame = pd.read_csv(io.StringIO(buffer.getvalue()))
        outputs.append([{"dtype": str(frame[name].dtype), "values": [_encoded(v) for v in frame[name].tolist()]}
                        for name in frame.columns])
    return outputs


def ribfrac_pred_csv(inputs, options):
    """The official reading of a prediction CSV file (ribfrac.md §1.3): `pd.read_csv(path)`; per column named as
    needed (written with spaces or not) its dtype and, per row, the value and the class `map(label_code_dict)` gives."""
    import pandas as pd

    codes = {0: "Background", 1: "Displaced", 2: "Nondisplaced", 3: "Buckle", 4: "Segmental", -1: "Ignore"}
    outputs = []
    for path in inputs:
        frame = pd.read_csv(path)
        names = {str(name).strip(): name for name in frame.columns}
        out = {"exact_names": all(name in frame.columns for name in ("public_id", "label_id", "confidence",
                                                                     "label_code"))}
        for name in ("public_id", "label_id", "confidence", "label_code"):
            column = frame[names[name]]
            out[name] = {"dtype": str(column.dtype), "values": [_encoded(v) for v in column.tolist()]}
        out["classes"] = [None if isinstance(c, float) else c for c in frame[names["label_code"]].map(codes)]
        outputs.append(out)
    return outputs


def nifti_labels(inputs, options):
    """The official volume reading (ribfrac.md §1.2): `nibabel.load(path).get_fdata()`, then `.astype(np.uint8)`;
    per file the shape, whether every value is finite, the extremes and a SHA-256 of the uint8 voxels (x fastest)."""
    import hashlib

    import nibabel as nib
    import numpy as np

    outputs = []
    for path in inputs:
        try:
            data = nib.load(path).get_fdata()
        except Exception as error:  # the official code would stop here
            outputs.append({"error": type(error).__name__})
            continue
        with np.errstate(invalid="ignore", over="ignore"):
            labels = data.astype(np.uint8)
        outputs.append({"shape": list(data.shape), "finite": bool(np.isfinite(data).all()),
                        "min": repr(float(data.min())), "max": repr(float(data.max())),
                        "sha256": hashlib.sha256(labels.tobytes(order="F")).hexdigest()})
    return outputs


def box_iou_int64(inputs, options):
    """The TB caverns box IoU (tb-caverns-2022.md §2) on numpy 1.22.4 int64 coordinates, as the official code
    computes it: volumes and intersection in int64 (wrapping), the IoU a float64 division."""
    import numpy as np

    outputs = []
    for a, b in inputs:
        try:
            a, b = np.array(a, dtype=np.int64), np.array(b, dtype=np.int64)
        except OverflowError:
            outputs.append("OverflowError")
            continue
        with np.errstate(all="ignore"):
            xi1, yi1, zi1 = max(a[0], b[0]), max(a[1], b[1]), max(a[2], b[2])
            xi2, yi2, zi2 = min(a[3], b[3]), min(a[4], b[4]), min(a[5], b[5])
            if xi2 <= xi1 or yi2 <= yi1 or zi2 <= zi1:
                outputs.append(repr(0.0))
                continue
            inter = (xi2 - xi1) * (yi2 - yi1) * (zi2 - zi1)
            vol_a = (a[3] - a[0]) * (a[4] - a[1]) * (a[5] - a[2])
            vol_b = (b[3] - b[0]) * (b[4] - b[1]) * (b[5] - b[2])
            outputs.append(repr(float(inter / (vol_a + vol_b - inter))))
    return outputs


PIECES.update({function.__name__: function for function in (pandas_columns, ribfrac_pred_csv, nifti_labels,
                                                             box_iou_int64)})


def parse_numbers(inputs, options):
    """`int(text)` (base 10) or `float(text)` (options["kind"]) of each text, as the official code calls them on
    participant text: the value as text (str of an int, repr of a float) or "ValueError"."""
    parse = {"int": int, "float": float}[options["kind"]]
    outputs = []
    for text in inputs:
        try:
            value = parse(text)
        except ValueError:
            outputs.append("ValueError")
            continue
        outputs.append(str(value) if isinstance(value, int) else repr(value))
    return outputs


def csv_rows(inputs, options):
    """The official reading of a caption or TB file: `csv.reader(..., quoting=QUOTE_NONE)` over the file opened as
    text (options["newline"]: None, as the caption evaluators, or "", as the TB caverns evaluator); per input (the
    file's text, written as UTF-8) the rows, or the error the reader raised ("Error: line contains NUL") and the
    reader's line number then."""
    import csv
    import os
    import tempfile

    outputs = []
    handle, path = tempfile.mkstemp(suffix=".csv")
    os.close(handle)
    try:
        for text in inputs:
            with open(path, "w", encoding="utf-8", newline="") as out:
                out.write(text)
            with open(path, encoding="utf-8", newline=options["newline"]) as source:
                reader = csv.reader(source, delimiter=options["delimiter"], quoting=csv.QUOTE_NONE)
                try:
                    outputs.append({"rows": list(reader)})
                except csv.Error as error:
                    outputs.append({"error": "%s: %s" % (type(error).__name__, error), "line": reader.line_num})
    finally:
        os.unlink(path)
    return outputs


PIECES.update({function.__name__: function for function in (parse_numbers, csv_rows)})


def versions():
    """Versions of the reference libraries that are installed here."""
    found = {"python": "%d.%d.%d" % sys.version_info[:3]}
    for module in ("nltk", "rouge_score", "sklearn", "numpy", "scipy", "skimage", "pandas", "nibabel"):
        try:
            found[module] = __import__(module).__version__
        except ImportError:
            pass
        except AttributeError:
            found[module] = "installed"
    return found


def main():
    job = json.load(sys.stdin)
    outputs = PIECES[job["piece"]](job["inputs"], job.get("options", {}))
    json.dump({"outputs": outputs, "versions": versions()}, sys.stdout)


if __name__ == "__main__":
    main()
