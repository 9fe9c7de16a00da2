"""The import layering of ``src/wmrl`` (docs/architecture.md draws it): no import circles, no arrow up.

Every import counts: at module level, inside a function (a lazy import is still an arrow), under
``TYPE_CHECKING``. Relative imports are resolved; ``from a import b`` is an arrow to the module ``a.b`` when there is
one, else to ``a``. Importing ``a.b`` also runs ``a/__init__.py``; that implicit arrow is not drawn (a package's
``__init__`` re-exports its own modules).

The parts, lowest first: the RL core; the AutoResearch wing (its contracts, its tasks, then the environments that run them, then
the world models that stand in for them, then its training classes); the VLA wing (its parts, then its training classes); the application on top. The core
imports no wing, a wing never imports the other wing or the application, and inside a wing nothing imports a
layer above its own.
"""

from __future__ import annotations

import ast
from collections import deque
from dataclasses import dataclass
from pathlib import Path

import pytest

SRC = Path(__file__).resolve().parents[2] / "src"
ROOT = "wmrl"

#: part -> the modules it holds, by dotted prefix (the longest prefix that matches decides; the package ``wmrl``
#: itself is core)
PARTS: dict[str, tuple[str, ...]] = {
    "core": ("wmrl.types", "wmrl.paths", "wmrl.threads", "wmrl.algorithms", "wmrl.callbacks", "wmrl.generation", "wmrl.models",
             "wmrl.rollout", "wmrl.modules", "wmrl.evaluation"),
    "autoresearch.contracts": ("wmrl.autoresearch.contracts",),
    "autoresearch.tasks": ("wmrl.autoresearch.tasks",),
    "autoresearch.environments": ("wmrl.autoresearch.environments",),
    "autoresearch.world_models": ("wmrl.autoresearch.world_models",),
    "autoresearch.training": ("wmrl.autoresearch",),
    "vla.parts": ("wmrl.vla",),
    "vla.training": ("wmrl.vla.module", "wmrl.vla.settings", "wmrl.vla.datamodule"),
    "application": ("wmrl.cli", "wmrl.run_report", "wmrl.testing", "wmrl.benchmarking"),
}
#: part -> the other parts it may import
MAY_IMPORT: dict[str, set[str]] = {
    "core": set(),
    "autoresearch.contracts": {"core"},
    "autoresearch.tasks": {"core", "autoresearch.contracts"},
    "autoresearch.environments": {"core", "autoresearch.contracts", "autoresearch.tasks"},
    "autoresearch.world_models": {"core", "autoresearch.contracts", "autoresearch.tasks", "autoresearch.environments"},
    "autoresearch.training": {"core", "autoresearch.contracts", "autoresearch.tasks", "autoresearch.environments",
                              "autoresearch.world_models"},
    "vla.parts": {"core"},
    "vla.training": {"core", "vla.parts"},
    "application": set(PARTS) - {"application"},
}
#: (importer, imported) -> why the arrow stays for now; empty: every arrow keeps the layering
ALLOWED: dict[tuple[str, str], str] = {}


@dataclass(frozen=True)
class Arrow:
    """``importer`` imports ``imported`` at ``file:line``."""

    importer: str
    imported: str
    file: str
    line: int

    def __str__(self) -> str:
        return f"{self.importer} -> {self.imported} ({self.file}:{self.line})"


