"""Contract schemas ("domains"): data files validated on load.

A domain has 7-10 issues: 3-5 distributive continuous terms (range, unit and the seller's
preferred direction; the buyer's is opposite) and integrative categorical or binary terms on which
each party independently draws a preferred level [paper §3]. Add a domain by adding a YAML file
to this folder (or pass another folder to :func:`load_domains`).

Files load strictly: a key given twice, two issue names equal ignoring case (a party's term name
is matched case-insensitively, so one of them could never be named), and a range that is not
finite with lo < hi are errors naming the file and the field. Which domain is held out is checked
with the profile (:mod:`negolib.params`): more than one needs ``evaluation.held_out_domain``.

Imported domains (``imported=True``: a Genius/ANAC scenario, :mod:`.genius`) keep their own size (no 7-10
issues, 3-5 continuous rule) and may use a fourth kind, ``table``: named levels on which each party
carries its own table of evaluations (stored with the party's preferences, not the domain). A table
issue is integrative unless its ``split`` says ``distributive`` (the importer writes that label when
the two parties rank the levels in exactly opposite orders).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import Any, Literal

from negolib.core.errors import ValidationError
from negolib.core.files import load_yaml  # the strict loader: a key given twice is an error

DOMAIN_DIR = Path(__file__).parent
IssueKind = Literal["continuous", "categorical", "binary", "table"]
ISSUE_KINDS: tuple[str, ...] = ("continuous", "categorical", "binary")
IMPORTED_KINDS: tuple[str, ...] = (*ISSUE_KINDS, "table")
SPLITS: tuple[str, ...] = ("distributive", "integrative")
MIN_ISSUES, MAX_ISSUES = 7, 10
MIN_CONTINUOUS, MAX_CONTINUOUS = 3, 5


@dataclass(frozen=True)
class Issue:
    """One term of the contract.

    For continuous issues ``lo``/``hi``/``unit`` are set and ``seller_sign`` is +1 when the seller
    prefers high values (-1 when low). Categorical issues have ``levels``; binary issues have the
    levels ``(True, False)``; table issues (imported domains only) have ``levels`` and a ``split``
    label, ``distributive`` or ``integrative``.
    """

    name: str
    kind: IssueKind
    description: str = ""
    unit: str = ""
    lo: float = 0.0
    hi: float = 1.0
    seller_sign: int = 1
    levels: tuple[Any, ...] = ()
    split: str = ""

    @property
    def distributive(self) -> bool:
        """Continuous terms are distributive; categorical and binary are integrative; a table term
        is what its ``split`` label says."""
        if self.kind == "table":
            return self.split == "distributive"
        return self.kind == "continuous"


@dataclass(frozen=True)
class Domain:
    """A contract schema with a prose brief per role."""

    name: str
    title: str
    issues: tuple[Issue, ...]
    briefs: dict[str, str]
    held_out: bool = False
    imported: bool = False  # a fixed (Genius/ANAC) scenario's domain: complete contracts, table issues
    _index: dict[str, int] = field(default_factory=dict, init=False, repr=False, compare=False)
    _by_lower: dict[str, Issue] = field(default_factory=dict, init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        self._index.update({i.name: k for k, i in enumerate(self.issues)})
        self._by_lower.update({i.name.lower(): i for i in self.issues})

    def lookup(self, name: str) -> Issue | None:
        """The issue a party's term name refers to (case-insensitive), or None if off-schema."""
        return self._by_lower.get(name.lower())

    @property
    def issue_names(self) -> tuple[str, ...]:
        return tuple(self._index)

    def issue(self, name: str) -> Issue:
        """The issue called ``name`` (exact schema name)."""
        for issue in self.issues:
            if issue.name == name:
                return issue
        raise KeyError(f"domain '{self.name}' has no issue '{name}'; issues: {self.issue_names}")

    def index(self, name: str) -> int:
        """Position of issue ``name`` in the schema."""
        return self._index[name]

    def __hash__(self) -> int:
        return hash(self.name)


_TOP_KEYS = {"name", "title", "held_out", "briefs", "issues"}
_ISSUE_KEYS = {
    "continuous": {"name", "kind", "unit", "range", "seller_prefers", "description"},
    "categorical": {"name", "kind", "levels", "description"},
    "binary": {"name", "kind", "description"},
    "table": {"name", "kind", "levels", "split", "description"},
}


def _require(cond: bool, source: str, field: str, problem: str) -> None:
    if not cond:
        raise ValidationError(source, field, problem)


