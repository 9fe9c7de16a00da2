"""The documentation site (docs/, mkdocs.yml): it builds in strict mode, its pages render in headless Chromium, the
API reference covers every module and each configurable class's keys, every code block on it runs in a test or
says why not, and nothing in the repository points outside it."""

from __future__ import annotations

import importlib
import inspect
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from PIL import Image
from support.docs_blocks import ROOT, all_blocks

MKDOCS = Path(sys.executable).parent / "mkdocs"
NEEDS_MKDOCS = pytest.mark.skipif(not MKDOCS.exists(), reason="no mkdocs: pip install -c constraints.txt -e '.[docs]'")
API = ROOT / "docs" / "reference" / "api"


# -- the site -----------------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def site(tmp_path_factory) -> Path:
    """The site built the way the README says (strict mode), into a temp dir."""
    out = tmp_path_factory.mktemp("site")
    result = subprocess.run([str(MKDOCS), "build", "--strict", "--site-dir", str(out)], cwd=ROOT,
                            capture_output=True, text=True, timeout=600, env=_env())
    assert result.returncode == 0, result.stderr[-4000:]
    return out


def _env() -> dict:
    return {**os.environ, "NO_MKDOCS_2_WARNING": "1"}  # no end-of-life banner in the build log


@NEEDS_MKDOCS
def test_the_site_builds_in_strict_mode_with_every_page(site):
    for page in ("index.html", "concepts.html", "design.html", "findings.html", "getting-started/cpu.html",
                 "guides/report.html", "reference/cli.html", "reference/configs.html", "reference/api/callbacks.html",
                 "extending.html", "tasks.html", "scale-out.html", "security.html", "vla.html",
                 "benchmarks/index.html", "benchmarks/RESULTS-learn.html", "benchmarks/results/cpu-learn_heldout.png"):
        assert (site / page).is_file(), page
    # generated at build time from the code: every subcommand's --help, every shipped config
    cli = (site / "reference" / "cli.html").read_text()
    for command in ("wmrl tasks list", "wmrl tasks add", "wmrl exec", "wmrl report"):
        assert f"<code>{command}</code>" in cli, command
    configs = (site / "reference" / "configs.html").read_text()
    for config in ROOT.glob("configs/**/*.yaml"):
        assert config.relative_to(ROOT).as_posix() in configs, config
    # a link to a repository file that is not on the site is shown as its path (docs/tasks.md links the example)
    assert "<code>examples/tasks/state_violent_crime</code>" in (site / "tasks.html").read_text()


CONFIGURABLE = {"callbacks.html": ["wmrl.callbacks.routing:AnchorRouting", "wmrl.callbacks.world_model_reward:WorldModelReward",
                                   "wmrl.callbacks.debiasing:OnlineDebiasing", "wmrl.callbacks.denoising:InverseVarianceDenoising",
                                   "wmrl.callbacks.fusion:VarianceFusion", "wmrl.callbacks.reward_terms:RewardTerms"],
                "modules.html": ["wmrl.autoresearch.module:GRPOModule"],
                "tasks.html": ["wmrl.autoresearch.datamodule:AutoResearchDataModule"],
                "environments.html": ["wmrl.autoresearch.world_models.lm:LMWorldModel",
                                      "wmrl.autoresearch.world_models.learned:LearnedWorldModel",
                                      "wmrl.autoresearch.environments.real:SandboxEnvironment"],
                "generation.html": ["wmrl.generation.hf_world_model:HFWorldModelBackend",
                                    "wmrl.generation.vllm:VLLMGenerationEngine"]}


@NEEDS_MKDOCS
@pytest.mark.parametrize("page", sorted(CONFIGURABLE))
def test_the_api_reference_lists_each_configurable_class_with_its_config_keys(site, page):
    html = (site / "reference" / "api" / page).read_text()
    for target in CONFIGURABLE[page]:
        module, name = target.split(":")
        cls = getattr(importlib.import_module(module), name)
        anchor = f'id="{module}.{name}"'
        assert anchor in html, target
        section = html[html.index(anchor):]
        keys = [k for k in inspect.signature(cls.__init__).parameters if k != "self"]
        missing = [k for k in keys if f"<code>{k}</code>" not in section[:200_000]]
        assert not missing, f"{target}: {missing} not in its parameter table"


def test_every_module_is_on_an_api_page():
    listed = {m for page in API.glob("*.md") for m in re.findall(r"^::: (wmrl[\w.]*)$", page.read_text(), re.M)}
    modules = {".".join(p.relative_to(ROOT / "src").with_suffix("").parts)
               for p in (ROOT / "src" / "wmrl").rglob("*.py") if p.name != "__init__.py"
               and ROOT / "src/wmrl/autoresearch/tasks/solutions" not in p.parents}  # the scripts with slots: not modules
    # wmrl.cli.commands: its commands are the generated "Command line" page; its Python entry points are listed
    # one by one; wmrl.cli.__main__ is `python -m wmrl.cli`
    assert sorted(modules - listed - {"wmrl.cli.commands", "wmrl.cli.__main__"}) == []
    assert {"wmrl.cli.commands.main", "wmrl.cli.commands.lightning_cli"} <= listed
    assert sorted(m for m in listed if m.rsplit(".", 1)[0] not in modules and m not in modules) == []


def _chromium() -> str | None:
    return shutil.which("chromium") or shutil.which("chromium-browser") or shutil.which("google-chrome")


PAGES = [("index.html", "wmrl", "Where to start"),
         ("concepts.html", "The method - wmrl", "Online Debiasing"),
         ("reference/api/callbacks.html", "Callbacks - wmrl", "AnchorRouting")]


