"""Cost accounting: token usage per call and party, USD per episode, and a dry run [paper App. G].

Usage comes from the transcripts (every turn records the input/output tokens its call billed), so
cost is recomputed from what was actually played. Prices are a table of USD per million input and
output tokens per model, passed in from params (providers' list prices change; none are built
in). The paper's reference point is ``PAPER_FRONTIER_EPISODE_USD``: $0.069 per frontier-seller
episode, the mean over its four frontier-seller cells (37.1M input and 5.2M output tokens, both
sides billed) [App. G].
"""

from __future__ import annotations

import math
from collections.abc import Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import pandas as pd

from negolib.games.multi_issue.scenarios import ROLES, Role
from negolib.params import Price

PAPER_FRONTIER_EPISODE_USD = 0.069
"""USD per frontier-seller episode, both sides billed at list prices [paper App. G]."""
PAPER_FRONTIER_TOKENS = {"input": 37.1e6, "output": 5.2e6, "episodes": 4 * 576}
"""Tokens billed over the paper's four frontier-seller cells (2 sellers x 2 buyers x 576 episodes)."""
PAPER_FRONTIER_MEAN_TURNS = (10.4 + 8.8) / 2
"""Mean turns of the two frontier sellers' episodes [Table 4]."""
DEFAULT_TURNS_PER_EPISODE = 10.0
"""(ours) dry-run default, close to the frontier sellers' 8.8-10.4 mean turns [Table 4]."""
DEFAULT_TOKENS_PER_TURN = (1_700, 235)
"""(ours) (input, output) tokens per call: the paper's 16.1k input / 2.26k output tokens per
frontier episode [App. G] spread over ~9.6 turns [Table 4]."""


PriceTable = Mapping[str, Price]


def price_table(raw: Mapping[str, Any], source: str = "params") -> dict[str, Price]:
    """Validate a price table from params: ``{model: {input: usd_per_m, output: usd_per_m}}``.

    ``[input, output]`` pairs and :class:`Price` values are accepted too.
    """
    out: dict[str, Price] = {}
    for model, v in raw.items():
        try:
            if isinstance(v, Price):
                out[model] = v
            elif isinstance(v, Mapping):
                extra = set(v) - {"input", "output"}
                if extra or not {"input", "output"} <= set(v):
                    raise ValueError(f"needs exactly the keys 'input' and 'output', got {sorted(v)}")
                out[model] = Price(v["input"], v["output"])
            elif isinstance(v, Sequence) and not isinstance(v, str) and len(v) == 2:
                out[model] = Price(v[0], v[1])
            else:
                raise ValueError(f"expected {{input: ..., output: ...}} or [input, output], got {v!r}")
        except ValueError as exc:
            raise ValueError(f"{source}: prices.{model}: {exc}") from None
    return out


def _price(prices: PriceTable, model: str) -> Price:
    try:
        return prices[model]
    except KeyError:
        raise KeyError(f"no price for model {model!r}; priced models: {sorted(prices)}") from None


@dataclass(frozen=True)
class PartyUsage:
    """Tokens billed to one party of one episode (``calls`` = turns it played)."""

    calls: int = 0
    input_tokens: int = 0
    output_tokens: int = 0


def party_usage(record: Mapping[str, Any]) -> dict[Role, PartyUsage]:
    """Token usage of each role in one transcript record, summed over its turns."""
    acc = {r: [0, 0, 0] for r in ROLES}
    for t in record.get("turns", []):
        a = acc[t["role"]]
        a[0] += 1
        a[1] += int(t.get("input_tokens") or 0)
        a[2] += int(t.get("output_tokens") or 0)
    return {r: PartyUsage(*acc[r]) for r in ROLES}


def call_usage_frame(records: Iterable[Mapping[str, Any]]) -> pd.DataFrame:
    """One row per call (turn): key, turn, role, input/output tokens, latency."""
    rows = [{"arm": r["arm"], "domain": r["domain"], "seed": r["seed"], "buyer": r["buyer"],
             "turn": t["turn"], "role": t["role"], "input_tokens": t.get("input_tokens", 0),
             "output_tokens": t.get("output_tokens", 0), "latency_s": t.get("latency_s", 0.0)}
            for r in records for t in r.get("turns", [])]
    return pd.DataFrame(rows, columns=["arm", "domain", "seed", "buyer", "turn", "role", "input_tokens",
                                       "output_tokens", "latency_s"])


