"""A fused epilogue: what a kernel does to alpha A B + beta C before it stores D, in one order.

    z = alpha A B + beta C          (the GEMM)
    z = z + bias                    (bias: one per row of D, bias[i], or per column, bias[j])
    y = activation(z)               (relu, gelu_tanh, gelu_erf, silu)
    y = y + residual                (residual: an M x N matrix, C's type)
    D = output_scale * y            (a number, alpha's type), rounded once to D's type

Each step is optional; a catalog entry declares which (``epilogue = { bias = "row", activation
= "gelu_erf", residual = true, output_scale = true, bias_type = "float32" }``) and lists their
roles (``bias``, ``residual``, ``output_scale``). The float64 reference applies them in this order
(gemmcheck.judge.oracle); the forward error bound counts each step's rounding and the
activation's own (Lipschitz constant and evaluation error, ``Epilogue.propagate``).

The activations, as the reference evaluates them in float64:
relu(x) = max(x, 0); gelu_tanh(x) = x/2 (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3)));
gelu_erf(x) = x/2 (1 + erf(x / sqrt(2))); silu(x) = x / (1 + exp(-x)).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from gemmcheck import arrays
from gemmcheck.contract import dtypes as dt

ACTIVATIONS = ("relu", "gelu_tanh", "gelu_erf", "silu")
BIAS_AXES = ("row", "col")
ROLES = ("bias", "residual", "output_scale")
# The largest |f'(x)| of each activation: how far an error in z moves f(z).
LIPSCHITZ = {"": 1.0, "relu": 1.0, "gelu_tanh": 1.13, "gelu_erf": 1.13, "silu": 1.1}
# An activation's own evaluation error in float32 with the accurate library functions (expf,
# tanhf, erff: at most 2 ulp each), in units of u_acc times (|x| + |f(x)|): silu's x / (1 +
# expf(-x)) is within 6 u |f|; gelu's x/2 (1 + erff(x / sqrt 2)) within 3.5 u |x| + 2 u |f|
# (erff's argument off by 2 u moves erf by at most u; erff 4 u; 1 + erf u |1 + erf|), the tanh
# form within 4.5 u |x| + 2 u |f| (its argument off by 6 u moves tanh by 2.7 u). 8 covers each.
# Fast intrinsics (__expf, tanh.approx) are outside it and may be reported.
EVALUATION_ULPS = {"": 0.0, "relu": 0.0, "gelu_tanh": 8.0, "gelu_erf": 8.0, "silu": 8.0}
OUTPUT_SCALE = 0.5        # the output scale every problem passes: a power of two, exact


class EpilogueError(ValueError):
    """An epilogue spelling or table the suite cannot read."""


@dataclass(frozen=True)
class Epilogue:
    """Which epilogue steps a kernel fuses (see the module's docstring)."""

    bias: str = ""                  # "", "row" (bias[i]) or "col" (bias[j])
    bias_type: dt.DType | None = None   # the bias's element type (None: D's)
    activation: str = ""            # "" or one of ACTIVATIONS
    residual: bool = False
    output_scale: bool = False

    def __post_init__(self):
        if self.bias not in ("", *BIAS_AXES):
            raise EpilogueError(f"bias = {self.bias!r}; use \"row\" (one per row of D) or \"col\" (one per column)")
        if self.activation not in ("", *ACTIVATIONS):
            raise EpilogueError(f"activation = {self.activation!r}; use one of {', '.join(ACTIVATIONS)}")

    @property
    def roles(self) -> tuple[str, ...]:
        """The roles a kernel with this epilogue lists."""
        return tuple(r for r, on in zip(ROLES, (self.bias, self.residual, self.output_scale)) if on)

    @property
    def transcendental(self) -> bool:
        """Whether the activation's value is not exact in floating point (judged by the bound)."""
        return self.activation not in ("", "relu")

    @property
    def added_terms(self) -> int:
        """Terms the epilogue adds to alpha A B + beta C (bias, residual): for the exact range."""
        return bool(self.bias) + self.residual

    @property
    def spelling(self) -> str:
        """``bias:row/float32,act:gelu_erf,residual,scale`` (operand_types' epilogue= field)."""
        parts = [f"bias:{self.bias}" + (f"/{self.bias_type.name}" if self.bias_type else "")] if self.bias else []
        parts += [f"act:{self.activation}"] if self.activation else []
        parts += ["residual"] * self.residual + ["scale"] * self.output_scale
        return ",".join(parts)

    def describe(self) -> str:
        steps = ["alpha A B + beta C"]
        steps += [f"+ bias per {self.bias}"] if self.bias else []
        steps = [" ".join(steps)]
        steps += [self.activation] if self.activation else []
        steps += ["+ residual"] if self.residual else []
        steps += ["* output_scale"] if self.output_scale else []
        return "epilogue: " + ", then ".join(steps)

    def neutral(self, M: int, N: int) -> dict:
        """Values that leave alpha A B + beta C as it is but for the activation: a zero bias and
        residual, an output scale of 1 (for a hand-checked example that has no epilogue)."""
        import numpy as np

        values = {"bias": np.zeros(M if self.bias == "row" else N), "residual": np.zeros((M, N)),
                  "output_scale": 1.0}
        return {role: values[role] for role in self.roles}

    # -- the reference, in float64 --------------------------------------------------------

    def activate(self, z):
        """The activation of float64 `z` on its array module."""
        xp = arrays.module_of(z)
        if self.activation == "relu":
            return xp.maximum(z, 0.0)
        if self.activation == "gelu_tanh":
            return 0.5 * z * (1.0 + xp.tanh(math.sqrt(2.0 / math.pi) * (z + 0.044715 * z ** 3)))
        if self.activation == "gelu_erf":
            return 0.5 * z * (1.0 + _erf(z / math.sqrt(2.0)))
        if self.activation == "silu":
            with_exp = xp.exp(-xp.clip(z, -700.0, 700.0))
            return z / (1.0 + with_exp)
        return z

    def pre_activation(self, z, values: dict):
        """z + bias, the bias broadcast along its axis (`values`: the run's epilogue values)."""
        if not self.bias:
            return z
        xp = arrays.module_of(z)
        bias = xp.asarray(values["bias"], dtype=xp.float64).reshape(-1)
        return z + (bias[:, None] if self.bias == "row" else bias[None, :])

    def finish(self, y, values: dict):
        """output_scale (y + residual)."""
        xp = arrays.module_of(y)
        if self.residual:
            y = y + xp.asarray(values["residual"], dtype=xp.float64)
        return y * float(values["output_scale"]) if self.output_scale else y

    def apply(self, z, values: dict):
        """The whole epilogue on alpha A B + beta C (float64), in the declared order."""
        return self.finish(self.activate(self.pre_activation(z, values)), values)

    def propagate(self, error_z, z, values: dict, u: float):
        """A bound on |D - D_ref| before D's own rounding, from a bound `error_z` on |z - z_ref|
        (z: the reference before the activation, bias added), `u`: the accumulator's unit
        roundoff. The activation moves an error by at most its Lipschitz constant L and adds its
        own evaluation error c u (|z| + |f(z)|), z within error_z of the reference; a residual add
        rounds once (u |y + residual|); a scale multiply once (u |s y|, nothing for a power of two)."""
        xp = arrays.module_of(z)
        y = self.activate(z)
        near = xp.abs(z) + error_z
        error = LIPSCHITZ[self.activation] * error_z + \
            EVALUATION_ULPS[self.activation] * u * (near + xp.abs(y) + LIPSCHITZ[self.activation] * error_z)
        if self.residual:
            y = y + xp.asarray(values["residual"], dtype=xp.float64)
            error = error + u * (xp.abs(y) + error)
        if self.output_scale:
            scale = float(values["output_scale"])
            exact = scale != 0 and math.frexp(abs(scale))[0] == 0.5
            error = abs(scale) * error + (0.0 if exact else u * abs(scale) * (xp.abs(y) + error))
        return error


def _erf(x):
    """erf on x's array module (numpy has none: math.erf per element, vectorized)."""
    xp = arrays.module_of(x)
    if xp.__name__ == "numpy":
        import numpy as np
        return np.vectorize(math.erf, otypes=[np.float64])(x) if x.size else x.copy()
    from cupyx.scipy.special import erf
    return erf(x)


NONE = Epilogue()


def parse(spelling: str) -> Epilogue:
    """An Epilogue from its spelling (Epilogue.spelling); EpilogueError otherwise."""
    fields: dict = {}
    for part in filter(None, spelling.split(",")):
        key, _, value = part.partition(":")
        if key == "bias" and value:
            axis, _, type_name = value.partition("/")
            fields.update(bias=axis, bias_type=dt.get(type_name) if type_name else None)
        elif key == "act" and value:
            fields["activation"] = value
        elif key in ("residual", "scale") and not value:
            fields["residual" if key == "residual" else "output_scale"] = True
        else:
            raise EpilogueError(f"epilogue {spelling!r}: cannot read {part!r}; parts are bias:row|col[/type], "
                                f"act:{'|'.join(ACTIVATIONS)}, residual and scale")
    return Epilogue(**fields)


def from_table(table) -> Epilogue:
    """An Epilogue from a catalog's ``epilogue = { ... }`` table; EpilogueError naming the key."""
    if not isinstance(table, dict):
        raise EpilogueError(f"must be a table such as {{ bias = \"row\", activation = \"relu\" }}, got {table!r}")
    known = {"bias", "bias_type", "activation", "residual", "output_scale"}
    if set(table) - known:
        raise EpilogueError(f"unknown key(s) {sorted(set(table) - known)}; use {', '.join(sorted(known))}")
    for key in ("residual", "output_scale"):
        if type(table.get(key, False)) is not bool:
            raise EpilogueError(f"{key} = {table[key]!r}; use true or false")
    if "bias_type" in table and "bias" not in table:
        raise EpilogueError("bias_type without bias; say bias = \"row\" or \"col\"")
    try:
        bias_type = dt.get(table["bias_type"]) if "bias_type" in table else None
    except ValueError as exc:
        raise EpilogueError(f"bias_type: {exc}") from None
    return Epilogue(table.get("bias", ""), bias_type, table.get("activation", ""),
                    table.get("residual", False), table.get("output_scale", False))