@NEEDS_MKDOCS
@pytest.mark.skipif(_chromium() is None, reason="no chromium browser (apt-get install chromium)")
@pytest.mark.parametrize(("page", "title", "heading"), PAGES)
def test_the_pages_render_in_headless_chromium(site, tmp_path, page, title, heading):
    flags = [_chromium(), "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
             "--disable-background-networking", "--disable-component-update", "--disable-sync",
             "--disable-dev-shm-usage", "--allow-file-access-from-files", f"--user-data-dir={tmp_path / 'profile'}",
             "--virtual-time-budget=10000"]
    url = (site / page).as_uri()
    dom = subprocess.run([*flags, "--dump-dom", url], capture_output=True, text=True, timeout=120).stdout
    assert f"<title>{title}</title>" in dom
    headings = [re.sub(r"<[^>]+>", "", h).replace("¶", "").strip()
                for h in re.findall(r"<h[1-3][^>]*>(.*?)</h[1-3]>", dom, flags=re.S)]
    assert heading in headings, headings
    shot = tmp_path / "page.png"
    subprocess.run([*flags, f"--screenshot={shot}", "--window-size=1280,1600", url], capture_output=True,
                   timeout=120, check=True)
    image = Image.open(shot).convert("RGB")
    assert image.size == (1280, 1600)
    assert len(image.resize((128, 160)).getcolors(1 << 16)) > 20  # a styled page with text, not a blank screen


# -- code blocks ------------------------------------------------------------------------------------------
def test_every_code_block_is_marked():
    unmarked = [f"{b.page}:{b.line}" for b in all_blocks() if b.kind is None]
    assert unmarked == [], "each needs <!-- run: ID -->, <!-- file: NAME --> or <!-- not run: REASON --> before it"
    vague = [f"{b.page}:{b.line}" for b in all_blocks() if b.kind == "not run" and len(b.value.split()) < 3]
    assert vague == [], "say why the block is not run"


def test_every_run_marker_is_run_by_a_test():
    sources = "\n".join(p.read_text() for p in (ROOT / "tests").rglob("*.py")) + (ROOT / ".ci" / "run").read_text()
    runs = [b for b in all_blocks() if b.kind == "run"]
    assert runs
    unused = sorted({b.value for b in runs if f'"{b.value}"' not in sources and f"run: {b.value}" not in sources})
    assert unused == [], "no test runs these blocks"
    by_id: dict[str, set[str]] = {}
    for b in runs:
        by_id.setdefault(b.value, set()).add(b.text)
    assert [i for i, texts in by_id.items() if len(texts) > 1] == [], "one ID, one command, wherever it is shown"


def test_every_file_block_is_written_out_by_its_pages_test():
    sources = "\n".join(p.read_text() for p in (ROOT / "tests").rglob("*.py"))
    pages = sorted({b.page for b in all_blocks() if b.kind == "file"})
    assert pages and [p for p in pages if Path(p).name not in sources] == []


def test_the_readme_links_resolve():
    text = (ROOT / "README.md").read_text()
    links = [t.split("#")[0] for t in re.findall(r"\]\(([^)\s]+)\)", text) if "://" not in t and not t.startswith("#")]
    assert links and [t for t in links if not (ROOT / t).exists()] == []


# -- nothing outside the repository -------------------------------------------------------------------------
def test_the_readmes_map_of_the_design_names_what_the_tree_holds():
    """Every path and class the README's "Where the design lives" table names exists where it says."""
    import re

    table = (ROOT / "README.md").read_text().split("## Where the design lives", 1)[1].split("\n## ", 1)[0]
    rows = [line for line in table.splitlines() if line.startswith("| ") and not line.startswith("| design")]
    assert len(rows) >= 8
    for row in rows:
        where = row.split("|")[2]
        for path in re.findall(r"`([\w/.]+(?:\.py|/))`", where):
            base = ROOT if path.startswith(("configs/", "tests/", "benchmarks/")) else ROOT / "src" / "wmrl"
            assert (base / path).exists(), f"README names {path}, which does not exist"
        for name in re.findall(r"`([A-Z]\w+)`", where):
            if name != "LightningCLI":
                assert re.search(rf"^class {name}\b", "\n".join(
                    f.read_text() for f in (ROOT / "src").rglob("*.py")), re.M), f"README names class {name}"


def test_nothing_points_outside_the_repository():
    """The design notes the project was built from are not part of it: what they said is in docs/ (the method,
    design, findings pages), in the project's own words."""
    hits = []
    for top in ("README.md", "docs", "src", "configs", "benchmarks", "tests", "examples", ".ci", "pyproject.toml",
                "mkdocs.yml"):
        path = ROOT / top
        files = [path] if path.is_file() else [p for p in path.rglob("*") if p.is_file() and ".egg-info" not in str(p)]
        for file in files:
            if file.suffix in (".png", ".pt", ".pyc", ".csv", ".jsonl") or file == Path(__file__):
                continue
            text = file.read_text(errors="ignore")
            hits += [f"{file.relative_to(ROOT)}: {word}" for word in ("shared/", "DESIGN.md", "STYLE.md") if word in text]
    assert hits == []


# -- the build hooks ---------------------------------------------------------------------------------------
def test_doctests_become_fenced_blocks():
    sys.path.insert(0, str(ROOT / "docs" / "hooks"))
    try:
        from doctest_blocks import fence_doctests
    finally:
        sys.path.pop(0)
    text = "Adds.\n\n>>> [1, 2][0]\n1\n\n    >>> indented (an Examples section) is left alone\n"
    assert fence_doctests(text).splitlines()[2:6] == ["```pycon", ">>> [1, 2][0]", "1", "```"]
    assert fence_doctests(text).endswith("    >>> indented (an Examples section) is left alone")
