"""Multi-turn token-level rollouts for GRPO [paper §3 "Optimization", App. H, App. J].

Any game trains here: the engine drives episodes through :class:`TrainableEpisode` (who moves, a
party's view, a turn's text, the outcome's reward, score and deal, the no-deal floor, bad parses, the
record), built per scenario item by an :data:`EpisodeFactory`, with a :data:`Render` of the policy's
view into chat messages; the policy plays one ``role`` (the seller by default) and the item's named
opponent the other. Every game hands over its episode factory and render (the paper's:
:mod:`negolib.games.multi_issue.training`); this module imports no game. Below,
"seller" reads as the policy's role and "buyer" as the opponent's.

Every episode is one trajectory: ``prompt_ids`` (the seller's first prompt rendered with the chat
template, capped at the prompt cap) followed by ``completion_ids``, the concatenation, turn by
turn, of

* the seller's sampled tokens (``env_mask`` 1, with their sampling log-probabilities), and
* the environment's tokens (``env_mask`` 0, log-probability 0): the rest of the assistant-turn
  close after the seller's stop token, the user-turn tags around the buyer's turn as the prompt
  scaffold renders it, and the next generation prompt (tags derived from the tokenizer,
  :mod:`negolib.core.chat_template`).

Seller text is decoded only to drive the environment; the ids it came from are kept as sampled and
never re-tokenized. The trajectory ends on the seller's last end-of-turn token (appended as an
environment token when the turn hit its token budget). The reward is Eq. 1 from
:mod:`negolib.games.multi_issue.env` with ``accept_applies_terms`` on; an episode the driver has to cut (seller-turn
cap, context cap) gets the floor ``-lambda``, as in the paper's reward plumbing: the policy ran long.

Errors are contained to their trajectory and excluded from the update. When anything raises while
one episode takes a turn (rendering or encoding the seller's prompt, decoding its text, the buyer
agent, the parser or the environment), or the buyer agent answers with an error, that episode ends
with status ``error`` and the rest of the batch plays on. A failed ``generate`` or buyer
``act_batch`` call is retried one context / view at a time first, so one bad input costs only its
own episode. An error says nothing about the policy's negotiating (a buyer outage, a bug), so an
error trajectory is not trained on: :meth:`RolloutBatch.trl_output` zeroes its ``env_mask`` (no
token of it enters the loss) and gives it the mean reward of the valid trajectories of its group
(same scenario and buyer), which makes its group-normalized and leave-one-out advantages exactly 0
(0.0 when the whole group errored); the others' leave-one-out baselines shift slightly toward
their group mean. :meth:`RolloutBatch.metrics` averages rewards, scores, deals, turns and parse
rates over the valid trajectories only and reports ``error_rate``; a batch in which every
trajectory errored warns. The trajectory's record keeps the error text (``status`` "error").

Scaffolds: under ``training`` the seller's chat only grows by appending (the buyer's prose as a user
turn), so the trajectory is exactly the template's render of the dialogue. Under ``evaluation`` (a
beyond-paper arm) the scaffold re-renders one user message per turn; one trajectory cannot be a
re-rendered prompt, so each later seller turn sees the re-rendered scaffold message appended as the
user turn of a growing chat (history, current offer, turn number, phase and reminder included).

Generation is batched per wave: all live episodes whose seller is to move generate in one call of
a :class:`TokenGenerator` (HF ``generate`` on CPU, colocated vLLM on GPU); buyers answer per buyer
agent in one ``act_batch`` call.
"""

from __future__ import annotations

import math
import time
import warnings
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from negolib.agents.base import Agent, AgentReply, Render, act_contained, error_text, reply_problem
from negolib.core.chat_template import TurnTags, encode_chat, strip_template_tags
from negolib.core.sampling import derive_seed
from negolib.training.data import ScenarioItem

# ---------------------------------------------------------------------------------------------
# Token generators
# ---------------------------------------------------------------------------------------------


@dataclass
class Generation:
    """One sampled turn: ``ids`` (T,) up to and including the stop token when one was produced,
    ``logprobs`` (T,) of each sampled token under the sampling distribution, ``stopped``."""

    ids: list[int]
    logprobs: list[float]
    stopped: bool


