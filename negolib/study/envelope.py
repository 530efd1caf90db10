"""The upper envelope behind the exact Pareto frontier (:func:`negolib.study.efficiency.frontier_from_sets`).

The frontier of (a finite set of anchors, the discrete terms' sums) + (one concave curve g, the continuous terms'
segments sorted by slope) is the upper envelope of the translates anchor + g, cut to its Pareto part. This module
computes it on scalars (an envelope is a handful of points long): :func:`envelope_frontier` takes the anchors
``(m, 2)`` and g's vertices ``(k, 2)`` and returns the frontier's arrays (vertices, whether each consecutive pair
is joined by a frontier segment, and the anchor owning each vertex and segment). :mod:`negolib.study.efficiency`'s
module docstring states the geometry and the exactness rules (buyer values from g's vertices; an edge vertical in
floating point keeps both ends).
"""

from __future__ import annotations

import math
from bisect import bisect_right
from dataclasses import dataclass

import numpy as np

EPS = 1e-12


@dataclass
class _Piece:
    """One envelope piece: anchor ``j`` owns seller values [lo, hi], with buyer values ``lo_y`` and
    ``hi_y`` there. ``own_lo`` / ``own_hi``: the end is the translate's own first / last vertex."""

    j: int
    lo: float
    hi: float
    lo_y: float
    hi_y: float
    own_lo: bool
    own_hi: bool


@dataclass(frozen=True)
class _Curve:
    """g as Python lists (the envelope works on scalars: its arrays are a handful of points long)."""

    xs: list[float]
    ys: list[float]

    @property
    def width(self) -> float:
        return self.xs[-1]

    def at(self, x: float) -> float:
        """g(x), clamped to [0, width]."""
        xs, ys = self.xs, self.ys
        if x <= xs[0]:
            return ys[0]
        if x >= xs[-1]:
            return ys[-1]
        i = bisect_right(xs, x)
        x0, x1 = xs[i - 1], xs[i]
        return ys[i - 1] + (ys[i] - ys[i - 1]) * (x - x0) / (x1 - x0)


def _inside(x: float, y: float, lo: float, hi: float, y_lo: float, y_hi: float) -> bool:
    """Whether a vertex (x, y) of a translate lies strictly between the translate's points at seller
    values lo and hi (buyer values y_lo, y_hi): within EPS of [lo, hi] and past each end in seller
    *or* in buyer value (beyond EPS). On an edge of g that is (near-)vertical the seller values of its
    two ends agree to the last bits and only the buyer value tells them apart."""
    return (lo - EPS < x < hi + EPS and (x > lo + EPS or y < y_lo - EPS)
            and (x < hi - EPS or y > y_hi + EPS))


def _takeover(new: tuple[float, float], old: tuple[float, float], g: _Curve, lo: float, hi: float,
              lo_ys: tuple[float, float], old_hi_y: float) -> tuple[float, float, float] | None:
    """First x in [lo, hi] where translate ``new`` + g >= translate ``old`` + g (None: never), as
    (x, new's buyer value there, old's buyer value there).

    Both are defined on [lo, hi]; their difference h is nondecreasing there because g is concave
    and ``new`` lies further right, so the ends decide the common cases and the breakpoints the rest.
    ``lo_ys``: (new, old) buyer values at lo; ``old_hi_y``: old's at hi. A breakpoint's own translate
    takes its value from g's vertex, never through the round trip ``(c + s) - s``: a near-vertical
    edge of g (an issue with w_s ~ 1e-10) turns that round trip's last-bit error into ~1e-8 of buyer
    value. At a crossing inside an interval both translates are linear; new is the shallower one
    there (h nondecreasing), so the crossing's buyer value is interpolated along new.
    """
    (ns, nb), (os_, ob) = new, old
    yn0, yo0 = lo_ys
    if yn0 - yo0 >= -EPS:
        return lo, yn0, yo0
    yn_hi = nb + g.at(hi - ns)
    if yn_hi - old_hi_y < -EPS:
        return None
    inner = sorted([(c + ns, nb + y, None) for c, y in zip(g.xs, g.ys)
                    if _inside(c + ns, nb + y, lo, hi, yn0, yn_hi)]
                   + [(c + os_, None, ob + y) for c, y in zip(g.xs, g.ys)
                      if _inside(c + os_, ob + y, lo, hi, yo0, old_hi_y)],
                   key=lambda t: (t[0], -(t[1] if t[2] is None else t[2])))
    x0, h0 = lo, yn0 - yo0
    for x1, yn1, yo1 in [*inner, (hi, yn_hi, old_hi_y)]:
        yn1 = nb + g.at(x1 - ns) if yn1 is None else yn1
        yo1 = ob + g.at(x1 - os_) if yo1 is None else yo1
        h1 = yn1 - yo1
        if h1 >= -EPS:
            if h1 > h0:
                lam = min(-h0 / (h1 - h0), 1.0)  # h1 may be below 0 (within EPS): no extrapolation
                y = yn0 + (yn1 - yn0) * lam
                return x0 + (x1 - x0) * lam, y, y
            return x1, yn1, yo1
        x0, h0, yn0 = x1, h1, yn1
    return hi, yn_hi, old_hi_y


