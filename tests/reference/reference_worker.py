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


def _encoded_index(index):
    """An index as the frame pieces compare it: none for a RangeIndex, else its dtype and values (a MultiIndex's
    values per level)."""
    import pandas as pd

    if isinstance(index, pd.RangeIndex):
        return None
    if isinstance(index, pd.MultiIndex):
        levels = [index.get_level_values(k) for k in range(index.nlevels)]
        return {"dtype": "multi", "levels": [{"dtype": str(level.dtype), "values": [_encoded(v) for v in level]}
                                             for level in levels]}
    return {"dtype": str(index.dtype), "values": [_encoded(v) for v in index]}


def pandas_frame(inputs, options):
    """`pd.read_csv(path)` of pandas 1.4.4, defaults, as the RibFrac evaluation calls it: per file the column names,
    the index (none for the default RangeIndex), each column's dtype and values, or the exception and its message."""
    import pandas as pd

    outputs = []
    for path in inputs:
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                frame = pd.read_csv(path)
        except Exception as error:  # the official code would stop here
            outputs.append({"error": [type(error).__name__, str(error).strip()]})
            continue
        outputs.append({"columns": [str(name) for name in frame.columns], "index": _encoded_index(frame.index),
                        "data": [{"dtype": str(frame.iloc[:, k].dtype),
                                  "values": [_encoded(v) for v in frame.iloc[:, k].tolist()]}
                                 for k in range(frame.shape[1])]})
    return outputs


def _ribfrac_case_metrics(case, gt_info, pred_info):
    """One case of ribfrac.md §2 from its matching (num_gt, num_pred, max_iou and hit_label per prediction label,
    given instead of volumes) and the case's CSV rows, with the pandas operations the official code performs:
    the frames built as ribfrac.md §2.1 says, the two left merges of ribfrac.md §2.3, the confusion matrix of
    ribfrac.md §4 with `.loc`."""
    import numpy as np
    import pandas as pd

    rows = ["Buckle", "Displaced", "Nondisplaced", "Segmental", "FN"]
    columns = ["Buckle", "Displaced", "Nondisplaced", "Segmental", "FP", "Ignore"]
    num_gt, num_pred = case["num_gt"], case["num_pred"]
    if num_pred == 0:
        metrics = pd.DataFrame()
    elif num_gt == 0:
        metrics = pd.DataFrame([{"pred_label": i, "max_iou": 0, "hit_label": 0, "gt_class": "FP", "num_gt": 0}
                                for i in range(1, num_pred + 1)])
        metrics = metrics.merge(pred_info[["label_id", "label_code", "confidence"]], how="left",
                                left_on="pred_label", right_on="label_id")
        metrics.rename({"label_code": "pred_class", "confidence": "prob"}, axis=1, inplace=True)
        metrics.drop(["label_id"], axis=1, inplace=True)
    else:
        metrics = pd.DataFrame(np.zeros((num_pred, 3)), columns=["pred_label", "max_iou", "hit_label"])
        metrics["pred_label"] = np.arange(1, num_pred + 1)
        metrics["max_iou"] = np.array(case["max_iou"], dtype=np.float64)
        metrics["hit_label"] = np.array(case["argmax"], dtype=np.int64) + 1
        metrics["hit_label"] = metrics.apply(lambda x: x["hit_label"] if x["max_iou"] > 0 else 0, axis=1)
        metrics = metrics.merge(pred_info[["label_id", "label_code", "confidence"]], how="left",
                                left_on="pred_label", right_on="label_id")
        metrics.rename({"confidence": "prob", "label_code": "pred_class"}, axis=1, inplace=True)
        metrics.drop("label_id", axis=1, inplace=True)
        metrics = metrics.merge(gt_info[["label_id", "label_code"]], how="left", left_on="hit_label",
                                right_on="label_id")
        metrics.rename({"label_code": "gt_class"}, axis=1, inplace=True)
        metrics.drop("label_id", axis=1, inplace=True)
        metrics["gt_class"] = metrics.apply(lambda x: "FP" if pd.isna(x["gt_class"]) else x["gt_class"], axis=1)
    matrix = pd.DataFrame(np.zeros((5, 6)), index=rows, columns=columns)
    for i in range(len(metrics)):
        gt_class, pred_class = metrics.gt_class[i], metrics.pred_class[i]
        if pred_class not in ("Background", "Ignore"):
            matrix.loc[pred_class, "FP" if gt_class == "Background" else gt_class] += 1
    for i in range(len(gt_info)):
        if len(metrics) == 0 or gt_info.label_id[i] not in list(metrics.hit_label):
            if gt_info.label_code[i] != "Background":
                matrix.loc["FN", gt_info["label_code"][i]] += 1
    return metrics, matrix


