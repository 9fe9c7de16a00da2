"""The code blocks of the documentation and their markers (docs/guides/docs.md, "Every code block runs, or says why
not"): every fenced block on the site is preceded by ``<!-- run: ID -->``, ``<!-- file: NAME -->`` or
``<!-- not run: REASON -->``. Tests read the blocks they run from the pages themselves, by ``ID``."""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
MARKER = re.compile(r"^\s*<!-- (run|file|not run): ?(.*?) -->\s*$")
FENCE = re.compile(r"^( {0,3}|\s*)(`{3,}|~{3,})([^`]*)$")


@dataclass(frozen=True)
class Block:
    page: str       # path relative to the repository root
    line: int       # 1-based line of the opening fence
    language: str
    kind: str | None  # run | file | not run | None (no marker)
    value: str        # the ID, file name or reason
    text: str         # the block's content, dedented to its fence


def site_pages() -> list[Path]:
    """The Markdown the site and the README show: docs/ (not its build hooks), README.md, benchmarks/*.md."""
    pages = [p for p in sorted((ROOT / "docs").rglob("*.md")) if "hooks" not in p.relative_to(ROOT / "docs").parts]
    return [ROOT / "README.md", *pages, *sorted((ROOT / "benchmarks").glob("*.md"))]


def blocks(page: Path) -> list[Block]:
    """Every fenced block of ``page`` with the marker on the line just before its opening fence."""
    lines = page.read_text().splitlines()
    found: list[Block] = []
    i = 0
    while i < len(lines):
        opening = FENCE.match(lines[i])
        if not opening:
            i += 1
            continue
        indent, fence, info = opening.groups()
        close = re.compile(rf"^\s*{re.escape(fence[0])}{{{len(fence)},}}\s*$")
        end = next((j for j in range(i + 1, len(lines)) if close.match(lines[j])), len(lines))
        body = [line[len(indent):] if line.startswith(indent) else line.lstrip() for line in lines[i + 1:end]]
        marker = MARKER.match(lines[i - 1]) if i > 0 else None
        found.append(Block(str(page.relative_to(ROOT)), i + 1, info.strip(), marker.group(1) if marker else None,
                           marker.group(2).strip() if marker else "", "\n".join(body) + "\n"))
        i = end + 1
    return found


def all_blocks() -> list[Block]:
    return [block for page in site_pages() for block in blocks(page)]


def docs_block(page: str, block_id: str) -> str:
    """The text of the block marked ``<!-- run: block_id -->`` on ``page`` (relative to the repository root)."""
    matches = [b for b in blocks(ROOT / page) if b.kind == "run" and b.value == block_id]
    if len(matches) != 1:
        raise LookupError(f"{page}: expected one block marked <!-- run: {block_id} --> (found {len(matches)})")
    return matches[0].text


def docs_file(page: str, name: str) -> str:
    """The text of the block marked ``<!-- file: name -->`` on ``page``."""
    matches = [b for b in blocks(ROOT / page) if b.kind == "file" and b.value == name]
    if len(matches) != 1:
        raise LookupError(f"{page}: expected one block marked <!-- file: {name} --> (found {len(matches)})")
    return matches[0].text