class TokenGenerator(Protocol):
    """Samples one continuation per context; ``budgets[i]`` caps the new tokens of context ``i``."""

    def generate(self, contexts: Sequence[Sequence[int]], budgets: Sequence[int]) -> list[Generation]: ...


def _cut(ids: Sequence[int], lps: Sequence[float], stop_ids: Sequence[int], budget: int) -> Generation:
    """Trim a raw continuation at its first stop token (kept) and at the budget."""
    stops = set(stop_ids)
    out_ids, out_lps = [], []
    for tok, lp in zip(ids, lps):
        if len(out_ids) >= budget:
            break
        out_ids.append(int(tok))
        out_lps.append(float(lp))
        if tok in stops:
            return Generation(out_ids, out_lps, True)
    return Generation(out_ids, out_lps, False)


class HFAgentGenerator:
    """Batched HF sampling from token contexts through :meth:`negolib.agents.hf_agent.HFAgent.generate_ids`.

    The agent's model is the policy being trained (the same module object, so every optimizer step
    is seen by the next wave), its sampling settings are the recipe's, and each call is seeded from
    the agent's seed and a call counter. Chunks of ``agent.max_batch`` contexts per ``generate`` call.
    """

    def __init__(self, agent: Any, seed: int | None = None) -> None:
        self.agent = agent
        self.seed = agent.sampling.seed if seed is None else seed
        self.calls = 0

    def generate(self, contexts: Sequence[Sequence[int]], budgets: Sequence[int]) -> list[Generation]:
        out: list[Generation] = []
        step = max(1, self.agent.max_batch)
        for i in range(0, len(contexts), step):
            seed = derive_seed(self.seed, [f"call{self.calls}"], [i])
            comps, lps, fins = self.agent.generate_ids([list(c) for c in contexts[i : i + step]], seed)
            for ids, lp, fin, budget in zip(comps, lps, fins, budgets[i : i + step]):
                out.append(_cut(ids, lp, self.agent.tags.stop_ids if fin else (), budget))
        self.calls += 1
        return out


class VLLMTokenGenerator:
    """Generation through TRL's colocated vLLM engine (``trainer.vllm_generation``).

    The engine samples with the trainer's temperature/top-p/top-k and its per-call token cap
    (``max_completion_length`` = new tokens per turn); contexts are token ids. ``sync`` (called
    before each wave) pushes the current policy weights when the optimizer step changed.
    """

    def __init__(
        self, vllm_generation: Any, stop_ids: Sequence[int], sync: Callable[[], None] | None = None
    ) -> None:
        self.vg, self.stop_ids, self.sync = vllm_generation, [int(s) for s in stop_ids], sync

    def generate(self, contexts: Sequence[Sequence[int]], budgets: Sequence[int]) -> list[Generation]:
        if not contexts:
            return []
        if self.sync is not None:
            self.sync()
        _, completion_ids, logprobs, _ = self.vg.generate(
            prompts=[list(c) for c in contexts], images=None, num_generations=1
        )
        out = []
        for ids, lps, budget in zip(completion_ids, logprobs or [None] * len(contexts), budgets):
            flat = (
                [0.0 if (lp is None or lp[0] is None) else float(lp[0]) for lp in lps]
                if lps
                else [0.0] * len(ids)
            )
            out.append(_cut(list(ids), flat, self.stop_ids, budget))
        return out


# ---------------------------------------------------------------------------------------------
# The episode protocol
# ---------------------------------------------------------------------------------------------


class EpisodeOutcome(Protocol):
    """How a finished episode ended, as the update reads it: the deal flag, the reward the policy is
    trained on, its score (the game's payoff for the policy, logged) and the number of turns played."""

    deal: bool
    reward: float
    score: float
    turns: int


class TrainableEpisode(Protocol):
    """One episode of a game as the rollout engine drives it (the paper's
    :class:`~negolib.games.multi_issue.training.PaperEpisode`, or a game's adapter). ``step`` takes a turn of the party
    to move: the policy's decoded text, or what :meth:`opponent_turn` made of the opponent's reply; it may raise
    (the engine contains it)."""

    episode_id: str

    @property
    def to_move(self) -> str: ...  # the role whose turn is next

    @property
    def done(self) -> bool: ...

    @property
    def outcome(self) -> EpisodeOutcome | None: ...  # None while running

    @property
    def turns(self) -> Sequence[Any]: ...  # the turns played so far

    @property
    def no_deal_floor(self) -> float: ...  # the reward and score of an episode the driver cuts

    def view(self, role: str) -> Any: ...

    def step(self, turn: Any, input_tokens: int = 0, output_tokens: int = 0, latency_s: float = 0.0) -> Any: ...

    def opponent_turn(self, reply: AgentReply) -> Any: ...  # the opponent's reply as ``step`` takes it

    def bad_parses(self, role: str) -> tuple[int, int]: ...  # (bad-parse turns, turns) of ``role``

    def record(self, **key: Any) -> dict[str, Any]: ...  # the game's JSON-ready transcript record


