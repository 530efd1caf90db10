"""The evaluation protocol as data [paper §4, App. K]: what is fixed before any arm runs, its file and its hash.

* :class:`Protocol` holds the arms (a seller, its sampling and scaffold), the seed block, domains and held-out
  domain, the buyers, the metrics, the prespecified primary family, the bootstrap settings and the environment's
  evaluation config (terms attached to an accept ignored, 12 rounds, the ACCEPT rule). It round-trips through a
  YAML file validated on load: an unknown key or a wrong type is a :class:`~negolib.core.errors.ValidationError` naming
  the file, the field and the allowed keys or values.
* :func:`freeze` writes the protocol and returns its SHA-256 over a canonical serialization (sorted-key compact
  JSON of :func:`protocol_to_dict`); :func:`protocol_hash` computes it without writing. A frozen file is never
  silently replaced, and a file edited after freezing fails to load.
* :func:`protocol_from_params` builds it from a profile; :func:`held_out_extension_protocol` is App. C's
  prespecified extension. Playing a protocol, its logs and its per-arm table live in :mod:`negolib.study.evaluation`.
"""

from __future__ import annotations

import hashlib
import json
import math
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import yaml

from negolib.core.errors import NegolibError, ValidationError
from negolib.core.files import atomic_write_text
from negolib.games.multi_issue.domains import load_domains
from negolib.games.multi_issue.env import EnvConfig
from negolib.games.multi_issue.metrics import ARM_TABLE_METRICS, METRICS
from negolib.games.multi_issue.scenarios import (
    EVAL_SEED_START,
    EVAL_SEEDS_PER_DOMAIN,
    TRAIN_SEED_BLOCK,
    Scenario,
)
from negolib.params import BACKENDS as PROFILE_BACKENDS
from negolib.params import load_yaml, spec_dict, to_dict
from negolib.profile_genius import check_protocol_genius, genius_from_dict, genius_to_dict, imported_scenarios

HASH_FIELD = "protocol_hash"
BACKENDS: tuple[str, ...] = (*PROFILE_BACKENDS, "custom")
"""A protocol's seller and buyer backends: a profile's (:data:`negolib.params.BACKENDS`), plus ``custom`` for
agents a caller builds itself."""
SCAFFOLDS: tuple[str, ...] = ("evaluation", "training")
FIRST_MOVERS: tuple[str, ...] = ("seller", "buyer")
SAMPLING_TYPES: dict[str, type] = {"temperature": float, "top_p": float, "top_k": int,
                                   "max_new_tokens": int, "thinking": bool}
SECRET_KEYS = frozenset({"api_key", "apikey", "key", "token", "secret", "password", "authorization"})
# "Three orders of magnitude above every training seed" [App. K].
MIN_EVAL_SEED = 1000 * (TRAIN_SEED_BLOCK.stop - 1)
_NAME_RE = re.compile(r"^[A-Za-z0-9_.-]+$")
_HASH_LINE = re.compile(r"^#\s*sha256:\s*([0-9a-f]{64})\s*$", re.MULTILINE)


def _now() -> str:
    """The current UTC time, to the second (ISO 8601)."""
    return datetime.now(timezone.utc).isoformat(timespec="seconds")


class ProtocolError(NegolibError):
    """Records or runs that would break the frozen protocol (mixed hashes, unlogged arms)."""


# ---------------------------------------------------------------------------------------------
# The protocol
# ---------------------------------------------------------------------------------------------

@dataclass(frozen=True)
class SeedBlock:
    """``n`` consecutive evaluation seeds from ``start`` (shared by every domain)."""

    start: int = EVAL_SEED_START
    n: int = EVAL_SEEDS_PER_DOMAIN

    @property
    def seeds(self) -> list[int]:
        return list(range(self.start, self.start + self.n))


