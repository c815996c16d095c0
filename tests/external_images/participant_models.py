"""Participants' models of a realistic size, as ONNX graphs with seeded random weights, packed as grand-challenge model
tarballs (`model.tar.gz`, extracted to /opt/ml/model) for the images in unet3d/ and resnet50/.

    .venv/bin/python tests/external_images/participant_models.py --out build/external-models

- `unet3d.onnx`: nnU-Net's default 3-D full-resolution U-Net (PlainConvUNet as nnU-Net v2 plans it for a CT task:
  six stages of 32, 64, 128, 256, 320, 320 features, two 3x3x3 convolutions per stage, each followed by instance
  normalisation and leaky ReLU, strided convolutions down, transposed convolutions up, a 1x1x1 head with two
  classes): 31.2 M parameters. Input (N, 1, D, H, W) with D, H, W multiples of 32; output (N, 2, D, H, W) logits.
- `resnet50.onnx`: ResNet-50 (torchvision's v1.5 bottlenecks, batch normalisation as exported in eval mode) with a
  one-logit head instead of ImageNet's 1000 classes: 23.5 M parameters. Input (N, 3, 512, 512), output (N, 1).

The graphs are written with the onnx package (no PyTorch needed in CI); weights are He-normal from a seeded
generator, so a model file is the same on every run. Random weights give meaningless predictions; these models are
there to exercise run time, memory and the GPU path at a participant's scale, not to score.
"""

from __future__ import annotations

import argparse
import io
import tarfile
from pathlib import Path

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

OPSET = 17
IR_VERSION = 8  # opset 17's IR version: ONNX Runtime reads it whatever onnx release writes the file
UNET_FEATURES = (32, 64, 128, 256, 320, 320)
RESNET_BLOCKS = (3, 4, 6, 3)
RESNET_WIDTHS = (64, 128, 256, 512)
RESNET_INPUT = 512


class GraphBuilder:
    """Nodes and seeded initialisers of one ONNX graph."""

    def __init__(self, seed: int):
        self.rng = np.random.default_rng(seed)
        self.nodes: list[onnx.NodeProto] = []
        self.initializers: list[onnx.TensorProto] = []
        self.count = 0

    def name(self, prefix: str) -> str:
        self.count += 1
        return f"{prefix}_{self.count}"

    def weight(self, prefix: str, array: np.ndarray) -> str:
        name = self.name(prefix)
        self.initializers.append(numpy_helper.from_array(array.astype(np.float32), name))
        return name

    def he_normal(self, prefix: str, shape: tuple[int, ...], fan_in: int) -> str:
        return self.weight(prefix, self.rng.standard_normal(shape, np.float32) * np.float32(np.sqrt(2.0 / fan_in)))

    def node(self, op: str, inputs: list[str], **attributes) -> str:
        output = self.name(op.lower())
        self.nodes.append(helper.make_node(op, inputs, [output], name=output, **attributes))
        return output

    def parameters(self) -> int:
        return sum(int(np.prod(t.dims)) for t in self.initializers)

    def model(self, inputs: list[onnx.ValueInfoProto], output: str, output_info: onnx.ValueInfoProto,
              metadata: dict[str, str]) -> onnx.ModelProto:
        self.nodes.append(helper.make_node("Identity", [output], [output_info.name]))
        graph = helper.make_graph(self.nodes, "participant", inputs, [output_info], self.initializers)
        model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", OPSET)],
                                  producer_name="medchallenge tests/external_images", ir_version=IR_VERSION)
        for key, value in metadata.items():
            model.metadata_props.append(onnx.StringStringEntryProto(key=key, value=value))
        onnx.checker.check_model(model)
        return model


def _conv3d_block(g: GraphBuilder, x: str, c_in: int, c_out: int, stride: int) -> str:
    """Conv 3x3x3 (bias) -> InstanceNorm (affine) -> LeakyReLU(0.01), as nnU-Net's ConvDropoutNormReLU."""
    w = g.he_normal("conv_w", (c_out, c_in, 3, 3, 3), c_in * 27)
    b = g.weight("conv_b", np.zeros(c_out))
    x = g.node("Conv", [x, w, b], kernel_shape=[3, 3, 3], pads=[1] * 6, strides=[stride] * 3)
    x = g.node("InstanceNormalization", [x, g.weight("in_scale", np.ones(c_out)), g.weight("in_bias", np.zeros(c_out))],
               epsilon=1e-5)
    return g.node("LeakyRelu", [x], alpha=0.01)


