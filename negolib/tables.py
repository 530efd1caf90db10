"""The paper's tables, rebuilt from our tidy frames, with the paper's reported values beside ours.

Two layers:

* **tidy inputs** (:class:`Analysis`, :func:`arm_estimates`, :func:`design_contrasts`,
  :func:`decomposition`): numbers computed from this run's episode table with :mod:`negolib.stats`
  and :mod:`negolib.metrics` (seed-cluster bootstrap; one seeded set of resamples per scenario set);
* **builders** (``table1`` ... ``table9`` and the setup tables): tidy frames in, a
  :class:`BookTable` out, whose columns labelled ``paper: ...`` hold the paper's reported numbers
  from ``params/paper_reported.yaml`` (transcribed once, never computed) and whose other columns
  hold ours. A cell with nothing to show is ``—``; no number is ever invented.

A :class:`BookTable` renders as pandas Styler HTML in a notebook and saves CSV, markdown and HTML
under ``outputs/<profile>/tables/``.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from negolib.diagnostics import decomposition_columns, decomposition_table, guards_table
from negolib.domains import load_domains
from negolib.formatting import DASH, fmt_ci, fmt_num, fmt_pct, is_number
from negolib.metrics import arm_table, buyer_split
from negolib.paper import PaperReported, load_paper_reported
from negolib.params import Params, SizeGroup, spec_dict
from negolib.stats import ClusterResampler, arm_estimate, contrast_lookup, contrast_table, estimate_lookup, holm
from negolib.training.flops import flops_from_log

PAPER = "paper"
ROLE_LABELS = {"base": "base", "shared_early": "shared LR (early)", "shared": "shared LR",
               "lr3": "3× LR", "lr10": "10× LR"}


# ---------------------------------------------------------------------------------------------
# Formatting
# ---------------------------------------------------------------------------------------------

def fmt_paper(v: Any, digits: int = 3, signed: bool = False, mark: str = "", pct: bool = False) -> str:
    """A paper value: a number, or ``[est, lo, hi]``."""
    if v is None:
        return DASH
    if isinstance(v, (list, tuple)):
        if len(v) == 3:
            return fmt_ci(v[0], v[1], v[2], digits, signed=signed, mark=mark)
        if len(v) == 2:
            return f"{fmt_num(v[0], digits)} → {fmt_num(v[1], digits)}"
    if pct:
        return fmt_pct(v)
    return fmt_num(v, digits, signed) + (mark or "") if is_number(v) else str(v)


# ---------------------------------------------------------------------------------------------
# BookTable
# ---------------------------------------------------------------------------------------------

@dataclass
class BookTable:
    """A rendered table: ``frame`` (display strings), ``data`` (tidy numbers, ours) and a caption.

    Columns whose name starts with ``paper:`` hold the paper's reported values.
    """

    name: str
    title: str
    frame: pd.DataFrame
    caption: str = ""
    data: pd.DataFrame | None = None
    notes: list[str] = field(default_factory=list)
    paper_frame: pd.DataFrame | None = None

    @property
    def paper_columns(self) -> list[str]:
        return [c for c in self.frame.columns if str(c).startswith(f"{PAPER}:")]

    @property
    def empty(self) -> bool:
        return self.frame.empty

    def styler(self) -> Any:
        """pandas Styler: the paper's columns shaded and italic, our columns plain."""
        sty = self.frame.style.set_caption(f"<b>{self.title}</b>" + (f"<br>{self.caption}" if self.caption else ""))
        if self.paper_columns:
            sty = sty.set_properties(subset=self.paper_columns, **{"background-color": "#f1f1f6",
                                                                   "font-style": "italic", "color": "#445"})
        return sty.set_table_styles([{"selector": "caption", "props": "caption-side: top; text-align: left;"}])

    def to_html(self) -> str:
        return self.styler().to_html()

    def _repr_html_(self) -> str:
        notes = "".join(f"<p style='font-size:90%'>{n}</p>" for n in self.notes)
        html = self.to_html() + notes
        if self.paper_frame is not None and not self.paper_frame.empty:
            sty = self.paper_frame.style.set_caption("<b>paper (reported)</b>").set_properties(
                **{"background-color": "#f1f1f6", "font-style": "italic", "color": "#445"})
            html += "<br>" + sty.to_html()
        return html

    def to_markdown(self) -> str:
        body = self.frame.to_markdown(disable_numparse=True) if not self.frame.empty else "(no rows)"
        parts = [f"**{self.title}**", ""]
        if self.caption:
            parts += [self.caption, ""]
        parts.append(body)
        parts += ["", *[f"> {n}" for n in self.notes]] if self.notes else []
        if self.paper_frame is not None and not self.paper_frame.empty:
            parts += ["", "*paper (reported):*", "", self.paper_frame.to_markdown(disable_numparse=True)]
        return "\n".join(parts) + "\n"

    def save(self, folder: str | Path) -> list[Path]:
        """Write ``<name>.csv`` (as displayed), ``<name>.md``, ``<name>.html`` and, with tidy data,
        ``<name>_data.csv``."""
        folder = Path(folder)
        folder.mkdir(parents=True, exist_ok=True)
        out = [folder / f"{self.name}.csv", folder / f"{self.name}.md", folder / f"{self.name}.html"]
        self.frame.to_csv(out[0])
        out[1].write_text(self.to_markdown(), encoding="utf-8")
        out[2].write_text("<!doctype html><meta charset='utf-8'>" + self._repr_html_(), encoding="utf-8")
        if self.data is not None:
            out.append(folder / f"{self.name}_data.csv")
            self.data.to_csv(out[-1], index=False)
        if self.paper_frame is not None:
            out.append(folder / f"{self.name}_paper.csv")
            self.paper_frame.to_csv(out[-1])
        return out


def _frame(rows: list[dict[str, Any]], index: str | None = None) -> pd.DataFrame:
    df = pd.DataFrame(rows)
    if index and not df.empty:
        df = df.set_index(index)
    return df


# ---------------------------------------------------------------------------------------------
# Tidy inputs (ours): arm estimates and contrasts with the seed-cluster bootstrap
# ---------------------------------------------------------------------------------------------

@dataclass
class Analysis:
    """One analysis of an episode table: resamplers shared per scenario set (same seeded draws).

    Arms that played the same seeds share a :class:`negolib.stats.ClusterResampler`; language-model
    arms on a declared subset get one over the subset's seeds (their clusters), never empty ones.
    """

    df: pd.DataFrame
    n_resamples: int = 10_000
    seed: int = 0
    alpha: float = 0.05
    refine: bool = False
    refine_resamples: int = 100_000
    _cache: dict[tuple, Any] = field(default_factory=dict, repr=False)

    @classmethod
    def from_params(cls, df: pd.DataFrame, params: Params) -> Analysis:
        s = params.statistics
        return cls(df, s.n_resamples, s.seed, s.alpha, s.refine, s.refine_resamples)

    def resampler(self, seeds: Iterable[Any]) -> Any:
        key = tuple(sorted(set(int(s) for s in seeds)))
        if key not in self._cache:
            self._cache[key] = ClusterResampler(np.asarray(key), self.n_resamples, self.seed)
        return self._cache[key]

    def arms(self) -> list[str]:
        return [] if self.df.empty else sorted(pd.unique(self.df["arm"]))

    def pair_frame(self, arm_a: str, arm_b: str) -> tuple[pd.DataFrame, Any]:
        """(the two arms' episodes on the seeds both played, the resampler over those seeds)."""
        seeds = sorted(set(self.df.loc[self.df["arm"] == arm_a, "seed"]) & set(self.df.loc[self.df["arm"] == arm_b,
                                                                                             "seed"]))
        sub = self.df[self.df["arm"].isin([arm_a, arm_b]) & self.df["seed"].isin(seeds)]
        return sub, self.resampler(seeds)

    def has(self, arm: str | None) -> bool:
        return arm is not None and not self.df.empty and bool((self.df["arm"] == arm).any())


