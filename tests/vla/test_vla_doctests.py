"""The docstring examples of the wmrl.vla modules (skipped by tests/project/test_doctests.py on Python 3.11)."""

from __future__ import annotations

import doctest
import importlib
import pkgutil

import pytest

import wmrl.vla

pytestmark = pytest.mark.lerobot
MODULES = sorted(m.name for m in pkgutil.walk_packages(wmrl.vla.__path__, "wmrl.vla."))


@pytest.mark.parametrize("name", MODULES)
def test_docstring_examples(name):
    result = doctest.testmod(importlib.import_module(name), optionflags=doctest.ELLIPSIS)
    assert result.failed == 0, f"{result.failed} of {result.attempted} docstring examples in {name} failed"