@dataclass(frozen=True)
class ArmSpec:
    """One seller arm: its agent spec (``backend`` plus backend keys), sampling as sent, scaffold.

    ``n_seeds``/``domains`` declare the subset of the scenario set a costly arm plays (the first
    ``n_seeds`` seeds of the block on ``domains``); None plays all of it. ``first_mover='buyer'``
    is the beyond-paper buyer-opens arm. Pairing is by scenario key, so a subset arm pairs with
    every other arm on the scenarios it played.
    """

    name: str
    seller: Mapping[str, Any]
    sampling: Mapping[str, Any] = field(default_factory=dict)
    scaffold: str = "evaluation"
    notes: str = ""
    n_seeds: int | None = None
    domains: tuple[str, ...] | None = None
    first_mover: str = "seller"


@dataclass(frozen=True)
class Protocol:
    """The frozen evaluation protocol (see module docstring). Validated on construction.

    ``buyers`` maps each buyer name to its agent spec; ``primary`` lists the prespecified family
    as ``(arm_a, arm_b)`` pairs (S of arm_a minus S of arm_b, Holm-corrected). ``source`` names the
    file the protocol came from, for error messages only (not serialized, not hashed). ``genius``: imported
    scenarios by name (:mod:`negolib.profile_genius`), which ``domains`` may name; embedded in the file.
    """

    name: str
    arms: tuple[ArmSpec, ...]
    buyers: Mapping[str, Mapping[str, Any]]
    domains: tuple[str, ...]
    held_out_domain: str | None = None
    seeds: SeedBlock = field(default_factory=SeedBlock)
    metrics: tuple[str, ...] = ARM_TABLE_METRICS
    primary: tuple[tuple[str, str], ...] = ()
    alpha: float = 0.05
    n_resamples: int = 10_000
    bootstrap_seed: int = 0
    accept_applies_terms: bool = False
    max_rounds: int = 12
    description: str = ""
    accept_needs_offer: bool = True
    genius: Mapping[str, Scenario] = field(default_factory=dict)
    source: str = field(default="<Protocol>", compare=False, repr=False)

    def __post_init__(self) -> None:
        _validate(self)

    @property
    def arm_names(self) -> list[str]:
        return [a.name for a in self.arms]

    def arm(self, name: str) -> ArmSpec:
        """The arm called ``name``."""
        for a in self.arms:
            if a.name == name:
                return a
        raise KeyError(f"{self.source}: no arm {name!r}; arms: {self.arm_names}")

    def env_config(self, arm: ArmSpec | None = None) -> EnvConfig:
        """The evaluation environment of ``arm`` (terms attached to an accept ignored by default; the protocol's
        ACCEPT rule, ``accept_needs_offer``: False is the paper's, True ours)."""
        first = arm.first_mover if arm is not None else "seller"
        return EnvConfig(max_rounds=self.max_rounds, first_mover=first,  # type: ignore[arg-type]
                         accept_applies_terms=self.accept_applies_terms,
                         accept_needs_offer=self.accept_needs_offer)


def _fail(source: str, where: str, problem: str) -> None:
    raise ValidationError(source, where, problem)


def _check_jsonable(value: Any, source: str, where: str) -> None:
    """Agent specs must be plain JSON data (for the canonical hash) and hold no secrets."""
    if isinstance(value, Mapping):
        for k, v in value.items():
            if not isinstance(k, str):
                _fail(source, where, f"keys must be strings, got {k!r}")
            if k.lower() in SECRET_KEYS:
                _fail(source, f"{where}.{k}", "secrets never go in a protocol; name the environment "
                      "variable that holds them (api_key_env)")
            _check_jsonable(v, source, f"{where}.{k}")
    elif isinstance(value, (list, tuple)):
        for i, v in enumerate(value):
            _check_jsonable(v, source, f"{where}[{i}]")
    elif isinstance(value, float):
        if not math.isfinite(value):
            _fail(source, where, f"must be finite, got {value!r}")
    elif value is not None and not isinstance(value, (str, int, bool)):
        _fail(source, where, "must be a string, number, boolean, list or mapping, got "
              f"{type(value).__name__}")