EpisodeFactory = Callable[[ScenarioItem, str], TrainableEpisode]
"""``(item, episode_id) -> episode``: a fresh episode of the item's scenario."""


def other_role(role: str) -> str:
    """The opponent's role."""
    return "buyer" if role == "seller" else "seller"


# ---------------------------------------------------------------------------------------------
# Trajectories
# ---------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class RolloutLimits:
    """Sequence limits of the driver [App. H "Sequences"]."""

    max_new_tokens: int = 768
    max_context_tokens: int = 16_384
    max_prompt_tokens: int = 2_048
    max_seller_turns: int = 13


@dataclass
class Trajectory:
    """One episode as a training sample. ``completion_ids``, ``env_mask`` and ``logprobs`` are (C,)."""

    item: ScenarioItem
    episode: TrainableEpisode
    prompt_ids: list[int] = field(default_factory=list)
    completion_ids: list[int] = field(default_factory=list)
    env_mask: list[int] = field(default_factory=list)
    logprobs: list[float] = field(default_factory=list)
    segments: list[tuple[str, list[int]]] = field(default_factory=list)  # (role|"env", ids) in order
    seller_turns: int = 0
    prompt_truncated: bool = False
    status: str = "running"  # deal | no_deal | truncated | error
    error: str | None = None
    gen_stopped: bool = True  # the last seller turn ended on a stop token
    role: str = "seller"  # the policy's role

    @property
    def done(self) -> bool:
        return self.status != "running"

    @property
    def context(self) -> list[int]:
        return self.prompt_ids + self.completion_ids

    def add(self, kind: str, ids: Sequence[int], logprobs: Sequence[float] | None = None) -> None:
        ids = [int(i) for i in ids]
        if not ids:
            return
        self.completion_ids += ids
        self.env_mask += [0 if kind == "env" else 1] * len(ids)
        self.logprobs += list(logprobs) if logprobs is not None else [0.0] * len(ids)
        self.segments.append((kind, ids))

    def loss_mask(self, trained_turns: str = "all") -> list[int]:
        """The (C,) mask the loss sees: ``env_mask`` for ``"all"``; for ``"last"`` only the tokens of the last
        policy segment (the seller's last turn) are 1. An excluded trajectory's mask is all zero."""
        if self.excluded:
            return [0] * len(self.env_mask)
        if trained_turns == "all":
            return list(self.env_mask)
        if trained_turns != "last":
            raise ValueError(f"trained_turns must be 'all' or 'last', got {trained_turns!r}")
        last = max((i for i, (kind, _) in enumerate(self.segments) if kind != "env"), default=None)
        out: list[int] = []
        for i, (_, ids) in enumerate(self.segments):
            out += [int(i == last)] * len(ids)
        return out

    @property
    def excluded(self) -> bool:
        """An error trajectory: left out of the update (see the module docstring)."""
        return self.status == "error"

    @property
    def reward(self) -> float:
        """Eq. 1 (the game's reward); the floor -lambda for a driver cut; NaN for an excluded (error) trajectory."""
        out = self.episode.outcome
        if self.excluded:
            return math.nan
        if self.status == "truncated" or out is None:
            return self.episode.no_deal_floor
        return float(out.reward)

    @property
    def score(self) -> float:
        """S (the game's score); -lambda for a driver cut; NaN for an excluded (error) trajectory."""
        out = self.episode.outcome
        if self.excluded:
            return math.nan
        if self.status == "truncated" or out is None:
            return self.episode.no_deal_floor
        return float(out.score)

    def fail(self, error: str) -> None:
        """End the trajectory as an error (excluded from the update)."""
        self.status, self.error = "error", error

    @property
    def deal(self) -> bool:
        return self.status == "deal"

    @property
    def seller_tokens(self) -> int:
        return sum(self.env_mask)

    @property
    def env_tokens(self) -> int:
        return len(self.env_mask) - sum(self.env_mask)

    def record(self, **key: Any) -> dict[str, Any]:
        """The transcript record (negolib format) plus training fields."""
        rec = self.episode.record(**key)
        if self.status in ("truncated", "error"):
            rec["status"] = "error" if self.status == "error" else "truncated"
            rec["error"] = self.error
        rec["training"] = {
            "reward": None if self.excluded else self.reward,
            "excluded": self.excluded,
            "prompt_tokens": len(self.prompt_ids),
            "seller_tokens": self.seller_tokens,
            "env_tokens": self.env_tokens,
            "seller_turns": self.seller_turns,
            "prompt_truncated": self.prompt_truncated,
            "driver_status": self.status,
        }
        return rec


