"""Shared fixtures: a tiny task suite in a temp cache, and the sandbox backends that work here."""

from __future__ import annotations

import os
import shutil

import pytest
from support.docs_blocks import ROOT
from support.sandbox_probe import bwrap_missing

from wmrl.autoresearch.tasks.spec import TaskSpec

# The suite's fits keep torch's default thread count (one per core), as before the kit chose it from the load
# (wmrl.threads): a run and its resume in one test, or a fit and the base it is compared with, then use the same
# kernels whatever else the machine is doing. tests/core/test_threads.py tests the choice itself.
os.environ.setdefault("WMRL_THREADS", str(os.cpu_count() or 1))


def _iris():
    from sklearn.datasets import load_iris

    frame = load_iris(as_frame=True).frame
    frame.columns = ["sepal_length", "sepal_width", "petal_length", "petal_width", "species"]
    return frame


def _diabetes():
    from sklearn.datasets import load_diabetes

    return load_diabetes(as_frame=True, scaled=False).frame.rename(columns={"target": "progression"})


TINY_SPECS = (
    TaskSpec(
        id="tiny_iris", split="smoke", package="scikit-learn", loader="load_iris", version="1.9.1",
        type="multiclass", target=("species",), metric="accuracy", title="Iris species",
        goal="Predict the iris species from four flower measurements.", load=_iris, time_budget_s=20,
        memory_mb=2048, seed=0,
    ),
    TaskSpec(
        id="tiny_diabetes", split="train", package="scikit-learn", loader="load_diabetes", version="1.9.1",
        type="regression", target=("progression",), metric="rmse", title="Diabetes progression",
        goal="Predict disease progression one year after baseline.", load=_diabetes, time_budget_s=20,
        memory_mb=2048, seed=0,
    ),
)


@pytest.fixture(scope="session", autouse=True)
def isolated_cache(tmp_path_factory):
    """Tests build tasks, log executions and register task folders in a temp cache, never in the user's
    (``~/.cache/wmrl``); ``WMRL_TEST_CACHE=DIR`` keeps one across sessions (warm task builds and executions).

    The sandboxes' runtime views go to ``.cache/runtime-views`` in the checkout (git ignores it), beside the
    environments the suites run in (``.venv``, ``.venv312``, ``.venv-vllm``): on their filesystem and mount the
    views are hard links, where a temp folder on another mount (a bind-mounted checkout in CI) would get a
    1.5-3 GB copy of each environment. Views are keyed by the installation's state, so every session and every
    test that sets a cache of its own shares them."""
    path = os.environ.get("WMRL_TEST_CACHE") or str(tmp_path_factory.mktemp("wmrl-cache"))
    patch = pytest.MonkeyPatch()
    patch.setenv("WMRL_CACHE", path)  # subprocesses inherit it
    if not os.environ.get("WMRL_RUNTIME_VIEWS"):
        patch.setenv("WMRL_RUNTIME_VIEWS", str(ROOT / ".cache" / "runtime-views"))
    yield path
    patch.undo()


@pytest.fixture(autouse=True)
def no_leaked_task_sources(monkeypatch):
    """Task folders a config registers (``data.init_args.task_dirs``) are process-wide: none outlives its test."""
    from wmrl.autoresearch.tasks import registry

    monkeypatch.setattr(registry, "_session", [])
    monkeypatch.delenv(registry.ENV_VAR, raising=False)


@pytest.fixture(autouse=True)
def no_shared_mlflow_stores():
    """MLflow keeps one store per tracking URI for the process; configs/loggers/mlflow.yaml's ``sqlite:///mlflow.db``
    is relative to the working directory, a new temp folder in each test, so each test opens its own."""
    import sys

    yield
    if "mlflow.store.tracking.sqlalchemy_store" in sys.modules:
        from mlflow.store.tracking.sqlalchemy_store import SqlAlchemyStore
        from mlflow.tracking._model_registry.registry import ModelRegistryStoreRegistry
        from mlflow.tracking._tracking_service.registry import TrackingStoreRegistry

        TrackingStoreRegistry._get_store_with_resolved_uri.cache_clear()
        ModelRegistryStoreRegistry._get_store_with_resolved_uri.cache_clear()
        from mlflow.store.model_registry.sqlalchemy_store import SqlAlchemyStore as RegistryStore

        for store in (SqlAlchemyStore, RegistryStore):
            for engine in store._engine_map.values():
                engine.dispose()
            store._engine_map.clear()


