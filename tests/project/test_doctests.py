"""The docstring examples of every wmrl module run and hold (docs/design.md: pure functions carry examples that run)."""

from __future__ import annotations

import doctest
import importlib
import pkgutil

import pytest

import wmrl

# runs inside the sandbox as a script; the VLA package needs the Python 3.12 lerobot env (tests/vla/)
SKIP = ("wmrl.autoresearch.environments.sandbox.boot", "wmrl.vla")
MODULES = sorted(
    m.name for m in pkgutil.walk_packages(wmrl.__path__, "wmrl.") if not m.name.startswith(SKIP)
)


@pytest.mark.parametrize("name", MODULES)
def test_docstring_examples(name):
    result = doctest.testmod(importlib.import_module(name), optionflags=doctest.ELLIPSIS)
    assert result.failed == 0, f"{result.failed} of {result.attempted} docstring examples in {name} failed"


def test_the_doctests_are_found():
    assert "wmrl.algorithms.debias" in MODULES and "wmrl.autoresearch.world_models.learned" in MODULES
