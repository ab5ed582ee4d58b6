"""Judging one run: compare what the kernel wrote with what a correct kernel must have written,
into a Judgement (findings, worst ratio, error map).

``judge(run, A, B, exact=...)`` returns a Judgement (findings, worst ratio,
error map, message); ``assert_judgement`` records it and fails the test with
everything needed to act on it. Checks go in this order, each on the
elements the previous ones left: shape, unwritten elements (poison bits),
NaN/Inf positions, then values; last, what the launch changed outside C (a guard band or
padding: an out-of-bounds write; A or B: input mutation), which no value check sees
(gemmcheck.judge.oracle.outside).

The reference and the bound: gemmcheck.judge.oracle.exactness (exact judging) and
gemmcheck.judge.oracle.bound (bounded judging); the NaN/Inf pattern:
gemmcheck.judge.oracle.special_values.

Unwritten elements when beta != 0: C starts as C0 instead of poison, so an
unwritten element still holds C0's bits. That only proves "unwritten" if no
correct result can hold them: ``judge`` checks the premise (exact: the
expected bits differ from C0's and not both are zeros; bound: |C_ref - C0|
exceeds the bound) and raises UnchangedElements otherwise
(gemmcheck.problems.problem chooses C0 so that it holds).

A strided batch's run (Run.batch > 1), or a grouped GEMM's (Run.groups), is judged product by
product, each exactly as one product is (its own premise, reference and bound: K terms, never
batch K), each finding naming its batch or group; what the launch changed outside the output (a
gap between two products' matrices, a masked group's rows, included) is reported once.
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np

from gemmcheck import arrays
from gemmcheck.contract import dtypes as dt
from gemmcheck.judge.oracle.bound import Bound, _ratio, reference_and_bound
from gemmcheck.judge.oracle.exactness import InexactProblem, _scaled, exact_reference
from gemmcheck.judge.oracle.judgement import Judgement, _tile_of, reproduction
from gemmcheck.judge.oracle.outside import outside_the_output
from gemmcheck.judge.oracle.special_values import special_pattern
from gemmcheck.phases import timed
from gemmcheck.problems.harness import never_written
from gemmcheck.problems.problem import scaled_operands, split_rows
from gemmcheck.verdict import Defect, Finding


class UnchangedElements(ValueError):
    """beta != 0 and C0 equals a correct result somewhere: an unwritten element would pass."""


def _representable(X, d: dt.DType) -> bool:
    xp = arrays.module_of(X)
    back = dt.from_bits(dt.to_bits(X, d), d).astype(xp.float64)
    # NaN-free inputs (nearly all) settle with one comparison; array_equal's equal_nan
    # costs ~6x that (2-3 ms of a 600^2 judgement here).
    return bool((back == X).all()) or bool(xp.array_equal(back, X, equal_nan=True))


def _scaling(run) -> tuple:
    """(alpha, beta, C0) of a run; C0 only when beta != 0 (otherwise C held poison)."""
    alpha, beta = getattr(run, "alpha", 1), getattr(run, "beta", 0)
    return alpha, beta, (getattr(run, "C0", None) if beta != 0 else None)


def _multiplied(run, types, A, B):
    """(A, B) as the kernel multiplies them: with their scale factors (the run's), and the
    unscaled pair (None without scales), on A's array module."""
    if not types.scales:
        return A, B, None
    return (*scaled_operands(types, A, B, getattr(run, "scales", {})), (A, B))


@timed("oracle")
def reference_of(run, A: np.ndarray, B: np.ndarray):
    """exact_reference of the problem `run` was launched on (its alpha, beta, C0 and scale
    factors), for judge(reference=) when many runs of that problem are judged; on the array
    module judge uses for that shape (gemmcheck.arrays.module_for)."""
    if _products(run):
        return np.concatenate([arrays.to_host(reference_of(product_run(run, p), *operands))
                               for p, operands in enumerate(_product_operands(run, A, B))])
    alpha, beta, C0 = _scaling(run)
    types = run.instance.types
    xp = arrays.module_for(run.M, run.N, run.K)
    A, B, unscaled = _multiplied(run, types, xp.asarray(A, dtype=xp.float64), xp.asarray(B, dtype=xp.float64))
    return exact_reference(A, B, types, alpha, beta, C0, unscaled)


@timed("oracle")
def judge(run, A: np.ndarray, B: np.ndarray, *, exact: bool, problem=None,
          reference: np.ndarray | None = None) -> Judgement:
    """Judge one run against the inputs it was given.

    `A`, `B`: float64 host inputs, already exactly representable in the dtype.
    `exact`: True to compare bit for bit (the inputs must make every partial sum
    exact; checked, InexactProblem otherwise), False for the forward error bound.
    `problem`: a Problem or label for the message (its seed makes the reproduction).
    alpha, beta and C0 come from the run (C = alpha A @ B + beta C0; see the docs of
    gemmcheck.judge.oracle.exactness and gemmcheck.judge.oracle.bound).
    `reference`: with exact, exact_reference of these inputs, when one caller judges many runs
    of one problem (the kill matrix's repeated launches): computed once, not per run.
    Large problems are judged on the GPU when the session's backend is the GPU (the same
    judgement: gemmcheck.arrays); the Judgement's arrays are numpy either way.
    A strided batch's run: A, B (and `reference`) its products' stacked by rows, judged product
    by product (_judge_batch).
    """
    if _products(run):
        return _judge_products(run, A, B, exact=exact, problem=problem, reference=reference)
    inst = run.instance
    alpha, beta, C0 = _scaling(run)
    types = inst.types            # every operand's type, read once: the rest reads this record
    out = types.D
    (M, K), (K2, N) = np.shape(A), np.shape(B)
    xp = arrays.module_for(M, N, K)
    A, B = xp.asarray(A, dtype=xp.float64), xp.asarray(B, dtype=xp.float64)
    if K != K2 or (run.M, run.N, run.K) != (M, N, K) or run.C_bits.shape != (M, N):
        raise ValueError(f"{inst.id}: shapes disagree: A {A.shape}, B {B.shape}, run M={run.M} "
                         f"N={run.N} K={run.K}, C {run.C_bits.shape}")
    if beta != 0 and (C0 is None or np.shape(C0) != (M, N) or not np.isfinite(C0).all()):
        raise ValueError(f"{inst.id}: beta={beta!r} needs a finite C0 of shape ({M}, {N}) in the run")
    C0 = None if C0 is None else xp.asarray(C0, dtype=xp.float64)
    scales = getattr(run, "scales", {})
    given = [("A", A, types.A), ("B", B, types.B)] + ([("C0", C0, types.C)] if C0 is not None else []) + \
        [(s.role, xp.asarray(scales[s.role], dtype=xp.float64), s.type) for s in types.scales if s.role in scales]
    for name, X, d in given:
        if not _representable(X, d):
            raise ValueError(f"{inst.id}: {name} holds values not representable in {d.name}; "
                             f"pass the inputs as rounded to the dtype (what the kernel read)")
    missing = [s.role for s in types.scales if s.role not in scales]
    if missing:
        raise ValueError(f"{inst.id}: the run has no {', '.join(missing)}; the kernel takes scale factors")
    label = getattr(problem, "label", None) or (str(problem) if problem is not None else f"M{M}xN{N}xK{K} {types.name}")
    A, B, unscaled = _multiplied(run, types, A, B)
    epilogue, epilogue_values = types.epilogue, getattr(run, "epilogue", {})
    missing = [role for role in epilogue.roles if role not in epilogue_values]
    if missing:
        raise ValueError(f"{inst.id}: the run has no {', '.join(missing)}; the kernel fuses an epilogue")
    # an activation whose value is not exact in floating point: the exact kinds' inputs judged by the bound
    exact = exact and not epilogue.transcendental
    fused = f"; {epilogue.describe()}" if epilogue.spelling else ""

    C_bits = xp.asarray(run.C_bits)
    C = dt.from_bits(C_bits, out).astype(xp.float64)
    output = getattr(run, "output", "C")   # the matrix the kernel wrote its result into
    nan_e, pinf_e, ninf_e = special_pattern(A, B, alpha)
    finite_e = ~(nan_e | pinf_e | ninf_e)
    no_special_inputs = bool(finite_e.all())
    scaling = "" if (alpha, beta) == (1, 0) else f" (alpha = {alpha:g}, beta = {beta:g})"
    scaled = " with its scale factors" if types.scales else ""
    if exact:
        ref = exact_reference(A, B, types, alpha, beta, C0, unscaled) if reference is None else xp.asarray(reference)
        ref = _fused(ref, epilogue, epilogue_values, types, inst)
        bound = xp.zeros((M, N))
        saturating = ", saturated to its finite range" if types.saturate else ""
        bound_text = (f"exact: the exact result{scaling}{scaled} rounded once to {out.name}{saturating}, bit for "
                      f"bit (+0.0 and -0.0 equal), every partial sum exact in {types.accumulator.name}{fused}")
    else:
        b = Bound.for_types(types, K, alpha, beta)
        finite_A, finite_B = arrays.finite_part(A), arrays.finite_part(B)
        ref = _scaled(finite_A @ finite_B, alpha, beta, C0)
        Q_hat = b.magnitude(xp, xp.abs(finite_A) @ xp.abs(finite_B), None if C0 is None else xp.abs(C0))
        ref, bound = reference_and_bound(b, epilogue, epilogue_values, ref, Q_hat, xp, (finite_A, finite_B))
        bound_text = b.describe() + (f"{fused}: the activation's Lipschitz constant and its own evaluation error "
                                     f"counted (gemmcheck.contract.epilogue)" if fused else "")
    if exact:
        # Rounding once may overflow (float16 beyond 65504): then Inf is the correct answer, or
        # NaN in a type without Inf (float8_e4m3fn), or the largest finite value when the
        # kernel's output conversion saturates. (want: the bits a right element holds; an
        # element that overflows here leaves finite_e below and is not compared with them.)
        want = dt.to_bits(xp.where(finite_e, ref, 0.0), out, saturate=types.saturate)
        rounded = dt.from_bits(want, out).astype(xp.float64)
        pinf_e |= finite_e & (rounded == xp.inf)
        ninf_e |= finite_e & (rounded == -xp.inf)
        nan_e |= finite_e & xp.isnan(rounded)
        finite_e &= xp.isfinite(rounded)
    specials = nan_e | pinf_e | ninf_e
    expected = (xp.where(nan_e, xp.nan, xp.where(pinf_e, xp.inf, xp.where(ninf_e, -xp.inf, ref)))
                if specials.any() else ref)
    if C0 is not None and getattr(run, "output", "C") == "C":   # C0 is in the output buffer
        _check_every_element_changes(inst, out, C0, ref, bound, finite_e, want if exact else None)

    findings: list[Finding] = []
    beyond = outside_the_output(run)   # reported last, after what C holds
    error_map = xp.zeros((M, N))
    unwritten = xp.asarray(run.unwritten, dtype=bool)
    if not out.marks_are_nan and output == "D" and unwritten.any():
        # a poison that is a value (float8_e4m3fn, int32) proves "unwritten" only where the
        # correct result is another value
        poison_value = dt.from_bits(xp.asarray([out.poison_bits], dtype=out.storage), out).astype(xp.float64)[0]
        could_be_right = (want == out.poison_bits) if exact else (xp.abs(poison_value - ref) <= bound)
        unwritten = unwritten & ~could_be_right
    written = ~unwritten

    # 1. Unwritten (harness.never_written: the poison, and the second poison on a launch with it;
    #    beta != 0: still C0's bits, which no correct result has).
    if unwritten.any():
        if output == "D":
            # D is poisoned at every launch and C keeps its own poison on the second one: a D
            # computed from C's NaN holds the first poison again, so what is left was never written
            what = never_written("D")
        elif C0 is not None:
            what = "never written (still C0's bits, which every correct result changes)"
        elif getattr(run, "c_fill", "poison") == "finite":
            what = "never written (still the finite values C held, which no correct result comes near)"
        elif "beta" in getattr(inst.spec, "roles", ()):
            # 0 * NaN keeps the NaN's payload on the CPU, so C = alpha * acc + beta * C gives
            # the poison back too (gemmcheck.judge.beta_zero tells the two apart)
            what = ("still the poison bits: never written, or computed from C's NaN (a read of C at "
                    "beta = 0 keeps its payload)")
        else:
            what = never_written("C")
        findings.append(_finding(Defect.UNWRITTEN_OUTPUT, "poison", unwritten, inst, what, output=output))
        error_map[unwritten] = xp.inf

    if exact and no_special_inputs and not findings and not beyond and bool((C_bits == want).all()):
        # Every element holds the exact result's bits (an overflow's Inf included): nothing
        # below can find anything. Most runs end here; the kill matrix judges a reference's
        # output at 1024^2 on the host about a dozen times a row.
        return Judgement(inst, label, M, N, K, exact, bound_text, findings, 0.0,
                         arrays.to_host(error_map), arrays.to_host(C), arrays.to_host(expected),
                         arrays.to_host(bound), np.zeros((M, N), bool), arrays.to_host(unwritten),
                         reproduction(problem), run)

    # 2. NaN/Inf positions.
    nan_c = xp.isnan(C) & written
    pinf_c, ninf_c = (C == xp.inf) & written, (C == -xp.inf) & written
    nan_where_none = nan_c & ~nan_e
    missing_nan = nan_e & written & ~nan_c
    inf_wrong = written & ~nan_e & ~nan_c & ((pinf_c != pinf_e) | (ninf_c != ninf_e))
    pattern_wrong = nan_where_none | missing_nan | inf_wrong
    if pattern_wrong.any():
        guard_payload = int(xp.count_nonzero(C_bits[nan_where_none] == out.guard_bits)) if out.marks_are_nan else 0
        parts = [f"{n} {what}" for n, what in (
            (int(nan_where_none.sum()), "NaN where none belongs"),
            (int(missing_nan.sum()), "finite where IEEE gives NaN"),
            (int(inf_wrong.sum()), "Inf where IEEE gives none or the wrong Inf"),
        ) if n]
        if guard_payload:
            parts.append(f"{guard_payload} of the NaNs carry the guard payload (an out-of-bounds read)")
        findings.append(_finding(Defect.WRONG_VALUES, "nan-inf-pattern", pattern_wrong, inst,
                                 "NaN/Inf positions wrong (" + "; ".join(parts) + ")", output=output,
                                 details={"nan_where_none_belongs": int(nan_where_none.sum()),
                                          "missing_nan": int(missing_nan.sum()),
                                          "wrong_inf": int(inf_wrong.sum()),
                                          "guard_payload": guard_payload}))
        error_map[pattern_wrong] = xp.inf

    # 3. Values, where both are finite.
    compare = written & finite_e & xp.isfinite(C)
    if exact:
        same = (C_bits == want) | ((C == 0) & (ref == 0))
        wrong = compare & ~same
        error_map[wrong] = xp.inf
        detector, what = "exact-bits", "differ from the exact result rounded once"
    else:
        err = xp.abs(C - ref)
        ratio = _ratio(xp, err, bound)
        error_map[compare] = ratio[compare]
        wrong = compare & (err > bound)
        detector, what = "error-bound", "outside the forward error bound"
    if wrong.any():
        narrower = _narrower_sums(types, K, alpha, beta, A, B, C0, C, wrong, xp)
        if narrower:
            declare = (f"accumulator = {{ {inst.dtype} = \"{narrower}\" }}" if len(inst.spec.dtypes) > 1 else
                       f"accumulator = \"{narrower}\"")   # another dtype of the entry may sum in its own type
            what += (f" (all within the bound of {narrower} sums, as if the kernel added in {narrower}, not "
                     f"{types.accumulator.name}; if it does by design, declare {declare})")
        findings.append(_finding(Defect.WRONG_VALUES, detector, wrong, inst, what, output=output))

    findings += beyond
    failing = unwritten | pattern_wrong | wrong
    host = arrays.to_host
    return Judgement(inst, label, M, N, K, exact, bound_text, findings,
                     float(error_map.max()) if error_map.size else 0.0, host(error_map),
                     host(C), host(expected), host(bound), host(failing), host(unwritten),
                     reproduction(problem), run)


def _fused(ref, epilogue, values: dict, types, inst):
    """The exact reference with a fused epilogue applied (no transcendental activation: every
    step exact, checked: the bias and residual sums stay exact in the accumulator)."""
    if not epilogue.spelling:
        return ref
    xp = arrays.module_of(ref)
    z = epilogue.pre_activation(ref, values)
    largest = float(xp.abs(z).max()) + (float(xp.abs(xp.asarray(values["residual"])).max()) if epilogue.residual
                                         else 0.0) if z.size else 0.0
    if largest > types.accumulator.exact_limit:
        raise InexactProblem(f"{inst.id}: the epilogue's sums reach {largest:g}, past what "
                             f"{types.accumulator.name} holds exactly; use exact=False")
    return epilogue.apply(ref, values)


def _products(run) -> bool:
    """Whether `run` launched several products (a strided batch, groups), judged one by one."""
    products = getattr(run, "products", None)
    return products is not None and products[0] != ""


def product_run(run, p: int):
    """Product p of a batch's or groups' run as a run of one product: its rows of the output, of
    unwritten and of C0; nothing outside the output (the whole run reports that once)."""
    rows = run.products[1]

    def part(X):
        return None if X is None else split_rows(X, rows)[p]
    return replace(run, M=rows[p], C_bits=part(run.C_bits), unwritten=part(run.unwritten), C0=part(run.C0),
                   guard_damage={}, inputs_changed={}, batch=1, groups=())


def _product_operands(run, A, B) -> list[tuple]:
    """Each product's (A, B): A's rows split as the run's products, B in equal blocks of K."""
    rows = run.products[1]
    return list(zip(split_rows(A, rows), split_rows(B, (B.shape[0] // len(rows),) * len(rows))))


def _judge_products(run, A, B, *, exact: bool, problem, reference) -> Judgement:
    """One Judgement of a batch's or groups' products, each judged on its own (an empty group
    has nothing to judge): findings named by batch or group index, the arrays stacked by rows,
    what changed outside the output once."""
    word, rows = run.products
    parts = [judge(product_run(run, p), *operands, exact=exact, problem=problem,
                   reference=None if reference is None else split_rows(reference, rows)[p])
             for p, operands in enumerate(_product_operands(run, A, B))]
    findings = [replace(f, summary=f"{word} {p}: {f.summary}", details={**f.details, word: p})
                for p, part in enumerate(parts) for f in part.findings]
    findings += outside_the_output(run)

    def stacked(name):
        return np.concatenate([getattr(part, name) for part in parts])
    first = parts[0]
    return Judgement(run.instance, first.problem, sum(rows), run.N, run.K, exact, first.bound_text, findings,
                     max(part.ratio for part in parts), stacked("error_map"), stacked("C"), stacked("expected"),
                     stacked("bound"), stacked("failing"), stacked("unwritten"), first.reproduction, run)


def _narrower_sums(types, K, alpha, beta, A, B, C0, C, wrong, xp) -> str | None:
    """The input type, when the kernel's wrong elements all fit the bound of sums in it instead of
    the declared accumulator (a half kernel that adds in half): what the finding then names.
    None for integer, scaled, fused or tensor-core kernels, and where no narrower sums explain it."""
    narrow = max((types.A, types.B), key=lambda d: d.unit_roundoff)
    if (types.A.is_integer or types.scales or types.epilogue.spelling or types.tensor_core_sums
            or narrow.conversion_roundoff or narrow.itemsize == 1
            or narrow.unit_roundoff <= types.accumulator.unit_roundoff):
        return None
    try:
        b = Bound.for_types(replace(types, accumulator=narrow), K, alpha, beta)
    except ValueError:
        return None
    finite_A, finite_B = arrays.finite_part(A), arrays.finite_part(B)
    ref = _scaled(finite_A @ finite_B, alpha, beta, C0)
    Q_hat = b.magnitude(xp, xp.abs(finite_A) @ xp.abs(finite_B), None if C0 is None else xp.abs(C0))
    within = xp.abs(C - ref) <= b.evaluate(Q_hat, ref, xp)
    return narrow.name if bool(within[wrong].all()) else None


def _check_every_element_changes(inst, d: dt.DType, C0, ref, bound, finite_e, want) -> None:
    """The premise of the unwritten check when beta != 0: no correct result holds C0's bits.
    `want`: an exact judgement's right bits (None when judged by the bound)."""
    xp = arrays.module_of(ref)
    if want is not None:
        rounded = dt.from_bits(want, d)
        same = (want == dt.to_bits(C0, d)) | ((rounded == 0) & (C0 == 0))
    else:
        same = xp.abs(ref - C0) <= bound
    same &= finite_e
    if same.any():
        i, j = (int(x) for x in xp.argwhere(same)[0])
        raise UnchangedElements(
            f"{inst.id}: at {int(same.sum())} elements, first C[{i}, {j}] (C0 = {float(C0[i, j])!r}, correct "
            f"result {float(ref[i, j])!r}), a correct result can equal C0, so an unwritten element would "
            f"pass; use Problem.operands()'s C0 (it avoids this for beta != 1)")


def _finding(defect: Defect, detector: str, mask, inst, what: str,
             details: dict | None = None, output: str = "C") -> Finding:
    mask = arrays.to_host(mask)
    count = int(np.count_nonzero(mask))
    i, j = (int(x) for x in np.unravel_index(int(np.argmax(mask)), mask.shape))   # the first, row-major
    summary = f"{what}: {count} of {mask.size} elements; first {output}[{i}, {j}]" + _tile_of(i, j, inst)
    info = {"fraction": count / mask.size}
    if inst.declared_tile:   # (a kernel without a tile is never told of one)
        tiles = _tiles(mask, inst.declared_tile)
        summary += "; tiles " + ", ".join(f"({a},{b})" for a, b in tiles[:8]) + (" ..." if len(tiles) > 8 else "")
        info["tiles"] = [list(t) for t in tiles[:64]]
    info.update(details or {})
    return Finding(defect, detector, summary, count, (i, j), info)


def _tiles(mask: np.ndarray, tile: int) -> list[tuple[int, int]]:
    """The (tile row, tile column) of every tile holding a True element, row-major. In numpy,
    not per element: a racing kernel at nightly's 2048^2 has millions of wrong elements (a
    Python loop over them took seconds per finding on the H200)."""
    return [(int(a), int(b)) for a, b in np.argwhere(arrays.block_reduce(mask, tile, np.logical_or, False))]