def _check_agent(spec: Any, source: str, where: str) -> None:
    if not isinstance(spec, Mapping):
        _fail(source, where, f"must be a mapping with a 'backend' key, got {spec!r}")
    if spec.get("backend") not in BACKENDS:
        _fail(source, f"{where}.backend", f"must be one of {list(BACKENDS)}, got {spec.get('backend')!r}")
    _check_jsonable(spec, source, where)


def _check_name(name: Any, source: str, where: str) -> None:
    if not isinstance(name, str) or not _NAME_RE.match(name):
        _fail(source, where, f"names use letters, digits, '_', '.', '-', got {name!r}")


def _check_sampling(sampling: Any, source: str, where: str) -> None:
    if not isinstance(sampling, Mapping):
        _fail(source, where, f"must be a mapping, got {sampling!r}")
    unknown = sorted(set(sampling) - set(SAMPLING_TYPES))
    if unknown:
        _fail(source, where, f"unknown keys {unknown}; allowed: {sorted(SAMPLING_TYPES)}")
    for k, v in sampling.items():
        if not _is_type(v, SAMPLING_TYPES[k]):
            _fail(source, f"{where}.{k}", f"must be {SAMPLING_TYPES[k].__name__}, got {v!r}")


def _validate_arm(arm: ArmSpec, p: Protocol, i: int) -> None:
    src, where = p.source, f"arms[{i}]"
    _check_name(arm.name, src, f"{where}.name")
    where = f"arms[{i}] ({arm.name})"
    _check_agent(arm.seller, src, f"{where}.seller")
    _check_sampling(arm.sampling, src, f"{where}.sampling")
    if arm.scaffold not in SCAFFOLDS:
        _fail(src, f"{where}.scaffold", f"must be one of {list(SCAFFOLDS)}, got {arm.scaffold!r}")
    if arm.first_mover not in FIRST_MOVERS:
        _fail(src, f"{where}.first_mover", f"must be one of {list(FIRST_MOVERS)}, got {arm.first_mover!r}")
    if arm.n_seeds is not None and not 1 <= arm.n_seeds <= p.seeds.n:
        _fail(src, f"{where}.n_seeds", f"must be in 1..{p.seeds.n} (seeds.n), got {arm.n_seeds}")
    if arm.domains is not None:
        bad = sorted(set(arm.domains) - set(p.domains))
        if bad or not arm.domains:
            _fail(src, f"{where}.domains", f"must be a non-empty subset of the protocol's domains "
                  f"{list(p.domains)}, got {list(arm.domains)}")


