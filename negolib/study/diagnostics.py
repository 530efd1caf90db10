"""Diagnostics of the sellers' play [paper Table 2, Table 6, Table 9, App. E].

Everything here is computed from transcript records (:meth:`negolib.games.multi_issue.env.Episode.record`) or the
episode table (:func:`negolib.core.transcripts.episodes_frame`) and returns tidy DataFrames.

Openings. The seller's *opening* is its first turn. It *opens with terms* when that turn's parsed
COUNTER names at least one schema term with a usable value (off-schema names and invalid values
do not count). The opening score is the seller's U~ of the ledger right after that turn, as if
the buyer accepted it as it stands (:func:`negolib.games.multi_issue.env.opening_score`, in the record's scenario:
``scenarios=`` names the imported ones, :mod:`negolib.games.multi_issue.record_scenarios`).

Decomposition. Normalized utility splits exactly by term, U~ = sum_k w_k (phi_k + 1) / 2, so on a
deal the seller's U~ is its distributive part (continuous terms) plus its integrative part
(categorical and binary terms), with a term never named counted in its class. The per-episode
columns ``seller_dist``, ``seller_int``, ``seller_u = seller_dist + seller_int``, ``buyer_u`` and
``welfare = seller_u + buyer_u`` (NaN on a no-deal) are contrasted on scenarios both arms closed
(:func:`decomposition_table`), so Δdist + Δint = Δseller_u and Δseller_u + Δbuyer_u = Δwelfare.

Style (over the seller's turns with non-empty prose, the text the buyer read):

* *opener*: the first three words, lower-cased (a word is a run of letters/digits, apostrophes
  kept: "I'm"); the most common opener's share and the top three's combined share;
* *repeated-opener rate*: the share of seller turns whose opener equals the opener of an earlier
  seller turn of the same episode (the first use of an opener in an episode never counts);
* *"I appreciate" rate*: prose starting with the literal "I appreciate" (after leading quotes,
  spaces and markdown);
* *JSON leakage*: a fragment of the action left in the prose: a quoted ``"action"``/``"terms"``
  key, a quoted ``"name"``/``"value"``/``"notes"`` key with a colon, an empty ``[]``/``{}``, a
  ``[{`` / ``}]`` / ``{"`` sequence, or an unbalanced ``[ ]`` or ``{ }`` (a dangling bracket);
* *unfilled placeholders*: ``[mention your specialty]``, ``[Your Name]``, ``[COMPANY]``,
  ``<insert price>``, ``{name}``, ``{{buyer}}`` (:data:`PLACEHOLDER_RE`);
* *buyer voice*: the seller speaks as if it were buying (:data:`BUYER_VOICE_PATTERNS`); the
  per-episode rate uses the opening turn (Table 6), the per-turn rate every seller turn;
* *closing turn names the concession*: on a deal the seller closed with ACCEPT, the accept's
  prose mentions a schema term (its name, its name with spaces, or its first word of >= 4
  letters) or the new value (a categorical level, a number, or a number in thousands for a "$k"
  unit) of a term changed by the last COUNTER before it;
* *late close*: a deal closed at or after the converge turn (16) of the episode's config.
"""

from __future__ import annotations

import math
import re
from collections import Counter
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

import numpy as np
import pandas as pd

from negolib.core.transcripts import episodes_frame
from negolib.games.multi_issue.domains import Domain, Issue
from negolib.games.multi_issue.env import opening_score
from negolib.games.multi_issue.metrics import Metric, deal_only, get_metric, metric_value
from negolib.games.multi_issue.record_scenarios import RecordScenarios, split_skip_reason
from negolib.games.multi_issue.scenarios import Scenario
from negolib.stats import ClusterResampler
from negolib.study.paired import contrast_table, pair_episodes, paired_contrast
from negolib.study.reading import (  # noqa: F401 (re-exported: part of this module's API)
    HAND_READ_PER_FAMILY,
    domain_family,
    format_transcript,
    hand_read_sample,
    sample_transcripts,
)
from negolib.study.record_view import episode_key as _key
from negolib.study.record_view import seller_turns as _seller_turns
from negolib.study.style_text import (  # noqa: F401 (re-exported: part of this module's API)
    BUYER_VOICE_PATTERNS,
    PLACEHOLDER_RE,
    buyer_voice_matches,
    find_placeholders,
    has_json_leak,
    is_buyer_voice,
    json_fragments,
    opener,
    starts_with_i_appreciate,
    straight_quotes,
)
from negolib.study.training_curves import (  # noqa: F401 (re-exported: part of this module's API)
    CURVE_METRICS,
    SPREAD_COLS,
    SPREAD_METRICS,
    rolling_step_means,
    training_step_spread,
)

