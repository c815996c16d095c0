"""The reference layer's own machinery: interpreter discovery, skip-or-fail, pinned lists, interrupted builds."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from reference import envs

pytestmark = pytest.mark.reference


def _fake_python(root: Path, version: str) -> Path:
    python = root / "versions" / version / "bin" / "python"
    python.parent.mkdir(parents=True)
    python.write_text("#!/bin/sh\nexit 1\n")
    python.chmod(0o755)
    return python


def test_find_python_takes_the_newest_patch_release_of_pyenv_root(tmp_path, monkeypatch):
    for version in ("3.9.2", "3.9.18", "3.10.13", "3.9.7-dev"):
        _fake_python(tmp_path, version)
    monkeypatch.setenv("PYENV_ROOT", str(tmp_path))
    assert envs.find_python("3.9") == tmp_path / "versions" / "3.9.18" / "bin" / "python"


@pytest.mark.parametrize("variables, outcome", [
    ({}, pytest.skip.Exception),
    ({"CI": "true"}, pytest.fail.Exception),
    ({"REQUIRE_REFERENCE": "1"}, pytest.fail.Exception),
])
def test_unavailable_skips_or_fails(monkeypatch, variables, outcome):
    monkeypatch.delenv("CI", raising=False)
    monkeypatch.delenv("REQUIRE_REFERENCE", raising=False)
    for name, value in variables.items():
        monkeypatch.setenv(name, value)
    with pytest.raises(outcome, match="no Python 3.9"):
        envs.unavailable("no Python 3.9 found")


def test_reference_lists_pin_every_package():
    for name in ("reference-py39.txt", "reference-py37.txt"):
        lines = [line for line in (envs.REPO / "requirements" / name).read_text().splitlines()
                 if line.strip() and not line.startswith("#")]
        assert lines and all(line.count("==") == 1 for line in lines), name
    assert envs.pinned(envs.REPO / "requirements" / "reference-py39.txt")["rouge-score"] == "0.1.2"


def test_failed_build_leaves_nothing_to_reuse(tmp_path):
    python = _fake_python(tmp_path / "pyenv", "3.9.18")  # exits 1: `python -m venv` fails
    destination = tmp_path / "envs" / "reference-py39-0123456789abcdef"
    with pytest.raises(RuntimeError, match="exited 1"):
        envs.build_env(python, envs.REPO / "requirements" / "reference-py39.txt", destination)
    assert not destination.exists()
    assert os.listdir(destination.parent) == []  # the temporary build folder is gone too
