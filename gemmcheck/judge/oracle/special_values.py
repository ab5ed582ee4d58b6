"""Where IEEE 754 puts NaN and Inf in a product: the expected special-value pattern.

Special values
--------------
The expected NaN/Inf pattern follows IEEE 754 on the float64 inputs: the
product a*b is NaN when either is NaN or one is infinite and the other zero
(of either sign), +-Inf when one is infinite and the other nonzero; C[i, j] is
NaN if any product is NaN or products of both infinite signs occur, +-Inf if
only infinite products of one sign occur, finite otherwise; alpha < 0 swaps
the infinite signs, alpha = 0 turns Inf into NaN (0 * Inf), and a finite
beta C0 changes neither. So a NaN or Inf
taints whole rows of C (from A) and whole columns (from B), and an element is
finite exactly when row i of A and column j of B are. Counts are computed with
0/1 matrix products, never with a library's own inf*0 handling.

Subnormals: gemmcheck builds with -ftz=false (gemmcheck.compile.compiler; NVRTC's
default, and no fast-math flags), so subnormal inputs, products and results
must be kept, not flushed to zero; the ``special`` kind's subnormal row makes
a flush visible as wrong values (and Inf * subnormal, flushed, as a NaN where
IEEE gives Inf). CuPy's own compile adds -ftz=true: the first H200 run
showed exactly that flush for float32 and bfloat16. The NaN payload is not judged (GPUs return a canonical NaN);
only the poison and guard payloads carry meaning: poison means unwritten, a
guard payload means the element read past an operand's end.
"""

from __future__ import annotations

from gemmcheck import arrays


def special_pattern(A, B, alpha=1) -> tuple:
    """(nan, +inf, -inf) masks of alpha A @ B (+ a finite beta C0) by IEEE 754 rules (assumes
    finite products stay finite), on the array module of A and B."""
    M, N = A.shape[0], B.shape[1]
    xp = arrays.module_of(A)
    if xp.isfinite(A).all() and xp.isfinite(B).all():
        none = xp.zeros((M, N), dtype=bool)
        return none, none.copy(), none.copy()
    f = xp.float64
    nan_a, nan_b = xp.isnan(A).astype(f), xp.isnan(B).astype(f)
    inf_a, inf_b = xp.isinf(A).astype(f), xp.isinf(B).astype(f)
    zero_a, zero_b = (A == 0).astype(f), (B == 0).astype(f)
    pos_a, neg_a = (A > 0).astype(f), (A < 0).astype(f)        # NaN compares false
    pos_b, neg_b = (B > 0).astype(f), (B < 0).astype(f)
    pinf_a, ninf_a = (A == xp.inf).astype(f), (A == -xp.inf).astype(f)
    pinf_b, ninf_b = (B == xp.inf).astype(f), (B == -xp.inf).astype(f)
    ones_a, ones_b = xp.ones_like(nan_a), xp.ones_like(nan_b)
    nan_products = nan_a @ ones_b + ones_a @ nan_b + inf_a @ zero_b + zero_a @ inf_b
    pos_inf = pinf_a @ pos_b + ninf_a @ neg_b + pos_a @ pinf_b + neg_a @ ninf_b
    neg_inf = pinf_a @ neg_b + ninf_a @ pos_b + pos_a @ ninf_b + neg_a @ pinf_b
    nan = (nan_products > 0) | ((pos_inf > 0) & (neg_inf > 0))
    pos, neg = (pos_inf > 0) & ~nan, (neg_inf > 0) & ~nan
    if alpha == 0:
        return nan | pos | neg, xp.zeros_like(pos), xp.zeros_like(neg)
    return (nan, neg, pos) if alpha < 0 else (nan, pos, neg)
