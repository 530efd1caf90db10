"""Transcripts for reading [paper App. E]: one episode as plain text, a seeded sample of an arm's episodes, and the
hand-read sample drawn per domain family (training, held-out, imported)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence

import numpy as np
import pandas as pd

from negolib.games.multi_issue.domains import load_domains
from negolib.games.multi_issue.protocol import action_text
from negolib.games.multi_issue.record_scenarios import RecordScenarios
from negolib.games.multi_issue.scenarios import Scenario
from negolib.study.record_view import KEY_COLS, Record
from negolib.study.record_view import episode_key as _key


def _clip(text: str, n: int) -> str:
    text = " ".join((text or "").split())
    return text if len(text) <= n else text[: n - 1].rstrip() + "…"


def format_transcript(rec: Record, max_chars: int = 400) -> str:
    """A readable transcript: a header, then per turn the prose the counterpart read and the
    parsed action, then the final ledger."""
    out = rec.get("outcome") or {}
    head = (f"[{rec['arm']} vs {rec['buyer']} | {rec['domain']} seed {rec['seed']} | {rec.get('status')}, "
            f"S={out.get('score', float('nan')):+.3f}, {len(rec['turns'])} turns]")
    lines = [head]
    for t in rec["turns"]:
        lines.append(f"T{t['turn']:>2} {t['role']:<6}: {_clip(t.get('prose') or '', max_chars)}")
        lines.append(f"          -> {action_text(t)}")
    if out:
        lines.append(f"final ledger: {out.get('final_ledger')}")
    return "\n".join(lines)


def sample_transcripts(records: Iterable[Record], arm: str, n: int, seed: int,
                       only_domains: Sequence[str] | None = None, buyer: str | None = None,
                       max_chars: int = 400) -> pd.DataFrame:
    """``n`` episodes of ``arm`` drawn without replacement (seeded; records sorted by key first, so
    the draw does not depend on file order), one row each with a readable ``transcript``."""
    pool = [r for r in records if r["arm"] == arm and (only_domains is None or r["domain"] in only_domains)
            and (buyer is None or r["buyer"] == buyer)]
    pool.sort(key=lambda r: (r["domain"], int(r["seed"]), r["buyer"]))
    rng = np.random.default_rng(seed)
    idx = sorted(rng.choice(len(pool), size=min(n, len(pool)), replace=False).tolist()) if pool else []
    rows = [{**_key(pool[i]), "status": pool[i].get("status"),
             "score": (pool[i].get("outcome") or {}).get("score"), "turns": len(pool[i]["turns"]),
             "transcript": format_transcript(pool[i], max_chars)} for i in idx]
    return pd.DataFrame(rows, columns=KEY_COLS + ["status", "score", "turns", "transcript"])


HAND_READ_PER_FAMILY = 5
"""Transcripts read by hand per trained arm per domain family (App. E: "five transcripts per RL'd arm per
domain family are read by hand")."""


def domain_family(domain: str, scenarios: Mapping[str, Scenario] | None = None) -> str:
    """The domain family a domain belongs to: ``"held-out"`` (the withheld domain), ``"training"`` (the
    eight training domains) or ``"imported"`` (one of the imported ``scenarios``). Ours: the paper names no other."""
    dom = load_domains().get(domain)
    return "imported" if domain in (scenarios or {}) else "held-out" if dom is not None and dom.held_out else "training"


def hand_read_sample(records: Iterable[Record], arm: str, seed: int, per_family: int = HAND_READ_PER_FAMILY,
                     max_chars: int = 400, scenarios: Mapping[str, Scenario] | None = None) -> pd.DataFrame:
    """The hand-read guard's sample of ``arm``: ``per_family`` seeded episodes (:func:`sample_transcripts`)
    from each domain family (:func:`domain_family`), with a ``family`` column, training family first."""
    recs = [r for r in records if r["arm"] == arm]
    RecordScenarios(scenarios).require((r["domain"] for r in recs), "hand_read_sample")
    families: dict[str, list[str]] = {}
    for d in sorted({r["domain"] for r in recs}):
        families.setdefault(domain_family(d, scenarios), []).append(d)
    parts = [sample_transcripts(recs, arm, per_family, seed, only_domains=families[f], max_chars=max_chars)
             .assign(family=f) for f in ("training", "held-out", "imported") if f in families]
    cols = ["family", *KEY_COLS, "status", "score", "turns", "transcript"]
    parts = [p for p in parts if not p.empty]
    return pd.concat(parts, ignore_index=True)[cols] if parts else pd.DataFrame(columns=cols)


__all__ = ["HAND_READ_PER_FAMILY", "domain_family", "format_transcript", "hand_read_sample", "sample_transcripts"]
