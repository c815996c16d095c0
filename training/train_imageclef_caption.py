"""Train the ImageCLEFmed Caption model on synthetic figures and export it to ONNX with its caption bank.

    PYTHONPATH=$PWD/shared .venv-train/bin/python training/train_imageclef_caption.py \
        --out algorithms/imageclef_caption/model/imageclef_caption.onnx --seed 0

One small CNN encoder (PyTorch, CPU, seeded) with two heads: a multi-label concept head (binary cross-entropy) and
an embedding trained so that the cosine similarity of two figures approaches the word and bigram agreement of their
captions. Figures come from `medchallenge.synth.imageclef_caption_images`, both editions, train split with generator
seed 10000+seed and valid split with 20000+seed; the benchmark's held-out test figures use small seeds, which
training never sees. Each figure goes through a JPEG round trip and the algorithm's own reading and resizing.

After training: per-concept thresholds maximising the mean per-figure F1 on the valid split; the caption bank (the
first `--bank-figures` training captions of each edition with their concepts, edition, official BLEU tokens and
embeddings: the bank matrix is part of the ONNX graph, which outputs the similarity to every bank entry); each
edition's retrieval parameters (neighbours, similarity weight, concept weight of the minimum-Bayes-risk choice)
chosen for the best official BLEU on its valid figures. All of it goes into the model's metadata. With the defaults
about 20 minutes on 2 CPU cores (figures 2 minutes, 20 epochs of about 45 s, tuning 2 minutes). Needs torch, onnx,
numpy, pillow (and nltk for the 2021 BLEU's stemmer).
"""

from __future__ import annotations

import argparse
import io
import json
import logging
import multiprocessing
import random
import re
import time
from dataclasses import asdict
from pathlib import Path

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

from onnx_export import export_onnx

from medchallenge.algorithms.imageclef_caption import (
    META_BANK,
    META_CONCEPTS,
    META_RETRIEVAL,
    META_THRESHOLDS,
    Retrieval,
    bleu_matrix,
    choose_caption,
    fit_square,
    read_figure,
    run_file_caption,
    select_concepts,
)
from medchallenge.metrics.imageclef_caption import (
    caption_bleu,
    load_stopwords,
    preprocess_caption,
    set_f1,
    snowball_stemmer,
)
from medchallenge.onnx_session import META_PREPROCESSING
from medchallenge.synth.imageclef_caption_images import figure_ids, figure_rng, generate_figure, vocabulary

log = logging.getLogger("train_imageclef_caption")

TRAIN_SEED_OFFSET = 10_000
VALIDATION_SEED_OFFSET = 20_000
EDITIONS = ("2022", "2021")
MEAN, STD = 0.5, 0.25
EMBEDDING = 64


def figure_example(job: tuple[str, str, int, int, str, int]) -> tuple[np.ndarray, list[str], str]:
    """One synthetic figure as the algorithm sees it (JPEG round trip, its reader, its square of `size` pixels), its
    concepts and caption."""
    edition, split, seed, index, figure_id, size = job
    figure, image, text = generate_figure(edition, split, seed, index, figure_id)
    buffer = io.BytesIO()
    image.save(buffer, format="JPEG", quality=figure_rng(seed, split, "jpeg", index).randint(75, 95))
    buffer.seek(0)
    return fit_square(read_figure(buffer), size), figure.concepts, text


def make_split(split: str, seed: int, count: int, size: int, workers: int, cache: Path | None) -> dict:
    """Both editions' figures of a split (read from `cache` when an earlier run with the same arguments wrote it)."""
    cached = cache / f"{split}-{seed}-{count}-{size}.npz" if cache else None
    if cached and cached.exists():
        with np.load(cached, allow_pickle=False) as stored:
            data = {"images": stored["images"], **json.loads(str(stored["labels"]))}
        log.info("%s split: %d figures from %s", split, len(data["images"]), cached)
        return data
    jobs = [(edition, split, seed, index, figure_id, size) for edition in EDITIONS
            for index, figure_id in enumerate(figure_ids(edition, split, count))]
    started = time.perf_counter()
    with multiprocessing.Pool(workers) as pool:
        examples = pool.map(figure_example, jobs, chunksize=16)
    log.info("%s split: %d figures in %.0f s", split, len(jobs), time.perf_counter() - started)
    labels = {"concepts": [e[1] for e in examples], "captions": [e[2] for e in examples],
              "editions": [job[0] for job in jobs]}
    data = {"images": np.stack([e[0] for e in examples]), **labels}
    if cached:
        cache.mkdir(parents=True, exist_ok=True)
        np.savez(cached, images=data["images"], labels=json.dumps(labels))
    return data


