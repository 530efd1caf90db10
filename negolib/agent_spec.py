"""An agent spec of a profile: one seller arm or buyer (:class:`AgentSpec`), the keys each backend takes, and the
checks the loader and the agent builder share (:func:`spec_problems`, :func:`check_agent`), so that the two can
never disagree. The profile loader (:mod:`negolib.params`) and the games' sections (:mod:`negolib.game_params`)
build every agent spec through :func:`check_agent`; errors are :class:`~negolib.core.errors.ValidationError` naming the
file and the dotted field."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any, Literal, get_args

from negolib.agents.api_agent import RetryPolicy
from negolib.core.errors import ValidationError
from negolib.core.sampling import Decoding
from negolib.core.schema import build
from negolib.games.multi_issue.scripted import STRATEGIES, strategy_param_problems

Backend = Literal["scripted", "hf", "vllm", "trained", "openai", "anthropic", "fixed_opening"]
BACKENDS: tuple[str, ...] = get_args(Backend)
Scaffold = Literal["evaluation", "training"]
OPENINGS = ("none", "best")
"""The named openings of a ``fixed_opening`` arm (else ``own:<arm>`` or a utility in [0, 1] as a string)."""
OWN_OPENING = "own:"
"""Prefix of a ``fixed_opening`` arm's ``opening`` that names another arm: ``own:<arm>`` is the first turn that
arm writes on the same scenario against the same buyer (App. A: does the trained arm's own opening carry the gain?)."""
DTYPES = ("float32", "float16", "bfloat16")
"""Weight dtypes a local model loads in (``torch.<dtype>``)."""
_ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
_SECRET_KEYS = {"api_key", "apikey", "key", "token", "secret", "password", "authorization"}

Sampling = Decoding  # an arm's decoding settings: one schema, :class:`negolib.core.sampling.Decoding`


@dataclass(frozen=True)
class AgentSpec:
    """One party: a seller arm or a buyer. Which keys are allowed depends on ``backend``.

    * ``scripted``: ``strategy`` (see :data:`negolib.games.multi_issue.scripted.STRATEGIES`), ``params``;
    * ``hf`` / ``vllm``: ``model`` (registry name, hub id or path), optional ``path`` /
      ``path_env`` (a local directory overriding the hub id), ``sampling``, ``scaffold``;
    * ``trained``: ``run`` (a training run of the profile), ``step`` (checkpoint; none = last) and
      ``train_seed`` (which of the run's seeds; default its first);
    * ``openai`` / ``anthropic``: ``model``, ``base_url``, ``api_key_env`` (never the key);
    * ``fixed_opening``: ``inner`` (an arm name) whose first turn is replaced by ``opening``.
    """

    backend: Backend
    label: str = ""
    paper_ref: str | None = None
    steps: int | None = None
    notes: str = ""
    strategy: str | None = None
    params: dict[str, Any] = field(default_factory=dict)
    model: str | None = None
    path: str | None = None
    path_env: str | None = None
    dtype: str | None = None
    device: str | None = None
    batch_size: int | None = None
    prompt_cap: int | None = None
    chat_template: str | None = None
    sampling: Sampling = field(default_factory=Sampling)
    scaffold: Scaffold = "evaluation"
    tensor_parallel: int | None = None
    gpu_memory_utilization: float | None = None
    run: str | None = None
    step: int | None = None
    train_seed: int | None = None
    base_url: str | None = None
    api_key_env: str | None = None
    max_concurrency: int | None = None
    timeout_s: float | None = None
    max_retries: int | None = None
    inner: str | None = None
    opening: str | None = None

    @property
    def is_lm(self) -> bool:
        """True for language-model parties (they play the declared LM subset of scenarios)."""
        return self.backend not in ("scripted", "fixed_opening")

    @property
    def display(self) -> str:
        return self.label or (self.strategy or self.model or self.run or self.backend)


COMMON_KEYS = {"backend", "label", "paper_ref", "steps", "notes"}
_LM_KEYS = {"model", "path", "path_env", "dtype", "device", "batch_size", "prompt_cap", "chat_template",
            "sampling", "scaffold"}
BACKEND_KEYS: dict[str, set[str]] = {
    "scripted": {"strategy", "params"},
    "hf": set(_LM_KEYS),
    "vllm": _LM_KEYS | {"tensor_parallel", "gpu_memory_utilization"},
    "trained": {"run", "step", "train_seed", "sampling", "scaffold", "dtype", "device", "batch_size",
                "prompt_cap"},
    "openai": {"model", "base_url", "api_key_env", "sampling", "scaffold", "max_concurrency", "timeout_s",
               "max_retries"},
    "anthropic": {"model", "base_url", "api_key_env", "sampling", "scaffold", "max_concurrency",
                  "timeout_s", "max_retries"},
    "fixed_opening": {"inner", "opening"},
}
_REQUIRED: dict[str, tuple[str, ...]] = {
    "scripted": ("strategy",), "hf": ("model",), "vllm": ("model",), "trained": ("run",),
    "openai": ("model", "api_key_env"), "anthropic": ("model", "api_key_env"),
    "fixed_opening": ("inner", "opening"),
}


def opening_source(opening: str | None) -> str | None:
    """The arm named by an ``own:<arm>`` opening, else None."""
    if isinstance(opening, str) and opening.startswith(OWN_OPENING):
        return opening[len(OWN_OPENING):]
    return None


def check_opening(opening: str) -> None:
    """Raise ``ValueError`` unless ``opening`` is 'none', 'best', ``own:<arm>`` (a non-empty arm name; the profile
    checks that the arm exists) or a utility in [0, 1] as a string."""
    allowed = f"one of {OPENINGS}, 'own:<arm>' or a utility in [0, 1] as a string"
    if opening in OPENINGS:
        return
    own = opening_source(opening)
    if own is not None:
        if not own.strip():
            raise ValueError(f"must be {allowed}: 'own:' needs an arm name, got {opening!r}")
        return
    try:
        u = float(opening)
    except (TypeError, ValueError):
        raise ValueError(f"must be {allowed}, got {opening!r}") from None
    if not 0 <= u <= 1:
        raise ValueError(f"must be {allowed}, got {opening!r}")


def _at_least(value: float | None, lo: float, strict: bool = False) -> bool:
    return value is None or (value > lo if strict else value >= lo)


def spec_problems(spec: AgentSpec) -> list[tuple[str, str]]:
    """(field, problem) for every value of ``spec`` that the agent builder
    (:func:`negolib.agents.factory.build_agent`) would reject; empty when it builds. The loader reports
    these at load (naming the profile field), so a profile that loads never fails for them when agents
    are built; the builder checks them too (:func:`negolib.agents.factory.check_spec`). The checks are
    the agents' own: scripted strategies' declared parameters, the sampling bounds, the API retry policy."""
    b, out = spec.backend, []
    if b == "scripted":
        out += [(k if k == "strategy" else f"params.{k}", why)
                for k, why in strategy_param_problems(spec.strategy or "", spec.params)]
    if b == "fixed_opening":
        try:
            check_opening(spec.opening or "")
        except ValueError as exc:
            out.append(("opening", str(exc)))
    # the sampling values are checked when built (negolib.core.sampling.Decoding names the field)
    if b == "anthropic" and spec.sampling.thinking:
        out.append(("sampling.thinking", "must be false: Anthropic arms run with thinking off (the paper's setting)"))
    for key in ("batch_size", "prompt_cap", "tensor_parallel", "max_concurrency"):
        if not _at_least(getattr(spec, key), 1):
            out.append((key, f"must be >= 1, got {getattr(spec, key)}"))
    if not _at_least(spec.step, 0):
        out.append(("step", f"must be >= 0 (0 = the policy the run starts from), got {spec.step}"))
    if not _at_least(spec.steps, 0):
        out.append(("steps", f"must be >= 0, got {spec.steps}"))
    g = spec.gpu_memory_utilization
    if g is not None and not 0 < g <= 1:
        out.append(("gpu_memory_utilization", f"must be in (0, 1], got {g}"))
    if spec.dtype is not None and spec.dtype not in DTYPES:
        out.append(("dtype", f"must be one of {list(DTYPES)}, got {spec.dtype!r}"))
    if b in ("openai", "anthropic"):
        for key in ("timeout_s", "max_retries"):
            if getattr(spec, key) is not None:
                try:
                    RetryPolicy(**{key: getattr(spec, key)})
                except ValueError as exc:
                    out.append((key, str(exc).removeprefix(f"{key} ")))
    return out


def check_agent(raw: Any, source: str, where: str) -> AgentSpec:
    """The :class:`AgentSpec` of the mapping ``raw`` at ``where`` of ``source``: the backend's keys only, never a
    key's value, every value the agent builder would reject refused here (:func:`spec_problems`)."""
    if not isinstance(raw, dict):
        raise ValidationError(source, where, f"must be a mapping with a 'backend' key, got {raw!r}")
    secrets = sorted(k for k in raw if str(k).lower() in _SECRET_KEYS)
    if secrets:
        raise ValidationError(source, f"{where}.{secrets[0]}", "API keys never go in a params file; "
                              "name the environment variable that holds it with 'api_key_env'")
    backend = raw.get("backend")
    if backend not in BACKENDS:
        raise ValidationError(source, f"{where}.backend", f"must be one of {list(BACKENDS)}, got {backend!r}")
    allowed = COMMON_KEYS | BACKEND_KEYS[backend]
    unknown = sorted(set(raw) - allowed)
    if unknown:
        raise ValidationError(source, where, f"unknown keys {unknown} for backend {backend!r}; "
                              f"allowed: {sorted(allowed)}")
    spec = build(AgentSpec, raw, source, where)
    for key in _REQUIRED[backend]:
        if getattr(spec, key) in (None, ""):
            raise ValidationError(source, f"{where}.{key}", f"is required for backend {backend!r}")
    for key in ("api_key_env", "path_env"):
        val = getattr(spec, key)
        if val is not None and not _ENV_NAME.match(val):
            raise ValidationError(source, f"{where}.{key}", f"must be an environment variable name "
                                  f"(letters, digits, _), got {val!r}")
    if backend == "scripted" and spec.strategy not in STRATEGIES:
        raise ValidationError(source, f"{where}.strategy", f"must be one of {sorted(STRATEGIES)}, "
                              f"got {spec.strategy!r}")
    for key, problem in spec_problems(spec):
        raise ValidationError(source, f"{where}.{key}", problem)
    return spec

__all__ = ["AgentSpec", "BACKENDS", "BACKEND_KEYS", "COMMON_KEYS", "DTYPES", "OPENINGS", "OWN_OPENING", "Backend",
           "Sampling", "Scaffold", "check_agent", "check_opening", "opening_source", "spec_problems"]