def arm_estimates(an: Analysis, arms: Sequence[str], metrics: Sequence[Any],
                  domains: Sequence[str] | None = None, buyer: str | None = None) -> pd.DataFrame:
    """Tidy (arm, metric, estimate, ci_low, ci_high, n_episodes, n_clusters) with arm-level intervals.

    ``metrics``: names in :data:`negolib.metrics.METRICS` or :class:`negolib.metrics.Metric` objects
    (e.g. ``buyer_split(a, b)``). Each arm is resampled over the seeds it played."""
    rows = []
    for arm in arms:
        if not an.has(arm):
            continue
        sub = an.df[an.df["arm"] == arm]
        res = an.resampler(sub["seed"])
        for m in metrics:
            try:
                e = arm_estimate(sub, arm, m, res, an.alpha, buyer=buyer, domains=domains)
            except (KeyError, ValueError):  # no episodes after the filter, or an undefined ratio
                continue
            rows.append({"arm": arm, "metric": e.metric, "estimate": e.estimate, "ci_low": e.ci_low,
                         "ci_high": e.ci_high, "n_episodes": e.n_episodes, "n_clusters": e.n_clusters})
    return pd.DataFrame(rows, columns=["arm", "metric", "estimate", "ci_low", "ci_high", "n_episodes",
                                       "n_clusters"])


def point_estimates(df: pd.DataFrame, arms: Sequence[str], metrics: Sequence[str]) -> pd.DataFrame:
    """Tidy point estimates (no intervals) of metrics per arm (``metrics.arm_table``)."""
    sub = df[df["arm"].isin(list(arms))] if not df.empty else df
    if sub.empty:
        return pd.DataFrame(columns=["arm", "metric", "estimate"])
    t = arm_table(sub, list(metrics))
    long = t.drop(columns=["n_episodes"], errors="ignore").reset_index().melt(id_vars="arm", var_name="metric",
                                                                             value_name="estimate")
    return long


def run_pairs(an: Analysis, pairs: Sequence[tuple[str, str]], metrics: Sequence[str] = ("score",),
              primary: Sequence[Sequence[str]] = (), restrict_both_closed: bool = False,
              domains: Sequence[str] | None = None, buyer: str | None = None) -> pd.DataFrame:
    """Paired contrasts ``arm_a - arm_b``, grouped by the seeds each pair shares (one resampler per
    seed set); Holm over the ``primary`` pairs (S only); ``mark`` is ``*`` (primary, Holm) or ``e``."""
    pairs = [(a, b) for a, b in pairs if an.has(a) and an.has(b)]
    if not pairs:
        return pd.DataFrame(columns=["arm_a", "arm_b", "metric", "estimate", "ci_low", "ci_high", "p_value",
                                     "primary", "p_holm", "mark"])
    groups: dict[tuple, list[tuple[str, str]]] = {}
    for a, b in pairs:
        sa = set(an.df.loc[an.df["arm"] == a, "seed"])
        sb = set(an.df.loc[an.df["arm"] == b, "seed"])
        groups.setdefault(tuple(sorted(sa & sb)), []).append((a, b))
    parts = []
    for seeds, grp in groups.items():
        if not seeds:
            continue
        sub = an.df[an.df["arm"].isin({x for p in grp for x in p}) & an.df["seed"].isin(seeds)]
        parts.append(contrast_table(sub, grp, list(metrics), an.resampler(seeds), None, an.alpha,
                                    refine=an.refine, refine_resamples=an.refine_resamples,
                                    restrict_both_closed=restrict_both_closed, buyer=buyer, domains=domains))
    out = pd.concat([p for p in parts if not p.empty], ignore_index=True) if parts else pd.DataFrame()
    if out.empty:
        return out
    keys = {(str(a), str(b)) for a, b in primary}
    out["primary"] = [(a, b) in keys and m == "score" for a, b, m in zip(out["arm_a"], out["arm_b"], out["metric"])]
    out["p_holm"] = np.nan
    if out["primary"].any():
        out.loc[out["primary"], "p_holm"] = holm(out.loc[out["primary"], "p_value"].to_numpy())
    test_p = np.where(out["primary"], out["p_holm"], out["p_value"])
    out["significant"] = test_p < an.alpha
    out["mark"] = np.where(out["significant"], np.where(out["primary"], "*", "e"), "")
    return out


def design_pairs(params: Params) -> list[tuple[str, str]]:
    """Every contrast the paper's tables need, from the profile's design (Table 1, Fig. 2/3, App. C)."""
    pairs: list[tuple[str, str]] = []
    for g in params.design.sizes:
        for role in ("shared_early", "shared", "lr3", "lr10", *g.extra):
            arm = getattr(g, role, None) if role in ROLE_LABELS else role
            if arm:
                pairs.append((arm, g.base))
        if g.lr3 and g.shared_early:
            pairs.append((g.lr3, g.shared_early))
        if g.lr3 and g.shared:
            pairs.append((g.lr3, g.shared))
        for f in params.design.frontier:
            for role in ("lr3", "shared", "base"):
                arm = getattr(g, role)
                if arm:
                    pairs.append((arm, f))
    if len(params.design.frontier) == 2:
        pairs.append((params.design.frontier[0], params.design.frontier[1]))
    for a, b in params.statistics.primary:
        pairs.append((a, b))
    seen: set[tuple[str, str]] = set()
    return [p for p in pairs if not (p in seen or seen.add(p))]  # type: ignore[func-returns-value]


def design_contrasts(an: Analysis, params: Params, metrics: Sequence[str] = ("score",),
                     domains: Sequence[str] | None = None) -> pd.DataFrame:
    """All design contrasts of S (and ``metrics``), with the profile's primary family marked."""
    return run_pairs(an, design_pairs(params), metrics, params.statistics.primary, domains=domains)


DECOMP_METRICS = ("seller_distributive", "seller_integrative", "buyer_utility", "welfare")


def decomposition(an: Analysis, pairs: Sequence[tuple[str, str]]) -> pd.DataFrame:
    """Table 2/9 inputs: paired deal-only changes (arm - base) over scenarios both arms closed, split
    into the seller's distributive and integrative parts, the buyer's U~ and joint welfare
    (:func:`negolib.diagnostics.decomposition_table`); metrics renamed to :data:`DECOMP_METRICS`."""
    pairs = [(a, b) for a, b in pairs if an.has(a) and an.has(b)]
    if not pairs:
        return pd.DataFrame()
    df = decomposition_columns(an.df)
    names = {"seller_dist": "seller_distributive", "seller_int": "seller_integrative", "buyer_u": "buyer_utility",
             "welfare": "welfare", "seller_u": "seller_utility"}
    parts = []
    for a, b in pairs:
        seeds = sorted(set(df.loc[df["arm"] == a, "seed"]) & set(df.loc[df["arm"] == b, "seed"]))
        if not seeds:
            continue
        sub = df[df["arm"].isin([a, b]) & df["seed"].isin(seeds)]
        t = decomposition_table(sub, b, [a], an.resampler(seeds), an.alpha, refine=False)
        parts.append(t.rename(columns={"arm": "arm_a", "base_arm": "arm_b"}))
    out = pd.concat(parts, ignore_index=True) if parts else pd.DataFrame()
    if not out.empty:
        out["metric"] = out["metric"].map(names)
    return out