def _upper_envelope(anchors: np.ndarray, g: _Curve) -> list[_Piece]:
    """Pieces of max_j (anchors[j] + g), seller-ascending; anchors (M, 2) seller-ascending."""
    pts = [(float(a), float(b)) for a, b in anchors]
    pieces: list[_Piece] = []
    top, bottom = g.ys[0], g.ys[-1]
    for j, a in enumerate(pts):
        (s, b), own_lo = a, True
        start, start_y, end = s, b + top, s + g.width
        while pieces:
            last = pieces[-1]
            if last.hi < start:  # no overlap (even by less than EPS: the gap may hide a drop)
                break
            os_, ob = pts[last.j]
            if start >= last.lo:
                lo, lo_ys = start, (start_y, last.lo_y if start == last.lo else ob + g.at(start - os_))
            else:
                lo, lo_ys = last.lo, (b + g.at(last.lo - s), last.lo_y)
            x = _takeover(a, pts[last.j], g, lo, last.hi, lo_ys, last.hi_y)
            if x is None:
                start, start_y, own_lo = last.hi, b + g.at(last.hi - s), False
                break
            xt, yn, yo = x
            if xt <= last.lo + EPS and lo <= last.lo + EPS and yo >= last.lo_y - EPS:
                pieces.pop()
                continue
            last.hi, last.hi_y, last.own_hi = xt, yo, False
            own_lo = own_lo and xt == start
            start, start_y = xt, yn
            break
        if end >= start - EPS:
            pieces.append(_Piece(j, start, max(end, start), start_y, b + bottom, own_lo, True))
    return pieces


Poly = list[tuple[float, float]]


def _piece_polyline(piece: _Piece, anchor: tuple[float, float], g: _Curve) -> Poly:
    """Vertices (x, y) of an envelope piece, seller-ascending.

    g's vertices take their buyer values from g itself (see :func:`_takeover`); an end that is the
    translate's own first or last vertex is that vertex; the others are kept when :func:`_inside`.
    """
    s, b = anchor
    poly = [] if piece.own_lo else [(piece.lo, piece.lo_y)]
    poly += [(c + s, b + y) for c, y in zip(g.xs, g.ys)
             if _inside(c + s, b + y, -math.inf if piece.own_lo else piece.lo,
                        math.inf if piece.own_hi else piece.hi, piece.lo_y, piece.hi_y)]
    if not piece.own_hi and (piece.hi > piece.lo or not poly):
        poly.append((piece.hi, piece.hi_y))
    return [p for r, p in enumerate(poly) if r == 0 or p != poly[r - 1]]  # a weight ~1e-20 repeats one


def _pareto_cut(poly: Poly, best: float) -> Poly:
    """Part of a nonincreasing polyline strictly above ``best`` (with its closure), flat start dropped."""
    above = [k for k, (_, y) in enumerate(poly) if y > best + EPS]
    if not above:
        return []
    k = above[-1]
    out = poly[:k + 1]
    if k + 1 < len(poly):
        (x0, y0), (x1, y1) = poly[k], poly[k + 1]
        xc = x0 + (x1 - x0) * min((y0 - best) / (y0 - y1), 1.0)  # y1 may be above best (within EPS)
        if xc > x0 + EPS:
            out.append((xc, best))
    while len(out) > 1 and out[0][1] <= out[1][1] + EPS:
        out = out[1:]
    return out


def _assemble(parts: list[tuple[int, Poly]]) -> tuple[np.ndarray, ...]:
    """Concatenate seller-ascending (anchor, polyline) parts into (points (n, 2), joined (n - 1,),
    vertex anchors (n,), segment anchors (n - 1,)); a part starting where the previous one ends
    (a crossing of two translates) shares that vertex and is joined to it."""
    pts: Poly = []
    joined: list[bool] = []
    v_anchor: list[int] = []
    s_anchor: list[int] = []
    for j, poly in parts:
        for r, p in enumerate(poly):
            if pts and r == 0 and math.hypot(p[0] - pts[-1][0], p[1] - pts[-1][1]) < 1e-12:
                continue
            if pts:
                joined.append(r > 0)
                s_anchor.append(j if r > 0 else -1)
            pts.append(p)
            v_anchor.append(j)
    return (np.asarray(pts, dtype=float).reshape(-1, 2), np.asarray(joined, dtype=bool),
            np.asarray(v_anchor, dtype=int), np.asarray(s_anchor, dtype=int))


def envelope_frontier(anchors: np.ndarray, curve: np.ndarray) -> tuple[np.ndarray, ...]:
    """(points (n, 2), joined (n - 1,), vertex anchor (n,), segment anchor (n - 1,)) of the Pareto part of the upper
    envelope of ``anchors`` (m, 2) + the concave curve with vertices ``curve`` (k, 2)."""
    g = _Curve(curve[:, 0].tolist(), curve[:, 1].tolist())
    pieces = _upper_envelope(anchors, g)
    parts: list[tuple[int, Poly]] = []
    best = -math.inf
    for piece in reversed(pieces):
        poly = _pareto_cut(_piece_polyline(piece, (float(anchors[piece.j, 0]), float(anchors[piece.j, 1])), g),
                           best)
        if poly:
            parts.append((piece.j, poly))
            best = max(best, poly[0][1])
    return _assemble(parts[::-1])


__all__ = ["EPS", "envelope_frontier"]
