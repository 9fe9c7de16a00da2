"""The solution scripts wmrl writes, kept as Python files (``tasks/solutions/``) and filled in per task.

A reference solution or a starter is a script that runs in the sandbox; keeping it as a ``.py`` file rather than
a string lets ruff lint it and a test compile it. A file is a script with *slots*, each a name between double
underscores, in one of three forms that all parse as Python:

- ``__name__``: an expression, a name or a string's text (``target = "__target__"``, ``return __raw__``);
- ``# __name__`` on a line of its own, or ``  # __name__`` after code: lines (a function, extra imports);
  the value replaces the comment with the spaces before it, so a trailing slot's value starts with ``\\n``
  to continue on a new line, and an empty value leaves the line as it was without the comment;
- ``, **__name__``: keyword arguments, written with their leading ``", "`` (or nothing).

The file's docstring says what the script is for and is not written. A *part* (``solutions/forecasters/``,
``solutions/risks/``) is a piece of a script: its import lines and its body, filled into a script's slots.
The rendered text is what the sandbox runs and what the suite's leaderboards were measured on, so a change to
a file changes the task's references (``wmrl tasks references --record``).
"""

from __future__ import annotations

import ast
import re
from functools import cache
from pathlib import Path

SOLUTIONS_DIR = Path(__file__).with_name("solutions")
_SLOT = re.compile(r"(?:, \*\*| *# )?__([a-z][a-z0-9_]*)__")


@cache
def script_text(name: str) -> str:
    """The script ``solutions/<name>.py`` without its docstring (and the blank lines after it)."""
    text = (SOLUTIONS_DIR / f"{name}.py").read_text()
    body = ast.parse(text).body
    if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant):
        text = "".join(text.splitlines(keepends=True)[body[0].end_lineno:]).lstrip("\n")
    return text


def fill(name: str, **values: str) -> str:
    """The script ``name`` with every slot replaced by its value.

    Raises:
        KeyError: a slot of the file has no value, or a value names no slot (a file and its caller disagree).
    """
    pieces = _pieces(name)
    slots = set(pieces[1::2])
    if slots != set(values):
        raise KeyError(f"solutions/{name}.py has slots {sorted(slots)}; given {sorted(values)}")
    return "".join(values[piece] if i % 2 else piece for i, piece in enumerate(pieces))


@cache
def _pieces(name: str) -> tuple[str, ...]:
    """The script's text split at its slots: text, slot name, text, ..., text (read and split once)."""
    return tuple(_SLOT.split(script_text(name)))


def part(name: str) -> tuple[str, str]:
    """The part ``solutions/<name>.py`` as ``(import lines, body)``, both without a final newline."""
    lines = script_text(name).splitlines()
    count = next((i for i, line in enumerate(lines) if not line.startswith(("import ", "from "))), len(lines))
    return "\n".join(lines[:count]), "\n".join(lines[count:]).strip("\n")
