"""ONNX Runtime sessions: CUDA when a GPU is visible, otherwise CPU, and the log says which."""

from __future__ import annotations

import json
import logging
import os
from pathlib import Path

from .errors import InputError

log = logging.getLogger("medchallenge.onnx")

DEVICES = ("auto", "cpu", "cuda")
# the metadata keys under which a model carries its pre- and post-processing parameters (JSON)
META_PREPROCESSING, META_POSTPROCESSING = "preprocessing", "postprocessing"


def physical_cores() -> int:
    """Cores this process may use (affinity), a sensible intra-op thread count."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:
        return os.cpu_count() or 1


def resolve_model(baked: Path, model_dir: Path | None, filename: str) -> Path:
    """A model in `model_dir` (e.g. /opt/ml/model, a GC model tarball) overrides the one baked into the image."""
    if model_dir is not None and (model_dir / filename).is_file():
        return model_dir / filename
    return baked


def create_session(model_path: Path, device: str = "auto", spinning: bool = True):
    """Open `model_path` with ONNX Runtime.

    device: "auto" (CUDA if the runtime offers it, else CPU), "cpu", or "cuda" (strict: fail instead of
    falling back to CPU). Set by the `--device` flag or the `MEDCHALLENGE_DEVICE` variable.
    spinning: whether idle intra-op threads busy-wait for work (ONNX Runtime's default); a model that runs for a few
    milliseconds between other work (decoding the next image) saves CPU time without it.
    An unreadable model, or "cuda" where the runtime offers no CUDA, is an InputError (one line).
    """
    import onnxruntime as ort

    available = ort.get_available_providers()
    if device != "cpu" and "CUDAExecutionProvider" in available and hasattr(ort, "preload_dlls"):
        ort.preload_dlls(directory="")  # the CUDA/cuDNN libraries of the nvidia-* wheels (GPU images)
    options = ort.SessionOptions()
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    options.intra_op_num_threads = int(os.environ.get("ORT_NUM_THREADS", physical_cores()))
    options.log_severity_level = 3
    if not spinning:
        options.add_session_config_entry("session.intra_op.allow_spinning", "0")
    if device == "cpu":
        providers = ["CPUExecutionProvider"]
    elif device == "cuda":
        if "CUDAExecutionProvider" not in available:
            raise InputError(f"--device cuda: this ONNX Runtime offers only {available}")
        options.add_session_config_entry("session.disable_cpu_ep_fallback", "1")
        providers = ["CUDAExecutionProvider"]
    elif device == "auto":
        providers = [p for p in ("CUDAExecutionProvider", "CPUExecutionProvider") if p in available]
    else:
        raise ValueError(f"unknown device {device!r} ({', '.join(DEVICES)})")
    try:
        session = ort.InferenceSession(str(model_path), sess_options=options, providers=providers)
    except Exception as exc:  # onnxruntime raises its own exception types for unreadable models
        raise InputError(f"{model_path}: cannot load the ONNX model ({type(exc).__name__})") from None
    used = session.get_providers()
    log.info("ONNX Runtime %s: model %s on %s", ort.__version__, model_path, used[0])
    if device == "auto" and "CUDAExecutionProvider" in providers and used[0] != "CUDAExecutionProvider":
        log.warning("CUDA provider requested but unavailable at run time; running on CPU")
    return session


def model_metadata(session) -> dict:
    """The model's custom metadata; values that are JSON are decoded."""
    meta = {}
    for key, value in session.get_modelmeta().custom_metadata_map.items():
        try:
            meta[key] = json.loads(value)
        except json.JSONDecodeError:
            meta[key] = value
    return meta


def processing_parameters(session, model_path: Path, pre_type, post_type) -> tuple:
    """The model's pre- and post-processing parameters (`pre_type.from_dict`, `post_type.from_dict` of its
    metadata); a model without them is an InputError naming the file."""
    meta = model_metadata(session)
    try:
        return pre_type.from_dict(meta[META_PREPROCESSING]), post_type.from_dict(meta[META_POSTPROCESSING])
    except (KeyError, TypeError, ValueError) as exc:
        raise InputError(f"{model_path}: model metadata lacks pre/post-processing parameters ({exc})") from None
