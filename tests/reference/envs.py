"""Reference environments for tests/reference: find a pyenv interpreter, build and cache a venv with every package
of requirements/reference-py<XY>.txt pinned, and run the reference worker in it (see conftest.py)."""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import subprocess
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import NoReturn

import pytest

REPO = Path(__file__).resolve().parents[2]
WORKER = Path(__file__).with_name("reference_worker.py")
RECIPE = "venv + pip install --no-deps --no-build-isolation -r; pip check; pip freeze == list (v1)"
STALE_BUILD_SECONDS = 3600
RESULTS: dict[str, dict] = {}
ENV_BUILDS: dict[str, dict] = {}


def reference_required() -> bool:
    return os.environ.get("CI") == "true" or os.environ.get("REQUIRE_REFERENCE") == "1"


def unavailable(reason: str) -> NoReturn:
    """Skip, or fail where the reference layer is required (CI=true, REQUIRE_REFERENCE=1)."""
    if reference_required():
        pytest.fail(f"reference tests are required (CI=true or REQUIRE_REFERENCE=1) but {reason}", pytrace=False)
    pytest.skip(f"{reason} (set REQUIRE_REFERENCE=1 to make this a failure)")


def pyenv_roots() -> list[Path]:
    """$PYENV_ROOT, then what `pyenv root` says, then ~/.pyenv."""
    roots = [Path(os.environ["PYENV_ROOT"])] if os.environ.get("PYENV_ROOT") else []
    pyenv = shutil.which("pyenv")
    if pyenv:
        result = subprocess.run([pyenv, "root"], capture_output=True, text=True, timeout=30)
        if result.returncode == 0 and result.stdout.strip():
            roots.append(Path(result.stdout.strip()))
    roots.append(Path.home() / ".pyenv")
    return roots


def find_python(minor: str) -> Path | None:
    """The newest pyenv CPython `minor`.N (e.g. 3.9.18 for "3.9"), else `python<minor>` on PATH, else None."""
    pattern = re.compile(re.escape(minor) + r"\.(\d+)")
    for root in pyenv_roots():
        versions = sorted(((int(match[1]), path) for path in (root / "versions").glob(f"{minor}.*")
                           if (match := pattern.fullmatch(path.name)) and (path / "bin" / "python").exists()),
                          reverse=True)
        if versions:
            return versions[0][1] / "bin" / "python"
    found = shutil.which(f"python{minor}")
    return Path(found) if found else None


def pinned(requirements: Path) -> dict[str, str]:
    """{canonical name: version} of the `name==version` lines."""
    pins = {}
    for line in requirements.read_text().splitlines():
        line = line.split("#", 1)[0].strip()
        if line:
            name, version = line.split("==")
            pins[re.sub(r"[-_.]+", "-", name).lower()] = version
    return pins


def envs_root() -> Path:
    if os.environ.get("MEDCHALLENGE_REFERENCE_ENVS"):
        return Path(os.environ["MEDCHALLENGE_REFERENCE_ENVS"])
    cache = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
    return cache / "medchallenge" / "reference-envs"


def _run(command: list, **kwargs) -> subprocess.CompletedProcess:
    result = subprocess.run([str(part) for part in command], capture_output=True, text=True, **kwargs)
    if result.returncode != 0:
        tail = "\n".join((result.stdout + result.stderr).strip().splitlines()[-15:])
        raise RuntimeError(f"`{' '.join(str(part) for part in command)}` exited {result.returncode}:\n{tail}")
    return result


def build_env(python: Path, requirements: Path, destination: Path) -> None:
    """Create the venv in a temporary folder next to `destination`, check it, rename it into place."""
    destination.parent.mkdir(parents=True, exist_ok=True)
    for stale in destination.parent.glob(f".{destination.name}.*"):  # builds killed an hour ago or more
        if time.time() - stale.stat().st_mtime > STALE_BUILD_SECONDS:
            shutil.rmtree(stale, ignore_errors=True)
    build = Path(tempfile.mkdtemp(prefix=f".{destination.name}.", dir=destination.parent))
    try:
        _run([python, "-m", "venv", build])
        pip = [build / "bin" / "python", "-m", "pip", "--disable-pip-version-check", "--no-input"]
        _run(pip + ["install", "--no-deps", "--no-build-isolation", "-r", requirements])
        _run(pip + ["check"])
        frozen = _run(pip + ["freeze"]).stdout.splitlines()
        installed = {re.sub(r"[-_.]+", "-", name).lower(): version
                     for name, version in (line.split("==") for line in frozen if "==" in line)}
        if len(installed) != len(frozen):
            raise RuntimeError(f"pip freeze lists packages without a version: {frozen}")
        if installed != pinned(requirements):
            raise RuntimeError(f"installed packages differ from {requirements.name}: {sorted(installed.items())}")
        (build / "reference-env.json").write_text(json.dumps(
            {"python": str(python), "requirements": requirements.name, "freeze": frozen}, indent=1))
        try:
            os.rename(build, destination)
        except OSError:
            if not (destination / "reference-env.json").exists():
                raise
            shutil.rmtree(build, ignore_errors=True)  # another run finished the same environment first
    except BaseException:
        shutil.rmtree(build, ignore_errors=True)
        raise


@dataclass
class ReferenceEnv:
    """A built reference environment; `run` sends one batch of inputs of one piece to the worker."""

    name: str
    python: Path
    versions: dict = field(default_factory=dict)

    def run(self, piece: str, inputs: list, **options) -> list:
        job = json.dumps({"piece": piece, "inputs": inputs, "options": options})
        env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "LC_ALL": "C.UTF-8",
               "NLTK_DATA": str(Path(tempfile.gettempdir()) / "medchallenge-no-nltk-data")}
        result = _run([self.python, "-I", WORKER], input=job, env=env, timeout=600)  # -I: no PYTHONPATH, no user site
        answer = json.loads(result.stdout)
        self.versions = answer["versions"]
        assert len(answer["outputs"]) == len(inputs)
        return answer["outputs"]


def reference_env(minor: str) -> ReferenceEnv:
    requirements = REPO / "requirements" / f"reference-py{minor.replace('.', '')}.txt"
    name = requirements.stem
    python = find_python(minor)
    if python is None:
        unavailable(f"no Python {minor} found (pyenv roots {[str(r) for r in pyenv_roots()]}, PATH); "
                    f"install it with `pyenv install {minor}`")
    interpreter = _run([python, "-c", "import sys; print(sys.version)"]).stdout.strip()
    key = hashlib.sha256("\n".join([RECIPE, str(python.resolve()), interpreter,
                                    requirements.read_text()]).encode()).hexdigest()[:16]
    destination = envs_root() / f"{name}-{key}"
    started = time.monotonic()
    cached = (destination / "reference-env.json").exists()
    if not cached:
        try:
            build_env(python, requirements, destination)
        except (RuntimeError, OSError, subprocess.SubprocessError) as error:
            unavailable(f"building the reference environment {name} failed: {error}")
    ENV_BUILDS[name] = {"path": str(destination), "python": interpreter.split()[0], "cached": cached,
                        "seconds": round(time.monotonic() - started, 1)}
    return ReferenceEnv(name, destination / "bin" / "python")


