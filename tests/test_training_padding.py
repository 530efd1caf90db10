"""Trimming a micro-batch to its own longest trajectory (negolib.training.padding): the columns cut are padding in
every row, and the completion tokens' log-probabilities (what the GRPO loss reads) are unchanged. A sabotaged twin
that cuts one real prompt column changes them, so the equality test can fail."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")

from negolib.training.padding import trim_micro_batch, trim_widths  # noqa: E402


def _batch(pad_left=(3, 1, 2), prompt_len=(4, 6, 5), comp_len=(2, 5, 3), extra_right=3, seed=0):
    """A TRL-shaped micro-batch: prompts left-padded to a common width (plus one all-padding column), completions
    right-padded to a common width plus ``extra_right`` all-padding columns (as when a longer episode of the step
    sits in another micro-batch)."""
    g = torch.Generator().manual_seed(seed)
    p_w = max(p + lp for p, lp in zip(prompt_len, pad_left))
    c_w = max(comp_len) + extra_right
    b = len(prompt_len)
    prompt_ids = torch.zeros(b, p_w, dtype=torch.long)
    prompt_mask = torch.zeros(b, p_w, dtype=torch.long)
    completion_ids = torch.zeros(b, c_w, dtype=torch.long)
    completion_mask = torch.zeros(b, c_w, dtype=torch.long)
    for i, (p, c) in enumerate(zip(prompt_len, comp_len)):
        prompt_ids[i, p_w - p:] = torch.randint(3, 250, (p,), generator=g)
        prompt_mask[i, p_w - p:] = 1
        completion_ids[i, :c] = torch.randint(3, 250, (c,), generator=g)
        completion_mask[i, :c] = 1
    return {"prompt_ids": prompt_ids, "prompt_mask": prompt_mask, "completion_ids": completion_ids,
            "completion_mask": completion_mask, "tool_mask": completion_mask.clone(),
            "old_per_token_logps": torch.randn(b, c_w, generator=g), "advantages": torch.randn(b, generator=g)}


def _logps(model, inputs):
    """Per-token log-probabilities of the completion tokens, as TRL computes them (shape (B, C))."""
    ids = torch.cat([inputs["prompt_ids"], inputs["completion_ids"]], dim=1)
    mask = torch.cat([inputs["prompt_mask"], inputs["completion_mask"]], dim=1)
    c = inputs["completion_ids"].shape[1]
    logits = model(input_ids=ids, attention_mask=mask).logits[:, -c - 1:-1].float()
    return torch.log_softmax(logits, -1).gather(-1, inputs["completion_ids"].unsqueeze(-1)).squeeze(-1)


def test_widths_cut_only_columns_that_are_padding_in_every_row():
    batch = _batch()
    start, width = trim_widths(batch["prompt_mask"], batch["completion_mask"])
    assert (start, width) == (1, 5)  # one all-padding prompt column; the longest completion is 5 tokens
    out = trim_micro_batch(batch)
    assert out["prompt_ids"].shape[1] == batch["prompt_ids"].shape[1] - 1
    for key in ("completion_ids", "completion_mask", "tool_mask", "old_per_token_logps"):
        assert out[key].shape[1] == 5
    assert torch.equal(out["advantages"], batch["advantages"])  # per-row tensors untouched
    assert out["completion_mask"].sum() == batch["completion_mask"].sum()
    assert out["prompt_mask"].sum() == batch["prompt_mask"].sum()


def test_nothing_to_trim_and_unknown_per_token_tensors_leave_the_batch_alone():
    tight = _batch(pad_left=(2, 0, 1), extra_right=0)
    assert trim_micro_batch(tight)["completion_ids"] is tight["completion_ids"]
    multimodal = {**_batch(), "token_type_ids": torch.zeros(3, 20, dtype=torch.long)}
    assert trim_micro_batch(multimodal)["prompt_ids"] is multimodal["prompt_ids"]


def test_completion_logps_are_unchanged_by_trimming_and_changed_by_a_sabotaged_trim():
    from negolib.models import tiny_causal_lm

    model, _ = tiny_causal_lm(seed=0)
    model.eval()
    batch = _batch(extra_right=4)
    out = trim_micro_batch(batch)
    width = out["completion_ids"].shape[1]
    mask = batch["completion_mask"][:, :width].bool()
    with torch.no_grad():
        full, trimmed = _logps(model, batch)[:, :width], _logps(model, out)
        assert torch.allclose(full[mask], trimmed[mask], atol=1e-5)
        # the twin: cut one more prompt column, which holds a real token of row 1
        sabotaged = {**out, "prompt_ids": out["prompt_ids"][:, 1:], "prompt_mask": out["prompt_mask"][:, 1:]}
        assert not torch.allclose(full[mask], _logps(model, sabotaged)[mask], atol=1e-5)
