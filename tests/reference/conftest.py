"""Reference layer: the libraries the official scorers ran, each in a virtual environment of the Python it ran
under, fuzzed against the project's re-implementations (marker `reference`: `pytest -m reference tests/reference`).

A reference environment is a venv of a pyenv interpreter (3.9, 3.7) with every package of
requirements/reference-py<XY>.txt installed --no-deps from the package index. It is built once and cached under
$MEDCHALLENGE_REFERENCE_ENVS (default ~/.cache/medchallenge/reference-envs)/<hash of the interpreter and the
requirement list>: built in a temporary folder beside it and renamed into place only when complete, so an
interrupted build is never reused. A missing interpreter or a failed build skips the tests with the reason, or
fails them under CI=true or REQUIRE_REFERENCE=1.

The reference side runs as one subprocess per piece and batch (tests/reference/reference_worker.py, JSON through
stdin/stdout); the project side runs in-process. Every test records how many inputs it tried and how many
mismatched; the terminal summary prints them and writes them to bench/reference-fuzz.json.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from reference.envs import ENV_BUILDS, RESULTS, ReferenceEnv, reference_env


@pytest.fixture(scope="session")
def py39() -> ReferenceEnv:
    """Python 3.9 with NLTK 3.7, rouge-score 0.1.2, scikit-learn 1.0.2, numpy 1.22.4, pandas 1.4.4, nibabel 3.2.2,
    scikit-image 0.19.3."""
    return reference_env("3.9")


@pytest.fixture(scope="session")
def py37() -> ReferenceEnv:
    """Python 3.7 with scikit-image 0.16.2."""
    return reference_env("3.7")


@pytest.fixture
def record():
    """record(piece, env, inputs, mismatches, **extra): keep the counts for the summary and assert no mismatch."""

    def keep(piece: str, env: ReferenceEnv, inputs: int, mismatches: list, **extra) -> None:
        RESULTS[piece] = {"inputs": inputs, "mismatches": len(mismatches), "environment": env.name,
                          "versions": env.versions, **extra}
        assert not mismatches, f"{piece}: {len(mismatches)} of {inputs} inputs differ; first: {mismatches[:5]}"

    return keep


def pytest_terminal_summary(terminalreporter, exitstatus, config):
    if not RESULTS:
        return
    terminalreporter.section("reference fuzz (inputs tried, mismatches)")
    for piece, result in RESULTS.items():
        extra = {k: v for k, v in result.items() if k not in ("inputs", "mismatches", "environment", "versions")}
        terminalreporter.write_line(f"{piece:28} {result['inputs']:7d} inputs {result['mismatches']:4d} mismatches"
                                    f"  [{result['environment']}]{'  ' + json.dumps(extra) if extra else ''}")
    for name, build in ENV_BUILDS.items():
        terminalreporter.write_line(f"{name}: {'cached' if build['cached'] else 'built'} in {build['seconds']} s "
                                    f"(Python {build['python']}) at {build['path']}")
    out = Path(config.rootpath) / "bench" / "reference-fuzz.json"
    out.parent.mkdir(exist_ok=True)
    out.write_text(json.dumps({"pieces": RESULTS, "environments": ENV_BUILDS,
                               "python": sys.version.split()[0]}, indent=1) + "\n")
    terminalreporter.write_line(f"written to {out}")