def _validate(p: Protocol) -> None:
    """Semantic checks of a protocol; errors name ``p.source``, the field and the allowed values."""
    src = p.source
    _check_name(p.name, src, "name")
    check_protocol_genius(p.genius, src)
    known = set(load_domains()) | set(p.genius)
    bad = sorted(set(p.domains) - known)
    if bad or not p.domains or len(set(p.domains)) != len(p.domains):
        _fail(src, "domains", f"must be distinct known domains; unknown {bad}; allowed: {sorted(known)}")
    if p.held_out_domain is not None and p.held_out_domain not in p.domains:
        _fail(src, "held_out_domain", f"must be one of domains {list(p.domains)}, got {p.held_out_domain!r}")
    if not MIN_EVAL_SEED <= p.seeds.start:
        _fail(src, "seeds.start", f"evaluation seeds must lie three orders of magnitude above every "
              f"training seed: >= {MIN_EVAL_SEED}, got {p.seeds.start}")
    if not 1 <= p.seeds.n <= 1000:
        _fail(src, "seeds.n", f"must be in 1..1000, got {p.seeds.n}")
    if not p.buyers:
        _fail(src, "buyers", "needs at least one buyer")
    for name, spec in p.buyers.items():
        _check_name(name, src, f"buyers.{name}")
        _check_agent(spec, src, f"buyers.{name}")
    if not p.arms:
        _fail(src, "arms", "needs at least one arm")
    for i, arm in enumerate(p.arms):
        _validate_arm(arm, p, i)
    names = p.arm_names
    dupes = sorted({n for n in names if names.count(n) > 1})
    if dupes:
        _fail(src, "arms", f"duplicate arm names {dupes}")
    clash = sorted(set(names) & set(p.buyers))
    if clash:
        _fail(src, "buyers", f"names {clash} are also arm names; names must be unique")
    allowed_metrics = sorted(METRICS) + ["buyer_split"]
    for i, m in enumerate(p.metrics):
        if m not in allowed_metrics:
            _fail(src, f"metrics[{i}]", f"unknown metric {m!r}; allowed: {allowed_metrics}")
    for i, pair in enumerate(p.primary):
        if len(pair) != 2 or pair[0] == pair[1] or any(a not in names for a in pair):
            _fail(src, f"primary[{i}]", f"must be [arm_a, arm_b], two different arms of {names}, "
                  f"got {list(pair)}")
    if not 0 < p.alpha < 1:
        _fail(src, "alpha", f"must be in (0, 1), got {p.alpha}")
    if p.n_resamples < 1:
        _fail(src, "n_resamples", f"must be >= 1, got {p.n_resamples}")
    if p.bootstrap_seed < 0:
        _fail(src, "bootstrap_seed", f"must be >= 0, got {p.bootstrap_seed}")
    if p.max_rounds < 1:
        _fail(src, "max_rounds", f"must be >= 1, got {p.max_rounds}")


# ---------------------------------------------------------------------------------------------
# Serialization, hashing, freezing
# ---------------------------------------------------------------------------------------------

def _plain(value: Any) -> Any:
    """Tuples to lists and mappings to dicts, recursively (JSON/YAML-ready)."""
    if isinstance(value, Mapping):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    return value


def _arm_dict(arm: ArmSpec) -> dict[str, Any]:
    d: dict[str, Any] = {"name": arm.name, "seller": _plain(arm.seller), "sampling": _plain(arm.sampling),
                         "scaffold": arm.scaffold, "notes": arm.notes}
    if arm.n_seeds is not None:
        d["n_seeds"] = arm.n_seeds
    if arm.domains is not None:
        d["domains"] = list(arm.domains)
    if arm.first_mover != "seller":
        d["first_mover"] = arm.first_mover
    return d


def protocol_to_dict(p: Protocol) -> dict[str, Any]:
    """The plain mapping written to the protocol file (and hashed)."""
    return {
        "name": p.name, "description": p.description,
        "seeds": {"start": p.seeds.start, "n": p.seeds.n},
        "domains": list(p.domains), "held_out_domain": p.held_out_domain,
        "buyers": _plain(p.buyers), "arms": [_arm_dict(a) for a in p.arms],
        "metrics": list(p.metrics), "primary": [list(x) for x in p.primary],
        "alpha": float(p.alpha), "n_resamples": p.n_resamples, "bootstrap_seed": p.bootstrap_seed,
        "accept_applies_terms": p.accept_applies_terms, "max_rounds": p.max_rounds,
        # written only when it departs from our rule, so protocols frozen before the field keep their hash
        **({} if p.accept_needs_offer else {"accept_needs_offer": False}),
        **({"genius": genius_to_dict(p.genius)} if p.genius else {}),
    }


def canonical_json(p: Protocol) -> str:
    """Sorted-key compact JSON of :func:`protocol_to_dict`: the bytes the hash is taken over."""
    return json.dumps(protocol_to_dict(p), sort_keys=True, separators=(",", ":"), ensure_ascii=False,
                      allow_nan=False)


def protocol_hash(p: Protocol) -> str:
    """SHA-256 (64 hex digits) of the protocol's canonical serialization."""
    return hashlib.sha256(canonical_json(p).encode("utf-8")).hexdigest()


