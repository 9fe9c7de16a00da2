"""An in-process stand-in for an OpenAI-compatible completions server (``vllm serve``'s API, the parts
:class:`~wmrl.generation.served_world_model.ServedWorldModelBackend` uses), backed by a real transformers model.

- ``GET /v1/models``: ``{"data": [{"id": <name>}]}``;
- ``POST /v1/completions`` with ``prompt`` as token ids: with ``allowed_token_ids`` and ``logprobs``, the
  next-token log-probs after the allowed-token mask (vLLM's ``--logprobs-mode processed_logprobs``), keyed
  ``token_id:<id>`` (``return_tokens_as_token_ids``); with ``structured_outputs.json``, a JSON answer of the
  predictions schema drawn with the request's seed (a tiny random model cannot follow a grammar).

``fail_next`` answers the next requests with HTTP errors (e.g. ``[503, 503]``); ``kill_at`` (a request count)
drops that request's connection unanswered and closes the server, as a server killed mid-step would; ``stop()``
closes it; every request body is kept in ``seen``.
"""

from __future__ import annotations

import json
import random
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import torch


class FakeCompletionServer:
    def __init__(self, model: Any, name: str = "world-model", logprobs_after_mask: bool = True) -> None:
        self.model, self.name, self.after_mask = model, name, logprobs_after_mask
        self.seen: list[dict] = []
        self.fail_next: list[int] = []
        self.kill_at: int | None = None
        self._lock = threading.Lock()
        server = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args):  # quiet
                pass

            def _send(self, code: int, payload: Any) -> None:
                data = json.dumps(payload).encode()
                self.send_response(code)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def do_GET(self):  # noqa: N802 - http.server's name
                if self.path == "/v1/models":
                    self._send(200, {"object": "list", "data": [{"id": server.name, "object": "model"}]})
                else:
                    self._send(404, {"error": {"message": f"no route {self.path}"}})

            def do_POST(self):  # noqa: N802
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                with server._lock:
                    server.seen.append(body)
                    failure = server.fail_next.pop(0) if server.fail_next else None
                    killed = server.kill_at is not None and len(server.seen) >= server.kill_at
                if killed:  # the connection closes unanswered and the server goes away
                    self.close_connection = True
                    threading.Thread(target=server.stop, daemon=True).start()
                    return
                if failure is not None:
                    self._send(failure, {"error": {"message": f"injected HTTP {failure}"}})
                elif body.get("model") != server.name:
                    self._send(404, {"error": {"message": f"The model `{body.get('model')}` does not exist."}})
                else:
                    self._send(200, server.complete(body))

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}"
        self._thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)
        self._thread.start()

    def complete(self, body: dict) -> dict:
        prompt = body["prompt"]
        if "structured_outputs" in body:
            rng = random.Random(body.get("seed"))
            status = rng.choice(["valid", "runtime_err", "ran_no_sub"])
            text = json.dumps({"reason": "fake", "predictions": [{
                "status": status, "error_type": None, "error_line": None,
                "quality_bucket": rng.choice(["low", "fair", "mid", "high"]) if status == "valid" else None,
                "env_feedback": "simulated", "confidence": 0.9}]})
            return {"choices": [{"index": 0, "text": text, "logprobs": None, "finish_reason": "stop"}]}
        with torch.no_grad(), self._lock:
            logits = self.model(torch.tensor([prompt])).logits[0, -1].float()
        allowed = body.get("allowed_token_ids")
        if allowed and self.after_mask:
            masked = torch.full_like(logits, float("-inf"))
            masked[allowed] = logits[allowed]
            logits = masked
        logprobs = torch.log_softmax(logits, dim=-1)
        top = torch.topk(logprobs, int(body.get("logprobs") or 1))
        entry = {f"token_id:{int(i)}": float(v) for v, i in zip(top.values, top.indices, strict=True)}
        first = int(top.indices[0])
        return {"choices": [{"index": 0, "text": "", "finish_reason": "length",
                             "logprobs": {"tokens": [f"token_id:{first}"], "token_logprobs": [float(top.values[0])],
                                          "top_logprobs": [entry], "text_offset": [0]}}]}

    def stop(self) -> None:
        """Close the listening socket: the next connection is refused (a killed server)."""
        self.httpd.shutdown()
        self.httpd.server_close()
