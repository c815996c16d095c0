"""ImageCLEFmed Caption algorithm (2021/2022): grand-challenge one-case mode or batch mode.

    python algorithms/imageclef_caption/inference.py --input FIGURE_DIR --output OUT_DIR [--edition 2021] [--device cpu]

The model beside this script (model/imageclef_caption.onnx; /opt/app/model in the image) is the default;
MODEL_DIR/imageclef_caption.onnx overrides it.
"""

from pathlib import Path

from medchallenge.algorithms.imageclef_caption import ALGORITHM
from medchallenge.algorithms.runner import main

if __name__ == "__main__":
    raise SystemExit(main(ALGORITHM, baked_model_dir=Path(__file__).resolve().parent / "model"))
