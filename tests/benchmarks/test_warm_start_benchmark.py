"""benchmarks/warm_start.py: the cpu-quality warm start teaches every menu line of the ``score`` view equally, with
the loss on the completion only, and writes a checkpoint directory the benchmarks' ``--model`` loads."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest
import torch

from wmrl.autoresearch.environments.real import SandboxEnvironment
from wmrl.autoresearch.tasks.model_choice import candidate_lines
from wmrl.models import LoraSettings, resolve_model, tiny_llama

ROOT = Path(__file__).resolve().parents[2]
spec = importlib.util.spec_from_file_location("warm_start", ROOT / "benchmarks" / "warm_start.py")
warm_start = importlib.util.module_from_spec(spec)
sys.modules["warm_start"] = warm_start
spec.loader.exec_module(warm_start)


@pytest.fixture
def lora_llama():
    from peft import LoraConfig, get_peft_model

    model, tokenizer = tiny_llama(seed=3)
    settings = LoraSettings(r=4, alpha=8)
    config = LoraConfig(task_type="CAUSAL_LM", r=settings.r, lora_alpha=settings.alpha,
                        target_modules=list(settings.target_modules))
    return get_peft_model(model, config), tokenizer


def test_every_menu_line_completes_its_tasks_prompt_once_after_the_estimator_prefill(tiny_suite, process_sandbox):
    from wmrl.models import smollm2_tokenizer

    tokenizer = smollm2_tokenizer()
    env = SandboxEnvironment(tiny_suite, process_sandbox, use_log=False, starter_view="score")
    found = warm_start.demonstrations(env, tokenizer, ["tiny_iris", "tiny_diabetes"])
    for task in ("tiny_iris", "tiny_diabetes"):
        mine = [d for d in found if d.task_id == task]
        assert [d.line for d in mine] == candidate_lines(env.starter(task))  # each line once, no preference
        assert len({tuple(d.prompt_ids) for d in mine}) == 1  # one prompt per task
        prompt = tokenizer.decode(mine[0].prompt_ids)
        assert "VALIDATION_SCORE=" in prompt and prompt.endswith("model = make_pipeline(preprocess,")
        for d in mine:
            written = tokenizer.decode(d.completion_ids)
            assert written == d.line.partition("preprocess,")[2] + "\nfinish(model)\n```"
            # the prefill and the completion make the script the environment runs
            script = (prompt + written).rsplit("```python\n", 1)[1].removesuffix("```")
            assert script.rstrip().endswith(d.line + "\nfinish(model)")
    forest = next(d for d in found if d.task_id == "tiny_iris" and "RandomForest" in d.line)
    code = (tokenizer.decode(forest.prompt_ids) + tokenizer.decode(forest.completion_ids)).rsplit("```python\n", 1)[1]
    assert env.execute("tiny_iris", code.removesuffix("```")).status.value == "valid"
    with pytest.raises(ValueError, match="not a menu line"):
        warm_start.completion("model = Ridge()")


def test_the_loss_is_the_completions_only_and_training_lowers_it():
    model, tokenizer = tiny_llama(seed=3)
    prompt = list(range(100, 140))
    examples = [warm_start.Demonstration("t", "a", prompt, [7, 8, 9]),
                warm_start.Demonstration("t", "b", prompt, [7, 5])]
    loss = warm_start.task_loss(model, examples, tokenizer.pad_token_id)
    # by hand: each row's completion tokens scored after its own full sequence (no prefix sharing, no padding)
    nll = []
    for e in examples:
        ids = torch.tensor([e.prompt_ids + e.completion_ids])
        logits = model(input_ids=ids).logits[0, len(e.prompt_ids) - 1 : -1]
        nll += torch.nn.functional.cross_entropy(logits, torch.tensor(e.completion_ids), reduction="none").tolist()
    assert loss.item() == pytest.approx(sum(nll) / len(nll), rel=1e-4)
    losses = warm_start.train(model, examples, epochs=8, lr=1e-2, pad_id=tokenizer.pad_token_id, seed=0)
    assert losses[-1] < 0.5 * losses[0]
    with pytest.raises(ValueError, match="must share one prompt"):
        warm_start.train(model, [examples[0], warm_start.Demonstration("t", "c", prompt[1:], [7])], 1, 1e-3,
                         tokenizer.pad_token_id, 0)


def test_the_merged_checkpoint_loads_as_a_model_directory(lora_llama, tmp_path):
    model, tokenizer = lora_llama
    for name, parameter in model.named_parameters():
        if "lora_B" in name:
            torch.nn.init.normal_(parameter, std=0.5)  # an adapter that changes the outputs
    ids = torch.tensor([[1, 2, 3, 4]])
    with torch.no_grad():
        expected = model(input_ids=ids).logits
    warm_start.save_merged(model, tokenizer, tmp_path / "policy")
    from transformers import AutoModelForCausalLM

    loaded = AutoModelForCausalLM.from_pretrained(resolve_model(tmp_path / "policy"))
    with torch.no_grad():
        assert torch.allclose(loaded(input_ids=ids).logits, expected, atol=1e-4)


def test_a_held_out_task_is_refused_before_anything_is_loaded(tmp_path):
    with pytest.raises(ValueError, match=r"warm_start: --tasks names tasks outside the train split: penguin_species "
                                         r"\(\w+\)\. A policy fine-tuned on held-out tasks"):
        warm_start.main(["--tasks", "wine_cultivar", "penguin_species", "--out", str(tmp_path / "policy")])
    assert not (tmp_path / "policy").exists()