def episode_cost(record: Mapping[str, Any], prices: PriceTable, seller_model: str | None,
                 buyer_model: str | None) -> dict[str, float]:
    """USD billed for one episode: ``{"seller": ..., "buyer": ..., "total": ...}``.

    A side whose model is ``None`` (scripted or self-served) costs nothing.
    """
    use = party_usage(record)
    out: dict[str, float] = {}
    for role, model in (("seller", seller_model), ("buyer", buyer_model)):
        u = use[role]  # type: ignore[index]
        out[role] = 0.0 if model is None else _price(prices, model).usd(u.input_tokens, u.output_tokens)
    out["total"] = out["seller"] + out["buyer"]
    return out


def cost_frame(records: Iterable[Mapping[str, Any]], prices: PriceTable,
               models: Mapping[str, str | None]) -> pd.DataFrame:
    """One row per episode with tokens and USD per party.

    ``models`` maps an agent name (a record's ``seller``/``buyer`` field) to the priced model it
    calls; names absent from it (scripted agents, local models) cost nothing.
    """
    rows = []
    for rec in records:
        sm, bm = models.get(rec["seller"]), models.get(rec["buyer"])
        use, usd = party_usage(rec), episode_cost(rec, prices, sm, bm)
        row: dict[str, Any] = {k: rec.get(k) for k in ("arm", "seller", "buyer", "domain", "seed", "status")}
        row.update(seller_model=sm, buyer_model=bm)
        for role in ROLES:
            row[f"{role}_calls"] = use[role].calls
            row[f"{role}_input_tokens"] = use[role].input_tokens
            row[f"{role}_output_tokens"] = use[role].output_tokens
            row[f"{role}_usd"] = usd[role]
        row["usd"] = usd["total"]
        rows.append(row)
    cols = ["arm", "seller", "buyer", "domain", "seed", "status", "seller_model", "buyer_model"] + [
        f"{r}_{c}" for r in ROLES for c in ("calls", "input_tokens", "output_tokens", "usd")] + ["usd"]
    return pd.DataFrame(rows, columns=cols)


def cost_summary(frame: pd.DataFrame) -> pd.DataFrame:
    """Per arm: episodes, tokens, total USD and USD per episode beside the paper's $0.069 reference."""
    if frame.empty:
        return pd.DataFrame(columns=["arm", "episodes", "input_tokens", "output_tokens", "usd",
                                     "usd_per_episode", "paper_frontier_usd_per_episode"])
    f = frame.assign(input_tokens=frame["seller_input_tokens"] + frame["buyer_input_tokens"],
                     output_tokens=frame["seller_output_tokens"] + frame["buyer_output_tokens"])
    g = f.groupby("arm", sort=True).agg(episodes=("usd", "size"), input_tokens=("input_tokens", "sum"),
                                        output_tokens=("output_tokens", "sum"), usd=("usd", "sum"))
    g["usd_per_episode"] = g["usd"] / g["episodes"]
    g["paper_frontier_usd_per_episode"] = PAPER_FRONTIER_EPISODE_USD
    return g.reset_index()