Record = Mapping[str, Any]
KEY_COLS = ["arm", "buyer", "domain", "seed"]
HASH_FIELD = "protocol_hash"


# ---------------------------------------------------------------------------------------------
# Helpers
# ---------------------------------------------------------------------------------------------

def _kind(turn: Mapping[str, Any]) -> str | None:
    return (turn.get("action") or {}).get("action")


def _is_deal(rec: Record) -> bool:
    return rec.get("status") == "deal"


def _carry_hash(src: pd.DataFrame, out: pd.DataFrame) -> pd.DataFrame:
    """Copy the protocol hash of ``src`` (``attrs``) onto a result table, as a column and attr."""
    h = src.attrs.get(HASH_FIELD)
    if h is not None:
        out[HASH_FIELD] = h
        out.attrs[HASH_FIELD] = h
    return out


# ---------------------------------------------------------------------------------------------
# Openings [Table 2, column 1; §5 "What the trained sellers do differently"]
# ---------------------------------------------------------------------------------------------

def named_schema_terms(domain: Domain, turn: Mapping[str, Any]) -> list[str]:
    """Schema issue names a turn's parsed COUNTER wrote (distinct, in the order named)."""
    act = turn.get("action") or {}
    if act.get("action") != "COUNTER":
        return []
    invalid = set(turn.get("invalid_terms") or ())
    out: list[str] = []
    for term in act.get("terms") or ():
        issue = domain.lookup(str(term["name"]))
        if issue is not None and issue.name not in invalid and issue.name not in out:
            out.append(issue.name)
    return out


OPENING_COLUMNS = KEY_COLS + ["held_out", "deal", "opening_turn", "opens_with_terms", "n_opening_terms",
                              "opening_terms_share", "opening_score", "seller_utility", "deal_minus_opening"]


def openings_frame(records: Iterable[Record], domains: Mapping[str, Domain] | None = None,
                   scenarios: Mapping[str, Scenario] | None = None) -> pd.DataFrame:
    """One row per episode: whether the seller opened with terms, how many, and the seller score
    the opening would give if accepted as it stands (NaN when the seller never spoke); ``scenarios``: the
    imported ones by domain name (:class:`~negolib.games.multi_issue.record_scenarios.RecordScenarios`)."""
    records, look = list(records), RecordScenarios(scenarios, domains)
    look.require((r["domain"] for r in records), "openings_frame")
    rows = []
    for rec in records:
        dom = look.domain(rec["domain"])
        seller = _seller_turns(rec)
        first = seller[0] if seller else None
        names = named_schema_terms(dom, first) if first else []
        score = (opening_score(look.scenario(rec["domain"], rec["seed"]), first["ledger"]) if first
                 else float("nan"))
        su = (rec.get("outcome") or {}).get("seller_utility")
        su = float(su) if su is not None and _is_deal(rec) else float("nan")
        rows.append({**_key(rec), "held_out": bool(rec.get("held_out", dom.held_out)), "deal": _is_deal(rec),
                     "opening_turn": first["turn"] if first else None, "opens_with_terms": bool(names),
                     "n_opening_terms": len(names), "opening_terms_share": len(names) / len(dom.issues),
                     "opening_score": score, "seller_utility": su, "deal_minus_opening": su - score})
    return pd.DataFrame(rows, columns=OPENING_COLUMNS)


