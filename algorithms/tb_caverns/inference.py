"""TB caverns detection algorithm (ImageCLEF 2022): grand-challenge one-case mode or batch mode.

    python algorithms/tb_caverns/inference.py --input CT_DIR --output OUT_DIR [--model MODEL_DIR] [--device cpu]

The model next to this script (model/tb_caverns.onnx) is the default; MODEL_DIR/tb_caverns.onnx overrides it.
"""

from pathlib import Path

from medchallenge.algorithms.tb_caverns import MODEL_FILENAME, main

if __name__ == "__main__":
    raise SystemExit(main(baked_model=Path(__file__).resolve().parent / "model" / MODEL_FILENAME))