def modules_of(src: Path, package: str) -> dict[str, Path]:
    """Dotted module name -> file, for every ``.py`` under ``src/package`` (a package is named by its folder)."""
    found = {}
    for path in sorted((src / package).rglob("*.py")):
        parts = path.relative_to(src).with_suffix("").parts
        found[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    return found


def _nearest(name: str, modules: dict[str, Path]) -> str | None:
    while name and name not in modules:
        name = name.rpartition(".")[0]
    return name or None


def _imported_names(node: ast.AST, module: str, is_package: bool) -> list[str]:
    if isinstance(node, ast.Import):
        return [alias.name for alias in node.names]
    if not isinstance(node, ast.ImportFrom):
        return []
    base = node.module or ""
    if node.level:
        here = module.split(".") if is_package else module.split(".")[:-1]
        here = here[: len(here) - (node.level - 1)]
        base = ".".join([*here, base] if base else here)
    return [f"{base}.{alias.name}" for alias in node.names]


def import_graph(src: Path, package: str = ROOT) -> list[Arrow]:
    """Every arrow between the modules of ``package`` (first import of each pair, in file order)."""
    modules = modules_of(src, package)
    arrows: dict[tuple[str, str], Arrow] = {}
    for module, path in modules.items():
        tree = ast.parse(path.read_text(), filename=str(path))
        for node in ast.walk(tree):
            for name in _imported_names(node, module, path.name == "__init__.py"):
                target = _nearest(name, modules) if name.split(".")[0] == package else None
                if target is None or target == module:
                    continue
                arrow = Arrow(module, target, str(path.relative_to(src)), node.lineno)
                key = (module, target)
                if key not in arrows or arrow.line < arrows[key].line:
                    arrows[key] = arrow
    return sorted(arrows.values(), key=lambda a: (a.importer, a.imported))


def circles(arrows: list[Arrow]) -> list[list[Arrow]]:
    """One circle per strongly connected group of modules (Tarjan), as the arrows that close it."""
    out: dict[str, list[Arrow]] = {}
    for arrow in arrows:
        out.setdefault(arrow.importer, []).append(arrow)
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    groups: list[set[str]] = []

    def visit(node: str) -> None:  # recursive: the graph is a few hundred modules deep at most
        index[node] = low[node] = len(index)
        stack.append(node)
        for arrow in out.get(node, []):
            nxt = arrow.imported
            if nxt not in index:
                visit(nxt)
                low[node] = min(low[node], low[nxt])
            elif nxt in stack:
                low[node] = min(low[node], index[nxt])
        if low[node] == index[node]:
            group = set()
            while True:
                member = stack.pop()
                group.add(member)
                if member == node:
                    break
            if len(group) > 1:
                groups.append(group)

    for node in sorted(out):
        if node not in index:
            visit(node)
    return [_closing_path(min(group), group, out) for group in groups]


def _closing_path(start: str, group: set[str], out: dict[str, list[Arrow]]) -> list[Arrow]:
    """The shortest path of arrows from ``start`` back to itself inside ``group``."""
    queue: deque[tuple[str, list[Arrow]]] = deque([(start, [])])
    seen = set()
    while queue:
        node, path = queue.popleft()
        for arrow in out.get(node, []):
            if arrow.imported == start:
                return [*path, arrow]
            if arrow.imported in group and arrow.imported not in seen:
                seen.add(arrow.imported)
                queue.append((arrow.imported, [*path, arrow]))
    raise AssertionError(f"no circle through {start}")  # a strongly connected group always has one


def part_of(module: str, parts: dict[str, tuple[str, ...]], root: str = ROOT) -> str | None:
    """The part whose longest prefix matches ``module``; the root package is core; ``None``: in no part."""
    if module == root:
        return "core"
    matches = [(len(prefix), part) for part, prefixes in parts.items() for prefix in prefixes
               if module == prefix or module.startswith(prefix + ".")]
    return max(matches)[1] if matches else None


def upward_arrows(arrows: list[Arrow], parts: dict[str, tuple[str, ...]], may_import: dict[str, set[str]],
                  allowed: dict[tuple[str, str], str], root: str = ROOT) -> list[Arrow]:
    """The arrows from a part to a part it may not import (those in ``allowed`` excepted)."""
    bad = []
    for arrow in arrows:
        source, target = part_of(arrow.importer, parts, root), part_of(arrow.imported, parts, root)
        if source != target and target not in may_import[source] and (arrow.importer, arrow.imported) not in allowed:
            bad.append(arrow)
    return bad


def _describe(arrow: Arrow) -> str:
    return f"{arrow} ({part_of(arrow.importer, PARTS)} may not import {part_of(arrow.imported, PARTS)})"


# -- the package --------------------------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def arrows() -> list[Arrow]:
    return import_graph(SRC)


def test_every_module_belongs_to_a_declared_part():
    missing = sorted(m for m in modules_of(SRC, ROOT) if part_of(m, PARTS) is None)
    assert not missing, f"add these modules to a part of PARTS (and to docs/architecture.md): {missing}"


def test_no_import_circles(arrows):
    found = circles(arrows)
    assert not found, "import circles:\n" + "\n".join("  " + "; ".join(map(str, c)) for c in found)


def test_no_part_imports_a_part_above_it(arrows):
    bad = upward_arrows(arrows, PARTS, MAY_IMPORT, ALLOWED)
    assert not bad, "arrows that run up:\n" + "\n".join(f"  {_describe(a)}" for a in bad)


def test_every_allowed_arrow_still_exists(arrows):
    present = {(a.importer, a.imported) for a in arrows}
    assert set(ALLOWED) <= present, f"remove from ALLOWED (gone): {sorted(set(ALLOWED) - present)}"


# -- the checker itself catches what it is for ----------------------------------------------------------------------
def _plant(src: Path, files: dict[str, str]) -> None:
    for name, text in files.items():
        path = src / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)