def _ribfrac_scores(gt_path, pred_path, cases):
    """ribfrac.md §1 to §5 on the two CSV files and per-case matchings: `pd.read_csv`, the label code mapping, the
    rows selected per case, ribfrac.md §2 (_ribfrac_case_metrics), the FROC of ribfrac.md §3 (`prob >= t`, the key
    recalls from `sort_values("fp")`) and the F1s of ribfrac.md §5; an exception where the official code fails."""
    import numpy as np
    import pandas as pd

    codes = {0: "Background", 1: "Displaced", 2: "Nondisplaced", 3: "Buckle", 4: "Segmental", -1: "Ignore"}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        gt_info, pred_info = pd.read_csv(gt_path), pd.read_csv(pred_path)
        gt_info["label_code"] = gt_info["label_code"].map(codes)
        pred_info["label_code"] = pred_info["label_code"].map(codes)
        frames, num_gts, matrix = [], [], np.zeros((5, 6))
        for case in cases:
            pid = case["id"]
            case_gt = gt_info.loc[gt_info.public_id == pid].reset_index(drop=True)
            case_pred = pred_info.loc[pred_info.public_id == pid].reset_index(drop=True)
            metrics, case_matrix = _ribfrac_case_metrics(case, case_gt, case_pred)
            frames.append(metrics)
            num_gts.append(case["num_gt"])
            matrix = matrix + case_matrix.values
        fp, recall = [], []
        for threshold in np.arange(0, 1, 0.01):
            positives = [df.loc[df["prob"] >= threshold] for df in frames if len(df) > 0]
            tp = sum(len(df.loc[df["max_iou"] > 0.2, "hit_label"].unique()) for df in positives)
            false = sum(len(df) - len(df.loc[df["max_iou"] > 0.2]) for df in positives)
            fp.append((false + 1e-8) / (len(frames) + 1e-8))
            recall.append((tp + 1e-8) / (sum(num_gts) + 1e-8))
        curve = pd.DataFrame({"fp": fp, "recall": recall}).sort_values("fp")
        key_recall = []
        for key in (0.5, 1, 2, 4, 8):
            less, more = curve.loc[curve.fp <= key], curve.loc[curve.fp >= key]
            if len(less) == 0:
                key_recall.append(0.0)
            elif len(more) == 0:
                key_recall.append(float(curve.recall.max()))
            else:
                fp0, fp1 = less["fp"].values[-1], more["fp"].values[0]
                r0, r1 = less["recall"].values[-1], more["recall"].values[0]
                key_recall.append(float(r0 + (r1 - r0) * ((key - fp0) / (fp1 - fp0 + 1e-8))))
        c = matrix[:, :-1]
        tp = np.diag(c)[:-1]
        fps = np.array([c[i, :].sum() - tp[i] for i in range(4)])
        fns = np.array([c[:, i].sum() - tp[i] for i in range(4)])
        p, r = tp / (tp + fps + 1e-8), tp / (tp + fns + 1e-8)
        overall = np.mean((2 * p * r) / (p + r + 1e-8))
        p = tp / (tp + (fps - c[:-1, -1]) + 1e-8)
        target = np.mean((2 * p * r) / (p + r + 1e-8))
        r = tp / (tp + (fns - c[-1, :-1]) + 1e-8)
        prediction = np.mean((2 * p * r) / (p + r + 1e-8))
    return {"froc_average": float(np.mean(key_recall)), "key_recall": key_recall, "macro_f1": float(overall),
            "target_aware_f1": float(target), "prediction_aware_f1": float(prediction),
            "matrix": matrix.astype(int).tolist()}


def ribfrac_csv_scores(inputs, options):
    """_ribfrac_scores on the two CSV files of each input and per-case matchings given instead of volumes; the
    scores, or the exception."""
    outputs = []
    for item in inputs:
        try:
            outputs.append(_ribfrac_scores(item["gt"], item["pred"], item["cases"]))
        except Exception as error:  # the official code would stop here
            outputs.append({"error": type(error).__name__})
    return outputs


