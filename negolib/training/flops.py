"""FLOP accounting for the matched-step budget [App. I] and the per-size table (Table 8) [App. H].

One GRPO step costs approximately ``C = 2 N D_gen + 6 N D_train``: ``N`` parameters in the forward
pass, ``D_gen`` tokens sampled by the policy (a forward per token) and ``D_train`` tokens the update
runs forward and backward. Here ``D_train`` counts every token of every trained sequence (prompt,
seller and buyer tokens alike: masked tokens still pass through forward and backward), which is
what the training logs record as ``tokens_trained``. The reference-model and old-policy forwards
(``2 N D_train`` each) are not in the paper's formula; ``step_flops(..., ref_forward=True)`` adds the
reference forward for those who want it.

Table 8 is built from a params mapping whose defaults are the paper's per-size values; the
relative FLOPs/step rows divide by the first size under both parameter conventions (effective
parameters dominate forward/backward; the optimizer touches all stored parameters).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import asdict, dataclass, fields, replace
from typing import Any

from negolib.core.errors import ValidationError


def step_flops(n_params: float, d_gen: float, d_train: float, ref_forward: bool = False) -> float:
    """``2 N D_gen + 6 N D_train`` (+ ``2 N D_train`` for the reference forward when asked)."""
    if n_params < 0 or d_gen < 0 or d_train < 0:
        raise ValueError("parameter and token counts must be >= 0")
    return 2.0 * n_params * d_gen + (8.0 if ref_forward else 6.0) * n_params * d_train


def flops_from_log(
    rows: Iterable[Mapping[str, Any]],
    n_params: float,
    gen_key: str = "tokens_generated",
    train_key: str = "tokens_trained",
) -> list[dict[str, float]]:
    """Per-step and cumulative FLOPs from logged token counts (rows of the training log, in step order).

    Returns one dict per row: ``step``, ``d_gen``, ``d_train``, ``flops``, ``cum_flops``.
    """
    out, cum = [], 0.0
    for row in rows:
        d_gen, d_train = float(row[gen_key]), float(row[train_key])
        c = step_flops(n_params, d_gen, d_train)
        cum += c
        out.append(
            {
                "step": int(row.get("step", len(out) + 1)),
                "d_gen": d_gen,
                "d_train": d_train,
                "flops": c,
                "cum_flops": cum,
            }
        )
    return out


@dataclass(frozen=True)
class SizeSpec:
    """One policy size of the study: parameter counts and the hardware-forced settings."""

    label: str
    effective_params: float
    total_params: float
    train_tp: int = 1
    micro_batch: int = 1
    gen_memory_fraction: float = 0.45
    eval_accelerators: int = 1


PAPER_SIZES: dict[str, SizeSpec] = {
    "E2B": SizeSpec("E2B", 2.3e9, 5.1e9, 1, 1, 0.45, 1),
    "E4B": SizeSpec("E4B", 4.5e9, 8.0e9, 1, 1, 0.40, 1),
    "12B": SizeSpec("12B", 11.95e9, 11.95e9, 1, 1, 0.35, 1),
    "31B": SizeSpec("31B", 30.7e9, 30.7e9, 4, 1, 0.30, 4),
}
"""Table 8 of the paper (Gemma 4 sizes; 48 GB evaluation accelerators)."""

PAPER_RELATIVE_FLOPS = {"effective": [1.0, 2.0, 5.2, 13.3], "total": [1.0, 1.6, 2.3, 6.0]}
"""The paper's printed relative FLOPs/step rows, for display beside ours."""


def sizes_from_params(
    params: Mapping[str, Mapping[str, Any]] | None = None, source: str = "params.sizes"
) -> dict[str, SizeSpec]:
    """The size table: the paper's entries, overridden/extended field by field from ``params``.

    ``params`` maps a size label to a mapping of :class:`SizeSpec` fields; a new label needs
    ``effective_params`` and ``total_params``. Unknown fields raise :class:`ValidationError`.
    """
    sizes = dict(PAPER_SIZES)
    allowed = {f.name for f in fields(SizeSpec)} - {"label"}
    for label, spec in (params or {}).items():
        unknown = sorted(set(spec) - allowed)
        if unknown:
            raise ValidationError(
                source, f"{label}.{unknown[0]}", f"unknown field; allowed: {sorted(allowed)}"
            )
        if label in sizes:
            sizes[label] = replace(sizes[label], **spec)
        else:
            missing = {"effective_params", "total_params"} - set(spec)
            if missing:
                raise ValidationError(source, f"{label}.{sorted(missing)[0]}", "required for a new size")
            sizes[label] = SizeSpec(label, **spec)
    return sizes


def table8(params: Mapping[str, Mapping[str, Any]] | None = None, decimals: int = 1):  # noqa: ANN201
    """Table 8 as a DataFrame: one column per size, the paper's rows, relative FLOPs under both conventions.

    At matched optimizer steps and (approximately) matched token counts per step, per-step compute is
    proportional to N [App. I], so relative FLOPs/step is N divided by the first size's N.
    """
    import pandas as pd

    sizes = sizes_from_params(params)
    specs = list(sizes.values())
    base_eff, base_tot = specs[0].effective_params, specs[0].total_params
    rows = {
        "Effective parameters": [_fmt_params(s.effective_params) for s in specs],
        "Total parameters": [_fmt_params(s.total_params) for s in specs],
        "Train tensor-parallel degree": [s.train_tp for s in specs],
        "Train micro-batch size": [s.micro_batch for s in specs],
        "Generation memory fraction": [s.gen_memory_fraction for s in specs],
        "Eval serving accelerators (48 GB)": [s.eval_accelerators for s in specs],
        "Relative FLOPs/step (effective params)": [
            round(s.effective_params / base_eff, decimals) for s in specs
        ],
        "Relative FLOPs/step (total params)": [round(s.total_params / base_tot, decimals) for s in specs],
    }
    return pd.DataFrame(rows, index=[s.label for s in specs]).T


def size_records(params: Mapping[str, Mapping[str, Any]] | None = None) -> list[dict[str, Any]]:
    """The size table as JSON-ready records (for params files and logs)."""
    return [asdict(s) for s in sizes_from_params(params).values()]


def _fmt_params(n: float) -> str:
    return f"{n / 1e9:g}B" if n >= 1e9 else f"{n / 1e6:g}M"