def _is_type(value: Any, tp: type) -> bool:
    if tp is float:
        return isinstance(value, (int, float)) and not isinstance(value, bool)
    if tp is int:
        return isinstance(value, int) and not isinstance(value, bool)
    return isinstance(value, tp)


def _get(data: Mapping[str, Any], key: str, tp: type | tuple[type, ...], source: str, where: str,
         default: Any = ..., nullable: bool = False) -> Any:
    """``data[key]`` checked against ``tp`` (required when ``default`` is omitted)."""
    if key not in data:
        if default is ...:
            _fail(source, where, "is required")
        return default
    value = data[key]
    if value is None and nullable:
        return None
    types_ = tp if isinstance(tp, tuple) else (tp,)
    if not any(_is_type(value, t) for t in types_):
        names = " or ".join(t.__name__ for t in types_) + (" or null" if nullable else "")
        _fail(source, where, f"must be {names}, got {value!r}")
    return float(value) if types_ == (float,) else value


def _check_keys(data: Any, allowed: Iterable[str], source: str, where: str) -> None:
    if not isinstance(data, Mapping):
        _fail(source, where, f"must be a mapping, got {data!r}")
    unknown = sorted(set(data) - set(allowed))
    if unknown:
        _fail(source, where, f"unknown keys {unknown}; allowed: {sorted(allowed)}")


def _str_list(data: Mapping[str, Any], key: str, source: str, where: str, default: Any = ...) -> Any:
    """``data[key]`` as a tuple of strings; ``default`` when absent or null (required without one)."""
    if default is not ... and data.get(key) is None:
        return default
    value = _get(data, key, list, source, where)
    for i, v in enumerate(value):
        if not isinstance(v, str):
            _fail(source, f"{where}[{i}]", f"must be a string, got {v!r}")
    return tuple(value)


_ARM_KEYS = ("name", "seller", "sampling", "scaffold", "notes", "n_seeds", "domains", "first_mover")
_TOP_KEYS = ("name", "description", "seeds", "domains", "held_out_domain", "buyers", "arms", "metrics",
             "primary", "alpha", "n_resamples", "bootstrap_seed", "accept_applies_terms", "max_rounds",
             "accept_needs_offer", "genius")


def _arm_from_dict(raw: Any, source: str, i: int) -> ArmSpec:
    where = f"arms[{i}]"
    _check_keys(raw, _ARM_KEYS, source, where)
    sampling = dict(_get(raw, "sampling", dict, source, f"{where}.sampling", {}))
    _check_sampling(sampling, source, f"{where}.sampling")
    sampling = {k: float(v) if SAMPLING_TYPES[k] is float else v for k, v in sampling.items()}
    return ArmSpec(
        name=_get(raw, "name", str, source, f"{where}.name"),
        seller=_get(raw, "seller", dict, source, f"{where}.seller"),
        sampling=sampling,
        scaffold=_get(raw, "scaffold", str, source, f"{where}.scaffold", "evaluation"),
        notes=_get(raw, "notes", str, source, f"{where}.notes", ""),
        n_seeds=_get(raw, "n_seeds", int, source, f"{where}.n_seeds", None, nullable=True),
        domains=_str_list(raw, "domains", source, f"{where}.domains", None),
        first_mover=_get(raw, "first_mover", str, source, f"{where}.first_mover", "seller"),
    )