@dataclass
class Results:
    """Everything the results notebooks read: the analysis, arm estimates and the design contrasts."""

    params: Params
    an: Analysis
    est: pd.DataFrame
    contrasts: pd.DataFrame

    @property
    def empty(self) -> bool:
        return self.an.df.empty

    @property
    def arms(self) -> list[str]:
        """Evaluated arms, in the profile's order."""
        have = set(self.an.arms())
        return [a for a in self.params.arms if a in have]


def compute_results(df: pd.DataFrame, params: Params) -> Results:
    """Arm estimates (every metric of Tables 3-5 and the buyer split) and the design contrasts."""
    an = Analysis.from_params(df, params)
    if df.empty:
        return Results(params, an, pd.DataFrame(columns=["arm", "metric", "estimate", "ci_low", "ci_high"]),
                       pd.DataFrame())
    arms = [a for a in params.arms if an.has(a)]
    metrics: list[Any] = list(dict.fromkeys(TABLE4_METRICS + TABLE3_METRICS + TABLE5_METRICS))
    if len(params.design.buyer_split) == 2:
        metrics.append(buyer_split(*params.design.buyer_split))
    est = arm_estimates(an, arms, metrics)
    return Results(params, an, est, design_contrasts(an, params))


def _c(look: Mapping, a: str | None, b: str | None, metric: str = "score", signed: bool = True,
       digits: int = 3) -> str:
    if not a or not b:
        return DASH
    r = look.get((a, b, metric))
    if r is None:
        return DASH
    return fmt_ci(r["estimate"], r["ci_low"], r["ci_high"], digits, signed=signed, mark=r.get("mark", ""))


def _e(look: Mapping, arm: str | None, metric: str, digits: int = 3, ci: bool = True) -> str:
    if not arm:
        return DASH
    r = look.get((arm, metric))
    if r is None:
        return DASH
    if ci and "ci_low" in r:
        return fmt_ci(r["estimate"], r.get("ci_low"), r.get("ci_high"), digits, signed=False)
    return fmt_num(r["estimate"], digits)


# ---------------------------------------------------------------------------------------------
# Setup tables (02)
# ---------------------------------------------------------------------------------------------

def domain_table(domain: Any) -> BookTable:
    """One domain's contract schema (ours; the paper names the car domain's issues only)."""
    rows = []
    for i in domain.issues:
        if i.kind == "continuous":
            what = f"{i.lo:g} to {i.hi:g} {i.unit}".strip()
            pref = f"seller prefers {'high' if i.seller_sign > 0 else 'low'}"
        else:
            what = " / ".join(str(v) for v in i.levels) if i.kind == "categorical" else "yes / no"
            pref = "each party draws a preferred level"
        rows.append({"term": i.name, "kind": i.kind, "class": "distributive" if i.distributive else "integrative",
                     "range / levels": what, "preferences": pref, "description": i.description})
    title = f"Domain `{domain.name}`: {domain.title}" + (" (held out)" if domain.held_out else "")
    return BookTable(f"domain_{domain.name}", title, _frame(rows, "term"),
                     f"{len(domain.issues)} issues, {sum(i.distributive for i in domain.issues)} distributive.")


def domains_overview(domains: Mapping[str, Any]) -> BookTable:
    """All domains: issue counts by class (paper: 7-10 issues, 3-5 distributive, car has 10)."""
    rows = [{"domain": d.name, "title": d.title, "held out": d.held_out, "issues": len(d.issues),
             "distributive": sum(i.distributive for i in d.issues),
             "integrative": sum(not i.distributive for i in d.issues)} for d in domains.values()]
    return BookTable("domains", "The nine domains (eight training, one held out)", _frame(rows, "domain"),
                     "paper: 7-10 issues per domain (10 in the held-out car domain), 3-5 distributive terms.")


def arm_matrix(params: Params) -> BookTable:
    """The profile's arms and buyers: backend, model/strategy, sampling, scaffold, paper row mapped."""
    rows = []
    for section, specs in (("seller arm", params.arms), ("buyer", params.buyers)):
        for name, spec in specs.items():
            d = spec_dict(spec)
            what = spec.strategy or spec.model or (f"run {spec.run}" + (f" @ step {spec.step}" if spec.step else "")
                                                   if spec.run else "") or f"{spec.inner} + opening {spec.opening}"
            s = spec.sampling
            samp = DASH if spec.backend in ("scripted", "fixed_opening") else \
                f"T={s.temperature:g}, top-p={s.top_p:g}, top-k={s.top_k}, max_new={s.max_new_tokens}"
            rows.append({"name": name, "role": section, "backend": spec.backend, "what": what,
                         "label": spec.label, "sampling": samp,
                         "scaffold": spec.scaffold if spec.backend not in ("scripted", "fixed_opening") else DASH,
                         "scenario set": ("LM subset" if params.is_lm(name) else "full")
                         if section == "seller arm" else DASH,
                         "paper row": d.get("paper_ref", DASH)})
    return BookTable("arm_matrix", f"Arm matrix of profile '{params.profile}'", _frame(rows, "name"),
                     f"{len(params.arms)} seller arms, {len(params.buyers)} buyers.")


def scenario_set_table(params: Params, paper: PaperReported) -> BookTable:
    """The evaluation scenario set: ours (full and LM subset) beside the paper's design."""
    ev = params.evaluation
    doms = ev.domains or list(load_domains())
    held = [d for d in doms if load_domains()[d].held_out]
    lm_doms = ev.lm_domains or doms
    lm_seeds = ev.lm_seeds_per_domain or ev.seeds_per_domain
    nb = len(ev.buyers)
    n_lm = len(params.lm_arms())
    n_scr = len(params.arms) - n_lm
    total = n_scr * ev.seeds_per_domain * len(doms) * nb + n_lm * lm_seeds * len(lm_doms) * nb
    pd_ = paper.get("design", default={}) or {}
    rows = [
        {"quantity": "seeds per domain", "ours (scripted arms)": ev.seeds_per_domain, "ours (LM arms)": lm_seeds,
         "paper: value": pd_.get("seeds_per_domain")},
        {"quantity": "domains", "ours (scripted arms)": len(doms), "ours (LM arms)": len(lm_doms),
         "paper: value": pd_.get("domains")},
        {"quantity": "buyers", "ours (scripted arms)": nb, "ours (LM arms)": nb, "paper: value": pd_.get("buyers")},
        {"quantity": "episodes per arm", "ours (scripted arms)": ev.seeds_per_domain * len(doms) * nb,
         "ours (LM arms)": lm_seeds * len(lm_doms) * nb, "paper: value": pd_.get("episodes_per_arm")},
        {"quantity": "held-out episodes per arm", "ours (scripted arms)": ev.seeds_per_domain * len(held) * nb,
         "ours (LM arms)": lm_seeds * len([d for d in lm_doms if d in held]) * nb,
         "paper: value": pd_.get("held_out_episodes_per_arm")},
        {"quantity": "seed clusters", "ours (scripted arms)": ev.seeds_per_domain, "ours (LM arms)": lm_seeds,
         "paper: value": paper.get("statistics", "clusters")},
        {"quantity": "arms", "ours (scripted arms)": n_scr, "ours (LM arms)": n_lm, "paper: value": pd_.get("arms")},
        {"quantity": "episodes in total", "ours (scripted arms)": total, "ours (LM arms)": "",
         "paper: value": pd_.get("episodes_total")},
        {"quantity": "max rounds (turns)", "ours (scripted arms)": f"{ev.max_rounds} ({2 * ev.max_rounds})",
         "ours (LM arms)": f"{ev.max_rounds} ({2 * ev.max_rounds})",
         "paper: value": f"{pd_.get('max_rounds')} ({pd_.get('max_turns')})"},
    ]
    df = _frame(rows, "quantity").astype(object).fillna(DASH)
    return BookTable("scenario_set", "The paired evaluation scenario set", df,
                     "Every arm plays the identical scenarios (same seeds, weight draws and buyers); "
                     "language-model arms play the declared subset.")


