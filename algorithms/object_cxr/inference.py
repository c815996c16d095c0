"""object-CXR foreign-object detection algorithm: grand-challenge one-case mode or batch mode.

    python algorithms/object_cxr/inference.py --input IMAGE_DIR --output OUT_DIR [--model MODEL_DIR] [--device cpu]

The model beside this script (model/object_cxr.onnx; /opt/app/model in the image) is the default;
MODEL_DIR/object_cxr.onnx overrides it.
"""

from pathlib import Path

from medchallenge.algorithms.object_cxr import ALGORITHM
from medchallenge.algorithms.runner import main

if __name__ == "__main__":
    raise SystemExit(main(ALGORITHM, baked_model_dir=Path(__file__).resolve().parent / "model"))