def _official_volumes(root):
    """`NiiDataset(root)` (ribfrac.md §1.1): the names ending in .nii or .nii.gz, sorted by full path, and their
    ids."""
    import os
    import re

    files = sorted(os.path.join(root, name) for name in os.listdir(root)
                   if name.endswith(".nii") or name.endswith(".nii.gz"))
    return files, [re.sub(r"(\.nii)|(\.gz)|(-label)", "", os.path.basename(path)) for path in files]


def _official_iou(gt, pred):
    """The official connected-component IoU (ribfrac.md §2.2) with scikit-image: `label` of the union and of the
    intersection (default, full connectivity), `regionprops` of the intersection, each region's `coords[0]` as its
    anchor, `iou[g-1, p-1] = area / ((union == u).sum() + 1e-8)` assigned in region order."""
    import numpy as np
    from skimage.measure import label, regionprops

    iou = np.zeros((int(gt.max()), int(pred.max())))
    intersection = np.logical_and(gt > 0, pred > 0)
    union = label(np.logical_or(gt > 0, pred > 0))
    for region in regionprops(label(intersection)):
        anchor = tuple(region.coords[0])
        iou[gt[anchor] - 1, pred[anchor] - 1] = region.area / ((union == union[anchor]).sum() + 1e-8)
    return iou


def ribfrac_folders(inputs, options):
    """The official evaluation of a ground-truth and a prediction folder (ribfrac.md §1, §2): both listed as
    `NiiDataset` lists them (the two `assert`s), the first `.csv` of `os.listdir`, each pair of volumes read with
    `nib.load(f).get_fdata().astype(np.uint8)` (shapes asserted equal), matched (ribfrac.md §2.2) and scored
    (_ribfrac_scores); per input the scores and whether a volume held values the uint8 cast wraps or cannot take, or
    the exception."""
    import os

    import nibabel as nib
    import numpy as np

    outputs = []
    for item in inputs:
        wrapped = False
        try:
            gt_files, gt_ids = _official_volumes(item["gt"])
            pred_files, pred_ids = _official_volumes(item["pred"])
            assert len(pred_files) == len(gt_files)
            assert gt_ids == pred_ids
            gt_csv = [os.path.join(item["gt"], x) for x in os.listdir(item["gt"]) if x.endswith(".csv")][0]
            pred_csv = [os.path.join(item["pred"], x) for x in os.listdir(item["pred"]) if x.endswith(".csv")][0]
            cases = []
            for gt_path, pred_path, pid in zip(gt_files, pred_files, gt_ids):
                volumes = []
                for path in (gt_path, pred_path):
                    data = nib.load(path).get_fdata()
                    wrapped = wrapped or not np.isfinite(data).all() or bool((data <= -1).any() or (data >= 256).any())
                    with np.errstate(invalid="ignore", over="ignore"):
                        volumes.append(data.astype(np.uint8))
                gt, pred = volumes
                assert gt.shape == pred.shape
                num_gt, num_pred = int(gt.max()), int(pred.max())
                case = {"id": pid, "num_gt": num_gt, "num_pred": num_pred, "max_iou": [0.0] * num_pred,
                        "argmax": [0] * num_pred}
                if num_gt and num_pred:
                    iou = _official_iou(gt, pred)
                    case["max_iou"], case["argmax"] = iou.max(axis=0).tolist(), iou.argmax(axis=0).tolist()
                cases.append(case)
            scores = _ribfrac_scores(gt_csv, pred_csv, cases)
        except Exception as error:  # the official code would stop here
            outputs.append({"error": type(error).__name__, "wrapped": wrapped})
            continue
        scores["wrapped"] = wrapped
        outputs.append(scores)
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
                        "min": repr(float(data.min() if data.size else 0)),
                        "max": repr(float(data.max() if data.size else 0)),
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
                                                             box_iou_int64, pandas_frame,
                                                             ribfrac_csv_scores)})


def ribfrac_iou(inputs, options):
    """The official connected-component IoU (ribfrac.md §2.2, _official_iou); per input (uint8 ground truth and
    prediction as flat C-order lists and a shape) the matrix, each value as repr."""
    import numpy as np

    outputs = []
    for item in inputs:
        shape = tuple(item["shape"])
        iou = _official_iou(np.array(item["gt"], dtype=np.uint8).reshape(shape),
                            np.array(item["pred"], dtype=np.uint8).reshape(shape))
        outputs.append([[repr(float(v)) for v in row] for row in iou])
    return outputs


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


PIECES.update({function.__name__: function for function in (parse_numbers, csv_rows, ribfrac_iou,
                                                             ribfrac_folders)})


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