def openings_table(data: Iterable[Record] | pd.DataFrame, domains: Mapping[str, Domain] | None = None,
                   scenarios: Mapping[str, Scenario] | None = None) -> pd.DataFrame:
    """Per arm: share opening with terms; among those openings, mean terms named, their share of
    the domain's terms, the opening score, the seller U~ of the deals they led to, and the gap."""
    f = data if isinstance(data, pd.DataFrame) else openings_frame(data, domains, scenarios)
    rows = []
    for arm, g in f.groupby("arm", sort=True):
        w = g[g["opens_with_terms"]]
        wd = w[w["deal"]]
        rows.append({"arm": arm, "n_episodes": len(g), "opens_with_terms": g["opens_with_terms"].mean(),
                     "n_opening_with_terms": len(w),
                     "mean_terms_named": w["n_opening_terms"].mean() if len(w) else np.nan,
                     "mean_terms_share": w["opening_terms_share"].mean() if len(w) else np.nan,
                     "opening_score": w["opening_score"].mean() if len(w) else np.nan,
                     "deal_utility_after": wd["seller_utility"].mean() if len(wd) else np.nan,
                     "deal_minus_opening": wd["deal_minus_opening"].mean() if len(wd) else np.nan})
    return pd.DataFrame(rows)


# ---------------------------------------------------------------------------------------------
# Decomposition [Table 2 Δ columns, Table 9]
# ---------------------------------------------------------------------------------------------

DECOMPOSITION_COLUMNS = ("seller_dist", "seller_int", "seller_u", "buyer_u", "welfare")
SPLIT_SKIPPED = "split_skipped"  # why an episode's split is left out (empty: it is not)


def decomposition_columns(df: pd.DataFrame, domains: Mapping[str, Domain] | None = None,
                          scenarios: Mapping[str, Scenario] | None = None) -> pd.DataFrame:
    """Copy of an episode table with the exact per-term split (see module docstring).

    Needs ``domain``, ``deal``, ``seller_terms`` and ``buyer_terms`` (per-term contributions in
    the domain's issue order). On a no-deal every column is NaN. ``welfare`` is replaced by
    ``seller_u + buyer_u`` (equal to ``seller_utility + buyer_utility`` up to rounding). An imported
    scenario (``scenarios``, by domain name) splits by its issues' labels; where its split cannot add up to
    the recorded U~ (:func:`~negolib.games.multi_issue.record_scenarios.split_skip_reason`) the columns are
    NaN and :data:`SPLIT_SKIPPED` says why (empty elsewhere).
    """
    look = RecordScenarios(scenarios, domains)
    look.require(pd.unique(df["domain"]), "decomposition_columns")
    masks: dict[str, np.ndarray] = {}
    skip = {d: (split_skip_reason(look.imported[d]) or "") if look.is_imported(d) else "" for d in set(df["domain"])}
    cols: dict[str, list[float]] = {c: [] for c in DECOMPOSITION_COLUMNS}
    for dom, deal, st, bt in zip(df["domain"], df["deal"], df["seller_terms"], df["buyer_terms"]):
        if dom not in masks:
            masks[dom] = np.array([i.distributive for i in look.domain(dom).issues])
        mask = masks[dom]
        s, b = np.asarray(st, dtype=float), np.asarray(bt, dtype=float)
        if s.shape != mask.shape or b.shape != mask.shape:
            raise ValueError(f"domain {dom!r}: {s.size}/{b.size} term contributions, schema has {mask.size}")
        dist, integ, bu = ((float(s[mask].sum()), float(s[~mask].sum()), float(b.sum())) if bool(deal)
                           and not skip[dom] else (float("nan"),) * 3)
        for c, v in zip(DECOMPOSITION_COLUMNS, (dist, integ, dist + integ, bu, dist + integ + bu)):
            cols[c].append(v)
    out = df.copy()
    for c, v in cols.items():
        out[c] = v
    out[SPLIT_SKIPPED] = df["domain"].map(skip).to_numpy()
    return out


def _deal(df: pd.DataFrame) -> np.ndarray:
    return df["deal"].to_numpy().astype(float)


def _deal_metric(name: str, label: str) -> Metric:
    return Metric(name, label, deal_only(name), _deal)


DECOMPOSITION_METRICS: dict[str, Metric] = {
    "seller_dist": _deal_metric("seller_dist", "seller U~, distributive terms"),
    "seller_int": _deal_metric("seller_int", "seller U~, integrative terms"),
    "buyer_u": _deal_metric("buyer_u", "buyer U~"),
    "welfare": _deal_metric("welfare", "joint welfare"),
    "seller_u": _deal_metric("seller_u", "seller U~ (deal-only)"),
}


