"""negolib.training.lean_tiles: the in-place tile folds give TRL's bits, use less memory, and swap in and out."""

from __future__ import annotations

import itertools

import pytest

torch = pytest.importorskip("torch")
kernel = pytest.importorskip("trl.kernels.chunked_logprob")

from negolib.training.lean_tiles import backward_tile, forward_tile, lean_logprob_tiles  # noqa: E402

TOKENS, WIDTH, COLS = 48, 96, 80  # a strided tile: the last vocabulary chunk is narrower than the buffer


def _tile(strided: bool, seed: int) -> torch.Tensor:
    gen = torch.Generator().manual_seed(seed)
    buf = torch.randn(TOKENS, WIDTH if strided else COLS, generator=gen) * 4
    return buf[:, :COLS]


def _state(seed: int) -> dict[str, torch.Tensor]:
    gen = torch.Generator().manual_seed(seed + 1)
    n = TOKENS
    return {"targets": torch.randint(0, 3 * COLS, (n,), generator=gen),  # some in this tile, most elsewhere
            "running_max": torch.randn(n, generator=gen), "sum_exp": torch.rand(n, generator=gen) + 0.5,
            "x_sum_exp": torch.randn(n, generator=gen), "sq_sum_exp": torch.rand(n, generator=gen),
            "z_sum": torch.randn(n, generator=gen), "max_before_target": torch.randn(n, generator=gen),
            "target_logit": torch.randn(n, generator=gen)}


FLAGS = list(itertools.product([False, True], repeat=5))


@pytest.mark.parametrize("softcap,entropy,sq,mean,top1", FLAGS)
@pytest.mark.parametrize("strided", [False, True])
def test_forward_tile_is_bitwise_trl(softcap: bool, entropy: bool, sq: bool, mean: bool, top1: bool,
                                     strided: bool) -> None:
    outs = []
    for fold in (kernel._forward_tile, forward_tile):
        tile, state = _tile(strided, 3), _state(3)
        fold(tile, tile.stride(0), state["targets"], state["running_max"], state["sum_exp"], state["x_sum_exp"],
             state["sq_sum_exp"], state["z_sum"], state["max_before_target"], state["target_logit"], COLS, COLS,
             logit_scale=0.7, softcap=30.0, inv_t=1 / 0.9, HAS_SOFTCAP=softcap, HAS_ENTROPY=entropy,
             HAS_LOG_SUM_SQ_PROBS=sq, HAS_MEAN_LOGITS=mean, HAS_IS_TOP1=top1, BLOCK_SIZE=1024)
        outs.append(state)
    for name in outs[0]:
        assert torch.equal(outs[0][name], outs[1][name]), name


@pytest.mark.parametrize("softcap,logprob_grad,entropy_grad", list(itertools.product([False, True], repeat=3)))
@pytest.mark.parametrize("strided", [False, True])
def test_backward_tile_is_bitwise_trl(softcap: bool, logprob_grad: bool, entropy_grad: bool, strided: bool) -> None:
    gen = torch.Generator().manual_seed(7)
    log_z, entropy = torch.randn(TOKENS, generator=gen) + 5, torch.rand(TOKENS, generator=gen) * 3
    g_lp, g_ent = torch.randn(TOKENS, generator=gen), torch.randn(TOKENS, generator=gen)
    targets = torch.randint(0, 3 * COLS, (TOKENS,), generator=gen)
    tiles = []
    for fold in (kernel._backward_tile, backward_tile):
        tile = _tile(strided, 11)
        fold(tile, tile.stride(0), targets, log_z, entropy, g_lp, g_ent, COLS, COLS, logit_scale=0.7, softcap=30.0,
             inv_t=1 / 0.9, HAS_SOFTCAP=softcap, HAS_LOGPROB_GRAD=logprob_grad, HAS_ENTROPY_GRAD=entropy_grad,
             BLOCK_SIZE=1024)
        tiles.append(tile)
    # bitwise, signed zeros included
    assert torch.equal(tiles[0].view(torch.int32), tiles[1].view(torch.int32))


