"""ImageCLEFmed Caption 2021/2022 evaluator entry point (see README.md beside this file)."""

from medchallenge.evaluators.imageclef_caption import main

if __name__ == "__main__":
    raise SystemExit(main())