def unet3d(seed: int = 0) -> tuple[onnx.ModelProto, int]:
    """nnU-Net's default 3-D full-resolution U-Net; (model, parameter count)."""
    g = GraphBuilder(seed)
    x, skips, c_in = "image", [], 1
    for stage, features in enumerate(UNET_FEATURES):
        x = _conv3d_block(g, x, c_in, features, 1 if stage == 0 else 2)
        x = _conv3d_block(g, x, features, features, 1)
        skips.append(x)
        c_in = features
    for stage in range(len(UNET_FEATURES) - 2, -1, -1):
        features = UNET_FEATURES[stage]
        w = g.he_normal("up_w", (c_in, features, 2, 2, 2), c_in * 8)
        x = g.node("ConvTranspose", [x, w, g.weight("up_b", np.zeros(features))], kernel_shape=[2, 2, 2],
                   strides=[2, 2, 2])
        x = g.node("Concat", [x, skips[stage]], axis=1)
        x = _conv3d_block(g, x, 2 * features, features, 1)
        x = _conv3d_block(g, x, features, features, 1)
        c_in = features
    head = g.he_normal("head_w", (2, c_in, 1, 1, 1), c_in)
    x = g.node("Conv", [x, head, g.weight("head_b", np.zeros(2))], kernel_shape=[1, 1, 1])
    image = helper.make_tensor_value_info("image", TensorProto.FLOAT, ["batch", 1, "depth", "height", "width"])
    logits = helper.make_tensor_value_info("logits", TensorProto.FLOAT, ["batch", 2, "depth", "height", "width"])
    return g.model([image], x, logits, {"architecture": "nnU-Net 3d_fullres PlainConvUNet", "divisor": "32",
                                        "seed": str(seed)}), g.parameters()


def _conv_bn(g: GraphBuilder, x: str, c_in: int, c_out: int, kernel: int, stride: int, relu: bool,
             bn_scale: float = 1.0) -> str:
    """Conv (no bias) -> BatchNormalization (eval-mode statistics) -> optional ReLU."""
    w = g.he_normal("conv_w", (c_out, c_in, kernel, kernel), c_in * kernel * kernel)
    x = g.node("Conv", [x, w], kernel_shape=[kernel, kernel], pads=[kernel // 2] * 4, strides=[stride, stride])
    x = g.node("BatchNormalization", [x, g.weight("bn_scale", np.full(c_out, bn_scale)),
                                      g.weight("bn_bias", np.zeros(c_out)), g.weight("bn_mean", np.zeros(c_out)),
                                      g.weight("bn_var", np.ones(c_out))], epsilon=1e-5)
    return g.node("Relu", [x]) if relu else x


def resnet50(seed: int = 0) -> tuple[onnx.ModelProto, int]:
    """ResNet-50 with a one-logit head; (model, parameter count)."""
    g = GraphBuilder(seed)
    x = _conv_bn(g, "image", 3, 64, 7, 2, relu=True)
    x = g.node("MaxPool", [x], kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1])
    c_in = 64
    for layer, (blocks, width) in enumerate(zip(RESNET_BLOCKS, RESNET_WIDTHS)):
        for block in range(blocks):
            stride = 2 if block == 0 and layer > 0 else 1
            y = _conv_bn(g, x, c_in, width, 1, 1, relu=True)
            y = _conv_bn(g, y, width, width, 3, stride, relu=True)
            # the residual branch's last normalisation starts small (torchvision's zero_init_residual, not zero):
            # random weights then keep activations finite through 16 blocks
            y = _conv_bn(g, y, width, 4 * width, 1, 1, relu=False, bn_scale=0.2)
            shortcut = _conv_bn(g, x, c_in, 4 * width, 1, stride, relu=False) if block == 0 else x
            x = g.node("Relu", [g.node("Add", [y, shortcut])])
            c_in = 4 * width
    x = g.node("Flatten", [g.node("GlobalAveragePool", [x])], axis=1)
    w = g.weight("fc_w", g.rng.normal(0.0, 0.01, (1, c_in)))
    x = g.node("Gemm", [x, w, g.weight("fc_b", np.zeros(1))], transB=1)
    image = helper.make_tensor_value_info("image", TensorProto.FLOAT, ["batch", 3, RESNET_INPUT, RESNET_INPUT])
    logit = helper.make_tensor_value_info("logit", TensorProto.FLOAT, ["batch", 1])
    return g.model([image], x, logit, {"architecture": "ResNet-50 (one-logit head)", "input_size": str(RESNET_INPUT),
                                       "seed": str(seed)}), g.parameters()


MODELS = {"unet3d": unet3d, "resnet50": resnet50}


def write_model_tarball(name: str, out_dir: Path, seed: int = 0) -> tuple[Path, int]:
    """`out_dir/<name>-model.tar.gz` holding `<name>.onnx` (the tarball a participant uploads as the algorithm's
    model); returns (path, parameter count)."""
    model, parameters = MODELS[name](seed)
    data = model.SerializeToString()
    out_dir.mkdir(parents=True, exist_ok=True)
    path = out_dir / f"{name}-model.tar.gz"
    partial = path.with_name(path.name + ".part")
    with tarfile.open(partial, "w:gz", compresslevel=1) as tar:
        info = tarfile.TarInfo(f"{name}.onnx")
        info.size, info.mode = len(data), 0o644
        tar.addfile(info, io.BytesIO(data))
    partial.replace(path)
    return path, parameters


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    for name in MODELS:
        path, parameters = write_model_tarball(name, args.out, args.seed)
        print(f"{path}: {parameters / 1e6:.1f} M parameters")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