def decomposition_table(df: pd.DataFrame, base_arm: str, arms: Sequence[str], resampler: ClusterResampler,
                        alpha: float = 0.05, refine: bool = False, include_total: bool = True,
                        domains: Mapping[str, Domain] | None = None,
                        scenarios: Mapping[str, Scenario] | None = None) -> pd.DataFrame:
    """Paired deltas (arm minus ``base_arm``) on scenarios both arms closed, with intervals.

    Rows per arm: ``seller_dist``, ``seller_int``, ``buyer_u``, ``welfare`` (and ``seller_u``, the
    seller's deal-only change the first two sum to, with ``include_total``). All exploratory:
    ``mark`` is ``'e'`` where the interval excludes zero. ``n_episodes`` counts the both-closed
    pairs. Columns are added with :func:`decomposition_columns` when missing; episodes it skipped are left
    out, counted in ``n_skipped``, with the reasons in ``attrs["skipped"]``.
    """
    if not set(DECOMPOSITION_COLUMNS) <= set(df.columns):
        df = decomposition_columns(df, domains, scenarios)
    why = df[SPLIT_SKIPPED].fillna("").astype(str) if SPLIT_SKIPPED in df else pd.Series("", index=df.index)
    skipped, src = "; ".join(sorted(set(why[why != ""]))), df
    df = df[why == ""] if skipped else df
    names = ["seller_dist", "seller_int", "buyer_u", "welfare"] + (["seller_u"] if include_total else [])
    ms = [DECOMPOSITION_METRICS[n] for n in names]
    out = contrast_table(df, [(a, base_arm) for a in arms], ms, resampler, primary=None, alpha=alpha,
                         refine=refine, restrict_both_closed=True)
    out = out.rename(columns={"arm_a": "arm", "arm_b": "base_arm"})
    out["n_skipped"], out.attrs["skipped"] = len(src) - len(df), skipped
    out["label"] = out["metric"].map({n: DECOMPOSITION_METRICS[n].label for n in names})
    return _carry_hash(src, out)


# ---------------------------------------------------------------------------------------------
# Style detectors [App. E]
# ---------------------------------------------------------------------------------------------

SELLER_TURN_COLUMNS = KEY_COLS + ["turn", "k", "prose", "opener", "repeated_opener", "i_appreciate",
                                  "json_leak", "json_fragments", "n_placeholders", "placeholders",
                                  "buyer_voice", "bad_parse"]


def seller_turns_frame(records: Iterable[Record]) -> pd.DataFrame:
    """One row per seller turn with every style flag (``k`` is the seller's 1-based turn index)."""
    rows = []
    for rec in records:
        seen: set[str] = set()
        for k, t in enumerate(_seller_turns(rec), 1):
            prose = t.get("prose") or ""
            op = opener(prose)
            frags, phs = json_fragments(prose), find_placeholders(prose)
            rows.append({**_key(rec), "turn": t["turn"], "k": k, "prose": prose, "opener": op,
                         "repeated_opener": bool(op) and op in seen,
                         "i_appreciate": starts_with_i_appreciate(prose),
                         "json_leak": bool(frags), "json_fragments": ",".join(frags),
                         "n_placeholders": len(phs), "placeholders": " | ".join(phs),
                         "buyer_voice": is_buyer_voice(prose), "bad_parse": t.get("action") is None})
            if op:
                seen.add(op)
    return pd.DataFrame(rows, columns=SELLER_TURN_COLUMNS)


def opener_concentration(turns: pd.DataFrame, top: int = 3) -> pd.DataFrame:
    """Per arm: the most common opener, its share and the top-``top`` openers' combined share,
    over seller turns with non-empty prose."""
    rows = []
    for arm, g in turns[turns["opener"] != ""].groupby("arm", sort=True):
        counts = Counter(g["opener"]).most_common()
        n = len(g)
        rows.append({"arm": arm, "n_seller_turns": n, "top_opener": counts[0][0],
                     "top_opener_share": counts[0][1] / n,
                     f"top{top}_share": sum(c for _, c in counts[:top]) / n})
    return pd.DataFrame(rows, columns=["arm", "n_seller_turns", "top_opener", "top_opener_share",
                                      f"top{top}_share"])


# ---------------------------------------------------------------------------------------------
# Closing turns and late closes
# ---------------------------------------------------------------------------------------------

