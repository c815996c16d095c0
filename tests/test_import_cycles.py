"""No import cycles among the medchallenge modules: the dependencies of the package go one way.

Every import counts, wherever it is written: at the top of a module, inside a function (a lazy import is still a
dependency), under `if TYPE_CHECKING:` (a type is a dependency too), and `importlib.import_module("medchallenge...")`
with a literal name. `from package import name` is an edge to the submodule `package.name` where there is one, else
to the package's `__init__`. A cycle is a set of modules that each reach all the others (a strongly connected
component of more than one module).
"""

from __future__ import annotations

import ast
from collections.abc import Collection
from pathlib import Path

PACKAGE_ROOT = Path(__file__).resolve().parents[1] / "shared" / "medchallenge"

# Cycles left on purpose, each with why and how it is to be broken; a cycle that is gone must leave this list.
ALLOWED_CYCLES: dict[frozenset[str], str] = {}


def module_files(root: Path) -> dict[str, Path]:
    """Dotted module name -> file, for every module of the package at `root` (a package is its __init__.py)."""
    modules = {}
    for path in sorted(root.rglob("*.py")):
        parts = path.relative_to(root.parent).with_suffix("").parts
        if parts[-1] == "__init__":
            parts = parts[:-1]
        modules[".".join(parts)] = path
    return modules


def imported_modules(tree: ast.AST, module: str, is_package: bool, modules: Collection[str]) -> set[str]:
    """The modules of `modules` that the code of `module` imports, anywhere in it (relative imports resolved).
    `from a import b` is an edge to the module `a.b` where there is one, else to `a` (b is read from a)."""
    package = module.split(".") if is_package else module.split(".")[:-1]
    names = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = ".".join(package[:len(package) - node.level + 1] + ([node.module] if node.module else []))
            else:
                base = node.module or ""
            names.update(f"{base}.{alias.name}" if f"{base}.{alias.name}" in modules else base
                         for alias in node.names)
        elif (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
              and node.func.attr == "import_module" and node.args and isinstance(node.args[0], ast.Constant)
              and isinstance(node.args[0].value, str)):
            names.add(node.args[0].value)
    return {name for name in names if name in modules and name != module}


def import_graph(root: Path) -> dict[str, set[str]]:
    """Module -> the modules of the package it imports."""
    modules = module_files(root)
    return {module: imported_modules(ast.parse(path.read_text(encoding="utf-8"), str(path)), module,
                                     path.name == "__init__.py", modules)
            for module, path in modules.items()}


def reachable(graph: dict[str, set[str]], start: str) -> set[str]:
    seen, stack = set(), [start]
    while stack:
        for target in graph[stack.pop()]:
            if target not in seen:
                seen.add(target)
                stack.append(target)
    return seen


def import_cycles(graph: dict[str, set[str]]) -> set[frozenset[str]]:
    """The cycles: each set of two or more modules that import one another, directly or not."""
    reach = {module: reachable(graph, module) for module in graph}
    return {frozenset({module} | {other for other in reach[module] if module in reach[other]})
            for module in graph if module in reach[module]}


def test_the_package_has_no_import_cycle_but_the_listed_ones():
    cycles = import_cycles(import_graph(PACKAGE_ROOT))
    unexpected = [sorted(cycle) for cycle in cycles if cycle not in ALLOWED_CYCLES]
    assert not unexpected, f"import cycles: {unexpected}"
    gone = [sorted(cycle) for cycle in ALLOWED_CYCLES if cycle not in cycles]
    assert not gone, f"these cycles are gone (or changed): take them out of ALLOWED_CYCLES: {gone}"


def test_cycles_through_lazy_type_only_and_dynamic_imports_are_found(tmp_path):
    package = tmp_path / "pkg"
    (package / "sub").mkdir(parents=True)
    (package / "__init__.py").write_text("")
    (package / "sub" / "__init__.py").write_text("from . import leaf\n")
    (package / "a.py").write_text("def f():\n    from .b import g\n    return g\n")
    (package / "b.py").write_text("from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from .a import f\n")
    (package / "c.py").write_text("import importlib\nmodule = importlib.import_module('pkg.sub.leaf')\n")
    (package / "sub" / "leaf.py").write_text("from .. import c\n")
    (package / "d.py").write_text("from .sub import leaf\nfrom pkg import a\n")

    graph = import_graph(package)

    assert graph["pkg.d"] == {"pkg.sub.leaf", "pkg.a"}  # submodules, not the packages they are read from
    assert graph["pkg.sub"] == {"pkg.sub.leaf"}
    assert import_cycles(graph) == {frozenset({"pkg.a", "pkg.b"}), frozenset({"pkg.c", "pkg.sub.leaf"})}
