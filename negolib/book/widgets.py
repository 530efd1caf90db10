"""The two interactive tools of notebook 01: an episode explorer and a play-as-the-buyer game.

``EpisodeExplorer`` plays one evaluation episode of a profile (domain, seed, seller, buyer) and steps
through its turns. ``BuyerSession`` lets a person play the buyer against a configured seller: the
programmatic API is :meth:`BuyerSession.buyer_turn`; its widget offers one control per schema term
of the scenario's domain (a slider within the term's range for a continuous term, a dropdown of its
levels for a categorical or binary one) with an *include* box each, so a COUNTER names exactly the
terms the buyer ticked and no typo can put an off-schema term on the ledger. :func:`counter_terms`
is the pure mapping from the controls to the COUNTER's terms.

ipywidgets and IPython are imported inside the widget methods: importing this module is cheap and
the headless APIs (``play``, ``turn``, ``buyer_turn``) run without them.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from negolib.agents.factory import ModelCache
from negolib.games.multi_issue.domains import Domain, Issue, get_domain, load_domains
from negolib.games.multi_issue.env import EnvConfig, Episode
from negolib.games.multi_issue.protocol import canonical_value
from negolib.games.multi_issue.record_scenarios import RecordScenarios
from negolib.games.multi_issue.rollout import EpisodeSpec, play_one
from negolib.games.multi_issue.scenarios import Scenario, make_scenario
from negolib.games.multi_issue.scripted import STRATEGIES, make_scripted
from negolib.games.multi_issue.utility import both_utilities, contributions
from negolib.profile_genius import imported_scenarios
from negolib.study.runs import build_agent

if TYPE_CHECKING:
    from negolib.book.context import Book

# CSS classes the widgets carry (the browser test finds its elements by them).
CSS_PREFIX = "negobook"


# ---------------------------------------------------------------------------------------------
# Pure helpers: the ledger table, and the per-term controls' values and resolution
# ---------------------------------------------------------------------------------------------

def ledger_table(scenario: Any, ledger: dict[str, Any], show_seller: bool = True) -> Any:
    """The ledger as a table: every schema term, its value ('' if unnamed) and each party's
    contribution w_k (phi_k + 1)/2 to U~ (the seller's column only with ``show_seller``)."""
    import pandas as pd

    d = scenario.domain
    sc, bc = contributions(d, scenario.seller, ledger), contributions(d, scenario.buyer, ledger)
    rows = []
    for k, issue in enumerate(d.issues):
        row: dict[str, Any] = {"term": issue.name, "value": ledger.get(issue.name, ""),
                               "buyer contribution": round(float(bc[k]), 3)}
        if show_seller:
            row["seller contribution"] = round(float(sc[k]), 3)
        rows.append(row)
    off = [k for k in ledger if k not in d.issue_names]
    rows += [{"term": f"{k} (off-schema)", "value": ledger[k], "buyer contribution": 0.0,
              **({"seller contribution": 0.0} if show_seller else {})} for k in off]
    return pd.DataFrame(rows).set_index("term")


def term_step(issue: Issue) -> float:
    """The resolution of a continuous term's control: about 1/200 of its range, rounded up to
    1, 2 or 5 times a power of ten (0.1 for a $28k-$48k price, 0.2 for 0-24 months)."""
    span = issue.hi - issue.lo
    if not span > 0:
        return 1.0
    raw = span / 200
    exp = math.floor(math.log10(raw))
    for m in (1, 2, 5, 10):
        step = float(f"{m}e{exp}")
        if step >= raw * (1 - 1e-9):
            return step
    return float(f"1e{exp + 1}")  # unreachable: 10 x 10^exp >= raw


def _decimals(step: float) -> int:
    """Decimal places that show a multiple of ``step`` exactly (0 for steps of 1 and above)."""
    return max(0, -math.floor(math.log10(step) + 1e-9))


def _is_level(value: Any, levels: Sequence[Any]) -> bool:
    """Whether ``value`` is one of ``levels`` (``1`` is not the level ``True``)."""
    return any(type(value) is type(level) and value == level for level in levels)


def initial_values(domain: Domain, ledger: Mapping[str, Any],
                   preferred: Sequence[Any] | None = None) -> dict[str, Any]:
    """A starting value per schema term for the buyer's controls: the ledger's value when the
    ledger names the term (a continuous value clamped to the term's range), otherwise the middle
    of a continuous term's range and, for a level, the buyer's preferred level (else the first)."""
    prefs = list(preferred) if preferred is not None else [None] * len(domain.issues)
    values: dict[str, Any] = {}
    for issue, pref in zip(domain.issues, prefs):
        ok, v = canonical_value(issue, ledger[issue.name]) if issue.name in ledger else (False, None)
        if issue.kind == "continuous":
            x = min(max(float(v), issue.lo), issue.hi) if ok else (issue.lo + issue.hi) / 2
            values[issue.name] = round(x, _decimals(term_step(issue)))
        else:
            values[issue.name] = v if ok else (pref if _is_level(pref, issue.levels) else issue.levels[0])
    return values


def counter_terms(domain: Domain, values: Mapping[str, Any], included: Iterable[str]) -> dict[str, Any]:
    """The terms of the buyer's COUNTER from the per-term controls: exactly the ``included`` terms,
    in schema order, each with its control's value (a continuous one rounded to the control's step).

    Raises ``ValueError`` for an included name that is not a term of ``domain`` (the widget has a
    control only for schema terms, so it never sends one), an included term without a value, and a
    value the term cannot take: a continuous value that is not a finite number in the term's range,
    or a value that is not one of a categorical or binary term's levels.
    """
    wanted = set(included)
    unknown = sorted(wanted - set(domain.issue_names))
    if unknown:
        raise ValueError(f"not terms of the {domain.name} schema: {', '.join(unknown)}")
    terms: dict[str, Any] = {}
    for issue in domain.issues:
        if issue.name not in wanted:
            continue
        if issue.name not in values:
            raise ValueError(f"no value for {issue.name}")
        v = values[issue.name]
        if issue.kind == "continuous":
            if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v):
                raise ValueError(f"{issue.name} needs a number, not {v!r}")
            tol = 1e-9 * max(1.0, issue.hi - issue.lo)
            if not issue.lo - tol <= v <= issue.hi + tol:
                raise ValueError(f"{issue.name} = {v:g} is outside its range {issue.lo:g}-{issue.hi:g} {issue.unit}")
            x = round(float(v), _decimals(term_step(issue)))
            terms[issue.name] = min(max(x, issue.lo), issue.hi)
        else:
            if not _is_level(v, issue.levels):
                raise ValueError(f"{issue.name} = {v!r} is not one of its levels {list(issue.levels)}")
            terms[issue.name] = v
    return terms


