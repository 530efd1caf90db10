"""Local LLM API servers for tests: real HTTP on 127.0.0.1, pluggable responders, fault injection.

:class:`ChatServer` speaks either the OpenAI chat-completions API (``POST /v1/chat/completions``)
or the Anthropic Messages API (``POST /v1/messages``), so the real ``openai`` and ``anthropic``
SDKs talk to it over real sockets. Its text comes from a *responder*: :func:`turn_responder`
(deterministic, a valid negotiation turn) or :class:`LocalModelResponder` (a real local model,
SmolLM2 via transformers). :class:`Fault` rules inject failures into chosen requests: 429 with
``retry-after``, 500, 529 overloaded, a hang past the client timeout, a truncated JSON body, a
dropped connection, and a 401 whose message echoes the key it received (as real providers echo
part of a bad key), to test redaction. A reply may carry tool calls (:func:`tool_responder`): the
OpenAI server returns them as ``tool_calls`` (arguments as a JSON string, or a raw string for a
malformed call), the Anthropic server as ``tool_use`` blocks. :class:`TransformersServe` runs the
real ``transformers serve`` process.
Every server listens on 127.0.0.1 only and every wait is bounded.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import threading
import time
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, Literal

Api = Literal["openai", "anthropic"]
FaultKind = Literal["429", "500", "529", "hang", "truncated", "drop", "401"]

DEFAULT_TURN = ("Thanks for walking me through this. I'd like to keep the key terms where they are "
                "for now.\n" + json.dumps({"action": "COUNTER", "terms": []}))


@dataclass
class ChatRequest:
    """A request as the responder sees it (Anthropic's ``system`` becomes a first system message)."""

    messages: list[dict[str, str]]
    max_tokens: int
    params: dict[str, Any]


@dataclass
class ChatReply:
    """What the server answers. ``tool_calls``: ``{"name", "arguments"}`` dicts (arguments a dict, or a string
    sent as is: a malformed call), answered in the provider's native tool-call shape."""

    text: str
    input_tokens: int
    output_tokens: int
    finish: str = "stop"
    tool_calls: list[dict[str, Any]] = field(default_factory=list)


Responder = Callable[[ChatRequest], ChatReply]


def _approx_tokens(text: str) -> int:
    return max(1, len(text) // 4)


def turn_responder(text: str = DEFAULT_TURN) -> Responder:
    """A deterministic responder: always ``text`` (default: prose + a valid COUNTER action)."""

    def respond(req: ChatRequest) -> ChatReply:
        prompt = "".join(m["content"] for m in req.messages)
        return ChatReply(text, _approx_tokens(prompt), _approx_tokens(text))

    return respond


def tool_responder(text: str = "", calls: list[dict[str, Any]] | None = None) -> Responder:
    """A deterministic responder answering ``text`` plus ``calls`` (``{"name", "arguments"}`` dicts) every time:
    a call, a malformed call, two calls, or prose only (no calls)."""

    def respond(req: ChatRequest) -> ChatReply:
        prompt = "".join(m["content"] for m in req.messages)
        return ChatReply(text, _approx_tokens(prompt), _approx_tokens(text) + 5 * len(calls or ()),
                         tool_calls=list(calls or ()))

    return respond


class LocalModelResponder:
    """A real local causal LM (loaded lazily with transformers) answering with its chat template.

    ``max_prompt_tokens`` keeps only the tail of a long templated prompt (CPU prefill of a full
    ~1k-token negotiation prompt takes seconds to tens of seconds on a busy 2-core machine); the
    reported ``input_tokens`` are still the whole prompt's, as a provider bills what it was sent.
    ``threads`` sets torch's intra-op threads while generating (1 is several times faster than 2
    when other processes share the 2 cores: OpenMP workers spin against each other).
    """

    def __init__(self, model_dir: str | Path, max_new_tokens: int = 24, do_sample: bool = False,
                 seed: int = 0, max_prompt_tokens: int | None = None, threads: int | None = 1) -> None:
        self.model_dir, self.max_new_tokens = Path(model_dir), max_new_tokens
        self.do_sample, self.seed, self.max_prompt_tokens = do_sample, seed, max_prompt_tokens
        self.threads = threads
        self._lock = threading.Lock()
        self._model: Any = None
        self._tok: Any = None

    def load(self) -> LocalModelResponder:
        from transformers import AutoModelForCausalLM, AutoTokenizer

        with self._lock:
            if self._model is None:
                self._tok = AutoTokenizer.from_pretrained(self.model_dir)
                self._model = AutoModelForCausalLM.from_pretrained(self.model_dir).eval()
        return self

    def __call__(self, req: ChatRequest) -> ChatReply:
        import torch

        self.load()
        with self._lock:  # one generation at a time: the server is threaded, the model is not
            enc = self._tok.apply_chat_template(req.messages, add_generation_prompt=True,
                                                return_tensors="pt", return_dict=True)
            n_prompt = int(enc["input_ids"].shape[1])
            keep = self.max_prompt_tokens or n_prompt
            ids = {k: v[:, -keep:] for k, v in enc.items() if k in ("input_ids", "attention_mask")}
            limit = min(req.max_tokens, self.max_new_tokens)
            before = torch.get_num_threads()
            torch.manual_seed(self.seed)
            try:
                torch.set_num_threads(self.threads or before)
                with torch.no_grad():
                    out = self._model.generate(**ids, max_new_tokens=limit, do_sample=self.do_sample,
                                               pad_token_id=self._tok.eos_token_id)
            finally:
                torch.set_num_threads(before)
            new = out[0, ids["input_ids"].shape[1]:]
            text = self._tok.decode(new, skip_special_tokens=True)
        return ChatReply(text, n_prompt, int(new.shape[0]), "length" if new.shape[0] >= limit else "stop")


@dataclass
class Fault:
    """Inject ``kind`` into the next ``count`` requests (whose raw body contains ``match``, if set)."""

    kind: FaultKind
    count: int | None = 1  # None: every matching request
    match: str | None = None
    retry_after: float | None = None
    hang_s: float = 3.0

    def applies(self, body: bytes) -> bool:
        if self.count is not None and self.count <= 0:
            return False
        return self.match is None or self.match.encode() in body


@dataclass
class ServerStats:
    requests: int = 0
    in_flight: int = 0
    max_in_flight: int = 0
    faults: dict[str, int] = field(default_factory=dict)
    bodies: list[dict[str, Any]] = field(default_factory=list)
    auth: list[str] = field(default_factory=list)


class ChatServer:
    """A threaded HTTP server speaking one provider's API; use as a context manager."""

    def __init__(self, api: Api = "openai", responder: Responder | None = None,
                 faults: list[Fault] | None = None, reject_params: tuple[str, ...] = (),
                 latency_s: float = 0.0) -> None:
        self.api = api
        self.responder = responder or turn_responder()
        self.faults = list(faults or [])
        self.reject_params = tuple(reject_params)
        self.latency_s = latency_s
        self.stats = ServerStats()
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._httpd: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None

    # -- lifecycle ------------------------------------------------------------------------------
    @property
    def port(self) -> int:
        assert self._httpd is not None, "server not started"
        return self._httpd.server_address[1]

    @property
    def base_url(self) -> str:
        """What the SDK takes as ``base_url`` (the OpenAI SDK wants the ``/v1`` prefix)."""
        root = f"http://127.0.0.1:{self.port}"
        return root + "/v1" if self.api == "openai" else root

    def start(self) -> ChatServer:
        server = self

        class Handler(_Handler):
            owner = server

        self._httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._httpd.daemon_threads = True
        self._thread = threading.Thread(target=self._httpd.serve_forever, kwargs={"poll_interval": 0.05},
                                        daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        if self._httpd is not None:
            self._httpd.shutdown()
            self._httpd.server_close()
        if self._thread is not None:
            self._thread.join(timeout=5)

    def __enter__(self) -> ChatServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # -- request handling -----------------------------------------------------------------------
    def _take_fault(self, body: bytes) -> Fault | None:
        with self._lock:
            for f in self.faults:
                if f.applies(body):
                    if f.count is not None:
                        f.count -= 1
                    self.stats.faults[f.kind] = self.stats.faults.get(f.kind, 0) + 1
                    return f
        return None

    def _error_body(self, status: int, message: str, etype: str, param: str | None = None) -> dict[str, Any]:
        if self.api == "anthropic":
            return {"type": "error", "error": {"type": etype, "message": message}}
        return {"error": {"message": message, "type": etype, "param": param, "code": None}}

    def _request(self, body: dict[str, Any]) -> ChatRequest:
        msgs = [{"role": m["role"], "content": _text(m["content"])} for m in body.get("messages", [])]
        if self.api == "anthropic" and body.get("system"):
            msgs.insert(0, {"role": "system", "content": _text(body["system"])})
        params = {k: v for k, v in body.items() if k not in ("messages", "system", "model", "max_tokens")}
        return ChatRequest(msgs, int(body.get("max_tokens") or 64), params)

    def _success(self, body: dict[str, Any]) -> dict[str, Any]:
        rep = self.responder(self._request(body))
        calls = rep.tool_calls or []
        ids = [c.get("id") or f"call_{self.stats.requests}_{i}" for i, c in enumerate(calls)]
        if self.api == "anthropic":
            content: list[dict[str, Any]] = [{"type": "text", "text": rep.text}] if rep.text or not calls else []
            content += [{"type": "tool_use", "id": i, "name": c["name"], "input": c.get("arguments", {})}
                        for i, c in zip(ids, calls)]
            stop = "max_tokens" if rep.finish == "length" else ("tool_use" if calls else "end_turn")
            return {"id": f"msg_{self.stats.requests}", "type": "message", "role": "assistant",
                    "model": body.get("model", "local"), "content": content,
                    "stop_reason": stop,
                    "stop_sequence": None,
                    "usage": {"input_tokens": rep.input_tokens, "output_tokens": rep.output_tokens}}
        message: dict[str, Any] = {"role": "assistant", "content": rep.text}
        finish = rep.finish
        if calls:
            message["content"] = rep.text or None
            message["tool_calls"] = [
                {"id": i, "type": "function", "function": {"name": c["name"], "arguments": (
                    c["arguments"] if isinstance(c.get("arguments"), str) else json.dumps(c.get("arguments", {})))}}
                for i, c in zip(ids, calls)]
            finish = "tool_calls" if finish == "stop" else finish
        return {"id": f"chatcmpl-{self.stats.requests}", "object": "chat.completion",
                "created": int(time.time()), "model": body.get("model", "local"),
                "choices": [{"index": 0, "message": message,
                             "finish_reason": finish}],
                "usage": {"prompt_tokens": rep.input_tokens, "completion_tokens": rep.output_tokens,
                          "total_tokens": rep.input_tokens + rep.output_tokens}}


def _text(content: Any) -> str:
    """Message content as plain text (a string, None as with an assistant turn of tool calls only, or a list of
    blocks: text blocks' text and string ``tool_result`` contents; ``tool_use`` blocks give nothing)."""
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    out = []
    for b in content:
        if isinstance(b, dict):
            inner = b.get("content") if b.get("type") == "tool_result" else None
            out.append(b.get("text", "") if inner is None else _text(inner))
    return "".join(out)


class _Handler(BaseHTTPRequestHandler):
    owner: ChatServer
    protocol_version = "HTTP/1.1"

    def log_message(self, format: str, *args: Any) -> None:  # keep test output quiet
        pass

    def do_GET(self) -> None:
        if self.path.rstrip("/") in ("/health", "/v1/health"):
            self._send(200, {"status": "ok"})
        else:
            self._send(404, {"error": "not found"})

    def do_POST(self) -> None:
        srv = self.owner
        raw = self.rfile.read(int(self.headers.get("Content-Length") or 0))
        route = "/v1/messages" if srv.api == "anthropic" else "/v1/chat/completions"
        if self.path.split("?")[0].rstrip("/") != route:
            self._send(404, srv._error_body(404, f"no route {self.path}", "not_found_error"))
            return
        with srv._lock:
            srv.stats.requests += 1
            srv.stats.in_flight += 1
            srv.stats.max_in_flight = max(srv.stats.max_in_flight, srv.stats.in_flight)
            srv.stats.auth.append(self.headers.get("x-api-key") or self.headers.get("authorization") or "")
        try:
            self._handle(srv, raw)
        except (BrokenPipeError, ConnectionResetError):
            pass
        finally:
            with srv._lock:
                srv.stats.in_flight -= 1

    def _handle(self, srv: ChatServer, raw: bytes) -> None:
        body = json.loads(raw or b"{}")
        with srv._lock:
            srv.stats.bodies.append(body)
        if srv.latency_s:
            srv._stop.wait(srv.latency_s)
        fault = srv._take_fault(raw)
        if fault is not None and self._inject(srv, fault, body):
            return
        sent = sorted(p for p in srv.reject_params if p in body)
        if sent:
            p = sent[0]
            msg = (f"`{p}` is not supported for this model." if srv.api == "anthropic" else
                   f"Unsupported parameter: '{p}' is not supported with this model."
                   + (" Use 'max_completion_tokens' instead." if p == "max_tokens" else ""))
            self._send(400, srv._error_body(400, msg, "invalid_request_error", p))
            return
        self._send(200, srv._success(body))

    def _inject(self, srv: ChatServer, fault: Fault, body: dict[str, Any]) -> bool:
        """Send the fault; True when the request is finished."""
        kind = fault.kind
        if kind == "429":
            hdr = {} if fault.retry_after is None else {"retry-after": f"{fault.retry_after:g}"}
            self._send(429, srv._error_body(429, "Rate limit reached, slow down", "rate_limit_error"), hdr)
        elif kind == "500":
            self._send(500, srv._error_body(500, "Internal server error", "api_error"))
        elif kind == "529":
            self._send(529, srv._error_body(529, "Overloaded", "overloaded_error"))
        elif kind == "hang":
            srv._stop.wait(fault.hang_s)  # past the client's timeout; bounded, ends at shutdown
            self.close_connection = True
            self.connection.close()
        elif kind == "truncated":
            data = json.dumps(srv._success(body)).encode()
            self._send_raw(200, data[: len(data) // 2])
        elif kind == "401":
            got = (self.headers.get("x-api-key") or self.headers.get("authorization") or "").removeprefix("Bearer ")
            self._send(401, srv._error_body(401, f"Incorrect API key provided: {got}", "authentication_error"))
        elif kind == "drop":
            self.close_connection = True
            try:
                self.connection.shutdown(socket.SHUT_RDWR)
            finally:
                self.connection.close()
        return True

    def _send(self, status: int, payload: dict[str, Any], headers: dict[str, str] | None = None) -> None:
        self._send_raw(status, json.dumps(payload).encode(), headers)

    def _send_raw(self, status: int, data: bytes, headers: dict[str, str] | None = None) -> None:
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        for k, v in (headers or {}).items():
            self.send_header(k, v)
        self.end_headers()
        self.wfile.write(data)
        self.wfile.flush()


def free_port() -> int:
    """A free TCP port on 127.0.0.1."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class TransformersServe:
    """The real ``transformers serve`` OpenAI-compatible server as a subprocess (context manager).

    ``threads`` sets ``OMP_NUM_THREADS`` for the server (see :class:`LocalModelResponder`).
    """

    def __init__(self, model_dir: str | Path, log_path: str | Path, startup_timeout_s: float = 90.0,
                 executable: str | Path | None = None, env: dict[str, str] | None = None,
                 threads: int | None = 1) -> None:
        self.model_dir, self.log_path = Path(model_dir), Path(log_path)
        self.startup_timeout_s = startup_timeout_s
        self.executable = str(executable or Path(sys.executable).with_name("transformers"))
        self.env = {**({"OMP_NUM_THREADS": str(threads)} if threads else {}), **(env or {})}
        self.port = free_port()
        self.proc: subprocess.Popen[bytes] | None = None

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    def __enter__(self) -> TransformersServe:
        cmd = [self.executable, "serve", str(self.model_dir), "--host", "127.0.0.1", "--port", str(self.port),
               "--device", "cpu", "--dtype", "float32"]
        env = {**os.environ, "HF_HUB_OFFLINE": "1", **(self.env or {})}
        self._log = open(self.log_path, "wb")
        self.proc = subprocess.Popen(cmd, stdout=self._log, stderr=subprocess.STDOUT, env=env)
        deadline = time.monotonic() + self.startup_timeout_s
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                self.__exit__()
                raise RuntimeError(f"transformers serve exited ({self.proc.returncode}); see {self.log_path}")
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{self.port}/health", timeout=1) as r:
                    if r.status == 200:
                        return self
            except OSError:
                time.sleep(0.5)
        self.__exit__()
        raise TimeoutError(f"transformers serve not ready after {self.startup_timeout_s}s; see {self.log_path}")

    def __exit__(self, *exc: object) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=15)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(timeout=5)
        if getattr(self, "_log", None) is not None:
            self._log.close()
