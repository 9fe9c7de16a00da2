"""A griffe extension for the API reference: docstring examples (``>>>`` lines and their output) become fenced
``pycon`` blocks, as a reader expects them and as ``tests/project/test_doctests.py`` runs them.

Left as plain docstring text, Markdown would read ``>>>`` as nested quotes and ``[a, b][0]`` in an output line
as a link reference (which the strict build then cannot resolve). Examples under a Google ``Examples:`` section
are indented and already handled by the docstring parser, so only examples at the docstring's own margin change.
"""

from __future__ import annotations

from typing import Any

import griffe


def fence_doctests(text: str) -> str:
    """Wrap each run of doctest lines (a ``>>>`` line up to the next blank line) in a ``pycon`` fence.

    >>> print(fence_doctests("Adds.\\n\\n>>> 1 + 1\\n2\\n\\nMore text."))
    Adds.
    <BLANKLINE>
    ```pycon
    >>> 1 + 1
    2
    ```
    <BLANKLINE>
    More text.
    """
    out: list[str] = []
    inside = False
    for line in text.splitlines():
        if not inside and line.startswith(">>>"):
            out.append("```pycon")
            inside = True
        elif inside and not line.strip():
            out.append("```")
            inside = False
        out.append(line)
    if inside:
        out.append("```")
    return "\n".join(out)


class DoctestBlocks(griffe.Extension):
    """Fence the docstring examples of every object griffe loads."""

    def on_instance(self, *, obj: griffe.Object, **kwargs: Any) -> None:
        if obj.docstring is not None and ">>>" in obj.docstring.value:
            obj.docstring.value = fence_doctests(obj.docstring.value)
