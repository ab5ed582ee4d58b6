"""A backend that runs Python stand-ins for kernels on numpy buffers: lets the
harness and detectors be tested without a GPU. Only for gemmcheck's own tests.
"""

import numpy as np

from gemmcheck import dtypes as dt
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
    a = dt.from_bits(A, d).reshape(M, K).astype(np.float64)
    b = dt.from_bits(B, d).reshape(K, N).astype(np.float64)
    C[:] = dt.to_bits(a @ b, d).reshape(-1)