def protocol_from_dict(data: Any, source: str = "<dict>") -> Protocol:
    """Validate a protocol mapping (as loaded from YAML) and build a :class:`Protocol`."""
    _check_keys(data, _TOP_KEYS, source, "<top>")
    seeds_raw = _get(data, "seeds", dict, source, "seeds", {})
    _check_keys(seeds_raw, ("start", "n"), source, "seeds")
    seeds = SeedBlock(_get(seeds_raw, "start", int, source, "seeds.start", EVAL_SEED_START),
                      _get(seeds_raw, "n", int, source, "seeds.n", EVAL_SEEDS_PER_DOMAIN))
    arms_raw = _get(data, "arms", list, source, "arms")
    buyers = _get(data, "buyers", dict, source, "buyers")
    primary = []
    for i, pair in enumerate(_get(data, "primary", list, source, "primary", [])):
        if not isinstance(pair, list) or len(pair) != 2 or not all(isinstance(a, str) for a in pair):
            _fail(source, f"primary[{i}]", f"must be a list [arm_a, arm_b] of two arm names, got {pair!r}")
        primary.append((pair[0], pair[1]))
    return Protocol(
        name=_get(data, "name", str, source, "name"),
        description=_get(data, "description", str, source, "description", ""),
        arms=tuple(_arm_from_dict(a, source, i) for i, a in enumerate(arms_raw)),
        buyers={str(k): v for k, v in buyers.items()},
        domains=_str_list(data, "domains", source, "domains"),
        held_out_domain=_get(data, "held_out_domain", str, source, "held_out_domain", None, nullable=True),
        seeds=seeds,
        metrics=_str_list(data, "metrics", source, "metrics", ARM_TABLE_METRICS),
        primary=tuple(primary),
        alpha=_get(data, "alpha", float, source, "alpha", 0.05),
        n_resamples=_get(data, "n_resamples", int, source, "n_resamples", 10_000),
        bootstrap_seed=_get(data, "bootstrap_seed", int, source, "bootstrap_seed", 0),
        accept_applies_terms=_get(data, "accept_applies_terms", bool, source, "accept_applies_terms", False),
        max_rounds=_get(data, "max_rounds", int, source, "max_rounds", 12),
        accept_needs_offer=_get(data, "accept_needs_offer", bool, source, "accept_needs_offer", True),
        genius=genius_from_dict(data.get("genius"), source), source=source,
    )


def load_protocol(path: str | Path) -> Protocol:
    """Load and validate a protocol file. A file whose ``# sha256:`` header does not match its
    content (edited after freezing) is rejected."""
    path = Path(path)
    if not path.exists():
        raise ValidationError(str(path), "<file>", "does not exist")
    text = path.read_text(encoding="utf-8")
    data = load_yaml(path)  # strict: a key given twice is an error naming it and its lines
    p = protocol_from_dict(data, str(path))
    m = _HASH_LINE.search(text)
    if m and m.group(1) != protocol_hash(p):
        raise ValidationError(str(path), "sha256", f"the file was edited after freezing: header says "
                              f"{m.group(1)[:12]}, content hashes to {protocol_hash(p)[:12]}; log the "
                              "departure in the deviation log instead")
    return p


def freeze(protocol: Protocol, path: str | Path, overwrite: bool = False, date: str | None = None) -> str:
    """Write ``protocol`` to ``path`` (YAML with a ``# sha256:`` header) and return its hash.

    Freezing the same content again is a no-op; a different protocol already frozen at ``path``
    raises :class:`ProtocolError` unless ``overwrite`` (departures belong in the deviation log).
    """
    path = Path(path)
    h = protocol_hash(protocol)
    if path.exists():
        try:
            old = protocol_hash(load_protocol(path))
        except ValidationError:
            if not overwrite:
                raise
            old = ""
        if old == h:
            return h
        if not overwrite:
            raise ProtocolError(f"{path}: a different protocol is already frozen here ({old[:12]}; this "
                                f"one hashes to {h[:12]}); log the departure with DeviationLog.log_deviation "
                                "or freeze to a new file")
    header = (f"# negobook evaluation protocol: frozen, do not edit (log departures in the deviation log)\n"
              f"# sha256: {h}\n# frozen_at: {date or _now()}\n")
    body = yaml.safe_dump(protocol_to_dict(protocol), sort_keys=False, allow_unicode=True,
                          default_flow_style=False, width=100)
    atomic_write_text(path, header + body)
    return h


def short_hash(h: str) -> str:
    """The first 12 hex digits, for display."""
    return h[:12]