def sampling_table(params: Params, paper: PaperReported) -> BookTable:
    """Sampling per language-model party, beside the paper's (T=1.0, top-p 0.95, top-k 64)."""
    rec = paper.get("recipe", default={}) or {}
    rows = []
    for name, spec in {**params.arms, **params.buyers}.items():
        if spec.backend in ("scripted", "fixed_opening"):
            continue
        s = spec.sampling
        rows.append({"party": name, "backend": spec.backend, "temperature": s.temperature, "top-p": s.top_p,
                     "top-k": s.top_k, "max new tokens": s.max_new_tokens, "thinking": s.thinking,
                     "paper: temperature / top-p / top-k / max new": (
                         f"{rec.get('temperature')} / {rec.get('top_p')} / {rec.get('top_k')} / "
                         f"{rec.get('max_new_tokens')}")})
    return BookTable("sampling", "Sampling settings as declared (recorded per arm as sent)", _frame(rows, "party"),
                     "paper: every self-served seller at temperature 1.0, top-p 0.95, top-k 64, thinking off; "
                     "frontier sellers requested at 0.7 [App. A].")


def recipe_table(config: Mapping[str, Any], paper: PaperReported, run: str = "") -> BookTable:
    """A training run's configuration beside the paper's recipe [App. H]."""
    rec = paper.get("recipe", default={}) or {}
    mapping = [
        ("scenarios per step", "scenarios_per_step", "scenarios_per_step"),
        ("rollouts per scenario (group)", "rollouts_per_scenario", "rollouts_per_scenario"),
        ("optimizer steps", "max_steps", "initial_steps"),
        ("learning rate (peak)", "peak_lr", "learning_rate"),
        ("warmup steps", "warmup_steps", "warmup_steps"),
        ("KL coefficient (k3, in loss)", "kl_beta", "kl_coef"),
        ("PPO clip (low/high)", ("clip_low", "clip_high"), "clip"),
        ("Adam betas", ("adam_beta1", "adam_beta2"), "adam_betas"),
        ("weight decay", "weight_decay", "weight_decay"),
        ("max new tokens per turn", "max_new_tokens", "max_new_tokens"),
        ("prompt cap (tokens)", "max_prompt_tokens", "prompt_cap_tokens"),
        ("context (tokens)", "max_context_tokens", "context_tokens"),
        ("rollout turns", "max_rollout_turns", "rollout_turns"),
        ("temperature / top-p / top-k", ("temperature", "top_p", "top_k"), ("temperature", "top_p", "top_k")),
        ("validation every (steps)", "validate_every", "validation_every"),
    ]

    def get(d: Mapping, k: Any) -> str:
        if isinstance(k, tuple):
            vals = [d.get(x) for x in k]
            return DASH if all(v is None for v in vals) else " / ".join(f"{v:g}" if is_number(v) else str(v)
                                                                        for v in vals)
        v = d.get(k)
        if isinstance(v, (list, tuple)):
            return " / ".join(f"{x:g}" for x in v)
        return DASH if v is None else (f"{v:g}" if is_number(v) else str(v))

    rows = [{"setting": label, "ours": get(config, ours), "paper: value": get(rec, theirs)}
            for label, ours, theirs in mapping]
    return BookTable(f"recipe_{run}" if run else "recipe", f"GRPO recipe{f' of run {run!r}' if run else ''}",
                     _frame(rows, "setting"), "paper: App. H (identical at every size up to the LR arm).")


def table8(sizes: Sequence[Mapping[str, Any]], paper: PaperReported) -> BookTable:
    """Table 8: per-size parameter counts and relative FLOPs/step; ours from the loaded models' configs.

    ``sizes``: ours, one mapping per size with ``label``, ``params`` (count) and optional
    ``embedding_params``; relative FLOPs/step are N / N of the first size [App. I].
    """
    rows = []
    base = sizes[0]["params"] if sizes and sizes[0].get("params") else None
    for s in sizes:
        n = s.get("params")
        rows.append({"size (ours)": s["label"], "parameters": _fmt_count(n),
                     "non-embedding parameters": _fmt_count(s.get("non_embedding_params")),
                     "relative FLOPs/step": fmt_num(n / base, 2) if n and base else DASH,
                     "device": s.get("device", "CPU")})
    ours = _frame(rows, "size (ours)")
    prow = []
    for key, v in (paper.get("sizes", default={}) or {}).items():
        prow.append({"paper: size": v.get("label", key), "paper: effective / total": (
            f"{v['effective_params_b']:g}B / {v['total_params_b']:g}B"),
            "paper: train TP": v.get("train_tp"), "paper: gen. memory fraction": v.get("gen_memory_fraction"),
            "paper: eval accelerators (48 GB)": v.get("eval_accelerators"),
            "paper: rel. FLOPs (effective)": f"{v.get('rel_flops_effective'):g}×",
            "paper: rel. FLOPs (total)": f"{v.get('rel_flops_total'):g}×"})
    theirs = _frame(prow, "paper: size")
    return BookTable("table8", "Table 8: per-size parameters and relative training compute", ours,
                     "Ours: the models this profile trains and evaluates (counts from the loaded weights); "
                     "below, the paper's Gemma 4 sizes.", paper_frame=theirs)


def _fmt_count(n: Any) -> str:
    if not is_number(n):
        return DASH
    return f"{n / 1e9:.2f}B" if n >= 1e9 else f"{n / 1e6:.1f}M" if n >= 1e6 else f"{n / 1e3:.1f}k"


# ---------------------------------------------------------------------------------------------
# Results tables (05-08)
# ---------------------------------------------------------------------------------------------

TABLE4_METRICS = ("score", "score_held_out", "deal_rate", "mean_turns", "bad_parse_rate")
TABLE3_METRICS = ("score", "deal_rate", "deal_utility", "welfare")
TABLE5_METRICS = ("score", "deal_rate", "deal_utility", "seller_bad_parse_rate", "mean_turns")


def _arm_label(params: Params | None, arm: str) -> str:
    if params is not None and arm in params.arms and params.arms[arm].label:
        return params.arms[arm].label
    return arm


def _paper_ref(params: Params | None, arm: str) -> str | None:
    return params.arms[arm].paper_ref if params is not None and arm in params.arms else None