def _parse_issue(raw: Any, source: str, i: int, imported: bool = False) -> Issue:
    where = f"issues[{i}]"
    _require(isinstance(raw, dict), source, where, "must be a mapping")
    name = raw.get("name")
    _require(isinstance(name, str) and name.isidentifier(), source, f"{where}.name",
             f"must be an identifier-like string, got {name!r}")
    where = f"issues[{i}] ({name})"
    kind = raw.get("kind")
    kinds = IMPORTED_KINDS if imported else ISSUE_KINDS
    _require(kind in kinds, source, f"{where}.kind", f"must be one of {kinds}, got {kind!r}")
    unknown = set(raw) - _ISSUE_KEYS[kind]
    _require(not unknown, source, where, f"unknown keys {sorted(unknown)}; allowed for {kind}: "
             f"{sorted(_ISSUE_KEYS[kind])}")
    desc = str(raw.get("description", ""))
    if kind == "continuous":
        rng = raw.get("range")
        _require(isinstance(rng, list) and len(rng) == 2
                 and all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in rng),
                 source, f"{where}.range", f"must be [lo, hi] numbers, got {rng!r}")
        lo, hi = float(rng[0]), float(rng[1])
        _require(math.isfinite(lo) and math.isfinite(hi), source, f"{where}.range",
                 f"needs finite numbers, got {rng!r}")
        _require(lo < hi, source, f"{where}.range", f"needs lo < hi, got {rng!r}")
        pref = raw.get("seller_prefers")
        _require(pref in ("high", "low"), source, f"{where}.seller_prefers",
                 f"must be 'high' or 'low', got {pref!r}")
        unit = raw.get("unit", "")
        _require(isinstance(unit, str), source, f"{where}.unit", "must be a string")
        return Issue(name, "continuous", desc, unit, lo, hi, 1 if pref == "high" else -1)
    if kind in ("categorical", "table"):
        levels = raw.get("levels")
        _require(isinstance(levels, list) and len(levels) >= 2
                 and all(isinstance(v, str) and v.strip() for v in levels),
                 source, f"{where}.levels", f"must be a list of >= 2 non-empty strings, got {levels!r}")
        _require(len({v.lower() for v in levels}) == len(levels), source, f"{where}.levels",
                 "levels must be distinct (case-insensitively)")
        if kind == "table":
            split = raw.get("split", "integrative")
            _require(split in SPLITS, source, f"{where}.split", f"must be one of {SPLITS}, got {split!r}")
            return Issue(name, "table", desc, levels=tuple(levels), split=split)
        return Issue(name, "categorical", desc, levels=tuple(levels))
    return Issue(name, "binary", desc, levels=(True, False))


def parse_domain(data: Any, source: str = "<domain>", imported: bool = False) -> Domain:
    """Validate a domain mapping (as loaded from YAML) and build a :class:`Domain`.

    ``imported``: an imported scenario's domain (any number of issues, table issues allowed)."""
    _require(isinstance(data, dict), source, "<top>", "must be a mapping")
    unknown = set(data) - _TOP_KEYS
    _require(not unknown, source, "<top>", f"unknown keys {sorted(unknown)}; allowed: {sorted(_TOP_KEYS)}")
    name = data.get("name")
    _require(isinstance(name, str) and name.isidentifier(), source, "name",
             f"must be an identifier-like string, got {name!r}")
    title = data.get("title", name)
    _require(isinstance(title, str), source, "title", "must be a string")
    held_out = data.get("held_out", False)
    _require(isinstance(held_out, bool), source, "held_out", f"must be true or false, got {held_out!r}")
    briefs = data.get("briefs")
    _require(isinstance(briefs, dict) and set(briefs) == {"seller", "buyer"}
             and all(isinstance(v, str) and v.strip() for v in briefs.values()),
             source, "briefs", "must map exactly 'seller' and 'buyer' to non-empty strings")
    raw_issues = data.get("issues")
    _require(isinstance(raw_issues, list), source, "issues", "must be a list")
    issues = tuple(_parse_issue(r, source, i, imported) for i, r in enumerate(raw_issues))
    names = [i.name.lower() for i in issues]
    dupes = sorted({i.name for i in issues if names.count(i.name.lower()) > 1})
    _require(not dupes, source, "issues", f"duplicate issue names {dupes} (names are matched ignoring case)")
    if imported:
        _require(len(issues) >= 1, source, "issues", "needs at least one issue")
        return Domain(name, title, issues, {k: " ".join(v.split()) for k, v in briefs.items()}, held_out, True)
    _require(MIN_ISSUES <= len(issues) <= MAX_ISSUES, source, "issues",
             f"needs {MIN_ISSUES}-{MAX_ISSUES} issues, got {len(issues)}")
    n_cont = sum(i.kind == "continuous" for i in issues)
    _require(MIN_CONTINUOUS <= n_cont <= MAX_CONTINUOUS, source, "issues",
             f"needs {MIN_CONTINUOUS}-{MAX_CONTINUOUS} continuous (distributive) issues, got {n_cont}")
    _require(n_cont < len(issues), source, "issues", "needs at least one categorical or binary issue")
    return Domain(name, title, issues, {k: " ".join(v.split()) for k, v in briefs.items()}, held_out)


def load_domain(path: str | Path) -> Domain:
    """Load and validate one domain file; errors name the file, the field and what is allowed."""
    path = Path(path)
    domain = parse_domain(load_yaml(path), str(path))
    _require(domain.name == path.stem, str(path), "name",
             f"must match the file name '{path.stem}', got '{domain.name}'")
    return domain


@lru_cache(maxsize=8)
def _load_dir(directory: str) -> tuple[Domain, ...]:
    files = sorted(Path(directory).glob("*.yaml"))
    if not files:
        raise ValidationError(directory, "<folder>", "holds no *.yaml domain files")
    return tuple(load_domain(f) for f in files)


def load_domains(directory: str | Path | None = None) -> dict[str, Domain]:
    """All domains of a folder (default: the shipped nine), training domains first, by name."""
    doms = _load_dir(str(directory or DOMAIN_DIR))
    ordered = sorted(doms, key=lambda d: (d.held_out, d.name))
    return {d.name: d for d in ordered}


def get_domain(name: str, directory: str | Path | None = None) -> Domain:
    """One domain by name, with a clear error listing the known names."""
    doms = load_domains(directory)
    if name not in doms:
        raise ValidationError(str(directory or DOMAIN_DIR), "domain", f"unknown domain {name!r}; "
                              f"known: {sorted(doms)}")
    return doms[name]