def test_a_differently_rounded_fold_is_caught() -> None:
    """The sabotaged twin: the same gradient, algebraically, as g * t - g * p instead of g * (t - p). It differs
    from TRL's only in rounding, and the bitwise comparison above catches that."""
    def rounded_otherwise(tile, tile_stride, targets, log_z, entropy, grad_logprobs, grad_entropy,  # noqa: ANN001, ANN202
                          vocab_start, n_cols, logit_scale, softcap, inv_t, HAS_SOFTCAP,  # noqa: ANN001, N803
                          HAS_LOGPROB_GRAD, HAS_ENTROPY_GRAD, BLOCK_SIZE):  # noqa: ANN001, N803
        p = torch.exp(tile * logit_scale * inv_t - log_z.unsqueeze(-1))
        is_target = (torch.arange(vocab_start, vocab_start + n_cols) == targets.unsqueeze(-1)).float()
        g = grad_logprobs.unsqueeze(-1)
        tile.copy_((g * is_target - g * p) * inv_t * logit_scale)

    gen = torch.Generator().manual_seed(7)
    log_z, g = torch.randn(TOKENS, generator=gen) + 5, torch.randn(TOKENS, generator=gen)
    targets = torch.randint(0, COLS, (TOKENS,), generator=gen)
    kw = dict(logit_scale=0.7, softcap=1.0, inv_t=1 / 0.9, HAS_SOFTCAP=False, HAS_LOGPROB_GRAD=True,
              HAS_ENTROPY_GRAD=False, BLOCK_SIZE=1024)
    tiles = []
    for fold in (kernel._backward_tile, rounded_otherwise):
        tile = _tile(False, 11)
        fold(tile, tile.stride(0), targets, log_z, g, g, g, 0, COLS, **kw)
        tiles.append(tile)
    assert torch.allclose(tiles[0], tiles[1], atol=1e-6)  # the same gradient...
    assert not torch.equal(tiles[0], tiles[1])  # ...but not the same bits


def test_the_backward_fold_allocates_no_tile() -> None:
    """Tensors alive at once during one fold, besides its inputs: the in-place fold's are O(tokens); TRL's
    include several tile-sized temporaries."""
    big = torch.randn(512, 4096)
    n_tile = big.numel() * 4
    targets = torch.randint(0, 4096, (512,))
    log_z, ent, g = torch.full((512,), 9.0), torch.ones(512), torch.ones(512)
    kw = dict(logit_scale=1.0, softcap=1.0, inv_t=1.0, HAS_SOFTCAP=False, HAS_LOGPROB_GRAD=True,
              HAS_ENTROPY_GRAD=False, BLOCK_SIZE=1024)
    lean = _torch_peak(backward_tile, big.clone(), targets, log_z, ent, g, g, 0, 4096, **kw)
    trl = _torch_peak(kernel._backward_tile, big.clone(), targets, log_z, ent, g, g, 0, 4096, **kw)
    assert lean < n_tile / 4  # ours: no tile-sized temporary
    assert trl >= 3 * n_tile  # TRL's: several at once (so the measurement can see them)


def _torch_peak(fold, tile: torch.Tensor, *args, **kw) -> int:  # noqa: ANN001, ANN002, ANN003
    """Bytes of tensors alive at once during ``fold`` beyond its inputs, tracked by a torch dispatch mode."""
    from torch.utils._python_dispatch import TorchDispatchMode

    class Track(TorchDispatchMode):
        def __init__(self) -> None:
            super().__init__()
            self.live: dict[int, int] = {}
            self.peak = 0

        def __torch_dispatch__(self, func, types, args=(), kwargs=None):  # noqa: ANN001, ANN204
            out = func(*args, **(kwargs or {}))
            import weakref
            for t in (out if isinstance(out, (tuple, list)) else [out]):
                if isinstance(t, torch.Tensor) and t.untyped_storage().data_ptr() not in self.live:
                    key = t.untyped_storage().data_ptr()
                    if key in seen_inputs:
                        continue
                    self.live[key] = t.untyped_storage().nbytes()
                    weakref.finalize(t.untyped_storage(), self.live.pop, key, None)
            self.peak = max(self.peak, sum(self.live.values()))
            return out

    seen_inputs = {tile.untyped_storage().data_ptr()} | {a.untyped_storage().data_ptr() for a in args
                                                         if isinstance(a, torch.Tensor)}
    with Track() as track:
        fold(tile, tile.stride(0), *args, **kw)
    return track.peak


def test_swap_in_and_out() -> None:
    before = kernel._forward_tile, kernel._backward_tile
    with lean_logprob_tiles() as swapped:
        assert swapped
        assert (kernel._forward_tile, kernel._backward_tile) == (forward_tile, backward_tile)
    assert (kernel._forward_tile, kernel._backward_tile) == before
    with lean_logprob_tiles(enabled=False) as swapped:
        assert not swapped and kernel._backward_tile is before[1]