def table4(est: pd.DataFrame, arms: Sequence[str], params: Params | None, paper: PaperReported) -> BookTable:
    """Table 4: every evaluated arm, S [CI], S held-out [CI], deal rate, turns, bad-parse (all turns)."""
    look = estimate_lookup(est)
    rows = []
    for arm in arms:
        if not any(k[0] == arm for k in look):
            continue
        p = paper.arm(_paper_ref(params, arm))
        rows.append({
            "arm": arm, "seller": _arm_label(params, arm), "episodes": _n(est, arm),
            "S (all domains)": _e(look, arm, "score"), "S (held-out)": _e(look, arm, "score_held_out"),
            "deal rate": _e(look, arm, "deal_rate", ci=False), "turns": _e(look, arm, "mean_turns", 1, ci=False),
            "bad-parse (all turns)": _e(look, arm, "bad_parse_rate", 4, ci=False),
            "paper: arm": paper.arm_label(_paper_ref(params, arm)),
            "paper: S": fmt_paper(p.get("score")), "paper: S (held-out)": fmt_paper(p.get("score_held_out")),
            "paper: deal rate": fmt_paper(p.get("deal_rate")), "paper: turns": fmt_paper(p.get("mean_turns"), 1),
            "paper: bad-parse": fmt_paper(p.get("bad_parse_rate"), 4)})
    return BookTable("table4", "Table 4: every evaluated arm", _frame(rows, "arm"),
                     "S is U~ on a deal and -0.3 on a no-deal, with 95% seed-cluster bootstrap intervals; "
                     "held-out is the car domain; turns out of 24; bad-parse over all turns.", est)


def _n(est: pd.DataFrame, arm: str) -> Any:
    sub = est[(est["arm"] == arm) & (est["metric"] == "score")] if not est.empty else est
    return int(sub["n_episodes"].iloc[0]) if len(sub) else DASH


def table3(est: pd.DataFrame, arms: Sequence[str], params: Params | None, paper: PaperReported) -> BookTable:
    """Table 3: outcome decomposition (S [CI], deal rate, deal-only U~, joint welfare)."""
    look = estimate_lookup(est)
    rows = []
    for arm in arms:
        if (arm, "score") not in look:
            continue
        p = paper.arm(_paper_ref(params, arm))
        rows.append({"arm": arm, "seller": _arm_label(params, arm), "S (all domains)": _e(look, arm, "score"),
                     "deal rate": _e(look, arm, "deal_rate", ci=False),
                     "deal-only U~": _e(look, arm, "deal_utility", ci=False),
                     "joint welfare": _e(look, arm, "welfare", ci=False),
                     "paper: arm": paper.arm_label(_paper_ref(params, arm)), "paper: S": fmt_paper(p.get("score")),
                     "paper: deal rate": fmt_paper(p.get("deal_rate")),
                     "paper: deal-only U~": fmt_paper(p.get("deal_utility")),
                     "paper: joint welfare": fmt_paper(p.get("welfare"))})
    return BookTable("table3", "Table 3: outcome decomposition behind Figure 2a", _frame(rows, "arm"),
                     "Deal-only U~ conditions on agreement; joint welfare is the sum of both parties' U~ on deals. "
                     "An arm that closes fewer but better deals can score higher on deal-only U~ and lower on S.",
                     est)


def table1(contrasts: pd.DataFrame, est: pd.DataFrame, params: Params, paper: PaperReported) -> BookTable:
    """Table 1: per size, 3×LR S and the paired differences (shared − base, 3× − base, 3× − shared)."""
    look, elook = contrast_lookup(contrasts), estimate_lookup(est)
    rows = []
    for g in params.design.sizes:
        p = paper.get("table1", g.paper, default={}) or {}

        def pc(key: str, p: Mapping = p) -> str:
            return fmt_paper(p.get(key), signed=True, mark=p.get(f"{key}_mark", "")) if key in p else DASH

        rows.append({
            "size": g.label, "arms": _roles(g),
            "3×LR S": _e(elook, g.lr3, "score", ci=False),
            "shared − base": _c(look, g.shared, g.base), "3×LR − base": _c(look, g.lr3, g.base),
            "3×LR − shared (early ckpt)": _c(look, g.lr3, g.shared_early),
            "3×LR − shared (final)": _c(look, g.lr3, g.shared),
            "paper: size": paper.get("sizes", g.paper, "label", default=DASH) if g.paper else DASH,
            "paper: 3×LR S": fmt_paper(p.get("lr3_score")), "paper: shared − base": pc("shared_minus_base"),
            "paper: 3×LR − base": pc("lr3_minus_base"),
            "paper: 3×LR − shared (early)": pc("lr3_minus_shared_early"),
            "paper: 3×LR − shared (@104)": pc("lr3_minus_shared") + (" †" if p.get("dagger") else "")})
    return BookTable("table1", "Table 1: paired gains by size and learning rate", _frame(rows, "size"),
                     "Pointwise 95% seed-cluster bootstrap intervals on within-scenario paired differences. "
                     "* survives Holm correction over the profile's prespecified primary family; e marks an "
                     "exploratory, unadjusted interval excluding zero.", contrasts)


def _roles(g: SizeGroup) -> str:
    parts = [f"{ROLE_LABELS[r]}={getattr(g, r)}" for r in ROLE_LABELS if getattr(g, r)]
    return "; ".join(parts)


RECIPES = (("shared", "Shared LR"), ("lr3", "3× LR"), ("lr10", "10× LR"))


def table2(decomp: pd.DataFrame, opens: Mapping[str, float] | None, params: Params, paper: PaperReported,
           with_ci: bool = False) -> BookTable:
    """Table 2 (``with_ci=False``) or Table 9: opening and decomposition descriptors per recipe and size.

    ``decomp``: :func:`decomposition` rows; ``opens``: arm -> share of episodes whose seller names
    >= 1 domain term at turn 1 (from :mod:`negolib.diagnostics`), or None.
    """
    look = contrast_lookup(decomp)
    rows = []
    for role, rlabel in RECIPES:
        for g in params.design.sizes:
            arm = getattr(g, role)
            if not arm:
                continue
            p = paper.get("table2", role, g.paper, default={}) or {}

            def cell(metric: str, a: str = arm, b: str = g.base) -> str:
                r = look.get((a, b, metric))
                if r is None:
                    return DASH
                lo, hi = (r["ci_low"], r["ci_high"]) if with_ci else (None, None)
                return fmt_ci(r["estimate"], lo, hi, 3, signed=True, mark=r.get("mark", ""))

            def pcell(key: str, p: Mapping = p) -> str:
                v = p.get(key)
                if v is None:
                    return DASH
                mark = "e" if (v[1] > 0 or v[2] < 0) else ""
                return fmt_ci(v[0], v[1] if with_ci else None, v[2] if with_ci else None, 3, signed=True, mark=mark)

            ob, oa = (opens or {}).get(g.base), (opens or {}).get(arm)
            n = look.get((arm, g.base, "welfare"), {}).get("n_episodes")
            rows.append({"recipe": rlabel, "size": g.label, "arm": arm,
                         "opens with terms (base → arm)": f"{fmt_pct(ob)} → {fmt_pct(oa)}",
                         "both closed (n)": n if n is not None else DASH,
                         "Δ seller U~ distributive": cell("seller_distributive"),
                         "Δ seller U~ integrative": cell("seller_integrative"),
                         "Δ buyer U~": cell("buyer_utility"), "Δ joint welfare": cell("welfare"),
                         "paper: size": paper.get("sizes", g.paper, "label", default=DASH) if g.paper else DASH,
                         "paper: opens (base → arm)": (f"{fmt_pct(p['opens_base'])} → {fmt_pct(p['opens_arm'])}"
                                                       if p else DASH),
                         "paper: Δ distributive": pcell("d_seller_distributive"),
                         "paper: Δ integrative": pcell("d_seller_integrative"),
                         "paper: Δ buyer U~": pcell("d_buyer_utility"), "paper: Δ welfare": pcell("d_welfare")})
    name, title = ("table9", "Table 9: Table 2 with every paired interval") if with_ci else \
        ("table2", "Table 2: what the trained sellers do differently (post hoc)")
    df = _frame(rows)
    if not df.empty:
        df = df.set_index(["recipe", "size"])
    return BookTable(name, title, df,
                     "Δ columns: paired differences from the same-size base over scenarios both arms closed "
                     "(exploratory; e marks a 95% seed-cluster interval excluding zero). U~ splits exactly by "
                     "term into distributive (continuous) and integrative (categorical, binary) parts.", decomp)