_NUM_RE = re.compile(r"\d[\d,]*(?:\.\d+)?")


def mentions_term(prose: str, issue: Issue, value: Any) -> bool:
    """True when ``prose`` names ``issue`` or its new ``value`` (see module docstring)."""
    p = straight_quotes(prose).lower()
    first = issue.name.split("_")[0]
    forms = {issue.name.lower(), issue.name.replace("_", " ").lower()} | ({first.lower()} if len(first) >= 4
                                                                           else set())
    if any(re.search(rf"\b{re.escape(f)}\b", p) for f in forms):
        return True
    if issue.kind in ("categorical", "table"):  # a level, by name
        return re.search(rf"\b{re.escape(str(value).lower())}\b", p) is not None
    if issue.kind == "continuous":
        v = float(value)
        scales = (1.0, 1000.0) if "k" in issue.unit.lower() else (1.0,)
        for m in _NUM_RE.finditer(p):
            x = float(m.group(0).replace(",", ""))
            if any(math.isclose(x, v * s, rel_tol=1e-9, abs_tol=1e-9) for s in scales):
                return True
    return False


def _changed_terms(domain: Domain, before: Mapping[str, Any], after: Mapping[str, Any]) -> list[Issue]:
    return [i for i in domain.issues if i.name in after and after.get(i.name) != before.get(i.name)]


CONCESSION_COLUMNS = KEY_COLS + ["closing_turn", "counter_turn", "changed_terms", "names_concession"]


def concession_frame(records: Iterable[Record], domains: Mapping[str, Domain] | None = None,
                     closer: str = "seller", scenarios: Mapping[str, Scenario] | None = None) -> pd.DataFrame:
    """One row per deal closed by ``closer``'s ACCEPT: the terms the last COUNTER before it changed
    and whether the accept's prose names one of them (None when that counter changed none)."""
    records, look = list(records), RecordScenarios(scenarios, domains)
    look.require((r["domain"] for r in records), "concession_frame")
    rows = []
    for rec in records:
        turns = rec["turns"]
        if not _is_deal(rec) or not turns or _kind(turns[-1]) != "ACCEPT" or turns[-1]["role"] != closer:
            continue
        dom = look.domain(rec["domain"])
        idx = next((i for i in range(len(turns) - 2, -1, -1) if _kind(turns[i]) == "COUNTER"), None)
        changed: list[Issue] = []
        if idx is not None:
            before = turns[idx - 1]["ledger"] if idx > 0 else {}
            changed = _changed_terms(dom, before, turns[idx]["ledger"])
        after = turns[idx]["ledger"] if idx is not None else {}
        named = (any(mentions_term(turns[-1].get("prose") or "", i, after[i.name]) for i in changed)
                 if changed else None)
        rows.append({**_key(rec), "closing_turn": turns[-1]["turn"],
                     "counter_turn": turns[idx]["turn"] if idx is not None else None,
                     "changed_terms": ",".join(i.name for i in changed), "names_concession": named})
    return pd.DataFrame(rows, columns=CONCESSION_COLUMNS)


def late_close(rec: Record) -> float:
    """1.0 for a deal closed at or after the converge turn (16), 0.0 for an earlier deal, NaN for
    a no-deal."""
    if not _is_deal(rec):
        return float("nan")
    converge = int((rec.get("config") or {}).get("converge_from_turn", 16))
    return float(int(rec["outcome"]["turns"]) >= converge)


# ---------------------------------------------------------------------------------------------
# Per-episode diagnostic columns, metrics and the per-arm style table
# ---------------------------------------------------------------------------------------------

STYLE_EPISODE_COLUMNS = KEY_COLS + ["n_style_turns", "n_repeated_opener", "n_i_appreciate", "n_json_leak",
                                    "n_placeholder_turns", "n_placeholders", "n_buyer_voice_turns",
                                    "buyer_voice_opening", "late_close", "names_concession"]


_COUNT_COLUMNS = ["n_style_turns", "n_repeated_opener", "n_i_appreciate", "n_json_leak",
                  "n_placeholder_turns", "n_placeholders", "n_buyer_voice_turns"]


