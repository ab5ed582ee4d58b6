"""The vendor library's GEMM for a combination of operand types: the ceiling a mixed-type
kernel is a share of, timed in the same run.

The library is cuBLASLt, driven through nvmath-python's bindings (``nvmath.bindings.cublasLt``,
the calls its ``nvmath.linalg.advanced.Matmul`` makes). The bindings and not ``Matmul``: the
timed buffers are CuPy arrays of raw bits, and CuPy has no float8 dtype for ``Matmul`` to read,
and ``Matmul`` takes no int8 -> int32 GEMM; cuBLASLt itself takes both. Imported only when a
ceiling is timed (``LtGemm``), so nothing here needs nvmath or a GPU to be read or tested.

Every GEMM runs in cuBLASLt's "TN" form, the one it supports for every type (fp8 and int8
need it): A's buffer is M rows of K contiguous elements, B's N columns of K, D column-major.
The work (2MNK) and the bytes are the kernel's, whatever its own layouts.

``library_gemms`` says which GEMM stands for a combination: its own when cuBLASLt has it (fp16
/ bf16 in with fp32 or bf16 out, fp8 e4m3 / e5m2 with per-tensor, outer-vector or 1 x 128 /
128 x 128 block scales into bf16, fp16, fp32 or fp8, int8 -> int32, TF32 math for float32,
the one-type GEMMs), then the nearest it has, each named with what differs. The first the
library finds an algorithm for on this device is the ceiling; the table names it.

A strided batch is one cuBLASLt GEMM with a batch count and tight strides in its matrix layouts
(BATCH_COUNT, STRIDED_BATCH_OFFSET). A fused epilogue is cuBLASLt's where it has one (BIAS,
RELU_BIAS, GELU_BIAS: GELU in its tanh form), its bias one per row of cuBLASLt's column-major D:
a kernel's bias per row of D is the library's bias along M; a bias per column, the product
computed transposed (D^T = B^T A^T, ``transposed``: the same work, the bias along N). What the
library has not (SiLU, GELU's erf form, a residual added after the activation, an output scale)
is named: GELU's tanh form stands for the other activations, beta C (C read) for the residual.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass, replace

import numpy as np

from gemmcheck.contract import dtypes as dt
from gemmcheck.contract import epilogue as epilogues
from gemmcheck.contract import operand_types

VENDOR = "cuBLASLt"
# Why a grouped kernel's ceiling is the strided-batched GEMM of the same work.
# (The table's notes say the long form, GROUPED_NOTE: a row's label stays one short phrase.)
NO_GROUPED = "no grouped GEMM of the library timed"
GROUPED_NOTE = ("a grouped kernel's ceiling is the strided-batched GEMM of the same work: no grouped GEMM of the "
                "library is relied on for sm_90 (nvmath-python 1.0's bindings reach cuBLAS's pointer-array "
                "cublasGemmGroupedBatchedEx and cuBLASLt's grouped layouts, neither timed here)")
WORKSPACE_BYTES = 32 * 2**20
HEURISTIC_CANDIDATES = 8

# cudaDataType of each element type (nvmath.CudaDataType's names); tf32 data is float32.
DATA_TYPE = {"float16": "CUDA_R_16F", "bfloat16": "CUDA_R_16BF", "float32": "CUDA_R_32F", "tf32": "CUDA_R_32F",
             "float64": "CUDA_R_64F", "int8": "CUDA_R_8I", "int32": "CUDA_R_32I",
             "float8_e4m3fn": "CUDA_R_8F_E4M3", "float8_e5m2": "CUDA_R_8F_E5M2"}
FP8 = ("float8_e4m3fn", "float8_e5m2")
HALVES = ("float16", "bfloat16")
FP8_OUTPUTS = ("bfloat16", "float16", "float32", *FP8)


@dataclass(frozen=True)
class LibraryGemm:
    """One cuBLASLt GEMM: element types of A, B, C, D, its compute type, and the scale mode of
    each scaled operand (cublasLtMatmulMatrixScale_t's names)."""

    a: str
    b: str
    c: str
    d: str
    compute: str                                  # cublas.ComputeType's name: COMPUTE_32F, ...
    scales: tuple[tuple[str, str], ...] = ()      # (("A", "SCALAR_32F"), ("B", "BLK128x128_32F"))
    nearest: str = ""                             # what differs from the kernel's combination ("": none)
    epilogue: str = ""                            # cublasLtEpilogue_t's name: BIAS, RELU_BIAS, ... ("": none)
    transposed: bool = False                      # D^T = B^T A^T: the bias along the kernel's N
    reads_c: bool = False                         # beta = 1, C read (standing for a residual's read)

    @property
    def name(self) -> str:
        """``e4m3e4m3bf16 scale_A=tensor scale_B=tensor``, ``tf32tf32f32``, ``s8s8s32``,
        ``f32f32f32 epilogue=RELU_BIAS (bias per column: D^T) beta=1``."""
        short = "".join(dt.get(t).short for t in (self.a, self.b, self.d))
        extra = [f"C={self.c}"] if self.c != self.d else []
        extra += [f"scale_{o}={SCALE_WORDS[m]}" for o, m in self.scales]
        extra += [f"epilogue={self.epilogue}"] if self.epilogue else []
        extra += ["(bias per column: D^T)"] if self.transposed else []
        extra += ["beta=1"] if self.reads_c else []
        return " ".join([short, *extra])

    @property
    def label(self) -> str:
        """How the table names it: ``cuBLASLt e4m3e4m3bf16 ...``, then ``(nearest: ...)``."""
        return self.label_for(1)

    def label_for(self, batch: int) -> str:
        """The label of `batch` of it strided: ``cuBLASLt f16f16f16 strided-batched x8``."""
        batched = f" strided-batched x{batch}" if batch > 1 else ""
        return f"{VENDOR} {self.name}{batched}" + (f" (nearest library GEMM: {self.nearest})" if self.nearest else "")

    @property
    def scale_type(self) -> str:
        """The type of alpha and beta (and of the scale factors' product)."""
        return {"COMPUTE_64F": "CUDA_R_64F", "COMPUTE_32I": "CUDA_R_32I"}.get(self.compute, "CUDA_R_32F")


# cublasLtMatmulMatrixScale_t by scale granularity: a per-tensor scalar, a vector along M (A) or
# N (B), one per 128 elements of K, one per 128 x 128 block. Key: (operand, Scale.block).
W = operand_types.WHOLE
SCALE_MODE = {("A", (W, W)): "SCALAR_32F", ("B", (W, W)): "SCALAR_32F",
              ("A", (1, W)): "OUTER_VEC_32F", ("B", (W, 1)): "OUTER_VEC_32F",
              ("A", (1, 128)): "VEC128_32F", ("B", (128, 1)): "VEC128_32F",
              ("A", (128, 128)): "BLK128x128_32F", ("B", (128, 128)): "BLK128x128_32F"}
SCALE_WORDS = {"SCALAR_32F": "tensor", "OUTER_VEC_32F": "outer-vector", "VEC128_32F": "1x128",
               "BLK128x128_32F": "128x128"}


def library_gemms(types) -> list[LibraryGemm]:
    """The cuBLASLt GEMMs that stand for a combination of operand types, best first: its own
    (``nearest`` empty) when cuBLASLt can express it, then the nearest it has. Empty when none
    comes near (an operand type the library does not take)."""
    t = operand_types.coerce(types)
    if t.epilogue != epilogues.NONE:   # its fused epilogue, else the GEMM alone
        plain = library_gemms(replace(t, epilogue=epilogues.NONE))
        fused = [with_epilogue(g, t.epilogue, t) for g in plain]
        why = "the GEMM alone, no epilogue (the library found no algorithm for its fused epilogue on this device)"
        return fused + [replace(g, nearest="; ".join(filter(None, [g.nearest, why]))) for g in plain]
    A, B, C, D, acc = t.A.name, t.B.name, t.C.name, t.D.name, t.accumulator.name
    if A in FP8 and B in FP8:
        return _fp8(t, A, B, D)
    if t.inputs_integer:
        exact = LibraryGemm("int8", "int8", "int32", "int32", "COMPUTE_32I")
        if (A, B, D) == ("int8", "int8", "int32"):
            return [exact]
        unscaled = " (the same int32 sums, not dequantized)" if t.dequantizes else ""
        return [replace(exact, nearest=f"int8 inputs and int32 output{unscaled}: cuBLASLt has no {A} x {B} -> {D} "
                                       "GEMM")]
    if A == "tf32" and B == "tf32":
        return [LibraryGemm("tf32", "tf32", D, D, "COMPUTE_32F_FAST_TF32",
                            nearest=_c_note(C, D))] if D == "float32" else \
            [LibraryGemm("tf32", "tf32", "float32", "float32", "COMPUTE_32F_FAST_TF32",
                         nearest=f"a float32 output: cuBLASLt's TF32 GEMM writes float32, not {D}")]
    if A in HALVES and B == A:
        if acc == "float16" and D == "float16":
            return [LibraryGemm(A, A, D, D, "COMPUTE_16F", nearest=_c_note(C, D))]
        if D in (A, "float32"):
            return [LibraryGemm(A, A, D, D, "COMPUTE_32F", nearest=_c_note(C, D))]
        return [LibraryGemm(A, A, "float32", "float32", "COMPUTE_32F",
                            nearest=f"a float32 output: cuBLASLt has no {A} -> {D} GEMM")]
    if A in HALVES and B in HALVES:
        return [LibraryGemm(A, A, "float32", "float32", "COMPUTE_32F",
                            nearest=f"B in {A} as A: cuBLASLt has no {A} x {B} GEMM")]
    if A == B == D and A in ("float32", "float64"):
        return [LibraryGemm(A, A, A, A, "COMPUTE_64F" if A == "float64" else "COMPUTE_32F",
                            nearest=_c_note(C, D))]
    return []


# cuBLASLt's epilogue by activation (and "_BIAS" with a bias); SiLU and GELU's erf form, which
# it lacks, as its GELU (tanh form): one transcendental per element as theirs.
LIBRARY_ACTIVATION = {"": "", "relu": "RELU", "gelu_tanh": "GELU", "gelu_erf": "GELU", "silu": "GELU"}


def fuses(epilogue: epilogues.Epilogue) -> bool:
    """Whether the library needs a fused epilogue for `epilogue`: not for an output scale alone,
    s (alpha A B + beta C) being its GEMM with alpha and beta times s."""
    return bool(epilogue.activation or set(epilogue.roles) - {"output_scale"})


def with_epilogue(gemm: LibraryGemm, epilogue: epilogues.Epilogue, types) -> LibraryGemm:
    """`gemm` with cuBLASLt's fused epilogue nearest to `epilogue`, each difference named."""
    if not fuses(epilogue):
        return gemm
    act = LIBRARY_ACTIVATION[epilogue.activation]
    name = "_".join(filter(None, [act, "BIAS" if epilogue.bias else ""]))
    notes = [gemm.nearest] if gemm.nearest else []
    if epilogue.activation in ("gelu_erf", "silu"):
        notes.append(f"GELU's tanh form for {epilogue.activation}: cuBLASLt has no {epilogue.activation} epilogue")
    bias_type = operand_types.coerce(types).of("bias").name if epilogue.bias else gemm.d
    if bias_type != gemm.d:
        notes.append(f"a bias in {gemm.d}: cuBLASLt's bias here is D's type, not {bias_type}")
    if epilogue.residual:
        notes.append("the residual read as beta C: cuBLASLt adds no residual after the activation")
    if epilogue.output_scale:
        notes.append("no output scale: cuBLASLt's epilogue has none after the activation")
    return replace(gemm, epilogue=name, transposed=epilogue.bias == "col", reads_c=epilogue.residual,
                   nearest="; ".join(notes))


def _c_note(C: str, D: str) -> str:
    return "" if C == D else f"C in {D}: cuBLASLt reads C in D's type, not {C}"


def _fp8(t, A: str, B: str, D: str) -> list[LibraryGemm]:
    """fp8 GEMMs: the kernel's scales, then per-tensor scales; e5m2 x e5m2 (which cuBLASLt
    lacks) as e4m3 x e5m2; an output type it lacks as bfloat16."""
    notes = []
    if (A, B) == ("float8_e5m2", "float8_e5m2"):
        A, notes = "float8_e4m3fn", ["A in e4m3: cuBLASLt has no e5m2 x e5m2 GEMM"]
    if D not in FP8_OUTPUTS:
        D, notes = "bfloat16", [*notes, f"a bfloat16 output: cuBLASLt's fp8 GEMM does not write {t.D.name}"]
    C = "bfloat16" if D in FP8 else D    # an fp8 D takes a 16-bit C
    modes, missing = [], []
    for scale in t.scales:
        mode = SCALE_MODE.get((scale.operand, scale.block))
        if mode is None or scale.type.name != "float32":
            missing.append(scale.describe())
        else:
            modes.append((scale.operand, mode))
    base = LibraryGemm(A, B, C, D, "COMPUTE_32F", (("A", "SCALAR_32F"), ("B", "SCALAR_32F")))
    if missing:
        why = f"per-tensor scales: cuBLASLt has no scale mode for {'; '.join(missing)}"
        return [replace(base, nearest="; ".join([*notes, why]))]
    own = replace(base, scales=tuple(modes) or base.scales, nearest="; ".join(notes))
    if all(m == "SCALAR_32F" for _, m in own.scales):
        return [own]
    return [own, replace(base, nearest="; ".join([*notes, "per-tensor scales (the library found no algorithm "
                                                           f"for {own.name} on this device)"]))]


def scale_elements(mode: str, rows: int, cols: int, operand: str) -> int:
    """How many float32 scale factors a mode reads for an operand of rows x cols (A: M x K, B:
    K x N), rounded up generously: the ceiling's scales are all 1, only their count matters."""
    m_or_n = rows if operand == "A" else cols
    k = cols if operand == "A" else rows
    blocks_k = -(-k // 128)
    return {"SCALAR_32F": 1, "OUTER_VEC_32F": m_or_n, "VEC128_32F": (m_or_n + 128) * blocks_k,
            "BLK128x128_32F": (-(-m_or_n // 128) + 1) * blocks_k}[mode]


class NoAlgorithm(RuntimeError):
    """cuBLASLt found no algorithm for a GEMM on this device (or rejected its description)."""


@functools.lru_cache(maxsize=None)
def _handle() -> int:
    """The process's cuBLASLt handle (made once: the ceilings of a run share it)."""
    from nvmath.bindings import cublasLt

    return cublasLt.create()


class LtGemm:
    """One planned cuBLASLt GEMM of M x N x K (`batch` of them, strided) on the current device:
    descriptors and the heuristic's best algorithm made once, `launch(A, B, D)` on CuPy arrays
    of raw bits, enqueued on the current stream. NoAlgorithm when the library has
    none for it here. cuBLASLt's own m x n is N x M for a ``transposed`` GEMM (a bias per
    column): A's buffer then holds its N x K operand, B's its K x M."""

    def __init__(self, gemm: LibraryGemm, M: int, N: int, K: int, batch: int = 1) -> None:
        import cupy
        import nvmath
        from nvmath.bindings import cublas, cublasLt

        self.gemm, self.cupy, self.lt = gemm, cupy, cublasLt
        M, N = (N, M) if gemm.transposed else (M, N)
        self.m, self.n = M, N
        self._dt = lambda name: int(getattr(nvmath.CudaDataType, name))
        attr = cublasLt.MatmulDescAttribute
        try:
            self.handle = _handle()
            self.desc = cublasLt.matmul_desc_create(int(getattr(cublas.ComputeType, gemm.compute)),
                                                    self._dt(gemm.scale_type))
            self._set(cublasLt.matmul_desc_set_attribute, self.desc, attr.TRANSA, np.int32(cublas.Operation.T))
            self._set(cublasLt.matmul_desc_set_attribute, self.desc, attr.TRANSB, np.int32(cublas.Operation.N))
            # scale factors of 1 (only the time is wanted), kept alive with this object
            self.scales = {}
            for operand, mode in gemm.scales:
                rows, cols = (M, K) if operand == "A" else (K, N)
                self.scales[operand] = cupy.ones(scale_elements(mode, rows, cols, operand) * batch, cupy.float32)
                self._set(cublasLt.matmul_desc_set_attribute, self.desc, getattr(attr, f"{operand}_SCALE_MODE"),
                          np.int32(getattr(cublasLt.MatmulMatrixScale, mode)))
                self._set(cublasLt.matmul_desc_set_attribute, self.desc, getattr(attr, f"{operand}_SCALE_POINTER"),
                          np.int64(self.scales[operand].data.ptr))
            if gemm.epilogue:
                self._fuse(gemm, M, batch)
            self.layouts = [self._layout(gemm.a, K, M, K, batch), self._layout(gemm.b, K, N, K, batch),
                            self._layout(gemm.c, M, N, M, batch), self._layout(gemm.d, M, N, M, batch)]
            # an fp8 D takes a C of another type: a buffer of its own, never read (beta = 0); a
            # residual's stand-in is read (beta = 1) from a buffer of its own
            self.c_buffer = (cupy.zeros(M * N * batch * dt.get(gemm.c).itemsize, cupy.uint8)
                             if gemm.c != gemm.d or gemm.reads_c else None)
            self.workspace = cupy.empty(WORKSPACE_BYTES, cupy.uint8)
            self.algorithm = self._plan()
        except NoAlgorithm:
            raise
        except Exception as exc:   # cuBLASLtError: a description the library rejects
            raise NoAlgorithm(f"{VENDOR} rejected {gemm.name}: {type(exc).__name__}: {exc}") from None
        scalar = {"CUDA_R_64F": np.float64, "CUDA_R_32I": np.int32}.get(gemm.scale_type, np.float32)
        self.alpha, self.beta = np.ones(1, scalar), (np.ones if gemm.reads_c else np.zeros)(1, scalar)

    def _fuse(self, gemm: LibraryGemm, M: int, batch: int) -> None:
        """The epilogue, and its bias: M zeros of D's type per product (kept alive with this object)."""
        attr = self.lt.MatmulDescAttribute
        self._set(self.lt.matmul_desc_set_attribute, self.desc, attr.EPILOGUE,
                  np.uint32(getattr(self.lt.Epilogue, gemm.epilogue)))
        if "BIAS" in gemm.epilogue:
            self.bias = self.cupy.zeros(M * batch * dt.get(gemm.d).itemsize, self.cupy.uint8)
            self._set(self.lt.matmul_desc_set_attribute, self.desc, attr.BIAS_POINTER, np.int64(self.bias.data.ptr))
            if batch > 1:
                self._set(self.lt.matmul_desc_set_attribute, self.desc, attr.BIAS_BATCH_STRIDE, np.int64(M))

    @staticmethod
    def _set(setter, obj, attribute, value) -> None:
        buffer = np.asarray(value)
        setter(obj, int(attribute), buffer.ctypes.data, buffer.nbytes)

    def _layout(self, type_name: str, rows: int, cols: int, ld: int, batch: int) -> int:
        layout = self.lt.matrix_layout_create(self._dt(DATA_TYPE[type_name]), rows, cols, ld)
        if batch > 1:
            attr = self.lt.MatrixLayoutAttribute
            self._set(self.lt.matrix_layout_set_attribute, layout, attr.BATCH_COUNT, np.int32(batch))
            self._set(self.lt.matrix_layout_set_attribute, layout, attr.STRIDED_BATCH_OFFSET, np.int64(rows * cols))
        return layout

    def _plan(self) -> int:
        lt = self.lt
        preference = lt.matmul_preference_create()
        self._set(lt.matmul_preference_set_attribute, preference, lt.MatmulPreferenceAttribute.MAX_WORKSPACE_BYTES,
                  np.uint64(WORKSPACE_BYTES))
        self.results = np.zeros(HEURISTIC_CANDIDATES, dtype=lt.matmul_heuristic_result_dtype)
        found = np.zeros(1, np.int32)
        try:
            lt.matmul_algo_get_heuristic(self.handle, self.desc, *self.layouts, preference, HEURISTIC_CANDIDATES,
                                         self.results.ctypes.data, found.ctypes.data)
        except Exception as exc:   # CUBLAS_STATUS_NOT_SUPPORTED: no algorithm for this GEMM here
            raise NoAlgorithm(f"{VENDOR} has no algorithm for {self.gemm.name} here ({exc})") from None
        finally:
            lt.matmul_preference_destroy(preference)
        if found[0] < 1:
            raise NoAlgorithm(f"{VENDOR} has no algorithm for {self.gemm.name} here")
        return self.results.ctypes.data + self.results.dtype.fields["algo"][1]   # the first (best) result's algo

    def launch(self, A, B, D) -> None:
        """D = A B (TN) on CuPy arrays of raw bits, enqueued on the current stream."""
        d = D.data.ptr
        c = self.c_buffer.data.ptr if self.c_buffer is not None else d
        adesc, bdesc, cdesc, ddesc = self.layouts
        self.lt.matmul(self.handle, self.desc, self.alpha.ctypes.data, A.data.ptr, adesc, B.data.ptr, bdesc,
                       self.beta.ctypes.data, c, cdesc, d, ddesc, self.algorithm, self.workspace.data.ptr,
                       WORKSPACE_BYTES, self.cupy.cuda.get_current_stream().ptr)


def planned(types, M: int, N: int, K: int, batch: int = 1) -> tuple[LtGemm | None, str]:
    """The first of `types`' library GEMMs cuBLASLt has an algorithm for here, planned, and how
    the table names it; (None, why) when it has none (each refusal said)."""
    candidates = library_gemms(types)
    if not candidates:
        return None, f"{VENDOR} has no GEMM near {operand_types.coerce(types).describe()}"
    refused = []
    for gemm in candidates:
        try:
            return LtGemm(gemm, M, N, K, batch), gemm.label_for(batch)
        except NoAlgorithm as exc:
            refused.append(str(exc))
    return None, "; ".join(refused)
