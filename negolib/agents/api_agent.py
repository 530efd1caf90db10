"""Shared machinery of API agents: one concurrent wave per batch, retries, usage, rejected params.

:class:`ApiAgent` renders every view of a batch into chat messages, then sends the whole batch as
one asyncio wave through the provider's async SDK client, at most ``max_concurrency`` requests in
flight. Transient failures (429, 5xx, 529 "overloaded", timeouts, connection resets, truncated or
invalid bodies) are retried with exponential backoff and full jitter (a server's ``retry-after``
is honoured as a floor); the SDK's own retries are off so this policy is the one in force. A
parameter the provider rejects (a 400/422 naming it) is recorded, dropped for every later call
and reported through :func:`negolib.core.sampling.warn_drift` [App. A "Sampling"]. A view that still
fails after the retry budget gets ``AgentReply(error=...)``: the rollout engine writes an error row
that a re-run completes [App. K]. Nothing here raises for one failing episode.

The key is read from the environment once, at construction (a missing key fails before any
request), and is never shown by ``repr``, :meth:`ApiAgent.settings`, error texts or log records.
"""

from __future__ import annotations

import asyncio
import email.utils
import json
import logging
import random
import re
import time
from abc import abstractmethod
from collections.abc import Coroutine, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass, field, is_dataclass, replace
from typing import Any, Literal, TypeVar

from negolib.agents.base import Agent, AgentReply, Render, View, require_render
from negolib.core.sampling import Decoding, SamplingConfig, derive_seed, warn_drift
from negolib.core.secrets import RedactingFilter, Secret, redact, require_key
from negolib.training.config import Scaffold

log = logging.getLogger(__name__)
Messages = list[dict[str, str]]
T = TypeVar("T")
MAX_ERROR_CHARS = 400


@dataclass(frozen=True)
class RetryPolicy:
    """Retry budget and backoff. Delay before retry ``n`` (0-based): U(0, min(max, base * 2^n))."""

    max_retries: int = 6
    base_delay_s: float = 1.0
    max_delay_s: float = 60.0
    timeout_s: float = 120.0

    def __post_init__(self) -> None:
        if self.max_retries < 0:
            raise ValueError(f"max_retries must be >= 0, got {self.max_retries}")
        if not 0 <= self.base_delay_s <= self.max_delay_s:
            raise ValueError(f"need 0 <= base_delay_s <= max_delay_s, got {self.base_delay_s}, {self.max_delay_s}")
        if self.timeout_s <= 0:
            raise ValueError(f"timeout_s must be > 0, got {self.timeout_s}")

    def delay(self, retry: int, rng: random.Random, retry_after: float | None = None) -> float:
        """Full-jitter backoff; a server's ``retry-after`` (capped at ``max_delay_s``) is a floor."""
        d = rng.uniform(0.0, min(self.max_delay_s, self.base_delay_s * 2.0 ** retry))
        if retry_after is not None:
            d = max(d, min(max(0.0, retry_after), self.max_delay_s))
        return d


@dataclass(frozen=True)
class Failure:
    """How one request failed: ``transient`` (retry), ``rejected`` (drop ``params``, resend), ``fatal``."""

    kind: Literal["transient", "rejected", "fatal"]
    reason: str
    retry_after: float | None = None
    params: tuple[str, ...] = ()
    detail: str = ""


@dataclass(frozen=True)
class Completion:
    """What one successful request returned."""

    text: str
    input_tokens: int = 0
    output_tokens: int = 0
    finish: str | None = None


@dataclass(frozen=True)
class ChatJob:
    """One request of a wave: chat messages plus per-request values of parameters being sent."""

    messages: Messages
    overrides: Mapping[str, Any] = field(default_factory=dict)


class InvalidResponse(Exception):
    """A 2xx response without what a turn needs (no choices, no text block): retried."""


@dataclass
class UsageStats:
    """Counters over the agent's life: turns asked, HTTP attempts, retries, tokens and latency."""

    calls: int = 0
    succeeded: int = 0
    failed: int = 0
    attempts: int = 0
    retries: int = 0
    input_tokens: int = 0
    output_tokens: int = 0
    latency_s: float = 0.0
    max_in_flight: int = 0
    errors: dict[str, int] = field(default_factory=dict)


def run_coroutine(coro: Coroutine[Any, Any, T]) -> T:
    """Run ``coro`` to completion from sync code, also when an event loop already runs (Jupyter)."""
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return asyncio.run(coro)
    with ThreadPoolExecutor(max_workers=1, thread_name_prefix="negolib-api") as ex:
        return ex.submit(asyncio.run, coro).result()