def table5(est: pd.DataFrame, split: pd.DataFrame | None, group: SizeGroup, params: Params,
           paper: PaperReported) -> BookTable:
    """Table 5: guards at one size (S, deal rate, deal-only U~, seller bad-parse, turns, buyer split)."""
    look = estimate_lookup(est)
    slook = estimate_lookup(split) if split is not None else {}
    arms = [getattr(group, r) for r in ("base", "shared_early", "shared", "lr3", "lr10") if getattr(group, r)]
    arms += [a for a in group.extra if a not in arms]
    rows = []
    for arm in arms:
        if (arm, "score") not in look:
            continue
        p = paper.arm(_paper_ref(params, arm))
        rows.append({"arm": arm, "seller": _arm_label(params, arm), "S": _e(look, arm, "score", ci=False),
                     "deal rate": _e(look, arm, "deal_rate", ci=False),
                     "deal-only U~": _e(look, arm, "deal_utility", ci=False),
                     "bad-parse (seller turns)": _e(look, arm, "seller_bad_parse_rate", 4, ci=False),
                     "turns": _e(look, arm, "mean_turns", 2, ci=False),
                     "buyer split": fmt_num(slook.get((arm, "buyer_split"), {}).get("estimate"), 3, True),
                     "paper: arm": paper.arm_label(_paper_ref(params, arm)), "paper: S": fmt_paper(p.get("score")),
                     "paper: deal rate": fmt_paper(p.get("deal_rate")),
                     "paper: deal-only U~": fmt_paper(p.get("deal_utility")),
                     "paper: bad-parse (seller)": fmt_paper(p.get("seller_bad_parse_rate"), 4),
                     "paper: turns": fmt_paper(p.get("mean_turns"), 2),
                     "paper: buyer split": fmt_paper(p.get("buyer_split"), signed=True)})
    a, b = (params.design.buyer_split + ["A", "B"])[:2]
    return BookTable("table5", f"Table 5: guards at {group.label}", _frame(rows, "arm"),
                     f"Prespecified guards: deal rate holds while U~ rises, flat seller parse-failure rate, turns "
                     f"below the cap; post hoc: buyer split = S vs {a} minus S vs {b} (paper: S vs GPT-5.6-Terra "
                     "minus S vs Claude Sonnet 5).", est)


def guards_frame(an: Analysis, pairs: Sequence[tuple[str, str]]) -> pd.DataFrame:
    """The four prespecified guards (:func:`negolib.diagnostics.guards_table`) of each (arm, base)
    pair, on the seeds both played, with paired seed-cluster intervals."""
    frames = []
    for arm, base in pairs:
        if an.has(arm) and an.has(base):
            sub, res = an.pair_frame(arm, base)
            frames.append(guards_table(sub, base, arm, res, alpha=an.alpha))
    return pd.concat(frames, ignore_index=True) if frames else pd.DataFrame()


def openings_book_table(openings: pd.DataFrame, params: Params, paper: PaperReported) -> BookTable:
    """Section 5: per arm, the share opening with terms, terms named, the opening's score if accepted,
    and the deals those openings led to (:func:`negolib.diagnostics.openings_table`); paper beside."""
    if openings.empty:
        return BookTable("openings", "Openings (§5)", openings)
    rows = []
    for r in openings.to_dict("records"):
        p = paper.get("openings", _paper_ref(params, r["arm"]) or "", default={}) or {}
        rows.append({"arm": r["arm"], "episodes": r["n_episodes"], "opens with terms": fmt_pct(r["opens_with_terms"]),
                     "terms named": fmt_num(r["mean_terms_named"], 1), "share of terms": fmt_pct(r["mean_terms_share"]),
                     "opening score": fmt_num(r["opening_score"]), "deal − opening": fmt_num(r["deal_minus_opening"],
                                                                                           signed=True),
                     "paper: opens with terms": fmt_pct(p.get("opens_with_terms")),
                     "paper: terms named": fmt_num(p.get("mean_terms_named"), 1),
                     "paper: opening score": fmt_num(p.get("opening_score")),
                     "paper: deal − opening": fmt_num(p.get("deal_minus_opening"), signed=True)})
    return BookTable("openings", "Openings: naming terms at turn 1 (§5, post hoc)", _frame(rows, "arm"),
                     "Among openings that name terms: how many, the seller's U~ if the opening were accepted as "
                     "it stands, and the deals those episodes reached minus that score.", openings)


def table6(voice: Mapping[str, float], params: Params, paper: PaperReported) -> BookTable:
    """Table 6: buyer's-voice opener rate on the held-out car domain, per arm (one detector)."""
    rows = []
    for arm in params.arms:
        if arm not in voice:
            continue
        ref = _paper_ref(params, arm)
        rows.append({"arm": arm, "seller": _arm_label(params, arm), "buyer's-voice openers (car)": fmt_pct(voice[arm]),
                     "paper: arm": paper.arm_label(ref),
                     "paper: rate": fmt_pct(paper.arm(ref).get("buyer_voice_car"))})
    return BookTable("table6", "Table 6: buyer's-voice opener rate on the held-out car domain", _frame(rows, "arm"),
                     "Only within-table comparisons are meaningful: absolute rates depend on the detector's breadth.")


def table7(est: pd.DataFrame, serving: Mapping[str, Mapping[str, Any]], params: Params,
           paper: PaperReported) -> BookTable:
    """Table 7: score beside what it took to serve (ours: parameters, memory, device)."""
    look = estimate_lookup(est)
    prow = {r["arm"]: r for r in (paper.get("table7", default=[]) or [])}
    rows = []
    for arm in params.arms:
        if (arm, "score") not in look:
            continue
        s = serving.get(arm, {})
        p = prow.get(_paper_ref(params, arm) or "", {})
        rows.append({"arm": arm, "seller": _arm_label(params, arm), "parameters": _fmt_count(s.get("params")),
                     "weights (GB)": fmt_num(s.get("gb"), 2), "device": s.get("device", DASH),
                     "S": _e(look, arm, "score", ci=False),
                     "paper: seller": p.get("label", DASH), "paper: effective / total": p.get("params") or DASH,
                     "paper: accelerators (48 GB)": p.get("accelerators") or DASH,
                     "paper: GB served": p.get("gb_served") or DASH, "paper: S": fmt_paper(p.get("score"))})
    return BookTable("table7", "Table 7: score beside serving footprint", _frame(rows, "arm"),
                     "We do not benchmark throughput or latency; scripted arms need no accelerator.")


