"""Plug-ins keep declared contracts: no ``hasattr`` / ``getattr`` probing in ``src/wmrl``, and every shipped plug-in
satisfies its :mod:`wmrl.types` Protocol.

The scan reads every file of ``src/wmrl`` as a syntax tree and flags each ``hasattr(...)`` and each ``getattr`` with
a default or a literal name (``getattr(x, "name", None)`` is a probe; ``getattr(x, "name")`` is ``x.name`` in
disguise). ``getattr(record, field)`` with a computed name, a loop over a record's declared fields that raises on
a missing one, is no probe and passes. What remains is listed in ``ALLOWED``: probes of objects wmrl does not
define (Lightning, jsonargparse, transformers, the os module), each with its reason.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest
import torch

import wmrl.types
from wmrl.autoresearch.contracts import ComparesWithStarter, ShowsStarter, TaskEnvironment, TaskGrader
from wmrl.types import (
    CAPABILITIES,
    AdapterPolicy,
    BindsToPolicy,
    GenerationEngine,
    GradesTrajectories,
    LanguageModelBackend,
    LanguagePolicy,
    LearnsFromAnchors,
    ReportsMetrics,
    WorldModel,
    declares,
)
from wmrl.vla.contracts import (
    ChunkPolicy,
    ClonesBehaviour,
    DemonstrationData,
    EpisodeGrader,
    EpisodeWorldModel,
    LearnsFromDemonstrations,
    Simulator,
)
from wmrl.vla.simulators.bandit import LinearGaussianPolicy

SRC = Path(__file__).resolve().parents[2] / "src" / "wmrl"

#: (file under src/wmrl, the call as written) -> why it may probe: none of these is a wmrl plug-in
ALLOWED = {
    ("autoresearch/module.py", 'getattr(self.trainer.strategy.model, "no_sync", None)'):
        "Lightning's wrapped model: DDP has no_sync, the single-device and FSDP wrappers do not",
    ("autoresearch/module.py", 'hasattr(self.trainer.strategy.model, "clip_grad_norm_")'):
        "Lightning's wrapped model: only an FSDP root clips the global norm of sharded gradients",
    ("autoresearch/module.py", 'getattr(self.trainer, "datamodule", None)'):
        "Lightning's trainer: a fit given dataloaders instead of a data module has none",
    ("autoresearch/grpo_build.py", "getattr(target, '__module__', '?')"):
        "naming the engine factory's callable for the hyperparameters (a class, a function or a callable object)",
    ("autoresearch/grpo_build.py", "getattr(target, '__qualname__', type(target).__name__)"):
        "naming the engine factory's callable for the hyperparameters (a callable object has no __qualname__)",
    ("cli/scripts.py", 'hasattr(value, "value")'):
        "printing an Outcome's fields: the enum ones by their value",
    ("cli/trainer.py", 'getattr(self, "exit_on_error", True)'): "jsonargparse's parser setting",
    ("cli/trainer.py", 'getattr(action, "choices", None)'): "argparse's subcommand action",
    ("cli/trainer.py", 'hasattr(self, "_config_before_checkpoint")'): "set only on the fit that loads a checkpoint",
    ("cli/trainer.py", 'getattr(node, "class_path", None)'): "jsonargparse's config namespace: a class_path node",
    ("cli/trainer.py", 'getattr(node, "init_args", None)'): "jsonargparse's config namespace: a class_path node",
    ("cli/trainer.py", 'hasattr(node, "__dict__")'): "walking jsonargparse's config namespace",
    ("cli/trainer.py", 'getattr(exc, "wmrl_config", None)'): "an exception that may carry the config that failed",
    ("cli/trainer.py", 'getattr(wandb, "run", None)'):
        "the wandb module, when a logger imported it: its current run (None before wandb.init)",
    ("generation/engine.py", 'getattr(model, "generation_config", None)'):
        "a transformers model: only generative ones carry a generation config",
    ("generation/engine.py", 'getattr(getattr(model, "generation_config", None), "eos_token_id", None)'):
        "a transformers generation config: its eos_token_id is optional",
    ("generation/vllm.py", 'getattr(vllm, "__version__", "?")'): "the vllm package's version, for the log",
    ("generation/vllm.py", 'getattr(model, "config", None)'): "a transformers model's config",
    ("generation/vllm.py", 'getattr(config, "name_or_path", "")'): "a transformers config: where it was loaded from",
    ("generation/vllm.py", 'getattr(config, "_name_or_path", "")'): "a transformers config: where it was loaded from",
    ("models/kv.py", 'getattr(output, "cache", None)'): "a transformers model output: the KV cache's name by version",
    ("models/kv.py", 'getattr(cache, "layers", None)'): "a transformers cache object: per-layer caches by version",
    ("models/resolve.py", 'hasattr(model.config, "quantization_config")'): "a transformers config: quantised or not",
    ("autoresearch/world_models/learned.py", 'getattr(self.tokenizer, "model_max_length", 256)'):
        "a transformers tokenizer: model_max_length is optional",
    ("autoresearch/environments/sandbox/common.py", 'getattr(os, "O_NONBLOCK", 0)'): "an os flag some platforms lack",
    ("autoresearch/environments/sandbox/leak_scanner.py", 'getattr(os, "O_NOFOLLOW", 0)'): "an os flag some platforms lack",
}


def _probes(path: Path) -> list[tuple[int, str]]:
    """``(line, call as written)`` of each hasattr, and each getattr with a default or a literal name, in ``path``."""
    source = path.read_text()
    found = []
    for node in ast.walk(ast.parse(source)):
        if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Name)):
            continue
        if node.func.id == "hasattr" or (node.func.id == "getattr" and (
                len(node.args) > 2 or (len(node.args) == 2 and isinstance(node.args[1], ast.Constant)))):
            found.append((node.lineno, ast.get_source_segment(source, node)))
    return found


def test_no_plug_in_is_probed_with_hasattr_or_getattr():
    found = {(str(path.relative_to(SRC)), call): line for path in sorted(SRC.rglob("*.py"))
             for line, call in _probes(path)}
    unexplained = [f"src/wmrl/{file}:{line}: {call}" for (file, call), line in found.items()
                   if (file, call) not in ALLOWED]
    assert not unexplained, (
        "hasattr/getattr probing in src/wmrl: declare what the plug-in must have as a Protocol in wmrl.types and "
        "check it with isinstance (or add the site to ALLOWED with its reason if the object is no wmrl plug-in):\n  "
        + "\n  ".join(unexplained))
    stale = sorted(key for key in ALLOWED if key not in found)
    assert not stale, f"ALLOWED lists sites that are gone (remove them): {stale}"


def test_the_scan_flags_a_probe_and_passes_a_field_loop(tmp_path):
    code = tmp_path / "probe.py"
    code.write_text('a = hasattr(env, "grade")\nb = getattr(env, "episode", None)\nc = getattr(env, "x")\n'
                    'd = [getattr(record, name) for name in FIELDS]\n')
    assert [line for line, _ in _probes(code)] == [1, 2, 3]


def test_types_lists_every_contract():
    import wmrl.autoresearch.contracts
    import wmrl.vla.contracts

    for module in (wmrl.types, wmrl.autoresearch.contracts, wmrl.vla.contracts):  # the core's and each wing's
        protocols = {name for name, value in vars(module).items() if isinstance(value, type)
                     and value.__module__ == module.__name__ and value.__dict__.get("_is_protocol")}
        assert len(protocols) >= 4
        assert protocols <= set(module.__all__), f"missing from {module.__name__}.__all__: {protocols - set(module.__all__)}"
    assert {".prompt", ".grade", ".fit_demonstrations", ".__call__"} <= {
        f".{name}" for protocol in (TaskEnvironment, EpisodeGrader, LearnsFromDemonstrations, TaskGrader)
        for name in vars(protocol) if not name.startswith("_") or name == "__call__"}


# -- the shipped plug-ins satisfy their contracts --------------------------------------------------------------
def test_autoresearch_plug_ins_satisfy_their_protocols(tmp_path):
    from peft import LoraConfig, get_peft_model
    from support.fakes import byte_tokenizer

    from wmrl.autoresearch.environments.real import SandboxEnvironment
    from wmrl.autoresearch.world_models.learned import LearnedWorldModel
    from wmrl.autoresearch.world_models.lm import LMWorldModel
    from wmrl.generation.engine import GenerationEngine as ReExported
    from wmrl.generation.hf import HFGenerationEngine
    from wmrl.generation.hf_world_model import HFWorldModelBackend
    from wmrl.generation.vllm import VLLMGenerationEngine
    from wmrl.generation.vllm_world_model import VLLMWorldModelBackend
    from wmrl.models import is_peft_model, tiny_llama

    environment = SandboxEnvironment(allow_weak_isolation=True, allow_weak_bounds=True, use_log=False)
    assert isinstance(environment, TaskEnvironment) and declares(environment, ShowsStarter)
    lm = LMWorldModel()
    assert isinstance(lm, WorldModel) and declares(lm, BindsToPolicy) and declares(lm, ReportsMetrics)
    learned = LearnedWorldModel()
    assert isinstance(learned, WorldModel) and declares(learned, LearnsFromAnchors)
    assert declares(learned, ComparesWithStarter) and declares(learned, ReportsMetrics)
    assert isinstance(HFWorldModelBackend(), LanguageModelBackend)
    assert isinstance(VLLMWorldModelBackend(), LanguageModelBackend)

    assert ReExported is GenerationEngine  # wmrl.generation.engine keeps exporting the contract
    model, tokenizer = tiny_llama(byte_tokenizer(), seed=0)
    assert isinstance(model, LanguagePolicy) and not is_peft_model(model)
    assert isinstance(HFGenerationEngine(model, tokenizer), GenerationEngine)
    assert issubclass(VLLMGenerationEngine, GenerationEngine)  # built only where vLLM is installed
    adapted = get_peft_model(model, LoraConfig(r=4, lora_alpha=8, target_modules=["q_proj", "v_proj"]))
    assert isinstance(adapted, AdapterPolicy) and is_peft_model(adapted)


def test_vla_plug_ins_satisfy_their_protocols():
    from wmrl.vla.datamodule.bandit_contexts import BanditDataModule
    from wmrl.vla.datamodule.lerobot import LeRobotVLADataModule
    from wmrl.vla.module import VLAGRPOModule
    from wmrl.vla.simulators.bandit import TargetBandit
    from wmrl.vla.simulators.libero import LiberoSimulator
    from wmrl.vla.simulators.pusht import PushTSimulator
    from wmrl.vla.world_models.distorted_oracle import DistortedOracle
    from wmrl.vla.world_models.progress import ProgressWorldModel

    for simulator in (PushTSimulator(), TargetBandit(), LiberoSimulator()):
        assert isinstance(simulator, Simulator), type(simulator).__name__
    for world_model in (ProgressWorldModel(), DistortedOracle(TargetBandit())):
        assert isinstance(world_model, EpisodeWorldModel) and declares(world_model, GradesTrajectories)
    assert declares(ProgressWorldModel(), LearnsFromDemonstrations)
    assert not isinstance(DistortedOracle(TargetBandit()), LearnsFromDemonstrations)
    assert isinstance(LeRobotVLADataModule(), DemonstrationData) and isinstance(BanditDataModule(), DemonstrationData)
    assert isinstance(LinearGaussianPolicy(), ChunkPolicy)
    assert isinstance(VLAGRPOModule(policy_instance=LinearGaussianPolicy()), ClonesBehaviour)


#: classes of src/wmrl that have a capability's members without being that plug-in, with the reason
NOT_CAPABILITIES = {
    ("wmrl.algorithms.denoise", "InverseVarianceWeight", "LearnsFromAnchors"):
        "observe(s2) records a squared error, a statistic of the denoising callback",
    ("wmrl.algorithms.fusion", "AgreementEstimate", "LearnsFromAnchors"):
        "observe(wm, real) records paired rewards, a statistic of the fusion callback",
    ("wmrl.models.precision", "Probe", "ReportsMetrics"): "the update's precision probe, no plug-in",
    **{(module, name, "ShowsStarter"): "a task's own starter(), no environment"
       for module, name in (("wmrl.autoresearch.tasks.build", "BuiltTask"),
                            ("wmrl.autoresearch.tasks.folder_task", "FolderTask"))},
    **{(module, name, "BindsToPolicy"): "a LanguageModelBackend's bind(); its world model declares BindsToPolicy"
       for module, name in (("wmrl.generation.hf_world_model", "HFWorldModelBackend"),
                            ("wmrl.generation.served_world_model", "ServedWorldModelBackend"),
                            ("wmrl.generation.vllm_world_model", "VLLMWorldModelBackend"))},
    **{(module, name, "ReportsMetrics"): "a GenerationEngine's metrics() is the engine contract's own"
       for module, name in (("wmrl.types", "GenerationEngine"), ("wmrl.generation.hf", "HFGenerationEngine"),
                            ("wmrl.generation.vllm", "VLLMGenerationEngine"))},
}


def _shipped_classes():
    import importlib
    import pkgutil

    import wmrl

    for info in pkgutil.walk_packages(wmrl.__path__, "wmrl."):
        if info.name.endswith("__main__"):  # runs the CLI
            continue
        try:
            module = importlib.import_module(info.name)
        except ImportError:  # an optional dependency (vLLM, LeRobot) is not installed here
            continue
        for value in vars(module).values():
            if isinstance(value, type) and value.__module__ == info.name and not value.__dict__.get("_is_protocol"):
                yield value


def test_every_shipped_plug_in_declares_the_capabilities_it_has():
    """A class with a capability's members declares it (``wmrl.types.declares`` uses only what is declared), or is
    listed in NOT_CAPABILITIES with its reason."""
    import inspect

    undeclared = []
    import wmrl.autoresearch.contracts
    import wmrl.vla.contracts

    capabilities = CAPABILITIES + wmrl.autoresearch.contracts.CAPABILITIES + wmrl.vla.contracts.CAPABILITIES
    for cls in _shipped_classes():
        for capability in capabilities:
            members = [m for m in vars(capability) if not m.startswith("_")]
            has = all(callable(getattr(cls, m, None)) or isinstance(inspect.getattr_static(cls, m, None), property)
                      for m in members)
            key = (cls.__module__, cls.__qualname__, capability.__name__)
            if has and capability not in cls.__mro__ and key not in NOT_CAPABILITIES:
                undeclared.append(f"{cls.__module__}.{cls.__qualname__}: {capability.__name__}")
    assert not undeclared, "declare these capabilities among the class's bases:\n  " + "\n  ".join(undeclared)
    seen = {(cls.__module__, cls.__qualname__) for cls in _shipped_classes()}
    stale = sorted(key for key in NOT_CAPABILITIES if key[:2] not in seen)
    assert not stale, f"NOT_CAPABILITIES lists classes that are gone (remove them): {stale}"


def test_a_capability_is_used_only_where_it_is_declared(recwarn):
    """A ``metrics()`` method alone does not make a plug-in ReportsMetrics: declares() says no and warns once, naming
    the base to add; the declared class is used; check_world_model reports the undeclared one."""
    from wmrl.testing import check_world_model

    class Undeclared:
        source = wmrl.types.Source.WORLD_MODEL

        def step_many(self, requests):
            return [wmrl.types.Outcome(wmrl.types.Status.VALID, 0.5, source=self.source) for _ in requests]

        def metrics(self):
            return {"calls": 1.0}

    class Declared(Undeclared, ReportsMetrics):
        pass

    assert not declares(Undeclared(), ReportsMetrics) and not declares(Undeclared(), ReportsMetrics)
    warned = [str(w.message) for w in recwarn if "does not declare it" in str(w.message)]
    assert len(warned) == 1 and "add ReportsMetrics (from wmrl.types) to the class's bases" in warned[0]
    assert declares(Declared(), ReportsMetrics)
    report = check_world_model(Undeclared())
    assert any("has the members of ReportsMetrics but does not declare it" in p for p in report.problems)
    assert "ReportsMetrics" in check_world_model(Declared()).capabilities


# -- a plug-in missing a member is refused where it is configured ----------------------------------------------
class _NoGrade:
    pass


class _NoPrompt:
    source = wmrl.types.Source.REAL

    def step_many(self, requests):
        return []


class _NoGaussian(torch.nn.Module):
    """A VLA policy that does not give its RL losses (so neither its loss nor its KL is known)."""

    chunk_size, n_action_steps = 1, 1

    def mean_chunk(self, obs):
        return torch.zeros(len(obs["observation.state"]), 1, 2)

    def per_sample_loss(self, obs, chunk, std):
        return torch.zeros(len(chunk))

    def bc_loss(self, obs, chunk, is_pad):
        return torch.zeros(())


def test_a_plug_in_missing_a_member_is_refused_naming_the_config_key():
    from support.fakes import LowTokenEnvironment, byte_tokenizer

    from wmrl.autoresearch.module import GRPOModule
    from wmrl.models import tiny_llama
    from wmrl.vla.module import VLAGRPOModule
    from wmrl.vla.world_models.distorted_oracle import DistortedOracle

    with pytest.raises(ValueError, match=r"world_model.init_args.oracle must grade .* _NoGrade lacks grade"):
        DistortedOracle(_NoGrade())
    with pytest.raises(ValueError, match=r"model.init_args.simulator must be a wmrl.vla.contracts.Simulator.* lacks grade, "
                                         r"play, source, success_threshold"):
        VLAGRPOModule(simulator=_NoGrade(), policy_instance=LinearGaussianPolicy())
    with pytest.raises(ValueError, match=r"model.init_args.policy_instance must be a wmrl.vla.contracts.ChunkPolicy.* "
                                         r"_NoGaussian lacks rl_loss"):
        VLAGRPOModule(policy_instance=_NoGaussian())
    with pytest.raises(TypeError, match=r"model.init_args.environment must be a wmrl.autoresearch.contracts.TaskEnvironment.* "
                                        r"_NoPrompt lacks prompt"):
        GRPOModule(policy=tiny_llama(byte_tokenizer(), seed=0), lora=None, environment=_NoPrompt())
    with pytest.raises(TypeError, match=r"model.init_args.engine must build a wmrl.types.GenerationEngine subclass "
                                        r"\(got _NoGrade\)"):
        GRPOModule(policy=tiny_llama(byte_tokenizer(), seed=0), lora=None,
                   environment=LowTokenEnvironment(byte_tokenizer()), engine=lambda policy, tokenizer: _NoGrade())


def test_warm_start_refuses_a_module_without_behaviour_cloning():
    from types import SimpleNamespace

    from wmrl.vla.warm_start import BehaviourCloningWarmStart

    with pytest.raises(TypeError, match=r"needs a module with a policy to clone into .*wmrl.vla.contracts.ClonesBehaviour.*, not "
                                        r"_NoGrade: remove the callback from trainer.callbacks"):
        BehaviourCloningWarmStart(steps=1).on_fit_start(SimpleNamespace(ckpt_path=None), _NoGrade())