def _retry_after(exc: BaseException) -> float | None:
    headers = getattr(getattr(exc, "response", None), "headers", None)
    if headers is None:
        return None
    ms = headers.get("retry-after-ms")
    if ms is not None:
        try:
            return float(ms) / 1000.0
        except ValueError:
            pass
    raw = headers.get("retry-after")
    if raw is None:
        return None
    try:
        return float(raw)
    except ValueError:
        try:
            when = email.utils.parsedate_to_datetime(raw)
        except (TypeError, ValueError):
            return None
        return max(0.0, when.timestamp() - time.time())


def _error_text(exc: BaseException) -> str:
    body = getattr(exc, "body", None)
    parts = [str(exc)]
    if isinstance(body, Mapping):
        parts.append(json.dumps(body, default=str))
    return " ".join(parts)


def _named_params(exc: BaseException, sent: Sequence[str]) -> tuple[str, ...]:
    """Sent parameters that a 400/422 error names (OpenAI's ``param`` field, else the message)."""
    body = getattr(exc, "body", None)
    if isinstance(body, Mapping):
        inner = body.get("error")
        p = body.get("param") or (inner.get("param") if isinstance(inner, Mapping) else None)
        if isinstance(p, str) and p in sent:
            return (p,)
    text = _error_text(exc)  # one at a time, in ``sent`` order: keep as much declared sampling as possible
    named = [p for p in sent if re.search(rf"(?<![A-Za-z0-9_]){re.escape(p)}(?![A-Za-z0-9_])", text)]
    return tuple(named[:1])


def classify_error(exc: BaseException, droppable: Sequence[str] = ()) -> Failure:
    """Sort an SDK/transport exception into transient, rejected-parameter or fatal."""
    names = {c.__name__ for c in type(exc).__mro__}
    if isinstance(exc, (asyncio.TimeoutError, TimeoutError)) or names & {"APITimeoutError", "TimeoutException"}:
        return Failure("transient", "timeout")
    if isinstance(exc, (json.JSONDecodeError, InvalidResponse, UnicodeDecodeError)) or names & {
            "APIResponseValidationError", "ValidationError", "DecodingError"}:
        return Failure("transient", f"invalid response body ({type(exc).__name__})")
    if names & {"APIConnectionError", "TransportError", "NetworkError", "RemoteProtocolError"} or isinstance(
            exc, ConnectionError):
        return Failure("transient", "connection error")
    status = getattr(exc, "status_code", None)
    if isinstance(status, int):
        text = _error_text(exc)
        short = f"HTTP {status}: {str(exc)[:160]}"
        if status in (408, 409, 425, 429) or status >= 500 or "overloaded" in text.lower():
            return Failure("transient", short, _retry_after(exc))
        if status in (400, 422):
            params = _named_params(exc, droppable)
            if params:
                return Failure("rejected", short, params=params, detail=text)
        return Failure("fatal", short)
    return Failure("fatal", f"{type(exc).__name__}: {str(exc)[:200]}")


def as_sampling_config(sampling: Any) -> SamplingConfig:
    """A :class:`SamplingConfig` from one, a params ``Sampling`` dataclass, a mapping or ``None``."""
    if sampling is None:
        return SamplingConfig()
    if isinstance(sampling, SamplingConfig):
        return sampling
    if isinstance(sampling, Decoding):
        return SamplingConfig.seeded(sampling)
    if is_dataclass(sampling) and not isinstance(sampling, type):
        return SamplingConfig.from_mapping(asdict(sampling))
    if isinstance(sampling, Mapping):
        return SamplingConfig.from_mapping(sampling)
    raise TypeError(f"sampling must be a SamplingConfig, a dataclass or a mapping, got {type(sampling).__name__}")