def style_episodes_frame(records: Sequence[Record], domains: Mapping[str, Domain] | None = None,
                         turns: pd.DataFrame | None = None,
                         scenarios: Mapping[str, Scenario] | None = None) -> pd.DataFrame:
    """Per episode: counts of flagged seller turns (over ``n_style_turns``, the seller turns with
    prose), buyer voice at the opening, late close and concession naming (NaN where undefined).
    ``turns`` is :func:`seller_turns_frame` of ``records`` when already computed."""
    records = list(records)
    turns = seller_turns_frame(records) if turns is None else turns
    turns = turns[turns["prose"] != ""].assign(placeholder_turn=lambda t: t["n_placeholders"] > 0)
    agg = turns.groupby(KEY_COLS, sort=False).agg(
        n_style_turns=("turn", "size"), n_repeated_opener=("repeated_opener", "sum"),
        n_i_appreciate=("i_appreciate", "sum"), n_json_leak=("json_leak", "sum"),
        n_placeholder_turns=("placeholder_turn", "sum"), n_placeholders=("n_placeholders", "sum"),
        n_buyer_voice_turns=("buyer_voice", "sum")).reset_index()
    conc = concession_frame(records, domains, scenarios=scenarios)[KEY_COLS + ["names_concession"]]
    conc = conc.assign(names_concession=conc["names_concession"].map(
        lambda v: float("nan") if v is None or pd.isna(v) else float(v)))
    base = pd.DataFrame([{**_key(rec), "buyer_voice_opening": _opens_in_buyer_voice(rec),
                          "late_close": late_close(rec)} for rec in records],
                        columns=KEY_COLS + ["buyer_voice_opening", "late_close"])
    out = base.merge(agg, on=KEY_COLS, how="left").merge(conc, on=KEY_COLS, how="left")
    out[_COUNT_COLUMNS] = out[_COUNT_COLUMNS].fillna(0).astype(int)
    out["names_concession"] = out["names_concession"].astype(float)
    return out[STYLE_EPISODE_COLUMNS]


def _opens_in_buyer_voice(rec: Record) -> bool:
    first = next(iter(_seller_turns(rec)), None)
    return bool(first and is_buyer_voice(first.get("prose") or ""))


def episode_diagnostics(records: Sequence[Record], domains: Mapping[str, Domain] | None = None,
                        scenarios: Mapping[str, Scenario] | None = None) -> pd.DataFrame:
    """The episode table with decomposition, opening and style columns: one frame for the stats
    layer (contrast any of :data:`DIAGNOSTIC_METRICS`)."""
    records = list(records)
    df = decomposition_columns(episodes_frame(records), domains, scenarios)
    opening = openings_frame(records, domains, scenarios)[KEY_COLS + ["opens_with_terms", "n_opening_terms",
                                                           "opening_terms_share", "opening_score"]]
    style = style_episodes_frame(records, domains, scenarios=scenarios)
    out = df.merge(opening, on=KEY_COLS, how="left").merge(style, on=KEY_COLS, how="left")
    hashes = [r.get(HASH_FIELD) for r in records]
    if any(h is not None for h in hashes):  # records stamped by negolib.study.evaluation
        out[HASH_FIELD] = hashes  # merges keep episodes_frame's row order
        if len(set(hashes)) == 1:
            out.attrs[HASH_FIELD] = hashes[0]
    return out


def _col(name: str) -> Callable[[pd.DataFrame], np.ndarray]:
    def fn(df: pd.DataFrame) -> np.ndarray:
        return df[name].to_numpy().astype(float)

    fn.__name__ = f"float_{name}"
    return fn


def _defined(name: str) -> Callable[[pd.DataFrame], np.ndarray]:
    def fn(df: pd.DataFrame) -> np.ndarray:
        return df[name].notna().to_numpy().astype(float)

    fn.__name__ = f"defined_{name}"
    return fn


def _zero_nan(name: str) -> Callable[[pd.DataFrame], np.ndarray]:
    def fn(df: pd.DataFrame) -> np.ndarray:
        return pd.to_numeric(df[name], errors="coerce").fillna(0.0).to_numpy()

    fn.__name__ = f"zero_nan_{name}"
    return fn


