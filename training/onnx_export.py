"""Export a trained PyTorch model to ONNX with its parameters in the model's metadata (shared by every training script).

The algorithm plug-ins read their pre- and post-processing from these metadata entries (JSON strings), so a model file
carries everything needed to run it.
"""
from __future__ import annotations

import json
import os
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # torch only to export: tuning scripts rewrite metadata with onnx alone
    import torch


def export_onnx(model: torch.nn.Module, example: torch.Tensor, out: Path, input_names: list[str],
                output_names: list[str], metadata: dict[str, object],
                dynamic_axes: dict[str, dict[int, str]] | None = None, doc_string: str = "") -> None:
    """Write `model` to `out` (opset 17) with each metadata value as JSON; checked with onnx, replaced atomically."""
    import onnx
    import torch

    out.parent.mkdir(parents=True, exist_ok=True)
    model.eval()
    tmp = out.with_name(out.name + ".tmp")
    torch.onnx.export(model, (example,), str(tmp), input_names=input_names, output_names=output_names,
                      dynamic_axes=dynamic_axes, opset_version=17, dynamo=False)
    proto = onnx.load(str(tmp))
    _set_metadata(proto, metadata)
    if doc_string:
        proto.doc_string = doc_string
    onnx.checker.check_model(proto)
    onnx.save(proto, str(tmp))
    os.replace(tmp, out)


def _set_metadata(proto, metadata: dict[str, object]) -> None:
    """Set each metadata entry (as JSON) of an ONNX ModelProto, replacing entries of the same key."""
    kept = [(p.key, p.value) for p in proto.metadata_props if p.key not in metadata]
    del proto.metadata_props[:]
    encoded = [(k, json.dumps(v, ensure_ascii=False, separators=(",", ":"))) for k, v in metadata.items()]
    for key, value in kept + encoded:
        entry = proto.metadata_props.add()
        entry.key, entry.value = key, value


def update_metadata(path: Path, metadata: dict[str, object]) -> None:
    """Replace (or add) metadata entries of an exported model (e.g. post-processing tuned afterwards), atomically."""
    import onnx

    proto = onnx.load(str(path))
    _set_metadata(proto, metadata)
    onnx.checker.check_model(proto)
    tmp = path.with_name(path.name + ".tmp")
    onnx.save(proto, str(tmp))
    os.replace(tmp, path)