def protocol_from_params(params: Any, arms: Sequence[str] | None = None, name: str | None = None) -> Protocol:
    """A protocol from a validated params profile (:mod:`negolib.params`).

    Arms default to ``params.eval_arms()``; language-model arms get the profile's declared subset
    (``evaluation.lm_seeds_per_domain`` / ``lm_domains``); the held-out domain is the one
    ``evaluation.held_out_domain`` names, else the one flagged ``held_out`` among the evaluated domains.
    """
    ev, st = params.evaluation, params.statistics
    doms, genius = load_domains(), imported_scenarios(getattr(ev, "genius", None))
    domains = tuple(ev.domains) if ev.domains else (*doms, *genius)
    named = getattr(ev, "held_out_domain", None)  # the profile names it when two are flagged
    held = [named] if named else [d for d in domains if d in doms and doms[d].held_out]
    out_arms = []
    for a in arms if arms is not None else params.eval_arms():
        spec = params.arms[a]
        seller = {k: v for k, v in spec_dict(spec).items() if k not in ("sampling", "scaffold", "notes")}
        lm = params.is_lm(a)
        sampling = to_dict(spec.sampling) if lm and "sampling" in spec_dict(spec) else {}
        n_seeds = ev.lm_seeds_per_domain if lm else None
        lm_domains = tuple(ev.lm_domains) if lm and ev.lm_domains else None
        out_arms.append(ArmSpec(a, seller, sampling, getattr(spec, "scaffold", "evaluation"), spec.notes,
                                n_seeds, lm_domains, getattr(ev, "first_mover", "seller")))
    buyers = {b: spec_dict(params.buyers[b]) for b in ev.buyers}
    primary = tuple((x[0], x[1]) for x in st.primary if arms is None or (x[0] in arms and x[1] in arms))
    return Protocol(name or params.profile, tuple(out_arms), buyers, domains, held[0] if held else None,
                    SeedBlock(EVAL_SEED_START, ev.seeds_per_domain), ARM_TABLE_METRICS, primary, st.alpha,
                    st.n_resamples, st.seed, False, ev.max_rounds, params.description,
                    accept_needs_offer=ev.accept_needs_offer, genius=genius, source=str(params.source))


HELD_OUT_EXTENSION = "held_out_extension"
"""The name suffix of App. C's held-out-panel extension protocol (:func:`held_out_extension_protocol`)."""


def held_out_extension_protocol(protocol: Protocol) -> Protocol:
    """App. C's prespecified extension of ``protocol``: double the held-out panel [App. C, K].

    The held-out domain alone, on the next block of reserved evaluation seeds, as many again as the main panel
    (``seeds.start + seeds.n`` on, ``seeds.n`` of them; an arm on a declared subset plays its ``n_seeds`` of the
    new block, as many again as it played), for every arm of ``protocol`` that played the held-out domain x
    every buyer, in the same evaluation environment. No primary family: every held-out contrast is exploratory
    (App. C). The union of both panels has twice the seed clusters on the held-out domain. A protocol without a
    held-out domain, or whose arms none played it, raises :class:`ProtocolError`.
    """
    held = protocol.held_out_domain
    if held is None:
        raise ProtocolError(f"{protocol.source}: the protocol names no held-out domain: no held-out panel to extend")
    arms = tuple(replace(a, domains=None) for a in protocol.arms if a.domains is None or held in a.domains)
    if not arms:
        raise ProtocolError(f"{protocol.source}: no arm of the protocol plays the held-out domain {held!r}")
    return replace(protocol, name=f"{protocol.name}.{HELD_OUT_EXTENSION}", arms=arms, domains=(held,), primary=(),
                   seeds=SeedBlock(protocol.seeds.start + protocol.seeds.n, protocol.seeds.n),
                   description=f"App. C's held-out-panel extension of {protocol.name!r} "
                               f"({short_hash(protocol_hash(protocol))}): {held} on the next {protocol.seeds.n} "
                               "reserved evaluation seeds")
