"""The command blocks of README.md and docs/*.md run as written: every ```bash block is run by bash (-e, -u,
pipefail) in a fresh folder whose name has a space, with the project's Python first on PATH, so a changed README is a
changed test. A block is preceded by at most one marker the extractor reads:

    <!-- docs-commands: given NAME: what the reader already has -->   the files GIVEN[NAME] makes, then the block
    <!-- docs-commands: not run: REASON -->                           not run; the text around it says why

A block without a marker runs in the empty folder. A marker of another form, a `given` this file does not know or a
`not run` without its reason fails the test."""

from __future__ import annotations

import gzip
import io
import os
import re
import shutil
import subprocess
import sys
import tarfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
DOCUMENTS = ("README.md", *sorted(str(p.relative_to(REPO)) for p in (REPO / "docs").glob("*.md")))
MARKER = re.compile(r"<!-- docs-commands: (.*) -->")
GIVEN_OR_NOT_RUN = re.compile(r"(?:given (?P<given>[a-z-]+)|not run): (?P<why>\S.{9,})")
BLOCK_TIMEOUT_S = 900
IMAGE_SOURCE = REPO / "tests" / "job_images" / "broken"  # the `ok` behaviour: a tb-caverns algorithm in seconds


@dataclass(frozen=True)
class Block:
    document: str
    line: int  # of the opening fence
    marker: str | None
    text: str

    @property
    def given(self) -> str | None:
        found = GIVEN_OR_NOT_RUN.fullmatch(self.marker or "")
        return found["given"] if found else None

    @property
    def runs(self) -> bool:
        return self.marker is None or self.given is not None


def bash_blocks(document: str) -> list[Block]:
    """Every ```bash block of `document` with the marker on the line before its fence (blank lines between
    allowed)."""
    blocks, lines = [], (REPO / document).read_text().splitlines()
    index = 0
    while index < len(lines):
        if lines[index].strip() == "```bash":
            before = next((line for line in reversed(lines[:index]) if line.strip()), "")
            marker = MARKER.fullmatch(before.strip())
            end = next(i for i in range(index + 1, len(lines)) if lines[i].strip().startswith("```"))
            blocks.append(Block(document, index + 1, marker[1] if marker else None,
                                "\n".join(lines[index + 1:end]) + "\n"))
            index = end
        index += 1
    return blocks


BLOCKS = [block for document in DOCUMENTS for block in bash_blocks(document)]


def run(command: list[str], **options) -> subprocess.CompletedProcess:
    return subprocess.run(command, check=True, capture_output=True, **options)


def synthetic_tb(folder: Path, cases: str, ground_truth: str) -> None:
    """Two small synthetic CTs in `folder/cases` and their ground truth in `folder/ground_truth`."""
    scratch = folder / ".synth"
    run([sys.executable, "-m", "medchallenge.synth", "tb-caverns", "--out", str(scratch), "--cases", "2", "--shape",
         "32", "32", "8", "--seed", "5"])
    (folder / cases).parent.mkdir(parents=True, exist_ok=True)
    (scratch / "input").rename(folder / cases)
    (scratch / "ground_truth").rename(folder / ground_truth)
    shutil.rmtree(scratch)


def saved_image(tag: str, archive: Path) -> None:
    """A tb-caverns algorithm image built as `tag`, saved as a team uploads it (`docker save | gzip`), then removed
    from the engine, so that the block's `docker load` or the phase loads it from the archive."""
    run(["docker", "build", "--quiet", "--build-arg", "BEHAVIOUR=ok", "--label", f"mc-test-docs={archive.name}",
         "--tag", tag, str(IMAGE_SOURCE)])
    archive.write_bytes(gzip.compress(run(["docker", "save", tag]).stdout, compresslevel=1))
    run(["docker", "rmi", tag])


def model_tarball(path: Path) -> None:
    data = b"weights of a model\n"
    with tarfile.open(path, "w:gz") as tar:
        info = tarfile.TarInfo("weights.txt")
        info.size = len(data)
        tar.addfile(info, io.BytesIO(data))


def repository(folder: Path) -> None:
    """The repository's scripts and models, as in a clone (the block's outputs go beside them, into the fresh
    folder)."""
    for name in ("algorithms", "evaluators"):
        (folder / name).symlink_to(REPO / name, target_is_directory=True)


def preflight_files(folder: Path) -> None:
    saved_image("my-algorithm:1", folder / "my-algorithm.tar.gz")
    synthetic_tb(folder, "cases", "ground_truth")
    model_tarball(folder / "model.tar.gz")


def phase_files(folder: Path) -> None:
    (folder / "phase").mkdir()
    saved_image("mc-test-docs/alpha-algorithm:1", folder / "phase" / "alpha-algorithm.tar.gz")
    model_tarball(folder / "phase" / "alpha-model.tar.gz")
    synthetic_tb(folder, "hidden/input", "hidden/ground_truth")


def lung_nodule(folder: Path) -> None:
    """The repository's examples and its wheelhouse (`make wheels`), as an organiser's clone has them."""
    for name in ("examples", "wheelhouse"):
        (folder / name).symlink_to(REPO / name, target_is_directory=True)


# what a block's reader already has: (makes it in the fresh folder, needs Docker)
GIVEN: dict[str, tuple[Callable[[Path], None], bool]] = {
    "repository": (repository, False),
    "preflight-files": (preflight_files, True),
    "phase-files": (phase_files, True),
    "lung-nodule": (lung_nodule, True),
}


def test_every_block_runs_or_says_why_not():
    assert BLOCKS, "no ```bash block found"
    for block in BLOCKS:
        where = f"{block.document}:{block.line}"
        if block.marker is not None:
            found = GIVEN_OR_NOT_RUN.fullmatch(block.marker)
            assert found, f"{where}: marker {block.marker!r}: expected `given NAME: ...` or `not run: REASON`"
            assert found["given"] is None or found["given"] in GIVEN, f"{where}: no files given as {found['given']}"


@pytest.mark.parametrize("block", [b for b in BLOCKS if b.runs], ids=lambda b: f"{b.document}:{b.line}")
def test_a_block_runs_as_written_in_a_fresh_folder(block, request, tmp_path):
    folder = tmp_path / "fresh folder"
    folder.mkdir()
    if block.given is not None:
        make, needs_docker = GIVEN[block.given]
        if needs_docker:
            request.getfixturevalue("docker_compose")  # fails (not skips) in CI without Docker
        make(folder)
    environment = dict(os.environ, PATH=f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}")
    result = subprocess.run(["bash", "-euo", "pipefail", "-c", block.text], cwd=folder, env=environment,
                            capture_output=True, text=True, timeout=BLOCK_TIMEOUT_S)
    assert result.returncode == 0, (f"{block.document}:{block.line}: status {result.returncode}\n"
                                    f"{result.stdout[-2000:]}\n{result.stderr[-3000:]}")