def _action_text(t: Any, show_terms: bool = True) -> str:
    """A turn's action as one short phrase: ``COUNTER price=38, service=annual`` (``COUNTER`` without
    ``show_terms``: a party never sees its counterpart's JSON, only the prose and the ledger),
    ``ACCEPT``, ``invalid ACCEPT`` or ``bad parse``."""
    if getattr(t, "invalid_accept", False):
        return "invalid ACCEPT"
    act = t.action or {}
    kind = act.get("action")
    if not kind:
        return "bad parse"
    if kind == "COUNTER" and show_terms:
        named = ", ".join(f"{x.get('name')}={x.get('value')}" for x in act.get("terms", []))
        text = f"COUNTER {named}" if named else "COUNTER (no terms)"
        if t.off_schema_terms:
            text += f" [off-schema: {', '.join(t.off_schema_terms)}]"
        return text
    return kind


# ---------------------------------------------------------------------------------------------
# The episode explorer
# ---------------------------------------------------------------------------------------------

class EpisodeExplorer:
    """Play one episode of a profile (domain, seed, seller arm, buyer) and step through its turns.

    ``scenarios``: imported scenarios by domain name (default: the profile's ``evaluation.genius``), so an
    imported domain plays, and its records step through, its own fixed preferences."""

    def __init__(self, book: Book, cache: Any = None, scenarios: Mapping[str, Scenario] | None = None) -> None:
        self.book, self.cache = book, cache or ModelCache()
        self._agents: dict[str, Any] = {}
        self.scenarios = RecordScenarios(imported_scenarios(getattr(book.params.evaluation, "genius", None))
                                         if scenarios is None else scenarios)

    def agent(self, name: str) -> Any:
        """A party of the profile by name, or a scripted strategy by its name (``hardheaded``, ...)."""
        if name not in self._agents:
            p = self.book.params
            if name not in p.arms and name not in p.buyers:
                self._agents[name] = make_scripted(name, seed=p.seed)
            else:
                role = "seller" if name in p.arms else "buyer"
                self._agents[name] = build_agent(name, p.agent(name), p.seed, params=p, cache=self.cache,
                                                 role=role)
        return self._agents[name]

    def demo_parties(self) -> tuple[str, str]:
        """(seller, buyer) that play on any machine: the profile's scripted ones, else scripted strategies."""
        p = self.book.params
        scripted = [a for a in p.arms if p.arms[a].backend == "scripted"]
        seller = "hardheaded" if "hardheaded" in scripted else (scripted[0] if scripted else "hardheaded")
        buyers = [b for b in p.evaluation.buyers if p.buyers[b].backend == "scripted"]
        return seller, (buyers[0] if buyers else "linear")

    def play(self, domain: str, seed: int, seller: str, buyer: str) -> dict[str, Any]:
        """The transcript record of one freshly played evaluation episode."""
        ev = self.book.params.evaluation
        cfg = EnvConfig(max_rounds=ev.max_rounds, first_mover=ev.first_mover, accept_needs_offer=ev.accept_needs_offer)
        spec = EpisodeSpec(seller, seller, buyer, self.scenarios.scenario(domain, int(seed)), cfg)
        return play_one(spec, {seller: self.agent(seller), buyer: self.agent(buyer)})

    def turn(self, record: dict[str, Any], k: int) -> tuple[dict[str, Any], Any]:
        """(turn k's record, the ledger table after it, in the record's scenario) for 1 <= k <= number of turns."""
        t = record["turns"][k - 1]
        self.scenarios.require([record["domain"]], "EpisodeExplorer.turn")
        return t, ledger_table(self.scenarios.scenario(record["domain"], int(record["seed"])), t["ledger"])

    def widget(self, domain: str = "car", seed: int = 5_000_053, seller: str | None = None,
               buyer: str | None = None) -> Any:
        """ipywidgets UI: pick domain, seed, seller, buyer; play; step through turns."""
        import ipywidgets as w
        from IPython.display import display

        p = self.book.params
        demo_seller, demo_buyer = self.demo_parties()
        sellers = list(dict.fromkeys([*p.arms, *STRATEGIES]))
        buyers = list(dict.fromkeys([*p.buyers, *STRATEGIES]))
        dd = w.Dropdown(options=[*load_domains(), *self.scenarios.imported], value=domain, description="domain")
        sd = w.BoundedIntText(value=seed, min=0, max=10**9, description="seed")
        sl = w.Dropdown(options=sellers, value=seller or demo_seller, description="seller")
        by = w.Dropdown(options=buyers, value=buyer or demo_buyer, description="buyer")
        go = w.Button(description="play episode", button_style="primary")
        step = w.IntSlider(value=1, min=1, max=1, description="turn")
        out = w.Output()
        go.add_class(f"{CSS_PREFIX}-play")
        step.add_class(f"{CSS_PREFIX}-step")
        out.add_class(f"{CSS_PREFIX}-explorer-out")
        state: dict[str, Any] = {}

        def show(_: Any = None) -> None:
            rec = state.get("record")
            if rec is None:
                return
            t, table = self.turn(rec, step.value)
            su, bu = both_utilities(self.scenarios.scenario(rec["domain"], int(rec["seed"])), t["ledger"])
            out.clear_output(wait=True)
            with out:
                act = (t["action"] or {}).get("action") or f"bad parse ({t['parse_error']})"
                print(f"turn {t['turn']} ({t['role']}): {act}")
                print(f"prose: {t['prose']}")
                print(f"ledger after the turn: seller U~ = {su:.3f}, buyer U~ = {bu:.3f}")
                display(table)
                if step.value == len(rec["turns"]):
                    o = rec["outcome"]
                    print(f"outcome: {'deal' if o['deal'] else 'no deal'}, S = {o['score']:.3f}, "
                          f"reward = {o['reward']:.3f}")

        def play(_: Any = None) -> None:
            state["record"] = self.play(dd.value, sd.value, sl.value, by.value)
            n = len(state["record"]["turns"])
            step.unobserve(show, names="value")
            step.max, step.value = n, n  # one redraw below, not one per trait change
            step.observe(show, names="value")
            show()

        go.on_click(play)
        step.observe(show, names="value")
        play()
        box = w.VBox([w.HBox([dd, sd]), w.HBox([sl, by, go]), step, out])
        box.add_class(f"{CSS_PREFIX}-explorer")
        return box


