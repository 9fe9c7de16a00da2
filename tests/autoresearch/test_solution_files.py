"""The reference solutions and starters kept as Python files (``wmrl/autoresearch/tasks/solutions/``): each file parses, each
one is used, and every script written from them for a built-in task compiles with no undefined name (the check
ruff's F821 cannot make on a file with slots)."""

from __future__ import annotations

import ast
import builtins
import symtable
from pathlib import Path

import pandas as pd
import pytest

from wmrl.autoresearch.tasks import references
from wmrl.autoresearch.tasks.catalog import TASKS
from wmrl.autoresearch.tasks.script_files import SOLUTIONS_DIR, fill, part, script_text
from wmrl.autoresearch.tasks.starter import generic_starter, infer_prediction

SCRIPTS = {"tabular", "tabular_bagged", "tabular_trivial", "stacking_block", "forecast", "survival",
           "generic_starter", "generic_copy"}
COLUMNS = {"size": "numeric", "colour": "categorical"}  # a task's feature columns, as its card lists them


def undefined_names(source: str) -> set[str]:
    """Names a script reads that nothing in it defines (and that are not builtins)."""
    top = symtable.symtable(source, "script.py", "exec")
    defined = {s.get_name() for s in top.get_symbols() if s.is_assigned() or s.is_imported()} | set(dir(builtins))
    missing, tables = set(), [top]
    while tables:
        table = tables.pop()
        tables.extend(table.get_children())
        for symbol in table.get_symbols():
            module_level = table is top or symbol.is_global()
            if module_level and symbol.is_referenced() and symbol.get_name() not in defined:
                missing.add(symbol.get_name())
    return missing


def written_scripts() -> dict[str, str]:
    """Every reference and starter of every built-in task (one numeric and one categorical feature)."""
    scripts = {}
    for spec in TASKS:
        for name, text in references.reference_solutions(spec, COLUMNS).items():
            scripts[f"{spec.id}/{name}"] = text
        if spec.type not in ("forecast", "survival"):
            scripts[f"{spec.id}/heavy_boosting"] = references.heavy_starter(spec, COLUMNS)
            scripts[f"{spec.id}/heavy_stacking"] = references.stacking_starter(spec, COLUMNS)
    return scripts


def test_every_file_parses_has_a_docstring_and_is_used():
    files = {p.relative_to(SOLUTIONS_DIR).with_suffix("").as_posix() for p in SOLUTIONS_DIR.rglob("*.py")}
    used = SCRIPTS | {f"forecasters/{n}" for n in references.FORECASTERS} | {f"risks/{n}" for n in references.RISKS}
    assert files == used, f"unused files {sorted(files - used)}, missing files {sorted(used - files)}"
    for name in files:
        tree = ast.parse((SOLUTIONS_DIR / f"{name}.py").read_text())
        assert ast.get_docstring(tree), f"solutions/{name}.py needs a docstring saying what the script is for"
        assert '"""' not in script_text(name), f"the docstring of solutions/{name}.py would be written"


def test_every_written_script_compiles_with_no_undefined_name():
    scripts = written_scripts()
    assert len(scripts) >= 8 * len(TASKS)
    for key, text in scripts.items():
        compile(text, key, "exec")
        assert "__" not in text.replace("__name__", ""), f"{key}: a slot was left unfilled"
        assert not undefined_names(text), f"{key} reads undefined names {sorted(undefined_names(text))}"


def test_the_undefined_name_check_finds_a_missing_name():
    assert undefined_names("import numpy as np\n\n\ndef f(x):\n    return np.log(x) + period\n") == {"period"}
    assert undefined_names("def f(x):\n    return [y for y in x]\n\n\nf([1])\n") == set()


def test_a_part_splits_into_its_imports_and_body():
    imports, body = part("forecasters/holt_winters")
    assert imports == "from statsmodels.tsa.holtwinters import ExponentialSmoothing"
    assert body.startswith("def forecast(history, steps):") and not body.endswith("\n")
    assert part("risks/trivial")[0] == ""


def test_a_slot_left_unfilled_or_a_value_without_a_slot_names_the_file():
    with pytest.raises(KeyError, match=r"solutions/tabular_trivial.py has slots \['constant'\]"):
        fill("tabular_trivial")
    with pytest.raises(KeyError, match="tabular_trivial.py"):
        fill("tabular_trivial", constant="0", extra="1")


def test_slot_forms_fill_as_documented():
    text = fill("tabular_trivial", constant="train['y'].mean()")
    assert "constant = train['y'].mean()\n" in text and "__" not in text


@pytest.mark.parametrize("kind", ["label", "real", "risk", "copy"])
def test_generic_starters_compile_with_no_undefined_name(tmp_path: Path, kind: str):
    train = pd.DataFrame({"id": range(20), "x": range(20), "c": list("ab") * 10,
                          "y": list("uv") * 10 if kind == "label" else [i / 3 for i in range(20)]})
    if kind == "risk":  # a survival pair: the time (y) and the event
        train["event"] = [0, 1] * 10
    train.to_csv(tmp_path / "train.csv", index=False)
    train.drop(columns=["y", "event"], errors="ignore").to_csv(tmp_path / "test.csv", index=False)
    columns = {"copy": ("not_in_train", "nor_this"), "risk": ("risk",)}.get(kind, ("y",))  # copy: no target to learn
    pd.DataFrame({"id": range(20), **dict.fromkeys(columns, 0.0)}).to_csv(tmp_path / "sample_submission.csv", index=False)
    prediction = infer_prediction(tmp_path, "id", ("id", *columns))
    assert prediction.kind == kind
    text = generic_starter(tmp_path, "id", prediction)
    compile(text, "starter.py", "exec")
    assert not undefined_names(text)


def test_the_wheel_ships_every_file():
    import fnmatch
    import tomllib

    root = Path(__file__).resolve().parents[2]
    globs = tomllib.loads((root / "pyproject.toml").read_text())["tool"]["setuptools"]["package-data"]["wmrl"]
    package = root / "src" / "wmrl"
    for path in SOLUTIONS_DIR.rglob("*.py"):
        name = path.relative_to(package).as_posix()
        assert any(fnmatch.fnmatch(name, g) and g.count("/") == name.count("/") for g in globs), \
            f"{name} is not package data of wmrl (pyproject.toml [tool.setuptools.package-data])"