def test_the_checker_finds_a_circle_made_by_a_lazy_relative_import(tmp_path):
    _plant(tmp_path, {"pkg/__init__.py": "", "pkg/low.py": "def f():\n    from .high import g\n",
                      "pkg/high.py": "from pkg.low import f\n", "pkg/other.py": "import pkg.low\n"})
    found = circles(import_graph(tmp_path, "pkg"))
    assert [[str(a) for a in circle] for circle in found] == [[
        "pkg.high -> pkg.low (pkg/high.py:1)", "pkg.low -> pkg.high (pkg/low.py:2)"]]


def test_the_checker_names_an_upward_arrow_with_its_file_and_line(tmp_path):
    _plant(tmp_path, {"pkg/__init__.py": "", "pkg/core/__init__.py": "", "pkg/wing/__init__.py": "",
                      "pkg/wing/env.py": "from pkg.core import base\n",
                      "pkg/core/base.py": "import os\n\n\ndef make():\n    from ..wing.env import Env\n"})
    parts = {"core": ("pkg.core",), "wing": ("pkg.wing",)}
    may_import = {"core": set(), "wing": {"core"}}
    arrows = import_graph(tmp_path, "pkg")
    bad = upward_arrows(arrows, parts, may_import, {}, root="pkg")
    assert [str(a) for a in bad] == ["pkg.core.base -> pkg.wing.env (pkg/core/base.py:5)"]
    assert upward_arrows(arrows, parts, may_import, {("pkg.core.base", "pkg.wing.env"): "planted"}, root="pkg") == []


def test_the_two_wings_have_one_shape():
    """Both wings hold the same roles where a reader looks for them: the LightningModule (``module``), the
    LightningDataModule(s) (``datamodule``), what stands in for reality (``world_models/``) and reality itself
    (``environments/`` for AutoResearch, ``simulators/`` for VLA)."""
    for wing, real in (("autoresearch", "environments"), ("vla", "simulators")):
        root = SRC / ROOT / wing
        roles = {p.stem if p.is_file() else p.name for p in root.iterdir() if p.suffix == ".py" or p.is_dir()}
        assert {"module", "datamodule", "world_models", real} <= roles, (wing, sorted(roles))
    assert (SRC / ROOT / "vla" / "policies").is_dir()  # where the wing's policies are (AutoResearch's: wmrl.models)


#: the wings' names: the core's code, docstrings and comments name neither wing nor what only a wing knows
WING_NAMES = r"(?i)autoresearch|\bvla\b|lerobot|pusht|libero|smolvla"


def test_the_core_names_no_wing():
    """The core is domain-free in its words too: a wing's name in the core (a docstring pointing at a wing's class,
    a comment about one domain) is an arrow the import graph cannot see. The package's front door
    (``wmrl/__init__.py``, which says what the kit is for) is not the core's code."""
    import re

    pattern = re.compile(WING_NAMES)
    found = []
    for module, path in modules_of(SRC, ROOT).items():
        if part_of(module, PARTS) != "core" or module == ROOT:
            continue
        for number, line in enumerate(path.read_text().splitlines(), 1):
            if pattern.search(line):
                found.append(f"{path.relative_to(SRC)}:{number}: {line.strip()}")
    assert not found, "the core names a wing:\n" + "\n".join(found)
    assert pattern.search("see wmrl.autoresearch.world_models") and pattern.search("the VLA path")  # it can fail


def test_the_tests_mirror_the_tree():
    """``tests/`` has a folder for the core, one per wing, one for ``benchmarks/`` and one for the project's docs and
    configs, and one support package for what they share: no test file lies loose at the top, no helper is collected."""
    tests = SRC.parent / "tests"
    top = {p.name for p in tests.iterdir() if p.name != "__pycache__" and not p.name.startswith(".")}
    wings = {p.name for p in (SRC / ROOT).iterdir() if (p / "module.py").is_file()}
    assert wings == {"autoresearch", "vla"}  # each wing has its training module: the check can see a new one
    assert top == {"conftest.py", "core", *wings, "benchmarks", "project", "vllm_real", "support"}, top
    assert (tests / "support" / "__init__.py").is_file() and not list((tests / "support").glob("test_*.py"))
