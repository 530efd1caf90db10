"""Prompt rendering for both scaffolds [paper §3, App. A].

Every word a party reads comes from the Jinja2 templates in this folder; this module only turns a
:class:`~negolib.games.multi_issue.env.PartyView` into template data and assembles chat messages.

* ``training``: a multi-turn chat. System message, then a first user message (private brief and
  the turn-1 instruction; a party that does not open also gets the counterpart's opening prose
  there), then the party's own past raw turns as assistant messages and the counterpart's prose
  alone as user messages. The message list only ever grows by appending, so a training rollout can
  append tokens turn after turn.
* ``evaluation``: system message plus ONE user message re-rendered every turn: brief, the full
  history (prose of both parties), the current offer (ledger), the turn number, the phase
  instruction from ``view.config.converge_from_turn`` on, and a format reminder.

Both give the party its private brief and its reservation value ("any deal that gives you at least
X of your best possible value beats no deal") and never state the turn cap. The system message states the
ACCEPT rule in force (``view.config.accept_needs_offer``): under the paper's an ACCEPT closes the deal; under
ours it closes only on the counterpart's COUNTER, and the prompt says what an ACCEPT at any other time does.

What the counterpart wrote reaches a party only as cleaned prose (:func:`negolib.core.crossing.clean_prose`)
and as ledger values. Contract terms are the environment's canonical values, one ``- name: value``
line each; off-schema names and values, which a party chose freely, are shown through
:func:`negolib.games.multi_issue.protocol.display_text` (one short line, no tags, brackets or quotes) on a separate
"Unrecognised terms (not part of the contract, never counted)" line, at most
:data:`MAX_UNRECOGNISED_SHOWN` of them. That line is ours, beyond the paper (whose ledger holds off-schema names
beside the contract terms, never scored, App. A): it tells both parties such terms do not count. Where the
environment writes lines around the prose (the evaluation history, the training scaffold with
``training_show_ledger``) the prose is kept to one line (:func:`negolib.core.crossing.one_line`, the rule every game's
quoted words follow), so it cannot pass for a ledger line either. The counterpart's raw text and its ``notes``
are never shown.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any

from negolib.core.crossing import one_line
from negolib.games.multi_issue.domains import Domain, Issue
from negolib.games.multi_issue.env import PartyView
from negolib.games.multi_issue.protocol import display_text
from negolib.games.multi_issue.scenarios import other
from negolib.training.config import Scaffold

SCAFFOLDS: tuple[str, ...] = ("training", "evaluation")
TEMPLATE_DIR = Path(__file__).parent
MAX_UNRECOGNISED_SHOWN = 8  # off-schema entries listed to the counterpart; the rest are counted
Message = dict[str, str]


@dataclass(frozen=True)
class PromptConfig:
    """Rendering options. ``template_dir`` swaps in another set of templates (same file names);
    ``training_show_ledger`` appends the current offer to each counterpart message of the training
    scaffold (the paper's training context grows by the counterpart's prose alone: off)."""

    template_dir: Path | None = None
    training_show_ledger: bool = False


def scaffold_names() -> tuple[str, ...]:
    """The selectable scaffolds: ``("training", "evaluation")``."""
    return SCAFFOLDS


@lru_cache(maxsize=8)
def _env(directory: str) -> Any:
    import jinja2

    return jinja2.Environment(loader=jinja2.FileSystemLoader(directory), undefined=jinja2.StrictUndefined,
                              trim_blocks=True, lstrip_blocks=True, autoescape=False,
                              keep_trailing_newline=False)


def _render(config: PromptConfig, name: str, **ctx: Any) -> str:
    text = _env(str(config.template_dir or TEMPLATE_DIR)).get_template(name).render(**ctx)
    text = "\n".join(line.rstrip() for line in text.strip().splitlines())
    return re.sub(r"\n{3,}", "\n\n", text)


def _num(x: float) -> str:
    return f"{x:g}"


def _pct(x: float) -> str:
    p = round(100 * x)
    return "under 1%" if p < 1 else f"{p}%"


def format_value(issue: Issue | None, value: Any) -> str:
    """A ledger value as a party reads it (units for ranged terms, yes/no for binary ones); a value
    named under an off-schema name (``issue`` None) is shown through :func:`display_text`."""
    if issue is None:
        return display_text(value)
    if issue.kind == "continuous" and isinstance(value, (int, float)) and not isinstance(value, bool):
        return f"{_num(float(value))} {issue.unit}".strip()
    if issue.kind == "binary" and isinstance(value, bool):
        return "yes" if value else "no"
    return display_text(value)


def ledger_items(domain: Domain, ledger: Mapping[str, Any]) -> list[dict[str, Any]]:
    """The ledger as template data: schema terms in domain order, then off-schema names.

    Off-schema names and values were written by a party, so both go through :func:`display_text`
    (one line, no tags, brackets or quotes, cut short); the templates set them apart from the
    contract lines. Schema values are the environment's canonical values.
    """
    items = [{"name": i.name, "value": format_value(i, ledger[i.name]), "off_schema": False}
             for i in domain.issues if i.name in ledger]
    known = set(domain.issue_names)
    items += [{"name": display_text(k), "value": format_value(None, v), "off_schema": True}
              for k, v in ledger.items() if k not in known]
    return items


def _ledger_context(domain: Domain, ledger: Mapping[str, Any]) -> dict[str, Any]:
    """What ``ledger.j2`` reads: ``ledger`` (contract lines), ``unrecognised`` (at most
    :data:`MAX_UNRECOGNISED_SHOWN` off-schema entries) and ``unrecognised_more`` (how many are not shown)."""
    items = ledger_items(domain, ledger)
    off = [it for it in items if it["off_schema"]]
    return {"ledger": [it for it in items if not it["off_schema"]],
            "unrecognised": off[:MAX_UNRECOGNISED_SHOWN],
            "unrecognised_more": max(0, len(off) - MAX_UNRECOGNISED_SHOWN)}


def _issues(view: PartyView) -> list[dict[str, Any]]:
    out = []
    for issue, w, sign, pref in zip(view.domain.issues, view.prefs.weights, view.prefs.signs,
                                    view.prefs.preferred):
        entry: dict[str, Any] = {"name": issue.name, "kind": issue.kind, "importance": _pct(w),
                                 "description": issue.description or issue.name.replace("_", " ")}
        if issue.kind == "table":  # an imported issue: its levels with this party's evaluations
            ev = view.prefs.evaluations[len(out)]
            entry.update(levels=list(issue.levels), worth=[f"{lv} {_pct(e) if e > 0 else '0%'}"
                                                            for lv, e in zip(issue.levels, ev)])
        elif issue.kind == "continuous":
            entry.update(lo=_num(issue.lo), hi=_num(issue.hi), unit_text=f" {issue.unit}" if issue.unit else "",
                         direction="higher" if sign > 0 else "lower")
        elif issue.kind == "categorical":
            entry.update(levels=list(issue.levels), preferred=pref)
        else:
            entry.update(preferred="yes" if pref else "no")
        out.append(entry)
    return out


def _context(view: PartyView, scaffold: str) -> dict[str, Any]:
    role, counterpart = view.role, other(view.role)
    return {
        "role": role, "counterpart": counterpart, "scaffold": scaffold,
        "domain_title": view.domain.title, "brief": view.domain.briefs[role],
        "issues": _issues(view), "reservation": _pct(view.prefs.reservation),
        "turn": view.turn, "converge": view.converge, "accept_needs_offer": view.config.accept_needs_offer,
        "opening": view.config.first_mover == role and (scaffold == "training" or view.turn == 1),
        **_ledger_context(view.domain, view.ledger),
    }


def system_message(view: PartyView, config: PromptConfig | None = None) -> str:
    """The system prompt: role, setting and the turn protocol (the same on every turn)."""
    return _render(config or PromptConfig(), "system.j2", **_context(view, "evaluation"))


def _training(view: PartyView, config: PromptConfig) -> list[Message]:
    ctx = _context(view, "training")
    history = list(view.history)

    def reply(h: Any) -> str:
        if not config.training_show_ledger:
            return _render(config, "training_reply.j2", prose=h.prose, ledger=None)
        # the current offer follows the prose: the prose is kept to one line so it cannot fake one
        return _render(config, "training_reply.j2", prose=one_line(h.prose), **_ledger_context(view.domain, h.ledger))

    opening = None
    if history and history[0].role != view.role and not ctx["opening"]:
        opening = reply(history.pop(0))
    messages: list[Message] = [
        {"role": "system", "content": _render(config, "system.j2", **ctx)},
        {"role": "user", "content": _render(config, "training_first.j2", **ctx, counterpart_opening=opening)},
    ]
    for h in history:
        if h.role == view.role:
            messages.append({"role": "assistant", "content": h.raw if h.raw is not None else h.prose})
        else:
            messages.append({"role": "user", "content": reply(h)})
    merged: list[Message] = []  # keep roles alternating if a turn is missing (truncated history)
    for m in messages:
        if merged and merged[-1]["role"] == m["role"] and m["role"] != "system":
            merged[-1] = {"role": m["role"], "content": merged[-1]["content"] + "\n\n" + m["content"]}
        else:
            merged.append(m)
    return merged


def _evaluation(view: PartyView, config: PromptConfig) -> list[Message]:
    ctx = _context(view, "evaluation")
    history = [{"turn": h.turn, "prose": one_line(h.prose) or "(no message)",
                "speaker": "You" if h.role == view.role else h.role.capitalize()} for h in view.history]
    return [
        {"role": "system", "content": _render(config, "system.j2", **ctx)},
        {"role": "user", "content": _render(config, "evaluation.j2", **ctx, history=history)},
    ]


def render_messages(view: PartyView, scaffold: Scaffold, config: PromptConfig | None = None) -> list[Message]:
    """Chat messages ``[{"role": ..., "content": ...}]`` for ``view`` under ``scaffold``."""
    if scaffold not in SCAFFOLDS:
        raise ValueError(f"unknown scaffold {scaffold!r}; choose from {SCAFFOLDS}")
    cfg = config or PromptConfig()
    return _training(view, cfg) if scaffold == "training" else _evaluation(view, cfg)


__all__ = ["PromptConfig", "SCAFFOLDS", "Scaffold", "format_value", "ledger_items", "render_messages",
           "scaffold_names", "system_message"]
