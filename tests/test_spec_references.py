"""Section references in the code resolve to numbered headings of the specifications in docs/metrics/.

A reference is the section sign followed by a section number (as written in the code: sign, then `3` or `2.1`). The
document it means (the rule of docs/metrics/README.md):

1. the last specification named on the same line before the reference, written `docs/metrics/<name>.md` or just
   `<name>.md` (lower-case name);
2. else the first one named on the same line after it;
3. else the file's own specification: the one document named in the file's header, which is the module docstring
   of a Python file (usually its `Spec:` line), the text before the first `## ` heading of a README, and the
   document itself for a specification. A header naming several documents (or none) gives no default, so every
   reference of that file must name its document on its line.

The reference must match a numbered heading of that document (`## 3. Title` is section 3, `### 3.2 Title` section
3.2). The sign followed directly by a letter (the old lettered sections) is an error too. Every `docs/metrics/*.md`
path named in the scanned files must exist.
"""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SPEC_DIR = ROOT / "docs" / "metrics"
SCANNED_DIRS = ("shared", "evaluators", "algorithms", "benchmarks", "training", "tests")
SKIPPED_PARTS = {"__pycache__", ".venv", ".venv-train", "build", "dist", "wheelhouse"}

SIGN = "\u00a7"
REFERENCE = re.compile(SIGN + r"\s?(\d+(?:\.\d+)*)")
LETTER_REFERENCE = re.compile(SIGN + r"[A-Za-z]")
DOCUMENT = re.compile(r"(?<![\w/.-])(?:docs/metrics/)?([a-z0-9][a-z0-9-]*)\.md\b")
DOCUMENT_PATH = re.compile(r"docs/metrics/([A-Za-z0-9_.-]+?\.md)\b")
HEADING = re.compile(r"^#{2,6}\s+(\d+(?:\.\d+)*)\.?\s")


@dataclass(frozen=True)
class Reference:
    where: str  # "path:line"
    section: str
    document: str | None  # file name in docs/metrics, None when unresolved
    text: str


def scanned_files() -> list[Path]:
    files = []
    for name in SCANNED_DIRS:
        for path in sorted((ROOT / name).rglob("*")):
            if SKIPPED_PARTS & set(path.relative_to(ROOT).parts) or any(p.endswith(".egg-info") for p in path.parts):
                continue
            if path.is_file() and (path.suffix == ".py" or path.name == "README.md"):
                files.append(path)
    return files


def spec_documents() -> list[Path]:
    return sorted(p for p in SPEC_DIR.glob("*.md") if p.name != "README.md")


def header_text(path: Path, text: str) -> str:
    """Where a file names its own specification: module docstring (.py), text before the first `## ` (README)."""
    if path.suffix == ".py":
        try:
            return ast.get_docstring(ast.parse(text)) or ""
        except SyntaxError:
            return ""
    head = []
    for line in text.splitlines():
        if line.startswith("## "):
            break
        head.append(line)
    return "\n".join(head)


def named_documents(line: str) -> list[tuple[int, str]]:
    """(position, file name) of every specification named on `line`."""
    return [(m.start(), m.group(1) + ".md") for m in DOCUMENT.finditer(line)]


def default_document(path: Path, text: str) -> str | None:
    if path.parent == SPEC_DIR:
        return path.name
    names = {name for _, name in named_documents(header_text(path, text))}
    return names.pop() if len(names) == 1 else None


def references(path: Path, text: str) -> list[Reference]:
    """Every section reference of a file with the document it resolves to (rule in the module docstring)."""
    default = default_document(path, text)
    found = []
    for number, line in enumerate(text.splitlines(), start=1):
        where = f"{path.relative_to(ROOT) if path.is_relative_to(ROOT) else path}:{number}"
        names = named_documents(line)
        for match in REFERENCE.finditer(line):
            before = [name for pos, name in names if pos < match.start()]
            after = [name for pos, name in names if pos > match.start()]
            document = before[-1] if before else after[0] if after else default
            found.append(Reference(where, match.group(1), document, line.strip()))
        for match in LETTER_REFERENCE.finditer(line):
            found.append(Reference(where, match.group(0)[1:], None, line.strip()))
    return found


def headings(document: Path) -> list[str]:
    return [m.group(1) for line in document.read_text(encoding="utf-8").splitlines() if (m := HEADING.match(line))]