DIAGNOSTIC_METRICS: dict[str, Metric] = {
    **DECOMPOSITION_METRICS,
    "opens_with_terms": Metric("opens_with_terms", "opens with terms (share of episodes)",
                               _col("opens_with_terms")),
    "repeated_opener_rate": Metric("repeated_opener_rate", "repeated-opener rate (seller turns)",
                                   "n_repeated_opener", "n_style_turns"),
    "i_appreciate_rate": Metric("i_appreciate_rate", '"I appreciate" rate (seller turns)', "n_i_appreciate",
                                "n_style_turns"),
    "json_leak_rate": Metric("json_leak_rate", "JSON leakage (seller turns)", "n_json_leak", "n_style_turns"),
    "placeholder_turn_rate": Metric("placeholder_turn_rate", "unfilled placeholders (seller turns)",
                                    "n_placeholder_turns", "n_style_turns"),
    "buyer_voice_turn_rate": Metric("buyer_voice_turn_rate", "buyer voice (seller turns)",
                                    "n_buyer_voice_turns", "n_style_turns"),
    "buyer_voice_opening": Metric("buyer_voice_opening", "buyer-voice opener (share of episodes)",
                                  _col("buyer_voice_opening")),
    "late_close_share": Metric("late_close_share", "deals closed at or after turn 16",
                               _zero_nan("late_close"), _defined("late_close")),
    "concession_naming_rate": Metric("concession_naming_rate", "seller closing turns naming the concession",
                                     _zero_nan("names_concession"), _defined("names_concession")),
}

STYLE_TABLE_METRICS = ("repeated_opener_rate", "i_appreciate_rate", "json_leak_rate", "placeholder_turn_rate",
                       "buyer_voice_opening", "buyer_voice_turn_rate", "concession_naming_rate",
                       "late_close_share")


def style_table(records: Sequence[Record], domains: Mapping[str, Domain] | None = None,
                scenarios: Mapping[str, Scenario] | None = None) -> pd.DataFrame:
    """Per arm: opener concentration and every style diagnostic (point estimates), with counts; ``scenarios``: the
    imported ones by domain name (a concession names a term of the record's own domain)."""
    records = list(records)
    turns = seller_turns_frame(records)
    conc = opener_concentration(turns)
    ep = style_episodes_frame(records, domains, turns, scenarios)
    rows = []
    for arm, g in ep.groupby("arm", sort=True):
        row: dict[str, Any] = {"arm": arm, "n_episodes": len(g)}
        for name in STYLE_TABLE_METRICS:
            row[name] = metric_value(g, DIAGNOSTIC_METRICS[name])
        row["n_placeholders"] = int(g["n_placeholders"].sum())
        row["n_concession_closings"] = int(g["names_concession"].notna().sum())
        row["n_deals"] = int(g["late_close"].notna().sum())
        rows.append(row)
    out = pd.DataFrame(rows)
    if out.empty:
        return out
    return conc.merge(out, on="arm", how="right")[["arm", "n_episodes", "n_seller_turns", "top_opener",
                                                   "top_opener_share", "top3_share", *STYLE_TABLE_METRICS,
                                                   "n_placeholders", "n_concession_closings", "n_deals"]]


# ---------------------------------------------------------------------------------------------
# Guards [§4, App. E]
# ---------------------------------------------------------------------------------------------

