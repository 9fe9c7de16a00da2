"""The world model as a service: a language-model world model's two
questions asked of OpenAI-compatible servers (``vllm serve``, or any server with vLLM's completions API), so the
world model runs on machines of its own, one engine per GPU, as in the paper's three-node system.

    backend:
      class_path: wmrl.generation.served_world_model.ServedWorldModelBackend
      init_args:
        urls: [http://wm-node:8000, http://wm-node:8001]   # one `vllm serve` per GPU
        timeout_s: 120

Each server is started with the world model's checkpoint and the log-probs after the allowed-token mask::

    vllm serve <checkpoint dir> --logprobs-mode processed_logprobs

Prompts travel as token ids (the completions API takes ``prompt: [int, ...]``), so the server sees exactly the
tokens the in-process backends see; the tokenizer is the world model's (``load(model)``) or the policy's
(``bind``, with ``model: policy``: the servers must then serve the policy's base checkpoint).

- ``score`` mode: one completion token restricted to the option letters (``allowed_token_ids``) with their
  log-probs (``logprobs``; ``return_tokens_as_token_ids`` names them ``token_id:<id>``), renormalised over the
  options: the in-process backends' ``softmax(logits[letters])``.
- ``generate`` mode: the answer constrained to :data:`~wmrl.generation.vllm_world_model.PREDICTIONS_SCHEMA`
  (``structured_outputs: {json: schema}``), seeded per prompt as the vLLM backend seeds its rows.

Failures follow the kit's rule, *missing, never 0*: a request that times out, or whose connection fails, or that
gets a 5xx answer, is retried (``retries``, with ``backoff_s`` doubling), then moved to the next server; a server
that failed is skipped for ``down_for_s`` seconds. A prompt no server answers comes back as ``None``, which the
world model reports as a missing outcome (``infra_error``, no reward) and counts (``world_model/unanswered``);
a warning names the server and the error. A 4xx answer is a configuration error (a wrong model name, a server
without the options' log-probs) and raises, naming the server's message.

Prompts of one prefix group (a task) go to one server first, so its prefix cache serves the task's overview and
data dictionary once.
"""

from __future__ import annotations

import http.client
import json
import logging
import math
import os
import threading
import time
import urllib.error
import urllib.request
import zlib
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from wmrl.generation.vllm_world_model import PREDICTIONS_SCHEMA
from wmrl.types import ReportsMetrics

log = logging.getLogger(__name__)


class ServerError(RuntimeError):
    """A server's answer the backend does not retry: an HTTP 4xx (a configuration error) or a malformed body."""


