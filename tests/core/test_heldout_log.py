"""The held-out evaluation record both RL modules share (:mod:`wmrl.evaluation.heldout`), and what moved out of the
modules with it: one component, the same class in both domains, behaviour cloning only in its callback."""

from __future__ import annotations

import json
from types import SimpleNamespace

import pytest
import torch


def _module(tmp_path, step=0, loggers=("csv",), rank_zero=True, eval_at_start=True):
    logged = []
    logger = SimpleNamespace(log_metrics=lambda metrics, step: logged.append((metrics, step)))
    trainer = SimpleNamespace(loggers=list(loggers), is_global_zero=rank_zero, default_root_dir=str(tmp_path))
    module = SimpleNamespace(trained_steps=step, global_step=step, trainer=trainer, loggers=[logger],
                             hparams=SimpleNamespace(eval_at_start=eval_at_start))
    return module, logged


def test_each_evaluation_is_labelled_and_written_as_one_line_of_heldout_jsonl(tmp_path):
    from wmrl.evaluation.heldout import EVAL_FILE, HeldOutLog
    from wmrl.vla.heldout_report import success_report

    log = HeldOutLog(success_report)
    assert log.report() == ""  # nothing evaluated: nothing printed
    log.keep(_module(tmp_path, step=0)[0], "heldout", 0.25, {"episodes": [{"task_id": "a", "success": 0.0}]})
    log.keep(_module(tmp_path, step=4)[0], "test", 0.5, {"episodes": []})
    lines = [json.loads(line) for line in (tmp_path / EVAL_FILE).read_text().splitlines()]
    assert lines == [{"split": "heldout", "step": 0, "episodes": [{"task_id": "a", "success": 0.0}]},
                     {"split": "test", "step": 4, "episodes": []}]
    assert log.history == [("start", 0.25), ("step 4", 0.5)]
    assert log.report().splitlines()[-1] == "      step 4: success 0.500"


@pytest.mark.parametrize("loggers, rank_zero", [((), True), (("csv",), False)])
def test_only_rank_zero_of_a_logging_run_writes(tmp_path, loggers, rank_zero):
    from wmrl.evaluation.heldout import HeldOutLog
    from wmrl.evaluation.report import held_out_report

    log = HeldOutLog(held_out_report)
    log.keep(_module(tmp_path / "run", loggers=loggers, rank_zero=rank_zero)[0], "heldout", {"score": 1.0}, {})
    assert not (tmp_path / "run").exists() and log.history == [("start", {"score": 1.0})]


def test_the_starting_policy_is_evaluated_once_before_the_first_step_and_logged_at_step_zero(tmp_path):
    from wmrl.evaluation.heldout import HeldOutLog
    from wmrl.evaluation.report import held_out_report

    log, calls = HeldOutLog(held_out_report), []
    module, logged = _module(tmp_path)
    log.at_start(module, lambda: calls.append(1) or {"success": 0.5})
    assert calls == [1] and logged == [({"heldout/success": 0.5}, 0)]
    for later in (_module(tmp_path, step=3)[0], _module(tmp_path, eval_at_start=False)[0]):  # resumed; switched off
        log.at_start(later, lambda: calls.append(1) or {})
    assert calls == [1]


def test_both_domains_keep_their_evaluations_in_the_shared_log_and_clone_behaviour_only_in_the_callback():
    from support.fakes import LowTokenEnvironment, byte_tokenizer

    from wmrl.autoresearch.module import GRPOModule
    from wmrl.evaluation.heldout import HeldOutLog
    from wmrl.models import tiny_llama
    from wmrl.vla.module import VLAGRPOModule
    from wmrl.vla.simulators.bandit import LinearGaussianPolicy

    llm = GRPOModule(policy=tiny_llama(byte_tokenizer(), seed=0), lora=None, kl_coef=0.0,
                     environment=LowTokenEnvironment(byte_tokenizer()))
    vla = VLAGRPOModule(policy_instance=LinearGaussianPolicy())
    assert type(llm.heldout) is HeldOutLog and type(vla.heldout) is HeldOutLog
    assert llm.eval_history is llm.heldout.history and vla.eval_history is vla.heldout.history
    assert "behaviour_cloning" not in dir(VLAGRPOModule)  # the SFT stage is BehaviourCloningWarmStart's alone


def test_a_gaussian_policy_gives_its_nll_and_kl_from_one_forward_pass():
    from wmrl.algorithms.gaussian import chunk_nll, gaussian_kl, gaussian_rl_loss

    calls = []

    def mean_chunk(obs):
        calls.append(1)
        return obs["x"]

    obs, chunk = {"x": torch.arange(12.0).view(2, 3, 2)}, torch.zeros(2, 2, 2)
    nll, kl = gaussian_rl_loss(mean_chunk, obs, chunk, 0.5, lambda o: o["x"] + 1.0)
    assert len(calls) == 1  # the reference's pass is the lambda: the policy's mean is computed once
    torch.testing.assert_close(nll, chunk_nll(chunk, obs["x"][:, :2], 0.5))  # the executed prefix only
    torch.testing.assert_close(kl, gaussian_kl(obs["x"][:, :2], obs["x"][:, :2] + 1.0, 0.5))
    assert float(gaussian_rl_loss(mean_chunk, obs, chunk, 0.5, None)[1]) == 0.0  # no reference: no KL


def test_the_final_policy_is_evaluated_when_no_evaluation_followed_the_last_step(tmp_path):
    """A fit whose last step ends no epoch (or that resumed at max_steps) still ends with its final policy scored,
    once; a fit that did not score its start has no gain to measure and is left alone."""
    from wmrl.evaluation.heldout import HeldOutLog
    from wmrl.evaluation.report import held_out_report

    summary = {"score": 0.5, "mean_position": 0.5, "valid_rate": 1.0, "best_of_k": 0.5}
    log = HeldOutLog(held_out_report)
    log.keep(_module(tmp_path, step=0)[0], "heldout", summary, {}, paired={"a": [0.5]})
    module, logged = _module(tmp_path, step=3)

    def evaluate():
        log.keep(module, "heldout", summary, {}, paired={"a": [0.5]})
        return {"score": 0.5}

    log.at_end(module, evaluate)
    log.at_end(module, evaluate)  # the last evaluation is of step 3 now
    assert [label for label, _ in log.history] == ["start", "step 3"] and logged == [({"heldout/score": 0.5}, 3)]
    assert "gain over the start: no change" in log.report()
    unstarted = HeldOutLog(held_out_report)
    unstarted.at_end(module, evaluate)
    assert unstarted.history == []


def test_the_log_travels_in_a_checkpoint_loaded_with_weights_only(tmp_path):
    """A resumed fit pairs its end with the start its checkpoint holds (a ``weights_only`` load, as Lightning's)."""
    from wmrl.evaluation.heldout import HeldOutLog
    from wmrl.evaluation.report import held_out_report

    log = HeldOutLog(held_out_report)
    log.keep(_module(tmp_path, step=0)[0], "heldout", {"score": 0.25, "missing": 1}, {}, paired={"a": [0.25, None]})
    torch.save({"wmrl_heldout": log.state_dict()}, tmp_path / "c.ckpt")
    resumed = HeldOutLog(held_out_report)
    resumed.load_state_dict(torch.load(tmp_path / "c.ckpt", weights_only=True)["wmrl_heldout"])
    assert resumed.history == log.history and resumed.paired == log.paired
