"""ONNX Runtime sessions: CUDA when a GPU is visible, otherwise CPU, and the log says which."""

from __future__ import annotations

import json
import logging
import os
import re
from pathlib import Path

from .errors import InputError
from .limits import load_json

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


TF32_VARIABLE = "MEDCHALLENGE_CUDA_TF32"
# CUDA's answers when no GPU is visible (driver library missing, no device, device count 0), as ONNX Runtime words them
NO_GPU_MARKERS = ("no CUDA-capable device", "cudaErrorNoDevice", "CUDA failure 100", "libcuda.so",
                  "CUDA driver version is insufficient", "cudaGetDeviceCount")


def cuda_provider_options() -> dict[str, str]:
    """The CUDA provider's options. TF32 off (ONNX Runtime's default is on: 10-bit mantissas in the convolutions and
    matrix products change RibFrac's candidates and types, issue 22, part 6), unless $MEDCHALLENGE_CUDA_TF32=1. cuDNN's
    convolution algorithm chosen by its heuristics: ONNX Runtime's default EXHAUSTIVE times every algorithm at each new
    input shape (seconds for the first case, again at every CT of another size, and the choice depends on the
    timings, so it can differ between runs); HEURISTIC asks cuDNN without running anything and gives the same choice
    for the same GPU, cuDNN and shape; DEFAULT (always implicit precomputed GEMM) is as reproducible but leaves the
    faster algorithms of 3-D convolutions unused."""
    tf32 = os.environ.get(TF32_VARIABLE, "0") or "0"
    if tf32 not in ("0", "1"):
        raise InputError(f"${TF32_VARIABLE}={tf32!r}: expected 0 (TF32 off, the default) or 1")
    return {"use_tf32": tf32, "cudnn_conv_algo_search": "HEURISTIC"}


def _reason(exc: Exception) -> str:
    """What ONNX Runtime's error says, in a few words: CUDA's `CUDA failure N: ...` when there is one (the message
    starts with a C++ signature), else its first line."""
    text = str(exc)
    cuda = re.search(r"CUDA failure \d+: [^;\n]*", text)
    first = next((line.strip() for line in text.splitlines() if line.strip()), type(exc).__name__)
    return (cuda.group(0).strip() if cuda else first)[:200]


def create_session(model_path: Path, device: str = "auto", spinning: bool = True):
    """Open `model_path` with ONNX Runtime.

    device: "auto" (CUDA if the runtime offers it and a GPU is visible, else CPU, logged), "cpu", or "cuda" (strict:
    one error line instead of falling back to CPU when this ONNX Runtime has no CUDA provider or no GPU is visible,
    judged by the providers the session actually got). Set by the `--device` flag or `MEDCHALLENGE_DEVICE`. CUDA
    runs with `cuda_provider_options()`.
    spinning: whether idle intra-op threads busy-wait for work (ONNX Runtime's default); a model that runs for a few
    milliseconds between other work (decoding the next image) saves CPU time without it.
    An unreadable model is an InputError (one line). ONNX Runtime's own fallback messages are not printed.
    """
    import onnxruntime as ort

    if device not in DEVICES:
        raise ValueError(f"unknown device {device!r} ({', '.join(DEVICES)})")
    available = ort.get_available_providers()
    if device == "cuda" and "CUDAExecutionProvider" not in available:
        raise InputError(f"--device cuda: no GPU for this ONNX Runtime (a CPU-only build: it offers {available}); "
                         "use a GPU image, or --device auto")
    use_cuda = device != "cpu" and "CUDAExecutionProvider" in available
    if use_cuda and hasattr(ort, "preload_dlls"):
        ort.preload_dlls(directory="")  # the CUDA/cuDNN libraries of the nvidia-* wheels (GPU images)
    ort.set_default_logger_severity(3)  # errors only: the CUDA provider's start-up warnings are answered below
    options = ort.SessionOptions()
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    options.intra_op_num_threads = int(os.environ.get("ORT_NUM_THREADS", physical_cores()))
    options.log_severity_level = 3
    if not spinning:
        options.add_session_config_entry("session.intra_op.allow_spinning", "0")
    providers: list = ["CPUExecutionProvider"]
    if use_cuda:
        providers = [("CUDAExecutionProvider", cuda_provider_options())] + (providers if device == "auto" else [])
    cuda_failed = False
    try:
        try:
            session = ort.InferenceSession(str(model_path), sess_options=options, providers=providers,
                                           enable_fallback=0)
        except Exception as exc:  # the CUDA provider failed to start, or the model is unreadable
            if not use_cuda:
                raise
            if device == "cuda":
                if any(marker in str(exc) for marker in NO_GPU_MARKERS):
                    raise InputError("--device cuda: no GPU is visible (ONNX Runtime's CUDA provider did not start: "
                                     f"{_reason(exc)}); give the container a GPU, or use --device auto") from None
                raise
            log.warning("CUDA provider failed to start (%s); running on CPU", _reason(exc))
            cuda_failed = True
            session = ort.InferenceSession(str(model_path), sess_options=options, providers=["CPUExecutionProvider"],
                                           enable_fallback=0)
    except InputError:
        raise
    except Exception as exc:  # onnxruntime raises its own exception types for unreadable models
        raise InputError(f"{model_path}: cannot load the ONNX model ({type(exc).__name__}: {_reason(exc)})"
                         ) from None
    used = session.get_providers()
    if device == "cuda" and "CUDAExecutionProvider" not in used:
        raise InputError(f"--device cuda: no GPU is visible (ONNX Runtime's CUDA provider did not start; the "
                         f"session got {used}); give the container a GPU, or use --device auto")
    log.info("ONNX Runtime %s: model %s on %s", ort.__version__, model_path, used[0])
    if use_cuda and not cuda_failed and used[0] != "CUDAExecutionProvider":
        log.warning("CUDA provider requested but no GPU is visible; running on CPU")
    return session


def model_metadata(session) -> dict:
    """The model's custom metadata; values that are JSON are decoded."""
    meta = {}
    for key, value in session.get_modelmeta().custom_metadata_map.items():
        try:
            meta[key] = load_json(value, f"the model's metadata '{key}'")
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
