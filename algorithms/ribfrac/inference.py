"""RibFrac rib-fracture detection and classification (MICCAI 2020): grand-challenge one-case mode or batch mode.

    python algorithms/ribfrac/inference.py --input CT_DIR --output OUT_DIR [--model MODEL_DIR] [--device cpu]

The model beside this script (model/ribfrac.onnx; /opt/app/model in the image) is the default;
MODEL_DIR/ribfrac.onnx overrides it.
"""

from pathlib import Path

from medchallenge.algorithms.ribfrac import ALGORITHM
from medchallenge.algorithms.runner import main

if __name__ == "__main__":
    raise SystemExit(main(ALGORITHM, baked_model_dir=Path(__file__).resolve().parent / "model"))