# ---------------------------------------------------------------------------------------------
# Play the buyer
# ---------------------------------------------------------------------------------------------

@dataclass
class BuyerControls:
    """The parts of a :meth:`BuyerSession.widget`: per schema term a value control and an include
    box (both keyed by the term's name, in schema order), the prose box, the two buttons, the
    status line, the transcript output and the whole box."""

    values: dict[str, Any]
    include: dict[str, Any]
    prose: Any
    counter: Any
    accept: Any
    status: Any
    out: Any
    box: Any

    def included(self) -> list[str]:
        """The names of the ticked terms, in schema order."""
        return [name for name, box in self.include.items() if box.value]


class BuyerSession:
    """Play the buyer against a configured seller: you write prose and an action, the seller answers.

    The environment is the evaluation one (terms attached to an accept are ignored). You see your
    own private preferences and your U~ of the ledger; the seller's is revealed at the end. An
    ACCEPT closes the episode only when the seller's last turn was a parsed COUNTER; otherwise it
    is an invalid action (the ledger is unchanged, the episode goes on, and it counts as a bad
    parse of yours), see :attr:`can_accept`.
    """

    def __init__(self, book: Book, seller: str, domain: str = "car", seed: int = 5_000_053,
                 cache: Any = None) -> None:
        self.book, self.seller = book, seller
        self.explorer = EpisodeExplorer(book, cache)
        self.scenario = make_scenario(get_domain(domain), int(seed))
        ev = book.params.evaluation
        env = EnvConfig(max_rounds=ev.max_rounds, accept_needs_offer=ev.accept_needs_offer)
        self.episode = Episode(self.scenario, env, f"human|{domain}|{seed}")
        self.controls: BuyerControls | None = None
        self._seller_moves()

    def _seller_moves(self) -> None:
        ep = self.episode
        while not ep.done and ep.to_move == "seller":
            rep = self.explorer.agent(self.seller).act(ep.view("seller"))
            ep.step(rep.text, rep.input_tokens, rep.output_tokens, rep.latency_s)

    def brief(self) -> Any:
        """Your (the buyer's) private preferences: weight, preferred direction or level per term."""
        import pandas as pd

        d = self.scenario.domain.issues
        prefs = self.scenario.buyer
        rows = [{"term": i.name, "weight": round(w, 3),
                 "you prefer": ("high" if s > 0 else "low") if i.kind == "continuous" else pref,
                 "range / levels": f"{i.lo:g}-{i.hi:g} {i.unit}" if i.kind == "continuous" else
                 " / ".join(map(str, i.levels))} for i, w, s, pref in zip(d, prefs.weights, prefs.signs,
                                                                          prefs.preferred)]
        return pd.DataFrame(rows).set_index("term")

    @property
    def can_accept(self) -> bool:
        """Whether an ACCEPT now closes the episode: it is not over and the seller's last turn was a
        parsed COUNTER (or the environment runs the paper's rule, ``accept_needs_offer=False``)."""
        ep = self.episode
        if ep.done:
            return False
        if not ep.config.accept_needs_offer:
            return True
        last = ep.turns[-1] if ep.turns else None
        return last is not None and (last.action or {}).get("action") == "COUNTER"

    def buyer_turn(self, prose: str, terms: dict[str, Any] | None = None, accept: bool = False) -> list[Any]:
        """Play your turn (a COUNTER naming ``terms``, or ACCEPT) and let the seller answer."""
        if self.episode.done:
            raise RuntimeError("the episode is over")
        action: dict[str, Any] = {"action": "ACCEPT"} if accept else \
            {"action": "COUNTER", "terms": [{"name": k, "value": v} for k, v in (terms or {}).items()]}
        n = len(self.episode.turns)
        self.episode.step(prose.strip() + "\n" + json.dumps(action))
        self._seller_moves()
        return self.episode.turns[n:]

    def status(self) -> str:
        ep = self.episode
        su, bu = both_utilities(self.scenario, ep.ledger)
        if ep.done:
            o = ep.outcome
            assert o is not None
            return (f"episode over: {'deal' if o.deal else 'no deal'}; your U~ = {bu:.3f}, the seller's U~ = "
                    f"{su:.3f} (seller's S = {o.score:.3f})")
        return f"turn {len(ep.turns) + 1}; your U~ of the current ledger = {bu:.3f} (reservation " \
               f"{self.scenario.buyer.reservation:.3f})"

    def accept_note(self) -> str:
        """What an ACCEPT would do now, for the widget's status line."""
        if self.episode.done:
            return "The episode is over."
        if self.can_accept:
            return "ACCEPT closes the deal on the ledger below (the seller's last turn was a COUNTER)."
        return ("ACCEPT now would be an invalid action: the seller's last turn was not a parsed COUNTER, so "
                "there is nothing to accept (the ledger stays, the episode goes on, and it counts as your "
                "bad parse). Make a COUNTER instead.")

    def _term_control(self, issue: Issue, value: Any) -> Any:
        """The value control of one schema term (not yet wired)."""
        import ipywidgets as w

        common: dict[str, Any] = {"description": issue.name, "style": {"description_width": "9em"},
                                  "tooltip": issue.description or issue.name}
        if issue.kind == "continuous":
            step = term_step(issue)
            return w.FloatSlider(value=value, min=issue.lo, max=issue.hi, step=step, continuous_update=False,
                                 readout_format=f".{_decimals(step)}f", layout=w.Layout(width="32em"), **common)
        labels = [("yes" if lv else "no") if issue.kind == "binary" else str(lv) for lv in issue.levels]
        return w.Dropdown(options=list(zip(labels, issue.levels)), value=value, layout=w.Layout(width="32em"),
                          **common)

    def widget(self) -> Any:
        """ipywidgets UI: one control per schema term with an include box, a prose box, and the
        COUNTER / ACCEPT buttons. COUNTER names exactly the ticked terms (changing a control ticks
        it); after each turn the controls show the new ledger and are unticked. The parts are kept in
        :attr:`controls`."""
        import ipywidgets as w
        from IPython.display import display

        domain = self.scenario.domain
        start = initial_values(domain, self.episode.ledger, self.scenario.buyer.preferred)
        syncing = {"on": False}
        values: dict[str, Any] = {}
        include: dict[str, Any] = {}
        rows = []
        for issue in domain.issues:
            ctl = self._term_control(issue, start[issue.name])
            box = w.Checkbox(value=False, description="", indent=False, layout=w.Layout(width="2em"),
                             tooltip=f"include {issue.name} in my counter")
            unit = f"{issue.unit} ({issue.lo:g}-{issue.hi:g})" if issue.kind == "continuous" else ""
            row = w.HBox([box, ctl, w.Label(unit)])
            row.add_class(f"{CSS_PREFIX}-term")
            row.add_class(f"{CSS_PREFIX}-term-{issue.name}")

            def tick(_: Any, box: Any = box) -> None:
                if not syncing["on"]:
                    box.value = True

            ctl.observe(tick, names="value")
            values[issue.name], include[issue.name] = ctl, box
            rows.append(row)

        prose = w.Textarea(placeholder="Two or three sentences to the seller", layout=w.Layout(width="60%"))
        counter = w.Button(description="COUNTER", button_style="primary",
                           tooltip="propose the ticked terms (the others stay as on the ledger)")
        accept = w.Button(description="ACCEPT", button_style="success", tooltip="accept the current ledger")
        status = w.HTML()
        out = w.Output()
        prose.add_class(f"{CSS_PREFIX}-prose")
        counter.add_class(f"{CSS_PREFIX}-counter")
        accept.add_class(f"{CSS_PREFIX}-accept")
        status.add_class(f"{CSS_PREFIX}-status")
        out.add_class(f"{CSS_PREFIX}-buyer-out")
        head = w.HTML("<b>Your counter</b>: tick the terms it names (changing a value ticks it); unticked "
                      "terms stay as they are on the ledger.")
        box = w.VBox([head, *rows, prose, w.HBox([counter, accept]), status, out])
        box.add_class(f"{CSS_PREFIX}-buyer")
        self.controls = BuyerControls(values, include, prose, counter, accept, status, out, box)

        def render(error: str = "") -> None:
            import html as html_mod

            ep = self.episode
            syncing["on"] = True
            try:
                now = initial_values(domain, ep.ledger, self.scenario.buyer.preferred)
                for name, ctl in values.items():
                    if name in ep.ledger:
                        ctl.value = now[name]
                for b in include.values():
                    b.value = False
            finally:
                syncing["on"] = False
            counter.disabled = accept.disabled = ep.done
            line = html_mod.escape(f"{self.status()}. {self.accept_note()}")
            if error:
                line = f"<span style='color:#b00'>{html_mod.escape(error)}</span><br>{line}"
            status.value = line
            out.clear_output(wait=True)
            with out:
                for t in ep.turns:
                    who = "seller" if t.role == "seller" else "you"
                    print(f"[{t.turn}] {who} ({_action_text(t, show_terms=who == 'you')}): {t.prose}")
                display(ledger_table(self.scenario, ep.ledger, show_seller=ep.done))

        def on_counter(_: Any) -> None:
            if self.episode.done:
                return render()
            try:
                terms = counter_terms(domain, {n: c.value for n, c in values.items()},
                                      self.controls.included() if self.controls else [])
            except ValueError as e:
                return render(str(e))
            self.buyer_turn(prose.value or "Here is my counter.", terms)
            prose.value = ""
            render()

        def on_accept(_: Any) -> None:
            if self.episode.done:
                return render()
            self.buyer_turn(prose.value or "Deal.", accept=True)
            prose.value = ""
            render()

        counter.on_click(on_counter)
        accept.on_click(on_accept)
        render()
        return box


__all__ = ["BuyerControls", "BuyerSession", "EpisodeExplorer", "counter_terms", "initial_values", "ledger_table",
           "term_step"]