@dataclass
class RolloutBatch:
    """The trajectories of one batch and where the time went (seconds)."""

    trajectories: list[Trajectory]
    generation_s: float = 0.0
    buyer_s: float = 0.0
    total_s: float = 0.0
    waves: int = 0

    def _imputed(self, values: Sequence[float]) -> list[float]:
        """``values`` with each excluded trajectory's entry replaced by the mean over the valid
        trajectories of its group (same scenario and buyer), or 0.0 when its whole group errored."""
        groups: dict[tuple[str, str], list[float]] = {}
        for t, v in zip(self.trajectories, values):
            if not t.excluded:
                groups.setdefault((t.item.scenario_id, t.item.buyer), []).append(v)
        out = []
        for t, v in zip(self.trajectories, values):
            if t.excluded:
                g = groups.get((t.item.scenario_id, t.item.buyer))
                v = sum(g) / len(g) if g else 0.0
            out.append(float(v))
        return out

    def rewards(self) -> list[float]:
        """The rewards the update sees: Eq. 1 per trajectory, imputed for excluded ones."""
        return self._imputed([t.reward for t in self.trajectories])

    def trl_output(self, trained_turns: str = "all") -> dict[str, list[Any]]:
        """What TRL's ``rollout_func`` returns: ids, logprobs, env_mask and per-episode extra fields.
        An excluded (error) trajectory has an all-zero ``env_mask`` and an imputed reward and score;
        ``trained_turns="last"`` masks every seller turn but the last (:meth:`Trajectory.loss_mask`)."""
        ts = self.trajectories
        return {
            "prompt_ids": [t.prompt_ids for t in ts],
            "completion_ids": [t.completion_ids for t in ts],
            "logprobs": [t.logprobs for t in ts],
            "env_mask": [t.loss_mask(trained_turns) for t in ts],
            "episode_reward": self.rewards(),
            "episode_score": self._imputed([t.score for t in ts]),
            "episode_deal": [float(t.deal) for t in ts],
        }

    def metrics(self) -> dict[str, float]:
        """Batch means for the training log: outcome means over the valid trajectories,
        ``error_rate`` and the other rates over all; token counts over all (what was generated and
        run through the model, excluded trajectories included)."""
        ts = self.trajectories
        n = max(1, len(ts))
        valid = [t for t in ts if not t.excluded]
        nv = max(1, len(valid))
        seller = sum(t.seller_tokens for t in ts)
        env = sum(t.env_tokens for t in ts)
        prompt = sum(len(t.prompt_ids) for t in ts)
        turns = [t.episode.outcome.turns if t.episode.outcome else len(t.episode.turns) for t in valid]
        return {
            "episode_reward": sum(t.reward for t in valid) / nv,
            "score": sum(t.score for t in valid) / nv,
            "deal_rate": sum(t.deal for t in valid) / nv,
            "turns": sum(turns) / nv,
            "bad_parse_rate": _bad_parse_rate(valid),
            "truncated_rate": sum(t.status == "truncated" for t in ts) / n,
            "error_rate": sum(t.excluded for t in ts) / n,
            "prompt_truncated_rate": sum(t.prompt_truncated for t in ts) / n,
            "tokens_generated": float(seller),
            "tokens_env": float(env),
            "tokens_prompt": float(prompt),
            "tokens_trained": float(seller + env + prompt),
            "time_generation_s": self.generation_s,
            "time_buyer_s": self.buyer_s,
            "time_rollout_s": self.total_s,
            "generation_tokens_per_s": seller / self.generation_s if self.generation_s > 0 else 0.0,
        }


