"""Evaluator entry point: ImageCLEF 2022 TB caverns detection (mAP over IoU 0.40-0.75)."""

from medchallenge.evaluators.tb_caverns import main

if __name__ == "__main__":
    raise SystemExit(main())
