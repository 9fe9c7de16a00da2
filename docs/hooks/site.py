"""mkdocs hooks that build wmrl's site from the repository as it is (``mkdocs.yml``: ``hooks:``).

- The results pages stay where the benchmarks write them (``benchmarks/README.md``, ``benchmarks/RESULTS*.md`` and
  their figures under ``benchmarks/results/``): they join the site as generated files at the same relative paths,
  so their own links keep working, and nothing is copied into ``docs/``.
- ``<!-- cli-help -->`` in a page becomes the ``--help`` of every ``wmrl`` subcommand, read from the parser itself
  (the reference cannot drift from the code); ``<!-- shipped-configs -->`` becomes the list of shipped YAMLs with
  their header comments.
- A relative link from a page to a repository file that is not on the site (a config, an example folder) is
  checked against the repository and written as that path, in code: it works on GitHub, reads right on the
  site, and a link to a file that does not exist still fails the strict build.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import posixpath
import re
from pathlib import Path

from mkdocs.structure.files import File, Files

REPO = Path(__file__).resolve().parents[2]
#: the repository folders whose Markdown and figures join the site, at the same relative paths
INCLUDED = (("benchmarks", "*.md"), ("benchmarks/results", "*.png"))
LINK = re.compile(r"(?<!!)\[([^\]\n]+)\]\(([^)\s]+)\)")


def on_files(files: Files, config) -> Files:
    for folder, pattern in INCLUDED:
        for path in sorted((REPO / folder).glob(pattern)):
            files.append(File.generated(config, path.relative_to(REPO).as_posix(), abs_src_path=str(path)))
    return files


def on_page_markdown(markdown: str, page, config, files: Files) -> str:
    for marker, generate in (("<!-- cli-help -->", cli_help), ("<!-- shipped-configs -->", shipped_configs)):
        line = re.compile(rf"^{re.escape(marker)}$", re.M)  # a marker on a line of its own, not one quoted in text
        if line.search(markdown):
            text = generate()
            markdown = line.sub(lambda _, text=text: text, markdown)
    return repository_links(markdown, page.file, files)


def repository_links(markdown: str, file: File, files: Files) -> str:
    """Links that leave the site for a repository file become that file's path in code (see the module docstring);
    links to site pages, anchors and URLs are left to mkdocs' own validation."""
    source = Path(file.abs_src_path) if file.abs_src_path else None

    def replace(match: re.Match) -> str:
        text, target = match.groups()
        path = target.split("#", 1)[0]
        if not path or "://" in path or path.startswith(("mailto:", "/")) or source is None:
            return match.group(0)
        on_site = posixpath.normpath(posixpath.join(posixpath.dirname(file.src_uri), path))
        if files.get_file_from_path(on_site) is not None:
            return match.group(0)
        in_repo = (source.parent / path).resolve()
        if not in_repo.exists() or REPO not in in_repo.parents:
            return match.group(0)  # mkdocs reports it: a broken link fails the strict build
        shown = in_repo.relative_to(REPO).as_posix()
        label = text.strip("`")
        return f"`{shown}`" if label in (shown, path, Path(shown).name) else f"{text} (`{shown}`)"

    return LINK.sub(replace, markdown)


def cli_help() -> str:
    """Every ``wmrl`` subcommand's ``--help``, as the parser prints it (100 columns)."""
    from wmrl.cli import LIGHTNING_COMMANDS, build_parser

    sections: list[str] = []
    with _columns(100):
        parser = build_parser()
        sections.append(_help_block("wmrl", parser))
        for name, sub in _subcommands(parser):
            if name.split()[-1] in LIGHTNING_COMMANDS:
                continue  # LightningCLI's own parser: documented on the page, `wmrl fit --help` lists every key
            sections.append(_help_block(name, sub))
    return "\n\n".join(sections)


def _subcommands(parser: argparse.ArgumentParser, prefix: str = "wmrl"):
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                yield f"{prefix} {name}", sub
                yield from _subcommands(sub, f"{prefix} {name}")


def _help_block(name: str, parser: argparse.ArgumentParser) -> str:
    return (f"### `{name}`\n\n<!-- not run: generated, the parser's --help -->\n```text\n"
            f"{parser.format_help().rstrip()}\n```")


@contextlib.contextmanager
def _columns(width: int):
    before = os.environ.get("COLUMNS")
    os.environ["COLUMNS"] = str(width)
    try:
        yield
    finally:
        if before is None:
            os.environ.pop("COLUMNS", None)
        else:
            os.environ["COLUMNS"] = before


def shipped_configs() -> str:
    """A table of the shipped YAMLs under ``configs/``: the bases an overlay goes on (its first line,
    ``# overlay on: a.yaml + b.yaml``) and the first sentence of the rest of its header comment."""
    rows = ["| config | goes on | what it is |", "|---|---|---|"]
    for path in sorted((REPO / "configs").rglob("*.yaml")):
        header = []
        for line in path.read_text().splitlines():
            if not line.startswith("#"):
                break
            header.append(line.lstrip("#").strip())
        overlay = bool(header) and header[0].startswith("overlay on:")
        bases = header.pop(0).removeprefix("overlay on:").split(" + ") if overlay else []
        text = " ".join(h for h in header if h and not h.startswith(("wmrl ", ".venv"))).strip()
        first = re.split(r"(?<=[.:;])\s", text, maxsplit=1)[0] if text else ""
        on = " + ".join(f"`{b.strip()}`" for b in bases) or "(a base)"
        rows.append(f"| `{path.relative_to(REPO).as_posix()}` | {on} | {first.replace('|', '/')} |")
    return "\n".join(rows)
