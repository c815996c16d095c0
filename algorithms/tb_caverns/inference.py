"""TB caverns detection algorithm (ImageCLEF 2022): grand-challenge one-case mode or batch mode.

    python algorithms/tb_caverns/inference.py --input CT_DIR --output OUT_DIR [--model MODEL_DIR] [--device cpu]

The model beside this script (model/tb_caverns.onnx; /opt/app/model in the image) is the default;
MODEL_DIR/tb_caverns.onnx overrides it.
"""

from pathlib import Path

from medchallenge.algorithms.runner import main
from medchallenge.algorithms.tb_caverns import ALGORITHM

if __name__ == "__main__":
    raise SystemExit(main(ALGORITHM, baked_model_dir=Path(__file__).resolve().parent / "model"))
