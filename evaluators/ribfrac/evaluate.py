"""RibFrac 2020 evaluator entry point (grand-challenge style): see README.md beside this file."""

from medchallenge.evaluators.ribfrac import main

if __name__ == "__main__":
    raise SystemExit(main())