@dataclass
class DryRunEstimate:
    """Expected API calls, tokens and USD of a planned run, per model and in total.

    ``max_*`` fields are the worst case, every episode running to the turn cap.
    """

    episodes: int
    skipped: int
    calls: float
    input_tokens: float
    output_tokens: float
    usd: float
    max_calls: int
    max_usd: float
    per_model: pd.DataFrame = field(repr=False)
    turns_per_episode: float = DEFAULT_TURNS_PER_EPISODE
    tokens_per_turn: tuple[int, int] = DEFAULT_TOKENS_PER_TURN

    def __str__(self) -> str:
        lines = [
            f"dry run: {self.episodes} episodes to play ({self.skipped} already complete, skipped), "
            f"~{self.turns_per_episode:g} turns each at ~{self.tokens_per_turn[0]} in / "
            f"{self.tokens_per_turn[1]} out tokens per call",
            f"  expected: {self.calls:,.0f} API calls, {self.input_tokens:,.0f} input + "
            f"{self.output_tokens:,.0f} output tokens, ${self.usd:,.2f}"
            + (f" (${self.usd / self.episodes:.4f}/episode)" if self.episodes else ""),
            f"  worst case (every episode to the cap): {self.max_calls:,} calls, ${self.max_usd:,.2f}",
            f"  paper reference: ${PAPER_FRONTIER_EPISODE_USD}/frontier-seller episode [App. G]",
        ]
        if not self.per_model.empty:
            lines.append(self.per_model.to_string(index=False))
        return "\n".join(lines)


def dry_run(specs: Sequence[Any], models: Mapping[str, str | None], prices: PriceTable,
            turns_per_episode: float = DEFAULT_TURNS_PER_EPISODE,
            tokens_per_turn: tuple[int, int] = DEFAULT_TOKENS_PER_TURN,
            done: Collection[tuple[str, str, int, str]] = (), echo: bool = True) -> DryRunEstimate:
    """Estimate the calls, tokens and USD of playing ``specs`` before any API call is made.

    ``specs`` are :class:`negolib.games.multi_issue.rollout.EpisodeSpec`; ``models`` maps agent names to priced model
    ids (absent or ``None``: unbilled). Keys in ``done`` (``TranscriptStore.completed_keys()``)
    are skipped, as a resumed run skips them. Prints the estimate unless ``echo`` is false.
    """
    if turns_per_episode <= 0:
        raise ValueError(f"turns_per_episode must be > 0, got {turns_per_episode}")
    tin, tout = tokens_per_turn
    todo = [s for s in specs if s.key not in done]
    acc: dict[str, list[float]] = {}
    max_calls, max_usd = 0, 0.0
    for s in todo:
        cap = s.config.max_turns
        turns = min(float(turns_per_episode), float(cap))
        first = s.config.first_mover
        for role, name in (("seller", s.seller), ("buyer", s.buyer)):
            model = models.get(name)
            if model is None:
                continue
            price = _price(prices, model)
            if turns.is_integer():  # the first mover plays the odd turn
                share = float(math.ceil(turns / 2) if role == first else math.floor(turns / 2))
            else:
                share = turns / 2
            cap_share = math.ceil(cap / 2) if role == first else cap // 2
            a = acc.setdefault(model, [0.0, 0.0, 0.0, 0.0])
            a[0] += share
            a[1] += share * tin
            a[2] += share * tout
            a[3] += price.usd(share * tin, share * tout)
            max_calls += cap_share
            max_usd += price.usd(cap_share * tin, cap_share * tout)
    per_model = pd.DataFrame([{"model": m, "calls": a[0], "input_tokens": a[1], "output_tokens": a[2],
                               "usd": a[3]} for m, a in sorted(acc.items())],
                             columns=["model", "calls", "input_tokens", "output_tokens", "usd"])
    est = DryRunEstimate(
        episodes=len(todo), skipped=len(specs) - len(todo), calls=float(per_model["calls"].sum()),
        input_tokens=float(per_model["input_tokens"].sum()),
        output_tokens=float(per_model["output_tokens"].sum()), usd=float(per_model["usd"].sum()),
        max_calls=max_calls, max_usd=max_usd, per_model=per_model, turns_per_episode=turns_per_episode,
        tokens_per_turn=(tin, tout))
    if echo:
        print(est)
    return est


__all__ = ["DEFAULT_TOKENS_PER_TURN", "DEFAULT_TURNS_PER_EPISODE", "DryRunEstimate",
           "PAPER_FRONTIER_EPISODE_USD", "PAPER_FRONTIER_MEAN_TURNS", "PAPER_FRONTIER_TOKENS", "PartyUsage",
           "Price", "PriceTable", "call_usage_frame", "cost_frame", "cost_summary", "dry_run", "episode_cost",
           "party_usage", "price_table"]