class ApiAgent(Agent):
    """Base class of API-served parties; subclasses build the client and make one request.

    ``api_key_env`` is the NAME of the environment variable holding the key. ``max_concurrency``
    bounds requests in flight per agent (one provider endpoint); ``retry`` sets the budget and
    backoff, and ``timeout_s`` / ``max_retries`` override its fields. ``seed`` seeds the jitter.
    """

    backend = "api"
    #: parameters the provider may reject; the agent drops them and carries on
    droppable: tuple[str, ...] = ("temperature", "top_p", "top_k", "seed")

    def __init__(self, name: str, model: str, *, api_key_env: str, base_url: str | None = None,
                 sampling: SamplingConfig | None = None, scaffold: Scaffold = "evaluation",
                 max_concurrency: int = 8, retry: RetryPolicy | None = None, timeout_s: float | None = None,
                 max_retries: int | None = None, seed: int = 0, arm: str | None = None,
                 role: str | None = None, render: Render | None = None) -> None:
        if scaffold not in ("training", "evaluation"):
            raise ValueError(f"scaffold must be 'training' or 'evaluation', got {scaffold!r}")
        if max_concurrency < 1:
            raise ValueError(f"max_concurrency must be >= 1, got {max_concurrency}")
        self._key = Secret(require_key(api_key_env, f"{self.backend} agent {name!r} ({model})"), api_key_env)
        self.name, self.model, self.base_url = name, model, base_url
        self.api_key_env, self.scaffold, self.arm = api_key_env, scaffold, arm or name
        self.role, self.renderer = role, render  # the game's (view, scaffold) -> messages
        self.sampling = as_sampling_config(sampling)
        over = {k: v for k, v in (("timeout_s", timeout_s), ("max_retries", max_retries)) if v is not None}
        self.retry = replace(retry or RetryPolicy(), **over)
        self.max_concurrency = max_concurrency
        self.usage = UsageStats()
        self.rejected: dict[str, str] = {}
        self._rng = random.Random(seed)
        self._params: dict[str, Any] = self.initial_params()
        self._in_flight = 0
        self._warn_drift()  # at run start: what is sent vs what the arm declares

    # -- provider hooks -------------------------------------------------------------------------
    @abstractmethod
    def initial_params(self) -> dict[str, Any]:
        """The request parameters (wire names) that carry the declared sampling."""

    @abstractmethod
    def make_client(self, api_key: str) -> Any:
        """A fresh async SDK client (SDK retries off, timeout from the policy)."""

    @abstractmethod
    async def request(self, client: Any, messages: Messages, params: dict[str, Any]) -> Completion:
        """One request; raise on failure (classified by :func:`classify_error`)."""

    def sent_sampling(self) -> dict[str, Any]:
        """The declared sampling fields as actually sent (``None``: not sent, provider default)."""
        p = self._params
        top_k = p.get("top_k", 0 if self.sampling.top_k == 0 else None)  # 0 = off = not sent
        return {"temperature": p.get("temperature"), "top_p": p.get("top_p"), "top_k": top_k,
                "max_new_tokens": p.get("max_tokens", p.get("max_completion_tokens")),
                "thinking": self.sampling.thinking, "seed": p.get("seed")}

    def accepts_rejection(self, param: str, detail: str) -> bool:
        """Whether an error naming ``param`` means the provider rejects it (default: yes)."""
        return True

    def on_rejected(self, param: str, reason: str) -> dict[str, Any]:
        """Replacement parameters for a rejected one (default none: it is just dropped)."""
        return {}

    # -- the agent protocol ---------------------------------------------------------------------
    def act_batch(self, views: Sequence[View]) -> list[AgentReply]:
        """Render every view and answer the batch as one concurrent wave; one reply per view.

        Where a seed is sent, each request gets its own, derived from (declared seed, episode id,
        turn), so runs are reproducible where the provider honours seeds and episodes differ.
        """
        batch: list[ChatJob | BaseException] = []
        render = require_render(self)
        for v in views:
            try:
                msgs = render(v, self.scaffold)
            except Exception as exc:  # one bad view must not sink the wave
                batch.append(exc)
                continue
            seed = derive_seed(int(self.sampling.seed or 0), [v.episode_id], [v.turn]) % 2**31
            batch.append(ChatJob(msgs, {"seed": seed}))
        return self.complete_batch(batch)

    def complete_batch(self, batch: Sequence[Messages | ChatJob | BaseException]) -> list[AgentReply]:
        """Answer already-rendered chat message lists (an exception entry becomes an error reply)."""
        if not batch:
            return []
        try:
            return run_coroutine(self.acomplete_batch(batch))
        except Exception as exc:  # e.g. the client could not be built: every view gets the error
            err = self._clean(f"{self.backend} {self.model}: {type(exc).__name__}: {exc}")
            return [AgentReply("", error=err) for _ in batch]

    async def acomplete_batch(self, batch: Sequence[Messages | ChatJob | BaseException]) -> list[AgentReply]:
        """The async wave: at most ``max_concurrency`` requests in flight, one reply per entry."""
        sem = asyncio.Semaphore(self.max_concurrency)
        n_rejected = len(self.rejected)
        client = self.make_client(self._key.reveal())
        try:
            replies = await asyncio.gather(*(self._one(client, sem, m) for m in batch))
        finally:
            await client.close()
        if len(self.rejected) > n_rejected:
            self._warn_drift()
        return list(replies)

    async def _one(self, client: Any, sem: asyncio.Semaphore, job: Messages | ChatJob | BaseException
                   ) -> AgentReply:
        t0 = time.perf_counter()
        self.usage.calls += 1
        if isinstance(job, BaseException):
            self.usage.failed += 1
            return AgentReply("", error=self._clean(f"prompt rendering failed: {type(job).__name__}: {job}"))
        job = job if isinstance(job, ChatJob) else ChatJob(job)
        retries, rejections = 0, 0
        while True:
            failure: Failure | None = None
            async with sem:
                params = dict(self._params)  # after the wait: a param rejected meanwhile is not resent
                params.update({k: v for k, v in job.overrides.items() if k in params})
                self._in_flight += 1
                self.usage.max_in_flight = max(self.usage.max_in_flight, self._in_flight)
                self.usage.attempts += 1
                t1 = time.perf_counter()
                try:
                    comp = await asyncio.wait_for(self.request(client, job.messages, params), self.retry.timeout_s)
                except Exception as exc:  # classified below; CancelledError propagates
                    failure = classify_error(exc, [p for p in self.droppable if p in params])
                finally:
                    self._in_flight -= 1
                req_s = time.perf_counter() - t1
            if failure is None:
                u = self.usage
                u.succeeded += 1
                u.input_tokens += comp.input_tokens
                u.output_tokens += comp.output_tokens
                u.latency_s += req_s
                return AgentReply(comp.text, comp.input_tokens, comp.output_tokens, time.perf_counter() - t0,
                                  extra={"attempts": retries + rejections + 1, "request_latency_s": req_s,
                                         "finish": comp.finish, "model": self.model})
            self.usage.errors[failure.reason.split(":")[0]] = self.usage.errors.get(
                failure.reason.split(":")[0], 0) + 1
            if failure.kind == "rejected" and rejections < len(self.droppable) + 1 and all(
                    self.accepts_rejection(p, failure.detail) for p in failure.params):
                rejections += 1
                self._drop(failure.params, failure.reason)
                continue  # resend without it; a rejection does not spend the retry budget
            if failure.kind != "transient" or retries >= self.retry.max_retries:
                self.usage.failed += 1
                what = "not retryable" if failure.kind != "transient" else f"gave up after {retries + 1} attempts"
                return AgentReply("", latency_s=time.perf_counter() - t0, error=self._clean(
                    f"{self.backend} {self.model}: {what}: {failure.reason}"))
            delay = self.retry.delay(retries, self._rng, failure.retry_after)
            retries += 1
            self.usage.retries += 1
            log.info("%s", self._clean(f"{self.name}: {failure.reason}; retry {retries}/{self.retry.max_retries} "
                                       f"in {delay:.2f}s"))
            await asyncio.sleep(delay)

    # -- rejected parameters and drift ----------------------------------------------------------
    def _drop(self, params: Sequence[str], reason: str) -> None:
        for p in params:
            if p not in self._params:
                continue  # a concurrent request already dropped it
            del self._params[p]
            self._params.update(self.on_rejected(p, reason))
            self.rejected[p] = self._clean(reason)[:MAX_ERROR_CHARS]
            log.warning("%s", self._clean(f"{self.name} ({self.model}): provider rejected '{p}'; "
                                          "dropped for later calls"))

    def _warn_drift(self) -> None:
        warn_drift(self.arm, self.sampling, self.sent_sampling(), rejected=list(self.rejected))

    # -- reporting ------------------------------------------------------------------------------
    def log_filter(self) -> RedactingFilter:
        """A logging filter scrubbing this agent's key; attach it to the run's log handlers."""
        return RedactingFilter([self._key])

    def _clean(self, text: str) -> str:
        return redact(text, [self._key])[:MAX_ERROR_CHARS * 2]

    def settings(self) -> dict[str, Any]:
        """Backend, model, endpoint, key variable name, declared vs sent sampling, rejected params."""
        out = {"backend": self.backend, "name": self.name, "arm": self.arm, "role": self.role, "model": self.model,
               "base_url": self.base_url, "api_key_env": self.api_key_env, "scaffold": self.scaffold,
               "max_concurrency": self.max_concurrency, "retry": asdict(self.retry),
               "declared": asdict(self.sampling), "sampling": self.sent_sampling(),
               "sent": dict(self._params), "rejected": dict(self.rejected)}
        return json.loads(redact(json.dumps(out, default=str), [self._key]))

    def __repr__(self) -> str:
        return (f"{type(self).__name__}(name={self.name!r}, model={self.model!r}, base_url={self.base_url!r}, "
                f"api_key_env={self.api_key_env!r})")


__all__ = ["ApiAgent", "ChatJob", "Completion", "Failure", "InvalidResponse", "RetryPolicy", "UsageStats",
           "as_sampling_config", "classify_error", "run_coroutine"]