def conv(cin: int, cout: int, stride: int = 1) -> nn.Sequential:
    return nn.Sequential(nn.Conv2d(cin, cout, 3, stride, 1, bias=False), nn.BatchNorm2d(cout), nn.ReLU(inplace=True))


class FigureEncoder(nn.Module):
    """A small CNN (a stride-2 stem, then stages of stride 2: a 6 x 6 map from 192 px) with a concept head and a
    normalised embedding head, both on the average and the maximum of the last feature map (the maximum keeps a small
    finding's response)."""

    def __init__(self, concepts: int, widths: tuple[int, ...] = (32, 64, 96, 128)):
        super().__init__()
        layers, cin = [conv(3, 16, 2)], 16
        for stage, width in enumerate(widths):
            layers += [conv(cin, width, 2)] + ([conv(width, width)] if stage < len(widths) - 1 else [])
            cin = width
        self.features = nn.Sequential(*layers)
        self.concept_head = nn.Linear(2 * cin, concepts)
        self.embedding_head = nn.Linear(2 * cin, EMBEDDING)

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        features = self.features(x)
        pooled = torch.cat([features.mean(dim=(2, 3)), features.amax(dim=(2, 3))], dim=1)
        return self.concept_head(pooled), F.normalize(self.embedding_head(pooled), dim=1)


class ExportedModel(nn.Module):
    """What the ONNX file computes: concept probabilities and the similarity to every caption-bank entry."""

    def __init__(self, encoder: FigureEncoder, bank: torch.Tensor):
        super().__init__()
        self.encoder = encoder
        self.register_buffer("bank", bank)

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        logits, embedding = self.encoder(x)
        return torch.sigmoid(logits), embedding @ self.bank.T


def to_tensor(images: np.ndarray) -> torch.Tensor:
    return (torch.from_numpy(images).float().permute(0, 3, 1, 2) / 255.0 - MEAN) / STD


def multi_hot(concepts: list[list[str]], vocabulary_cuis: list[str]) -> np.ndarray:
    index = {c: k for k, c in enumerate(vocabulary_cuis)}
    target = np.zeros((len(concepts), len(vocabulary_cuis)), np.float32)
    for row, cuis in enumerate(concepts):
        target[row, [index[c] for c in cuis]] = 1.0
    return target


def caption_terms(text: str) -> set:
    """A caption's lower-case words and word bigrams."""
    words = re.findall(r"[a-z0-9]+", text.lower())
    return set(words) | set(zip(words, words[1:]))


def term_agreement(a: set, b: set) -> float:
    """Dice agreement of two `caption_terms` sets."""
    return 2 * len(a & b) / max(len(a) + len(b), 1)


def caption_similarity(words: list[set], rows: np.ndarray) -> torch.Tensor:
    """The embedding's target: word and bigram agreement of the captions of the batch's figures."""
    n = len(rows)
    target = np.eye(n, dtype=np.float32)
    for a in range(n):
        for b in range(a + 1, n):
            target[a, b] = target[b, a] = term_agreement(words[rows[a]], words[rows[b]])
    return torch.from_numpy(target)