def guards_table(df: pd.DataFrame, base_arm: str, arm: str, resampler: ClusterResampler | None = None,
                 deal_rate_margin: float = 0.05, parse_margin: float = 0.01, cap_turns: int = 24,
                 alpha: float = 0.05) -> pd.DataFrame:
    """The four prespecified guards of ``arm`` against ``base_arm`` on their paired episodes, in numbers.

    * deal rate holds while U~ rises: passes unless the deal rate falls by more than
      ``deal_rate_margin`` (``limit`` = -margin on the change; the change in deal-only U~ is
      ``d_deal_utility``);
    * flat parse-failure rate: the seller's bad-parse rate rises by at most ``parse_margin``;
    * accepts only offers **(ours)**: the seller's invalid-accept rate (ACCEPTs with no buyer
      COUNTER to accept, see :mod:`negolib.games.multi_issue.env`) rises by at most ``parse_margin``: a trained seller
      that learned to try closing on its own terms fails it;
    * mean turns below the cap: the arm's mean turns is below ``cap_turns`` (``limit``; the share of
      episodes at the cap is ``share_at_cap``);
    * transcripts read by hand: ``passed`` is None (manual; see :func:`sample_transcripts`).

    With ``resampler`` each change gets its paired seed-cluster interval (``ci_estimate``, ``ci_low``,
    ``ci_high``; NaN without). The report layer words the guards (:mod:`negolib.study.report.appendix_d_e`).
    """
    pr = pair_episodes(df, arm, base_arm)
    a, b = pr.a, pr.b
    nan = float("nan")

    def val(rows: pd.DataFrame, metric: str) -> float:
        return metric_value(rows, get_metric(metric))

    def ci(metric: str) -> dict[str, float]:
        if resampler is None:
            return {"ci_estimate": nan, "ci_low": nan, "ci_high": nan}
        c = paired_contrast(df, arm, base_arm, metric, resampler, alpha=alpha)
        return {"ci_estimate": c.estimate, "ci_low": c.ci_low, "ci_high": c.ci_high}

    d_deal = val(a, "deal_rate") - val(b, "deal_rate")
    d_u = val(a, "deal_utility") - val(b, "deal_utility")
    d_parse = val(a, "seller_bad_parse_rate") - val(b, "seller_bad_parse_rate")
    d_accept = val(a, "invalid_accept_rate") - val(b, "invalid_accept_rate")
    turns_a = val(a, "mean_turns")
    at_cap = float((a["turns"] >= cap_turns).mean()) if len(a) else nan
    rows = [
        {"guard": "deal rate holds while U~ rises", "metric": "deal_rate", "base": val(b, "deal_rate"),
         "arm_value": val(a, "deal_rate"), "delta": d_deal, **ci("deal_rate"), "limit": -deal_rate_margin,
         "passed": bool(d_deal >= -deal_rate_margin), "d_deal_utility": d_u, "share_at_cap": nan},
        {"guard": "flat parse-failure rate", "metric": "seller_bad_parse_rate",
         "base": val(b, "seller_bad_parse_rate"), "arm_value": val(a, "seller_bad_parse_rate"),
         "delta": d_parse, **ci("seller_bad_parse_rate"), "limit": parse_margin,
         "passed": bool(d_parse <= parse_margin), "d_deal_utility": nan, "share_at_cap": nan},
        {"guard": "accepts only offers (ours)", "metric": "invalid_accept_rate",
         "base": val(b, "invalid_accept_rate"), "arm_value": val(a, "invalid_accept_rate"),
         "delta": d_accept, **ci("invalid_accept_rate"), "limit": parse_margin,
         "passed": bool(d_accept <= parse_margin), "d_deal_utility": nan, "share_at_cap": nan},
        {"guard": "mean turns below the cap", "metric": "mean_turns", "base": val(b, "mean_turns"),
         "arm_value": turns_a, "delta": turns_a - val(b, "mean_turns"), **ci("mean_turns"), "limit": cap_turns,
         "passed": bool(turns_a < cap_turns), "d_deal_utility": nan, "share_at_cap": at_cap},
        {"guard": "transcripts read by hand", "metric": None, "base": nan, "arm_value": nan, "delta": nan,
         "ci_estimate": nan, "ci_low": nan, "ci_high": nan, "limit": nan, "passed": None, "d_deal_utility": nan,
         "share_at_cap": nan},
    ]
    out = pd.DataFrame(rows)
    out.insert(0, "arm", arm)
    out.insert(1, "base_arm", base_arm)
    out["n_paired"] = len(a)
    return _carry_hash(df, out)


__all__ = ["HAND_READ_PER_FAMILY", "SPLIT_SKIPPED", "domain_family", "hand_read_sample",
           "named_schema_terms", "openings_frame", "openings_table", "decomposition_columns",
           "DECOMPOSITION_METRICS", "decomposition_table", "opener", "starts_with_i_appreciate",
           "json_fragments", "has_json_leak", "PLACEHOLDER_RE", "find_placeholders", "BUYER_VOICE_PATTERNS",
           "buyer_voice_matches", "is_buyer_voice", "seller_turns_frame", "opener_concentration",
           "mentions_term", "concession_frame", "late_close", "style_episodes_frame", "episode_diagnostics",
           "DIAGNOSTIC_METRICS", "style_table", "guards_table", "format_transcript", "sample_transcripts"]
__all__ += ["SPREAD_METRICS", "CURVE_METRICS", "SPREAD_COLS", "training_step_spread", "rolling_step_means"]