def _bad_parse_rate(ts: Sequence[Trajectory]) -> float:
    counts = [t.episode.bad_parses(t.role) for t in ts]
    return sum(bad for bad, _ in counts) / max(1, sum(n for _, n in counts))


def _observation_message(messages: Sequence[dict[str, str]]) -> dict[str, str]:
    """The one message the seller has not seen yet: the user turn after its last assistant message
    (training scaffold), or the re-rendered last message when there is no assistant turn (evaluation)."""
    last = max((i for i, m in enumerate(messages) if m["role"] == "assistant"), default=None)
    new = list(messages[last + 1 :]) if last is not None else [messages[-1]]
    if len(new) != 1 or new[0]["role"] != "user":
        raise ValueError(f"a rollout appends exactly one user turn; got roles {[m['role'] for m in new]}")
    return new[0]


@dataclass
class RolloutEngine:
    """Plays batches of episodes with the policy in ``role`` and returns token-level trajectories.

    The game is handed over: ``episode_factory`` builds each item's episode (it carries the game's rules; the
    paper's: :func:`negolib.games.multi_issue.training.paper_episodes`) and ``render`` maps the policy's view to chat
    messages under ``scaffold`` (the paper's: :func:`negolib.games.multi_issue.prompts.render_messages`). ``buyers``
    maps the names in each item's ``buyer`` field to the opponent agents.
    """

    generator: TokenGenerator
    tokenizer: Any
    tags: TurnTags
    buyers: Mapping[str, Agent]
    episode_factory: EpisodeFactory
    render: Render
    limits: RolloutLimits = field(default_factory=RolloutLimits)
    scaffold: str = "training"
    role: str = "seller"

    def _render(self, view: Any) -> list[dict[str, str]]:
        return self.render(view, self.scaffold)

    def _episode(self, item: ScenarioItem, episode_id: str) -> TrainableEpisode:
        return self.episode_factory(item, episode_id)

    def play(self, items: Sequence[ScenarioItem], episode_ids: Sequence[str] | None = None) -> RolloutBatch:
        """Play one episode per item (repeat an item for several rollouts) to the end."""
        missing = sorted({it.buyer for it in items} - set(self.buyers))
        if missing:
            raise KeyError(f"no buyer agent for {missing}; registered: {sorted(self.buyers)}")
        ids = (
            list(episode_ids)
            if episode_ids is not None
            else [f"{it.scenario_id}|{it.buyer}|{i}" for i, it in enumerate(items)]
        )
        trajs = [Trajectory(it, self._episode(it, eid), role=self.role) for it, eid in zip(items, ids)]
        batch = RolloutBatch(trajs)
        t0 = time.perf_counter()
        while True:
            live = [t for t in trajs if not t.done]
            if not live:
                break
            batch.waves += 1
            sellers = [t for t in live if t.episode.to_move == self.role]
            buyers = [t for t in live if t.episode.to_move != self.role]
            if sellers:
                t1 = time.perf_counter()
                self._seller_wave(sellers)
                batch.generation_s += time.perf_counter() - t1
            if buyers:
                t1 = time.perf_counter()
                self._buyer_wave(buyers)
                batch.buyer_s += time.perf_counter() - t1
            for t in live:
                if not t.done and t.episode.done:
                    t.status = "deal" if t.episode.outcome.deal else "no_deal"
        for t in trajs:  # the trajectory ends on the seller's end-of-turn token
            if t.completion_ids and not t.gen_stopped:
                t.add("env", self.tags.assistant_close.ids[:1])
        batch.total_s = time.perf_counter() - t0
        if trajs and all(t.excluded for t in trajs):
            warnings.warn(f"every trajectory of the batch ended in an error; nothing is trained on "
                          f"(first: {trajs[0].error})", RuntimeWarning, stacklevel=2)
        return batch

    def _prepare(self, t: Trajectory) -> list[int] | None:
        """Append what the seller has not seen since its last turn and return its context; None when
        the driver must cut the episode (seller-turn cap, or the context cap would be reached)."""
        if t.seller_turns >= self.limits.max_seller_turns:
            return None
        messages = self._render(t.episode.view(self.role))
        if not t.prompt_ids:
            ids = encode_chat(self.tokenizer, messages, add_generation_prompt=True)
            if len(ids) > self.limits.max_prompt_tokens:  # keep the end: the generation prompt survives
                ids, t.prompt_truncated = ids[-self.limits.max_prompt_tokens :], True
            t.prompt_ids = ids
            return t.context
        last_gen = next((ids for kind, ids in reversed(t.segments) if kind != "env"), [])
        obs = self.tags.observation_ids(self.tokenizer, _observation_message(messages)["content"], last_gen)
        if len(t.context) + len(obs) >= self.limits.max_context_tokens - 1:
            return None
        t.add("env", obs)
        t.gen_stopped = True
        return t.context

    def _generate(self, contexts: Sequence[list[int]], budgets: Sequence[int]) -> list[Generation | str]:
        """One ``generate`` call; if it raises or answers the wrong count, each context alone.
        A context that still fails gets its error text instead of a :class:`Generation`."""
        try:
            gens = self.generator.generate(contexts, budgets)
            if len(gens) == len(contexts):
                return list(gens)
            problem = f"generator returned {len(gens)} generations for {len(contexts)} contexts"
        except Exception as exc:  # noqa: BLE001 - contained to the episodes of this call
            problem = error_text(exc, "generate")
        if len(contexts) == 1:
            return [problem]
        return [self._generate([c], [b])[0] for c, b in zip(contexts, budgets)]

    def _seller_wave(self, sellers: Sequence[Trajectory]) -> None:
        ready: list[tuple[Trajectory, list[int]]] = []
        for t in sellers:
            try:
                ctx = self._prepare(t)
            except Exception as exc:  # noqa: BLE001 - rendering/encoding: contained to this episode
                t.fail(error_text(exc, f"turn {len(t.episode.turns) + 1} ({self.role}) prompt"))
                continue
            if ctx is None:
                t.status, t.error = "truncated", "driver limit (seller turns or context)"
            else:
                ready.append((t, ctx))
        if not ready:
            return
        cap = self.limits.max_context_tokens - 1  # room for an end-of-turn token after a cut turn
        budgets = [min(self.limits.max_new_tokens, cap - len(c)) for _, c in ready]
        t0 = time.perf_counter()
        gens = self._generate([c for _, c in ready], budgets)
        latency = (time.perf_counter() - t0) / len(ready)
        for (t, ctx), gen in zip(ready, gens):
            where = f"turn {len(t.episode.turns) + 1} ({self.role})"
            if isinstance(gen, str):
                t.fail(f"{where}: {gen}")
                continue
            t.add(self.role, gen.ids, gen.logprobs)
            t.seller_turns += 1
            t.gen_stopped = gen.stopped
            try:
                body = gen.ids[:-1] if gen.stopped else gen.ids
                raw = self.tokenizer.decode(body, skip_special_tokens=False)
                text = strip_template_tags(raw, self.tokenizer, self.tags)  # as HFAgent: no tag reaches the buyer
                t.episode.step(text, input_tokens=len(ctx), output_tokens=len(gen.ids), latency_s=latency)
            except Exception as exc:  # noqa: BLE001 - decoding/parser/environment: contained to this episode
                t.fail(error_text(exc, where))

    def _buyer_wave(self, buyers: Sequence[Trajectory]) -> None:
        groups: dict[str, list[tuple[Trajectory, Any]]] = {}
        opponent = other_role(self.role)
        for t in buyers:
            try:
                view = t.episode.view(opponent)
            except Exception as exc:  # noqa: BLE001 - contained to this episode
                t.fail(error_text(exc, f"turn {len(t.episode.turns) + 1} ({opponent}) view"))
                continue
            groups.setdefault(t.item.buyer, []).append((t, view))
        for name, pairs in groups.items():
            replies = act_contained(self.buyers[name], [v for _, v in pairs])  # never raises
            for (t, _), rep in zip(pairs, replies):
                problem = reply_problem(rep)
                if problem is not None:
                    t.fail(problem)
                    continue
                try:
                    turn = t.episode.opponent_turn(rep)
                    t.episode.step(turn, rep.input_tokens, rep.output_tokens, rep.latency_s)
                except Exception as exc:  # noqa: BLE001 - parser/environment: contained to this episode
                    t.fail(error_text(exc, f"turn {len(t.episode.turns) + 1} ({opponent})"))