def heldout_table(contrasts: pd.DataFrame, params: Params, paper: PaperReported) -> BookTable:
    """App. C: paired gains over the same-size base on the held-out domain, beside the paper's."""
    look = contrast_lookup(contrasts)
    rows = []
    for g in params.design.sizes:
        for role in ("shared", "lr3", "lr10"):
            arm = getattr(g, role)
            if not arm:
                continue
            key = {"shared": "shared_minus_base", "lr3": "lr3_minus_base"}.get(role)
            pv = paper.get("held_out", key, g.paper) if key and g.paper else None
            rows.append({"size": g.label, "recipe": ROLE_LABELS[role], "arm": arm,
                         "held-out gain over base": _c(look, arm, g.base),
                         "paper: held-out gain": fmt_paper(pv, signed=True)})
    return BookTable("heldout", "Held-out panel (App. C): gains over base on the car domain", _frame(rows),
                     f"paper: at n=128 a 95% interval has a half-width of about ±"
                     f"{paper.get('held_out', 'half_width_n128', default=0.03)}.", contrasts)


def frontier_table(contrasts: pd.DataFrame, params: Params, paper: PaperReported) -> BookTable:
    """Section 5: trained sellers against the frontier (or other reference) sellers (exploratory)."""
    look = contrast_lookup(contrasts)
    ptext = paper.get("contrasts", default={}) or {}
    rows = []
    for g in params.design.sizes:
        for role in ("lr3", "shared", "base"):
            arm = getattr(g, role)
            for f in params.design.frontier:
                if not arm or (arm, f, "score") not in look:
                    continue
                ref, fref = _paper_ref(params, arm), _paper_ref(params, f)
                pv = ptext.get(f"{ref}_minus_{fref}".replace("_56_minus", "_minus")) if ref and fref else None
                rows.append({"seller": arm, "reference": f, "difference in S": _c(look, arm, f),
                             "paper: difference": fmt_paper(pv, signed=True)})
    return BookTable("frontier", "Reference-seller contrasts (exploratory, unadjusted)", _frame(rows), "", contrasts)


def efficiency_table(eff: pd.DataFrame, params: Params | None = None) -> BookTable:
    """Beyond the paper: Pareto and Nash efficiency per arm (the paper computed none, App. K)."""
    df = eff.copy()
    if not df.empty:
        df = df.set_index("arm")
        df.insert(0, "seller", [_arm_label(params, a) for a in df.index])
        df = df.round(4)
    df["paper: value"] = "not computed (App. K)"
    return BookTable("efficiency", "Deal efficiency: Pareto frontier, Nash and Kalai points (beyond the paper)", df,
                     "Means over deals. Distances are Euclidean in (seller U~, buyer U~); welfare ratio = joint "
                     "welfare / the scenario's maximum.", eff)


def cost_by_arm(frame: pd.DataFrame, params: Params, api_models: Mapping[str, str],
                unpriced: Sequence[str] = ()) -> pd.DataFrame:
    """Per arm from :func:`negolib.cost.cost_frame`: who is billed, tokens and USD per episode.

    USD is shown only when every API party of the arm's episodes has a price (``unpriced`` lists
    API models without one); scripted and self-served parties are never billed."""
    rows = []
    for arm, g in frame.groupby("arm", sort=False):
        parties = set(g["seller"]) | set(g["buyer"])
        api = {api_models[p] for p in parties if p in api_models}
        missing = sorted(api & set(unpriced))
        lm = params.is_lm(arm) if arm in params.arms else False
        billing = "API" if api else ("self-served LM" if lm else "scripted")
        n = len(g)
        tin = (g["seller_input_tokens"] + g["buyer_input_tokens"]).sum() / n
        tout = (g["seller_output_tokens"] + g["buyer_output_tokens"]).sum() / n
        usd = DASH if not api else (f"no price for {', '.join(missing)}" if missing else f"{g['usd'].sum() / n:.4f}")
        rows.append({"arm": arm, "billed": billing, "episodes": n, "input tokens / episode": round(tin, 1),
                     "output tokens / episode": round(tout, 1), "USD / episode": usd})
    return pd.DataFrame(rows).set_index("arm") if rows else pd.DataFrame()


def cost_table(costs: pd.DataFrame, paper: PaperReported) -> BookTable:
    """Cost per episode by arm (tokens from transcripts; USD where a price is configured)."""
    df = costs.copy()
    ref = paper.get("cost", "usd_per_frontier_episode")
    df["paper: USD / frontier-seller episode"] = fmt_num(ref, 3) if ref is not None else DASH
    c = paper.get("cost", default={}) or {}
    return BookTable("cost", "Cost per episode (App. G)", df,
                     "Tokens are summed from the transcripts (both parties); USD only where params.prices lists "
                     f"the model. paper: ${c.get('usd_per_frontier_episode')} per frontier-seller episode, the mean "
                     f"over {c.get('frontier_cells')} cells ({c.get('input_tokens_m')}M input and "
                     f"{c.get('output_tokens_m')}M output tokens), both sides billed at list prices.", costs)


def training_summary(logs: Mapping[tuple[str, int], pd.DataFrame],
                     validation: Mapping[tuple[str, int], pd.DataFrame] | None = None,
                     n_params: Mapping[str, float] | None = None) -> pd.DataFrame:
    """One row per (run, seed) from its step logs: steps, reward / KL / entropy first -> last,
    validation S first -> last, wall time, and training FLOPs (App. I: 2 N D_gen + 6 N D_train from
    the logged token counts) when ``n_params[run]`` is known."""
    def arrow(df: pd.DataFrame, col: str, digits: int = 3) -> str:
        if df is None or df.empty or col not in df or df[col].notna().sum() == 0:
            return DASH
        v = df[col].dropna()
        return f"{v.iloc[0]:.{digits}f} → {v.iloc[-1]:.{digits}f}"

    rows = []
    for (run, seed), log in logs.items():
        if log.empty:
            continue
        last = log.iloc[-1]
        val = (validation or {}).get((run, seed), pd.DataFrame())
        row = {"run": run, "seed": seed, "steps": int(last.get("step", len(log))),
               "reward": arrow(log, "reward"), "score S": arrow(log, "score"), "deal rate": arrow(log, "deal_rate"),
               "KL (k3)": arrow(log, "kl", 4), "entropy": arrow(log, "entropy"),
               "validation S": arrow(val, "score"), "wall time (s)": fmt_num(last.get("wall_time_s"), 0)}
        n = (n_params or {}).get(run)
        if n and {"tokens_generated", "tokens_trained"} <= set(log.columns):
            fl = flops_from_log(log.to_dict("records"), n)
            row["training FLOPs"] = f"{fl[-1]['cum_flops']:.3g}" if fl else DASH
        rows.append(row)
    return pd.DataFrame(rows).set_index(["run", "seed"]) if rows else pd.DataFrame()


STYLE_PAPER_KEYS = (("top_opener_share", "top_opener_share"), ("top3_share", "top3_opener_share"),
                    ("repeated_opener_rate", "repeated_opener_rate"), ("i_appreciate_rate", "i_appreciate_rate"),
                    ("json_leak_rate", "json_leak_rate"), ("concession_naming_rate", "closing_names_concession"))