def train(data: dict, valid: dict, cuis: list[str], epochs: int, seed: int, widths: tuple[int, ...]) -> FigureEncoder:
    """The encoder trained on `data`; after each epoch the log says how many `valid` figures get their exact
    concept set at threshold 0.5 (progress only: nothing is chosen on it here)."""
    torch.manual_seed(seed)
    model = FigureEncoder(len(cuis), widths)
    images, targets = data["images"], torch.from_numpy(multi_hot(data["concepts"], cuis))
    words = [caption_terms(c) for c in data["captions"]]
    names = np.asarray(cuis)
    batch, steps = 64, epochs * (len(images) // 64)
    optimizer = torch.optim.AdamW(model.parameters(), lr=3e-3, weight_decay=1e-4)
    schedule = torch.optim.lr_scheduler.OneCycleLR(optimizer, max_lr=3e-3, total_steps=steps)
    rng = np.random.default_rng(seed)
    for epoch in range(epochs):
        model.train()
        order, started, losses = rng.permutation(len(images)), time.perf_counter(), []
        for start in range(0, len(order) - batch + 1, batch):
            rows = order[start:start + batch]
            x = to_tensor(images[rows])
            if rng.random() < 0.5:
                x = x.flip(3)  # left-right mirror: nothing in the captions depends on it
            logits, embedding = model(x)
            concept_loss = F.binary_cross_entropy_with_logits(logits, targets[rows])
            embedding_loss = F.mse_loss(embedding @ embedding.T, caption_similarity(words, rows))
            loss = concept_loss + embedding_loss
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            schedule.step()
            losses.append((concept_loss.item(), embedding_loss.item()))
        mean = np.mean(losses, axis=0)
        probabilities, _ = encode(model.eval(), valid["images"])
        exact = np.mean([set(names[p >= 0.5]) == set(c) for p, c in zip(probabilities, valid["concepts"])])
        log.info("epoch %d/%d: concept loss %.4f, embedding loss %.4f, valid exact concept sets %.3f (%.0f s)",
                 epoch + 1, epochs, mean[0], mean[1], exact, time.perf_counter() - started)
    return model.eval()


@torch.no_grad()
def encode(model: FigureEncoder, images: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    probabilities, embeddings = [], []
    for start in range(0, len(images), 256):
        logits, embedding = model(to_tensor(images[start:start + 256]))
        probabilities.append(torch.sigmoid(logits).numpy())
        embeddings.append(embedding.numpy())
    return np.concatenate(probabilities), np.concatenate(embeddings)


def tune_thresholds(probabilities: np.ndarray, concepts: list[list[str]], cuis: list[str]) -> np.ndarray:
    """Per-concept thresholds maximising the mean per-figure F1 (two rounds of coordinate ascent)."""
    thresholds = np.full(len(cuis), 0.5, np.float32)
    truth = [set(c) for c in concepts]

    def mean_f1(t: np.ndarray) -> float:
        return float(np.mean([set_f1(g, select_concepts(p, t, cuis)) for p, g in zip(probabilities, truth)]))

    best = mean_f1(thresholds)
    for _ in range(2):
        for k in range(len(cuis)):
            for value in (0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8):
                trial = thresholds.copy()
                trial[k] = value
                score = mean_f1(trial)
                if score > best:
                    best, thresholds = score, trial
    log.info("thresholds tuned: mean F1 %.4f on the valid split", best)
    return thresholds


def official_tokens(text: str, edition: str) -> list[str]:
    """The tokens the edition's official BLEU compares (2021: stemmed)."""
    return preprocess_caption(text, load_stopwords(), snowball_stemmer() if edition == "2021" else None)


def official_bleu(references: list[str], hypotheses: list[str], edition: str) -> float:
    return float(np.mean([caption_bleu(official_tokens(r, edition), official_tokens(h, edition))
                          for r, h in zip(references, hypotheses)]))


def tune_retrieval(valid: dict, probabilities: np.ndarray, similarity: np.ndarray, bank: dict,
                   thresholds: np.ndarray, cuis: list[str]) -> tuple[dict[str, Retrieval], dict[str, float]]:
    """Each edition's retrieval parameters with the best mean official BLEU on its valid figures."""
    bank_concepts = [frozenset(cuis[k] for k in ks) for ks in bank["concepts"]]
    bank_editions = np.asarray(bank["editions"])
    predicted = [frozenset(select_concepts(p, thresholds, cuis)) for p in probabilities]
    best, best_scores = {}, {}
    for edition in EDITIONS:
        rows = [i for i, e in enumerate(valid["editions"]) if e == edition]
        references = [valid["captions"][i] for i in rows]
        candidates = np.flatnonzero(bank_editions == edition)
        bleu = bleu_matrix([tuple(bank["tokens"][i]) for i in candidates])
        for neighbours in (1, 10, 20, 40, 60):
            for similarity_weight in (0.0, 5.0, 10.0, 20.0, 40.0):
                for concept_weight in (0.0, 0.1, 0.3, 1.0, 3.0):
                    if neighbours == 1 and (similarity_weight or concept_weight):
                        continue
                    retrieval = Retrieval(neighbours, similarity_weight, concept_weight)
                    chosen = [bank["captions"][choose_caption(similarity[i], candidates, bank_concepts, bleu,
                                                              predicted[i], retrieval)] for i in rows]
                    score = official_bleu(references, [run_file_caption(c) for c in chosen], edition)
                    log.info("%s retrieval %s: BLEU %.4f", edition, retrieval, score)
                    if edition not in best or score > best_scores[edition]:
                        best[edition], best_scores[edition] = retrieval, score
    return best, best_scores


def bank_subset(data: dict, per_edition: int) -> dict:
    """The first `per_edition` figures of each edition of a split."""
    rows, taken = [], dict.fromkeys(EDITIONS, 0)
    for row, edition in enumerate(data["editions"]):
        if taken[edition] < per_edition:
            rows.append(row)
            taken[edition] += 1
    return {"images": data["images"][rows], **{key: [data[key][i] for i in rows]
                                                for key in ("concepts", "captions", "editions")}}


def caption_bank(data: dict, cuis: list[str]) -> dict:
    """The training captions with their concepts (vocabulary indices), edition and official tokens (of the run-file
    form of the caption, under its edition's pre-processing: what the consensus BLEU compares)."""
    index = {c: k for k, c in enumerate(cuis)}
    return {"captions": data["captions"], "editions": data["editions"],
            "concepts": [[index[c] for c in cs] for cs in data["concepts"]],
            "tokens": [official_tokens(run_file_caption(c), e) for c, e in zip(data["captions"], data["editions"])]}


def finish(valid: dict, valid_probabilities: np.ndarray, valid_embeddings: np.ndarray,
           bank_embeddings: np.ndarray, bank: dict, cuis: list[str]) -> tuple[dict, dict]:
    """Thresholds and retrieval parameters tuned on the valid split: the post-processing part of the metadata, and
    the valid scores."""
    thresholds = tune_thresholds(valid_probabilities, valid["concepts"], cuis)
    retrieval, bleu = tune_retrieval(valid, valid_probabilities, valid_embeddings @ bank_embeddings.T, bank,
                                     thresholds, cuis)
    f1 = {e: float(np.mean([set_f1(g, select_concepts(p, thresholds, cuis))
                            for p, g, ed in zip(valid_probabilities, valid["concepts"], valid["editions"]) if ed == e]))
          for e in EDITIONS}
    log.info("valid split: concept F1 %s, BLEU %s with %s", f1, bleu, retrieval)
    return ({META_THRESHOLDS: [round(float(t), 3) for t in thresholds],
             META_RETRIEVAL: {edition: asdict(r) for edition, r in retrieval.items()}},
            {"valid_concept_f1": f1, "valid_bleu": bleu})


def export(model: FigureEncoder, bank_embeddings: np.ndarray, metadata: dict, size: int, out: Path) -> None:
    exported = ExportedModel(model, torch.from_numpy(bank_embeddings))
    outputs = ["concept_probabilities", "bank_similarity"]
    export_onnx(exported, torch.zeros(1, 3, size, size), out, ["figure"], outputs, metadata,
                dynamic_axes={name: {0: "batch"} for name in ["figure", *outputs]})
    log.info("wrote %s (%.1f MB)", out, out.stat().st_size / 1e6)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--train-figures", type=int, default=5000, help="per edition")
    parser.add_argument("--valid-figures", type=int, default=600, help="per edition")
    parser.add_argument("--bank-figures", type=int, default=2400, help="per edition: the first N training figures "
                        "form the caption bank")
    parser.add_argument("--epochs", type=int, default=20)
    parser.add_argument("--size", type=int, default=192, help="network input: the figure fitted into size x size")
    parser.add_argument("--widths", type=int, nargs="+", default=[32, 64, 96, 128], help="channels of the stages")
    parser.add_argument("--workers", type=int, default=2, help="processes generating figures")
    parser.add_argument("--cache", type=Path, help="keep the generated figures here for the next run")
    parser.add_argument("--save-weights", type=Path, help="also write the trained encoder's PyTorch state here")
    args = parser.parse_args()
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(message)s")
    torch.set_num_threads(2)
    random.seed(args.seed)
    cuis = list(vocabulary())
    started = time.perf_counter()
    train_data = make_split("train", TRAIN_SEED_OFFSET + args.seed, args.train_figures, args.size, args.workers,
                            args.cache)
    valid = make_split("valid", VALIDATION_SEED_OFFSET + args.seed, args.valid_figures, args.size, args.workers,
                       args.cache)
    model = train(train_data, valid, cuis, args.epochs, args.seed, tuple(args.widths))
    if args.save_weights:
        torch.save(model.state_dict(), args.save_weights)
    bank_data = bank_subset(train_data, args.bank_figures)
    _, bank_embeddings = encode(model, bank_data["images"])
    valid_probabilities, valid_embeddings = encode(model, valid["images"])
    bank = caption_bank(bank_data, cuis)
    tuned, scores = finish(valid, valid_probabilities, valid_embeddings, bank_embeddings, bank, cuis)
    metadata = {
        META_PREPROCESSING: {"size": args.size, "mean": MEAN, "std": STD},
        META_CONCEPTS: cuis,
        **tuned,
        META_BANK: bank,
        "training": {"seed": args.seed, "train_figures_per_edition": args.train_figures,
                     "valid_figures_per_edition": args.valid_figures,
                     "bank_figures_per_edition": len(bank["captions"]) // len(EDITIONS), "epochs": args.epochs,
                     "size": args.size, "widths": args.widths, **scores,
                     "minutes": round((time.perf_counter() - started) / 60, 1)},
    }
    export(model, bank_embeddings.astype(np.float32), metadata, args.size, args.out)


if __name__ == "__main__":
    main()