def problems(refs: list[Reference], sections: dict[str, set[str]]) -> list[str]:
    """One line per reference that does not resolve to a numbered heading of its document."""
    found = []
    for ref in refs:
        if ref.document is None:
            found.append(f"{ref.where}: {SIGN}{ref.section} names no specification (name docs/metrics/<x>.md on the "
                         f"line or in the file's header; lettered sections do not exist): {ref.text}")
        elif ref.document not in sections:
            found.append(f"{ref.where}: {SIGN}{ref.section} refers to {ref.document}, which is not in docs/metrics")
        elif ref.section not in sections[ref.document]:
            found.append(f"{ref.where}: {SIGN}{ref.section} has no numbered heading in {ref.document}: {ref.text}")
    return found


@pytest.fixture(scope="module")
def sections() -> dict[str, set[str]]:
    return {doc.name: set(headings(doc)) for doc in spec_documents()}


@pytest.fixture(scope="module")
def all_references() -> list[Reference]:
    refs = []
    for path in scanned_files() + spec_documents():
        refs += references(path, path.read_text(encoding="utf-8"))
    return refs


def test_specifications_exist_with_unique_numbered_headings():
    names = {doc.name for doc in spec_documents()}
    assert {"tb-caverns-2022.md", "ribfrac.md", "object-cxr.md", "imageclef-caption-2021.md",
            "imageclef-caption-2022.md"} <= names
    assert (SPEC_DIR / "README.md").is_file()
    for doc in spec_documents():
        numbers = headings(doc)
        assert numbers, f"{doc.name}: no numbered heading"
        assert len(numbers) == len(set(numbers)), f"{doc.name}: a section number is used twice"
        index = (SPEC_DIR / "README.md").read_text(encoding="utf-8")
        assert doc.name in index, f"docs/metrics/README.md does not list {doc.name}"


def test_every_section_reference_resolves(all_references, sections):
    in_code = [ref for ref in all_references if not ref.where.startswith("docs/")]
    assert len(in_code) >= 100, f"only {len(in_code)} references found in the code: is the scanner broken?"
    found = problems(all_references, sections)
    assert not found, f"{len(found)} unresolved section reference(s):\n" + "\n".join(found)
    print(f"{len(in_code)} section references in the code and {len(all_references) - len(in_code)} in the "
          "specifications resolve")


def test_every_named_specification_exists():
    missing = []
    for path in scanned_files():
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
            for match in DOCUMENT_PATH.finditer(line):
                if not (SPEC_DIR / match.group(1)).is_file():
                    missing.append(f"{path.relative_to(ROOT)}:{number}: docs/metrics/{match.group(1)}")
    assert not missing, "named but missing:\n" + "\n".join(missing)


def test_the_rule_catches_dangling_and_unresolved_references(tmp_path, sections):
    """The checker itself: a reference to a missing section, one without a document, a lettered one, and the
    same-line name winning over the header's."""
    module = tmp_path / "module.py"
    text = (
        '"""A module.\n\nSpec: docs/metrics/ribfrac.md\n"""\n'
        f"# {SIGN}3 and {SIGN}3.4: fine\n"
        f"# {SIGN}99: no such section\n"
        f"# object-cxr.md {SIGN}3.3 overrides the header; {SIGN}11 too\n"
        f"# {SIGN}2.2 of imageclef-caption-2022.md (named after the sign)\n"
        f"# {SIGN}A: lettered\n"
    )
    refs = references(module, text)
    assert [(r.section, r.document) for r in refs] == [
        ("3", "ribfrac.md"), ("3.4", "ribfrac.md"), ("99", "ribfrac.md"), ("3.3", "object-cxr.md"),
        ("11", "object-cxr.md"), ("2.2", "imageclef-caption-2022.md"), ("A", None)]
    found = problems(refs, sections)
    assert len(found) == 2 and f"{SIGN}99 has no numbered heading in ribfrac.md" in found[0]
    assert "names no specification" in found[1]

    ambiguous = tmp_path / "two.py"
    text = f'"""Both docs/metrics/ribfrac.md and object-cxr.md."""\n# {SIGN}3\n'
    assert problems(references(ambiguous, text), sections) == [
        f"{ambiguous}:2: {SIGN}3 names no specification (name docs/metrics/<x>.md on the line or in the file's "
        f"header; lettered sections do not exist): # {SIGN}3"]
