"""Write fixtures/bright_spot.onnx: a planted object-CXR "detector" whose heat map is high where the scaled input is
bright (4 x 4 average pooling, then a steep sigmoid), with the real model's metadata keys. The algorithm's tests use it
to check decoding and coordinates independently of the trained model. Run with the training venv (needs onnx):

    PYTHONPATH=shared .venv-train/bin/python tests/object_cxr/make_bright_spot_model.py
"""

import json
from pathlib import Path

import onnx
from onnx import TensorProto, helper

from medchallenge.algorithms.object_cxr import Postprocessing, Preprocessing

PRE = Preprocessing(input_size=(64, 64), percentiles=(1.0, 99.0))
POST = Postprocessing(stride=4, min_score=0.5, max_points=5)

nodes = [
    helper.make_node("AveragePool", ["radiograph"], ["pooled"], kernel_shape=[4, 4], strides=[4, 4]),
    helper.make_node("Sub", ["pooled", "threshold"], ["shifted"]),
    helper.make_node("Mul", ["shifted", "steepness"], ["scaled"]),
    helper.make_node("Sigmoid", ["scaled"], ["heatmap"]),
]
graph = helper.make_graph(
    nodes, "bright_spot",
    [helper.make_tensor_value_info("radiograph", TensorProto.FLOAT, [1, 1, 64, 64])],
    [helper.make_tensor_value_info("heatmap", TensorProto.FLOAT, [1, 1, 16, 16])],
    initializer=[helper.make_tensor("threshold", TensorProto.FLOAT, [], [0.6]),
                 helper.make_tensor("steepness", TensorProto.FLOAT, [], [20.0])])
model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=8)
for key, value in {"preprocessing": PRE.__dict__, "postprocessing": POST.__dict__}.items():
    entry = model.metadata_props.add()
    entry.key, entry.value = key, json.dumps(value)
onnx.checker.check_model(model)
onnx.save(model, str(Path(__file__).parent / "fixtures" / "bright_spot.onnx"))
