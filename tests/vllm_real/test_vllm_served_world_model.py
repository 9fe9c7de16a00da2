"""ServedWorldModelBackend against a real ``vllm serve`` (vLLM's CPU build) of SmolLM2-135M: the served scoring answers
equal the transformers backend's within the vLLM backend's tolerance, ``generate`` mode's guided JSON parses, and a
server killed mid-step gives missing outcomes (``infra_error``, no reward, never 0) and a warning naming it.

The server is docs/scale-out.md's ``vllm serve`` command, run as shown (the CPU overlay's engine settings and
``--logprobs-mode processed_logprobs``); it costs one engine start (~70 s on 2 cores)."""

from __future__ import annotations

import contextlib
import json
import logging
import os
import re
import signal
import subprocess
import threading
import time
import urllib.request
from pathlib import Path

import pytest
from test_vllm_world_model import SCORE_TOLERANCE, requests

from wmrl.autoresearch.world_models.lm import OUTCOME_CLASSES, LMWorldModel
from wmrl.generation.hf_world_model import HFWorldModelBackend
from wmrl.generation.served_world_model import ServedWorldModelBackend
from wmrl.types import Source, Status

ROOT = Path(__file__).resolve().parents[2]
START_TIMEOUT_S = 600


def serve_block() -> str:
    """docs/scale-out.md's ``vllm serve`` command, as shown (run from the repository root)."""
    from support.docs_blocks import docs_block

    return docs_block("docs/scale-out.md", "served-world-model-server")


def served_port() -> int:
    return int(re.search(r"--port (\d+)", serve_block()).group(1))


@pytest.fixture(scope="module")
def server(checkpoint, tmp_path_factory):
    """docs/scale-out.md's ``vllm serve`` command run exactly as written, in a process group of its own (its log is
    shown when it does not start); the URL is the one served.yaml names."""
    block, port = serve_block(), served_port()
    log_path = tmp_path_factory.mktemp("vllm-serve") / "serve.log"
    with log_path.open("w") as log_file:
        process = subprocess.Popen(["bash", "-euo", "pipefail", "-c", block], cwd=ROOT, stdout=log_file,
                                   stderr=subprocess.STDOUT, start_new_session=True)
    url = f"http://localhost:{port}"
    deadline = time.monotonic() + START_TIMEOUT_S
    while True:
        try:
            with urllib.request.urlopen(url + "/v1/models", timeout=5) as answer:
                assert json.loads(answer.read())["data"]
            break
        except OSError:
            if process.poll() is not None or time.monotonic() > deadline:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(process.pid, signal.SIGKILL)
                pytest.fail(f"vllm serve did not start (exit {process.poll()}); its log:\n"
                            f"{log_path.read_text()[-4000:]}")
            time.sleep(2)
    yield url, process
    if process.poll() is None:
        os.killpg(process.pid, signal.SIGTERM)
        try:
            process.wait(timeout=60)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)


def test_the_served_overlay_names_the_documented_server():
    import yaml

    overlay = yaml.safe_load((ROOT / "configs/autoresearch/world_models/served.yaml").read_text())
    (callback,) = [c for c in overlay["trainer"]["callbacks+"] if c["class_path"].endswith("WorldModelReward")]
    urls = callback["init_args"]["world_model"]["init_args"]["backend"]["init_args"]["urls"]
    assert urls == [f"http://localhost:{served_port()}"]


def served(url: str, suite, tokenizer, mode: str = "score", **kw) -> LMWorldModel:
    world_model = LMWorldModel(model="policy", mode=mode, suite=suite, max_new_tokens=1024, temperature=0.7,
                               top_p=0.8, backend=ServedWorldModelBackend([url], **kw))
    world_model.bind(None, tokenizer)
    return world_model


def test_served_scores_match_transformers(server, checkpoint, suite):
    url, _ = server
    local = LMWorldModel(model=str(checkpoint), mode="score", suite=suite, backend=HFWorldModelBackend())
    local._ensure_model()
    on_server = served(url, suite, local.tokenizer)
    batch = requests()
    for row, reference in zip(on_server.outcome_probabilities(batch), local.outcome_probabilities(batch),
                              strict=True):
        assert len(row) == len(OUTCOME_CLASSES) and sum(row) == pytest.approx(1.0, abs=1e-5)
        assert row == pytest.approx(reference, abs=SCORE_TOLERANCE)
    outcomes = on_server.step_many(batch)
    assert all(o.source is Source.WORLD_MODEL and o.reward is not None for o in outcomes)
    assert on_server.metrics()["unanswered"] == 0


def test_generate_mode_answers_follow_the_schema(server, checkpoint, suite):
    url, _ = server
    from transformers import AutoTokenizer

    world_model = served(url, suite, AutoTokenizer.from_pretrained(checkpoint), mode="generate")
    outcomes = world_model.step_many(requests()[:2])
    assert world_model.parse_failures == 0 and world_model.unanswered == 0
    assert all(o.source is Source.WORLD_MODEL and o.reward is not None for o in outcomes)


def test_a_server_killed_mid_step_gives_missing_outcomes(server, checkpoint, suite, caplog):
    """Runs last in this module: it kills the server."""
    url, process = server
    from transformers import AutoTokenizer

    world_model = served(url, suite, AutoTokenizer.from_pretrained(checkpoint), mode="generate",
                         retries=1, backoff_s=0.5, concurrency=1)
    killer = threading.Timer(3.0, lambda: os.killpg(process.pid, signal.SIGKILL))  # mid-answer: 1024 tokens
    killer.start()
    started = time.perf_counter()
    with caplog.at_level(logging.WARNING, logger="wmrl.generation.served_world_model"):
        outcomes = world_model.step_many(requests()[:2] * 2)
    killer.join()
    assert process.wait(timeout=30) is not None
    missing = [o for o in outcomes if o.missing]
    assert missing, "the server was killed mid-step: some answers must be missing"
    for outcome in missing:
        assert outcome.status is Status.INFRA_ERROR and outcome.reward is None and outcome.source is Source.WORLD_MODEL
    assert world_model.unanswered == len(missing) and world_model.parse_failures == 0
    assert url in caplog.text and "missing, never 0" in caplog.text
    assert time.perf_counter() - started < 120
