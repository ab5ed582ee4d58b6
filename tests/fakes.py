"""A backend that runs Python stand-ins for kernels on numpy buffers: lets the
harness and detectors be tested without a GPU. Only for gemmcheck's own tests.
"""

import tempfile
from pathlib import Path

import numpy as np

from gemmcheck.contract import catalog
from gemmcheck.contract import dtypes as dt
from gemmcheck.backends import Backend


class NumpyBackend(Backend):
    """`kernels` maps a catalog entry name to fn(instance, grid, block, A, B, C, M, N, K),
    where A, B, C are flat views of raw bits inside the guarded buffers."""

    name = "numpy-fake"

    def __init__(self, kernels):
        self.kernels = kernels
        self.launches = 0

    def describe(self):
        return "numpy stand-ins"

    def prepare(self, instances):
        pass

    def to_device(self, bits):
        return np.array(bits, copy=True)

    def to_host(self, buffer):
        return np.array(buffer, copy=True)

    def launch(self, instance, launch):
        self.launches += 1
        args = dict(zip(instance.spec.roles, launch.args))
        N = int(args["N"])
        M, K = int(args.get("M", N)), int(args.get("K", N))
        self.kernels[instance.spec.entry](instance, launch.grid, launch.block,
                                          args["A"], args["B"], args["C"], M, N, K)


def correct_product(instance, grid, block, A, B, C, M, N, K):
    d = instance.dt
    # an empty line keeps a leading dimension of 1 (BLAS): K = 0 leaves A one element a row
    a = dt.from_bits(A, d).reshape(M, -1)[:, :K].astype(np.float64) if M else np.zeros((0, K))
    b = dt.from_bits(B, d).reshape(K, N).astype(np.float64)
    C[:] = dt.to_bits(a @ b, d).reshape(-1)


# -- kernels that take their arguments by role (layouts, leading dimensions, alpha/beta) ----

# Every fake catalog entry's folder, removed when the process ends (they used to stay in /tmp:
# 17,000 of them after a day of runs). Made at the first entry: a child process that imports
# this module and leaves by os._exit made one for nothing and left it (528 empty ones here).
_FAKES: list[tempfile.TemporaryDirectory] = []


def _fakes_folder() -> str:
    if not _FAKES:
        _FAKES.append(tempfile.TemporaryDirectory(prefix="gemmcheck-fakes-"))
    return _FAKES[0].name


def RoleSpec(name, roles, layouts=None, policy="tile2d", shapes="any"):
    """A real catalog entry (gemmcheck.contract.catalog validates it) whose parameters are `roles`,
    with operand `layouts` and a TILE-based launch policy; its source only declares it."""
    folder = Path(tempfile.mkdtemp(prefix=f"{name}-", dir=_fakes_folder()))
    (folder / f"{name}.cu").write_text(f"template <typename T, int TILE>\n__global__ void {name}() {{}}\n")
    entry = {"name": name, "source": f"{name}.cu", "entry": name, "args": list(roles),
             "layout": dict(layouts or {}), "policy": policy, "tiles": [1, 2, 4, 8, 16, 32],
             "dtypes": list(dt.DTYPES), "expect": "correct"}
    if {"M", "K"} & set(roles):
        entry["shapes"] = shapes
    return catalog.entry._spec(folder / "catalog.toml", 0, entry)


SGEMM_ROLES = ("M", "N", "K", "alpha", "A", "lda", "B", "ldb", "beta", "C", "ldc")


class RoleBackend(NumpyBackend):
    """`kernels` maps an entry name to fn(instance, values) with values a dict of role -> argument,
    zipped from the kernel's roles and the launch's arguments, as a kernel would see them."""

    name = "numpy-roles-fake"

    def launch(self, instance, launch):
        self.launches += 1
        self.kernels[instance.spec.entry](instance, dict(zip(instance.spec.roles, launch.args)))


def role_gemm(instance, v, *, alpha=None, beta=None, assumes_tight_ld="", layouts=None):
    """C = alpha A B + beta C, every element read and written through the kernel's own
    indexing: row-major (i, j) at i * ld + j, column-major at j * ld + i, ld from the
    arguments. The keywords break it the ways the tests need: a fixed alpha or beta
    (ignoring the argument), ld assumed equal to the width for the operands named in
    `assumes_tight_ld` ("ABC", "C"), operands read in another layout."""
    d = instance.dt
    lay = {**{o: "row" for o in "ABC"}, **instance.spec.layouts, **(layouts or {})}
    M, N, K = v["M"], v["N"], v["K"]
    shapes = {"A": (M, K), "B": (K, N), "C": (M, N)}

    def index(operand):
        rows, cols = shapes[operand]
        width = cols if lay[operand] == "row" else rows
        ld = width if operand in assumes_tight_ld else v.get("ld" + operand.lower(), width)
        i, j = np.meshgrid(np.arange(rows), np.arange(cols), indexing="ij")
        return i * ld + j if lay[operand] == "row" else j * ld + i

    def read(operand):
        return dt.from_bits(v[operand][index(operand)], d).astype(np.float64)
    a = float(v.get("alpha", 1)) if alpha is None else alpha
    b = float(v.get("beta", 0)) if beta is None else beta
    with np.errstate(invalid="ignore", over="ignore"):
        result = a * (read("A") @ read("B"))
        if b != 0:
            result = result + b * read("C")
        v["C"][index("C")] = dt.to_bits(result, d)