@pytest.fixture(scope="session")
def tiny_suite(tmp_path_factory):
    """Two small tasks built into a temp cache, with hand-set leaderboards (no reference runs needed)."""
    from wmrl.autoresearch.tasks.suite import TaskSuite

    root = tmp_path_factory.mktemp("wmrl-cache")
    suite = TaskSuite(cache_dir=root / "cache", lock_path=root / "suite.lock.json", specs=TINY_SPECS)
    iris = suite.get("tiny_iris")
    suite.record(iris, {"trivial": 0.33, "weak": 0.7, "good": 0.9, "best": 0.97}, {})
    diabetes = suite.get("tiny_diabetes")
    suite.record(diabetes, {"trivial": 77.0, "linear": 55.0, "forest": 58.0}, {})
    return TaskSuite(cache_dir=root / "cache", lock_path=root / "suite.lock.json", specs=TINY_SPECS)


@pytest.fixture(scope="session")
def tiny_model_dir(tmp_path_factory):
    """A tiny random Llama with the SmolLM2 tokenizer saved as a model directory: what a config's
    ``model.init_args.model`` names for a user's own model, loaded in a second (its text is random)."""
    from wmrl.models import smollm2_tokenizer, tiny_llama

    model, tokenizer = tiny_llama(smollm2_tokenizer(), seed=0)
    path = tmp_path_factory.mktemp("tiny-policy")
    model.save_pretrained(path)
    tokenizer.save_pretrained(path)
    return path


@pytest.fixture(scope="session")
def process_sandbox():
    reason = bwrap_missing()
    if reason:
        pytest.skip(f"no bubblewrap: {reason}")
    from wmrl.autoresearch.environments.sandbox import ProcessSandbox

    return ProcessSandbox(isolation="bwrap", max_concurrency=2)


@pytest.fixture(scope="session")
def docker_sandbox():
    try:
        from wmrl.autoresearch.environments.sandbox.docker import DockerSandbox, docker_available
    except ImportError as exc:
        pytest.skip(f"no docker SDK: {exc}")
    reason = docker_available()
    if reason:
        pytest.skip(f"no docker engine: {reason}")
    sandbox = DockerSandbox(max_concurrency=2)
    yield sandbox
    sandbox.close()


@pytest.fixture(params=["process", "docker"])
def sandbox(request):
    """Each real backend in turn (skipped, naming the missing resource, where it cannot run)."""
    return request.getfixturevalue(f"{request.param}_sandbox")


@pytest.fixture
def have_tool():
    return lambda name: shutil.which(name) is not None


# -- the fake vLLM (tests/support/fake_vllm.py) for the fast tier's engine tests ----------------------------------------------
@pytest.fixture(scope="module")
def checkpoint(tmp_path_factory):
    """A tiny Llama with a byte-level tokenizer, written as the checkpoint directory vLLM loads (tests/vllm_real has
    its own: the real SmolLM2)."""
    from support import fake_vllm
    from support.fakes import byte_tokenizer

    from wmrl.models import tiny_llama

    model, tokenizer = tiny_llama(byte_tokenizer(), seed=0)
    return fake_vllm.save_checkpoint(model, tokenizer, tmp_path_factory.mktemp("tiny-llama"))


@pytest.fixture
def fake(monkeypatch):
    """The fake vLLM installed as ``vllm`` for the test, with no engine left over before or after it."""
    from support import fake_vllm

    from wmrl.generation.vllm import release_engines

    release_engines()
    yield fake_vllm.install(monkeypatch)
    release_engines()
