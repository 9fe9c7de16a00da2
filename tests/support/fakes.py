"""Deterministic test doubles that stand *beside* the real environment (never instead of it)."""

from __future__ import annotations

from collections.abc import Sequence

from wmrl.types import Outcome, Source, Status


class LowTokenEnvironment:
    """Rewards a response by the share of its tokens in the lower half of the vocabulary.

    A tiny randomly initialised model can learn this in a few GRPO steps, so tests can check that learning
    happens without real execution.
    """

    source = Source.REAL

    def __init__(self, tokenizer, prompt: str = "Say something.") -> None:
        self.tokenizer = tokenizer
        self.half = len(tokenizer) // 2
        self._prompt = prompt
        self.calls = 0

    def prompt(self, task_id: str) -> str:
        return f"{self._prompt} ({task_id})"

    def step_many(self, requests: Sequence) -> list[Outcome]:
        self.calls += 1
        outcomes = []
        for r in requests:
            ids = self.tokenizer(r.response, add_special_tokens=False)["input_ids"]
            share = sum(i < self.half for i in ids) / len(ids) if ids else 0.0
            outcomes.append(Outcome(Status.VALID, 0.5 + 0.5 * share, score=share, position=share,
                                    feedback=f"share {share:.2f}"))
        return outcomes


CHATML = (
    "{% for m in messages %}<|im_start|>{{ m['role'] }}\n{{ m['content'] }}<|im_end|>\n{% endfor %}"
    "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
)


def byte_tokenizer():
    """A byte-level tokenizer (256 bytes + 3 specials) with a ChatML template, built in-process."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    vocab = {chr(b) if 32 < b < 127 else f"<0x{b:02X}>": b for b in range(256)}
    byte_level = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)
    alphabet = pre_tokenizers.ByteLevel.alphabet()
    mapping = {ch: i for i, ch in enumerate(sorted(alphabet))}
    del vocab
    core = Tokenizer(models.BPE(vocab=mapping, merges=[]))
    core.pre_tokenizer = byte_level
    core.decoder = decoders.ByteLevel()
    tokenizer = PreTrainedTokenizerFast(tokenizer_object=core)
    tokenizer.add_special_tokens({"eos_token": "<|im_end|>", "additional_special_tokens": ["<|im_start|>"]})
    tokenizer.pad_token = tokenizer.eos_token
    tokenizer.chat_template = CHATML
    return tokenizer


class DistortedWorldModel:
    """A world-model double: the :class:`LowTokenEnvironment` reward passed through ``distortion``.

    ``distortion`` maps the real reward in [0.5, 1] to the predicted one in [0, 1]: a monotone one (e.g.
    squaring) is what Online Debiasing can undo, ``lambda r: 1.5 - r`` is a world model anti-correlated with
    reality.
    """

    source = Source.WORLD_MODEL

    def __init__(self, tokenizer, distortion=lambda r: (r - 0.5) ** 2 * 4) -> None:
        self.truth = LowTokenEnvironment(tokenizer)
        self.distortion = distortion
        self.calls = 0
        self.parse_failures = 0

    def step_many(self, requests: Sequence) -> list[Outcome]:
        self.calls += 1
        real = self.truth.step_many(requests)
        return [Outcome(Status.VALID, min(max(self.distortion(o.reward), 0.0), 1.0), position=o.position,
                        feedback="simulated", source=Source.WORLD_MODEL, variance=0.01) for o in real]


class LoggingModule:
    """Stands in for a LightningModule where a callback only logs: keeps what it logged."""

    def __init__(self, environments: dict | None = None) -> None:
        self.logged: dict[str, float] = {}
        self.environments = dict(environments or {})

    def log_dict(self, metrics, **kw):
        self.logged.update(metrics)

    def log(self, key, value, **kw):
        self.logged[key] = value