class ServedWorldModelBackend(ReportsMetrics):
    """Answers a language-model world model's two questions (:class:`~wmrl.types.LanguageModelBackend`) with
    OpenAI-compatible completion servers (``vllm serve``).

    Args:
        urls: the servers' base URLs (``http://host:port``; a trailing ``/v1`` is accepted), one engine each.
        served_model: the model name the servers serve (``--served-model-name``); ``None``: each server's first
            entry of ``GET /v1/models``.
        timeout_s: seconds one request may take (a ``generate``-mode answer of ``max_new_tokens`` included).
        retries: further attempts on one server after a timeout, a connection error or a 5xx answer.
        backoff_s: the wait before the first retry (doubling after each).
        down_for_s: how long a server that exhausted its retries is skipped before it is tried again.
        concurrency: requests in flight per server (the server batches them).
        api_key_env: the environment variable holding the servers' API key (``vllm serve --api-key``), if set.
    """

    def __init__(self, urls: Sequence[str] | str, served_model: str | None = None, timeout_s: float = 120.0,
                 retries: int = 2, backoff_s: float = 1.0, down_for_s: float = 30.0, concurrency: int = 8,
                 api_key_env: str = "OPENAI_API_KEY") -> None:
        urls = [urls] if isinstance(urls, str) else list(urls)
        if not urls:
            raise ValueError("ServedWorldModelBackend urls is empty: give at least one server, e.g. "
                             "urls: [http://localhost:8000]")
        for url in urls:
            if not url.startswith(("http://", "https://")):
                raise ValueError(f"ServedWorldModelBackend urls: {url!r} is not an http(s) URL "
                                 "(e.g. http://localhost:8000)")
        if timeout_s <= 0 or retries < 0 or backoff_s < 0 or down_for_s < 0 or concurrency < 1:
            raise ValueError("ServedWorldModelBackend needs timeout_s > 0, retries >= 0, backoff_s >= 0, "
                             f"down_for_s >= 0 and concurrency >= 1 (got {timeout_s}, {retries}, {backoff_s}, "
                             f"{down_for_s}, {concurrency})")
        self.urls = [url.rstrip("/").removesuffix("/v1") for url in urls]
        self.served_model = served_model
        self.timeout_s, self.retries, self.backoff_s = timeout_s, retries, backoff_s
        self.down_for_s, self.concurrency = down_for_s, concurrency
        self.api_key_env = api_key_env
        self.tokenizer: Any = None
        self._models: dict[str, str] = {}
        self._down_until: dict[str, float] = {}
        self._lock = threading.Lock()
        self.requests = 0
        self.retried = 0
        self.unanswered = 0

    # -- the tokenizer -------------------------------------------------------------------------------------
    def load(self, model: str) -> None:
        """The world model's checkpoint (a built-in name or a local dir): only its tokenizer is loaded here; the
        servers serve the weights."""
        from transformers import AutoTokenizer

        from wmrl.models import resolve_model

        self.tokenizer = AutoTokenizer.from_pretrained(resolve_model(model))

    def bind(self, policy: Any, tokenizer: Any) -> None:
        """``model: policy``: the policy's tokenizer; the servers serve the policy's base checkpoint."""
        self.tokenizer = tokenizer

    def metrics(self) -> dict[str, float]:
        """Running counts: requests sent, retries, prompts no server answered."""
        return {"server_requests": float(self.requests), "server_retries": float(self.retried),
                "unanswered": float(self.unanswered)}

    # -- the two questions ---------------------------------------------------------------------------------
    def option_probabilities(self, prompts: Sequence[Sequence[int]], option_ids: Sequence[int],
                             prefix_groups: Sequence[str] = ()) -> list[list[float] | None]:
        """Per prompt, the next-token probability of each option token, renormalised over the options; ``None``
        where no server answered."""
        options = [int(i) for i in option_ids]

        def body(prompt: Sequence[int], row: int) -> dict[str, Any]:
            return {"prompt": [int(t) for t in prompt], "max_tokens": 1, "temperature": 1.0, "seed": 0,
                    "logprobs": len(options), "allowed_token_ids": options, "return_tokens_as_token_ids": True}

        def read(answer: dict[str, Any], url: str) -> list[float]:
            try:
                (entry,) = answer["choices"][0]["logprobs"]["top_logprobs"][:1]
            except (KeyError, IndexError, TypeError, ValueError) as error:
                raise ServerError(f"{url}: a completion without top_logprobs ({error!r})") from None
            by_id = {int(key.removeprefix("token_id:")): float(value) for key, value in entry.items()
                     if key.startswith("token_id:")}
            missing = [i for i in options if i not in by_id]
            if missing:
                raise ServerError(
                    f"{url} returned no log-prob for option tokens {missing}: start the server with "
                    "`vllm serve ... --logprobs-mode processed_logprobs` (log-probs after the allowed-token mask)")
            logprobs = [by_id[i] for i in options]
            top = max(logprobs)
            weights = [math.exp(lp - top) if math.isfinite(lp) else 0.0 for lp in logprobs]
            total = sum(weights)
            return [w / total for w in weights] if total > 0 else [math.nan] * len(options)

        return self._ask(prompts, prefix_groups, body, read)

    def generate(self, prompts: Sequence[Sequence[int]], max_new_tokens: int, temperature: float, top_p: float,
                 seed: int) -> list[str | None]:
        """One JSON answer per prompt, constrained to the predictions schema; ``None`` where no server answered."""
        from wmrl.generation.vllm import row_seed

        def body(prompt: Sequence[int], row: int) -> dict[str, Any]:
            return {"prompt": [int(t) for t in prompt], "max_tokens": max_new_tokens, "temperature": temperature,
                    "top_p": top_p, "seed": row_seed(seed, row, 0),
                    "structured_outputs": {"json": PREDICTIONS_SCHEMA}}

        def read(answer: dict[str, Any], url: str) -> str:
            try:
                return str(answer["choices"][0]["text"])
            except (KeyError, IndexError, TypeError) as error:
                raise ServerError(f"{url}: a completion without text ({error!r})") from None

        return self._ask(prompts, (), body, read)

    # -- requests --------------------------------------------------------------------------------------------
    def _ask(self, prompts: Sequence[Sequence[int]], prefix_groups: Sequence[str],
             body: Callable[[Sequence[int], int], dict[str, Any]], read: Callable[[dict[str, Any], str], Any]
             ) -> list[Any]:
        """Each prompt's answer, asked of its group's server first and of the others after it fails."""
        def answer(row: int) -> Any:
            group = prefix_groups[row] if row < len(prefix_groups) else str(row)
            first = zlib.crc32(group.encode()) % len(self.urls)
            errors = []
            for url in self.urls[first:] + self.urls[:first]:
                if self._is_down(url):
                    errors.append(f"{url}: skipped (failed in the last {self.down_for_s:g} s)")
                    continue
                try:
                    return read(self._complete(url, body(prompts[row], row)), url)
                except OSError as error:  # timeouts and connection errors, after this server's retries
                    errors.append(f"{url}: {error}")
                    with self._lock:
                        self._down_until[url] = time.monotonic() + self.down_for_s
            with self._lock:
                self.unanswered += 1
            log.warning("world-model servers gave no answer (reported missing, never 0): %s", "; ".join(errors))
            return None

        if not prompts:
            return []
        with ThreadPoolExecutor(max_workers=min(len(prompts), self.concurrency * len(self.urls))) as pool:
            return list(pool.map(answer, range(len(prompts))))

    def _is_down(self, url: str) -> bool:
        with self._lock:
            return time.monotonic() < self._down_until.get(url, 0.0)

    def _complete(self, url: str, body: dict[str, Any]) -> dict[str, Any]:
        """``POST /v1/completions`` with retries; OSError once they are spent, ServerError on a 4xx answer."""
        body = {"model": self._model(url), **body}
        wait = self.backoff_s
        for attempt in range(self.retries + 1):
            with self._lock:
                self.requests += 1
                self.retried += attempt > 0
            try:
                return self._request(url, "/v1/completions", body)
            except urllib.error.HTTPError as error:
                if error.code < 500:
                    raise ServerError(f"{url} refused the request (HTTP {error.code}): {_body_of(error)}") from None
                failure: OSError = OSError(f"HTTP {error.code}: {_body_of(error)}")
            except OSError as error:  # URLError, timeouts, connection resets
                failure = error
            except http.client.HTTPException as error:  # a connection cut mid-answer (IncompleteRead, ...)
                failure = OSError(f"{type(error).__name__}: {error}")
            if attempt < self.retries:
                time.sleep(wait)
                wait *= 2
        raise failure

    def _model(self, url: str) -> str:
        if self.served_model is not None:
            return self.served_model
        if url not in self._models:
            listed = self._request(url, "/v1/models", None)
            try:
                self._models[url] = str(listed["data"][0]["id"])
            except (KeyError, IndexError, TypeError):
                raise ServerError(f"{url}/v1/models lists no model: set served_model") from None
        return self._models[url]

    def _request(self, url: str, path: str, body: dict[str, Any] | None) -> dict[str, Any]:
        headers = {"Content-Type": "application/json"}
        key = os.environ.get(self.api_key_env)
        if key:
            headers["Authorization"] = f"Bearer {key}"
        data = None if body is None else json.dumps(body).encode()
        request = urllib.request.Request(url + path, data=data, headers=headers, method="GET" if data is None else "POST")
        with urllib.request.urlopen(request, timeout=self.timeout_s) as response:
            try:
                return json.loads(response.read())
            except json.JSONDecodeError as error:
                raise ServerError(f"{url}{path} answered with something other than JSON ({error})") from None


def _body_of(error: urllib.error.HTTPError) -> str:
    try:
        return error.read().decode(errors="replace")[:500]
    except OSError:
        return error.reason if isinstance(error.reason, str) else repr(error.reason)