def style_diag_table(style: pd.DataFrame, params: Params, paper: PaperReported) -> BookTable:
    """App. E style diagnostics per arm (:func:`negolib.diagnostics.style_table`), with the paper's
    values for the arms it reports them for (31B and 12B 3× LR, 10× LR, ...)."""
    if style.empty:
        return BookTable("style", "Style diagnostics (App. E)", style)
    df = style.set_index("arm").copy()
    shares = [c for c in df.columns if c.endswith(("_share", "_rate", "_opening"))]
    for c in shares:
        df[c] = df[c].map(fmt_pct)
    for ours, theirs in STYLE_PAPER_KEYS:
        df[f"paper: {ours}"] = [fmt_pct(paper.get("style", _paper_ref(params, a) or "", theirs)) for a in df.index]
    df = df.loc[:, [c for c in df.columns if not c.startswith("paper:") or (df[c] != DASH).any()]]
    return BookTable("style", "Style diagnostics of the sellers' prose (App. E, post hoc)", df,
                     "Over the seller's turns with prose: opener = first three words; repeated-opener rate = "
                     "openers reused within an episode; JSON leakage = action fragments in the prose.", style)


def table6_from_style(style_car: pd.DataFrame, params: Params, paper: PaperReported) -> BookTable:
    """Table 6 from :func:`negolib.diagnostics.style_table` over the held-out domain's records."""
    voice = {} if style_car.empty else dict(zip(style_car["arm"], style_car["buyer_voice_opening"]))
    return table6(voice, params, paper)


def training_table(summary: pd.DataFrame, paper: PaperReported) -> BookTable:
    """App. D: per training run, logged KL (k3), entropy start -> end, reward, validation; paper beside."""
    df = summary.copy()
    kl = paper.get("training", "kl_end_of_continuation", default={}) or {}
    ent = paper.get("training", "entropy_continuation", default={}) or {}
    df["paper: KL at end (2.3B / 4.5B / 12B / 31B)"] = " / ".join(f"{kl[k]:g}" for k in kl) or DASH
    df["paper: entropy start → end (2.3B)"] = fmt_paper(ent.get("E2B"))
    return BookTable("training", "Training diagnostics (App. D)", df,
                     "Logged k3 KL to the initial policy and policy entropy from the run logs.", summary)


# ---------------------------------------------------------------------------------------------
# Beyond the paper (09)
# ---------------------------------------------------------------------------------------------

def scripted_baselines_table(res: Results) -> BookTable:
    """Rows: scripted sellers (S on the scenarios they played); columns: each language-model arm's
    paired difference in S against that seller on the scenarios both played."""
    p = res.params
    lm = [a for a in res.arms if p.is_lm(a)]
    scripted = [a for a in res.arms if not p.is_lm(a)]
    look, est = contrast_lookup(run_pairs(res.an, [(m, s) for m in lm for s in scripted])), estimate_lookup(res.est)
    rows = []
    for s in scripted:
        row = {"scripted seller": s, "label": p.arms[s].label, "S": _e(est, s, "score")}
        row.update({f"{m} − it": _c(look, m, s) for m in lm})
        rows.append(row)
    df = _frame(rows, "scripted seller")
    df["paper: value"] = "not run (App. A)"
    return BookTable("scripted_baselines", "Scripted baseline sellers against the language-model arms", df,
                     "ΔS columns: the language-model arm minus the scripted seller, paired on shared scenarios "
                     "(positive: the LM arm scores more). The paper ran no scripted seller.")


def turn_order_table(an: Analysis, variants: Sequence[str], suffix: str = ".buyer_opens") -> BookTable:
    """S with the buyer opening minus S with the seller opening, per seller (paired by scenario)."""
    look = contrast_lookup(run_pairs(an, [(v, v[: -len(suffix)]) for v in variants]))
    rows = [{"seller": v[: -len(suffix)], "S (buyer opens) − S (seller opens)": _c(look, v, v[: -len(suffix)]),
             "episodes": look.get((v, v[: -len(suffix)], "score"), {}).get("n_episodes", DASH)} for v in variants]
    df = _frame(rows, "seller")
    df["paper: value"] = "untested: the seller always opens (App. A)"
    return BookTable("buyer_opens", "Turn order: the buyer opens", df, "Paired by scenario and buyer.")


def fixed_openings_table(an: Analysis, params: Params, arms: Sequence[str],
                         opens: Mapping[str, float] | None = None) -> BookTable:
    """Each fixed-opening arm against its inner seller opening freely (ΔS, paired) and the share of
    episodes opening with terms (fixed / free)."""
    pairs = [(a, params.arms[a].inner or "") for a in arms]
    look = contrast_lookup(run_pairs(an, pairs))
    o = opens or {}
    rows = [{"arm": a, "opening": params.arms[a].opening, "free seller": b, "ΔS (fixed − free)": _c(look, a, b),
             "opens with terms (fixed / free)": f"{fmt_pct(o.get(a))} / {fmt_pct(o.get(b))}"} for a, b in pairs]
    df = _frame(rows, "arm")
    df["paper: value"] = "not run (App. A)"
    return BookTable("fixed_openings", "Fixed openings against the free-opening seller", df,
                     "Does the opening cause the score? The same seller, its first turn fixed.")


def seeds_scaffold_table(res: Results) -> BookTable:
    """Trained arms of runs with several seeds or trained on the evaluation scaffold, with S [CI]."""
    p, est = res.params, estimate_lookup(res.est)
    rows = []
    for a in res.arms:
        spec = p.arms[a]
        if spec.backend != "trained" or spec.run not in p.training.runs:
            continue
        run = p.training.runs[spec.run]
        if len(run.seeds) > 1 or run.scaffold == "evaluation":
            rows.append({"arm": a, "run": spec.run, "train seed": spec.train_seed if spec.train_seed is not None
                         else run.seeds[0], "training scaffold": run.scaffold, "S": _e(est, a, "score")})
    df = _frame(rows, "arm")
    df["paper: value"] = "one training seed per arm, training scaffold only (App. A)"
    return BookTable("seeds_scaffold", "Training seeds and evaluation-scaffold training", df)


def simple_table(name: str, title: str, frame: pd.DataFrame, caption: str = "",
                 paper_values: Mapping[str, Any] | None = None) -> BookTable:
    """Wrap any frame of ours, optionally adding constant ``paper: <key>`` columns."""
    df = frame.copy()
    for k, v in (paper_values or {}).items():
        df[f"{PAPER}: {k}"] = v if isinstance(v, str) else fmt_paper(v)
    return BookTable(name, title, df, caption)


__all__ = ["Analysis", "BookTable", "DASH", "DECOMP_METRICS", "PaperReported", "ROLE_LABELS", "Results",
           "TABLE3_METRICS", "TABLE4_METRICS", "TABLE5_METRICS", "arm_estimates", "arm_matrix",
           "compute_results", "contrast_lookup", "cost_by_arm", "cost_table", "decomposition",
           "design_contrasts", "design_pairs", "domain_table", "domains_overview", "efficiency_table",
           "estimate_lookup", "fixed_openings_table", "fmt_ci", "fmt_num", "fmt_paper", "fmt_pct",
           "frontier_table", "guards_frame", "heldout_table", "load_paper_reported", "openings_book_table",
           "point_estimates", "recipe_table", "run_pairs", "sampling_table", "scenario_set_table",
           "scripted_baselines_table", "seeds_scaffold_table", "simple_table", "style_diag_table", "table1",
           "table2", "table3", "table4", "table5", "table6", "table6_from_style", "table7", "table8",
           "training_summary", "training_table", "turn_order_table"]
