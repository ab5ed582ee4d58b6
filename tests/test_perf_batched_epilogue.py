"""The performance suite for strided-batched and fused-epilogue kernels, without a GPU: which
cuBLASLt GEMM is the ceiling (a strided batch of the same count, the fused epilogue nearest the
kernel's, each difference named), how it is described to cuBLASLt (nvmath-python's real
bindings, their library faked), and the timing path end to end on a fake GPU (numpy for CuPy):
a batched kernel timed on [timing] batch products, an epilogue kernel with its bias, residual
and output scale, each judged before timing and refused when wrong."""


import numpy as np
import pytest

from gemmcheck import perf
from gemmcheck.contract import catalog
from gemmcheck.contract import dtypes as dt
from gemmcheck.contract import operand_types
from gemmcheck.perf import library, session as perf_session, summary
from test_perf_gpu_path import fake_device
from test_perf_mixed import MixedBackend, _Buffer, fake_cublaslt

BATCHED = "examples/batched/catalog.toml"
EPILOGUE = "examples/epilogue/catalog.toml"
N = 32
KERNEL_TFLOPS, LIBRARY_TFLOPS = 8.8, 50.0


def instance_of(path, name, dtype="float32"):
    spec = next(s for s in catalog.load(path) if s.name == name)
    return catalog.Instance(spec, dtype, spec.tiles[0] if spec.has_tile else None)


# -- which library GEMM stands for each epilogue --------------------------------------------------

@pytest.mark.parametrize("epilogue, name, nearest", [
    ("bias:row", "f32f32f32 epilogue=BIAS", ""),
    ("bias:row,act:relu", "f32f32f32 epilogue=RELU_BIAS", ""),
    ("bias:row,act:gelu_tanh", "f32f32f32 epilogue=GELU_BIAS", ""),
    ("act:relu", "f32f32f32 epilogue=RELU", ""),
    ("bias:col,act:relu", "f32f32f32 epilogue=RELU_BIAS (bias per column: D^T)", ""),
    ("bias:col,act:gelu_erf", "f32f32f32 epilogue=GELU_BIAS (bias per column: D^T)",
     "GELU's tanh form for gelu_erf: cuBLASLt has no gelu_erf epilogue"),
    ("bias:row,act:silu,residual,scale", "f32f32f32 epilogue=GELU_BIAS beta=1",
     "GELU's tanh form for silu: cuBLASLt has no silu epilogue; the residual read as beta C: cuBLASLt adds no "
     "residual after the activation; no output scale: cuBLASLt's epilogue has none after the activation"),
    ("bias:row/float16", "f32f32f32 epilogue=BIAS", "a bias in float32: cuBLASLt's bias here is D's type, not float16"),
])
def test_an_epilogue_is_timed_as_the_library_fused_epilogue_nearest_it_each_difference_named(epilogue, name, nearest):
    fused, plain = library.library_gemms(f"float32 epilogue={epilogue}")
    assert (fused.name, fused.nearest) == (name, nearest)
    assert fused.label == f"cuBLASLt {name}" + (f" (nearest library GEMM: {nearest})" if nearest else "")
    # the GEMM alone when the library has no algorithm for the fused one here, said so
    assert plain.name == "f32f32f32" and not plain.epilogue and "no epilogue" in plain.nearest


def test_a_strided_batch_is_named_with_its_count():
    gemm = library.library_gemms("float16")[0]
    assert gemm.label_for(8) == "cuBLASLt f16f16f16 strided-batched x8" and gemm.label_for(1) == gemm.label


def test_each_example_kernel_has_a_library_ceiling_and_the_epilogue_kernels_a_fused_one():
    for path in (BATCHED, EPILOGUE):
        for spec in catalog.load(path):
            for dtype in spec.dtypes:
                gemms = library.library_gemms(spec.types_of(dtype))
                assert gemms, f"{spec.name} {dtype}"
                epilogue = spec.types_of(dtype).epilogue
                # an output scale alone is the library GEMM's alpha and beta: no fused epilogue needed
                fused = library.fuses(epilogue)
                assert bool(gemms[0].epilogue) == fused and not (epilogue.roles and not fused and gemms[0].nearest), \
                    spec.name


# -- described to cuBLASLt with the bindings' own names ---------------------------------------------

def _attributes(calls, setter):
    return {args[1]: args[4] for name, args in calls if name == setter}


def test_a_strided_batch_sets_the_count_and_tight_strides_in_every_layout(monkeypatch):
    calls = fake_cublaslt(monkeypatch)
    from nvmath.bindings import cublasLt

    library.LtGemm(library.library_gemms("float32")[0], 256, 128, 64, batch=8)
    layout = cublasLt.MatrixLayoutAttribute
    per_layout = [(args[1], args[4]) for name, args in calls if name == "matrix_layout_set_attribute"]
    counts = [np.frombuffer(v, np.int32)[0] for a, v in per_layout if a == layout.BATCH_COUNT]
    strides = [np.frombuffer(v, np.int64)[0] for a, v in per_layout if a == layout.STRIDED_BATCH_OFFSET]
    assert counts == [8] * 4 and strides == [64 * 256, 64 * 128, 256 * 128, 256 * 128]   # A, B, C, D: tight


def test_one_product_sets_no_batch_in_its_layouts(monkeypatch):
    calls = fake_cublaslt(monkeypatch)
    library.LtGemm(library.library_gemms("float32")[0], 256, 128, 64)
    assert not [c for c in calls if c[0] == "matrix_layout_set_attribute"]


@pytest.mark.parametrize("epilogue, fused, rows", [("bias:row,act:relu", "RELU_BIAS", 256),
                                                    ("bias:col,act:gelu_tanh", "GELU_BIAS", 128)])
def test_a_fused_epilogue_is_set_with_its_bias_along_the_kernels_axis(epilogue, fused, rows, monkeypatch):
    calls = fake_cublaslt(monkeypatch)
    from nvmath.bindings import cublasLt

    gemm = library.library_gemms(f"float32 epilogue={epilogue}")[0]
    lt = library.LtGemm(gemm, 256, 128, 64, batch=2)
    attr = _attributes(calls, "matmul_desc_set_attribute")
    desc = cublasLt.MatmulDescAttribute
    assert np.frombuffer(attr[desc.EPILOGUE], np.uint32)[0] == int(getattr(cublasLt.Epilogue, fused))
    assert np.frombuffer(attr[desc.BIAS_POINTER], np.int64)[0] == lt.bias.data.ptr
    assert lt.bias.host.size == 2 * rows * 4                             # float32, one a row of each product
    assert np.frombuffer(attr[desc.BIAS_BATCH_STRIDE], np.int64)[0] == rows
    # cuBLASLt's bias runs along its m: M for a bias per row, N (the product transposed) per column
    shapes = [args[1:] for name, args in calls if name == "layout"]
    assert shapes[2] == (rows, 256 * 128 // rows, rows) and (lt.m, lt.n) == (rows, 256 * 128 // rows)


def test_a_residual_is_read_as_beta_c_from_a_buffer_of_its_own(monkeypatch):
    calls = fake_cublaslt(monkeypatch)
    gemm = library.library_gemms("float32 epilogue=bias:row,act:relu,residual")[0]
    lt = library.LtGemm(gemm, 64, 64, 64)
    D = _Buffer(1)
    lt.launch(_Buffer(1), _Buffer(1), D)
    [(_, matmul)] = [c for c in calls if c[0] == "matmul"]
    assert lt.beta[0] == 1 and matmul[8] == lt.c_buffer.data.ptr != D.data.ptr


# -- timed on a fake GPU -----------------------------------------------------------------------------

class Backend(MixedBackend):
    """The example kernels on the fake GPU, from their arguments by role: a strided batch
    (honest, or computing its first product only) and the bias + activation + residual epilogue
    (honest, or with its bias on the wrong axis)."""

    def __init__(self, gpu, behaviour):
        super().__init__(gpu, behaviour)
        self.args = []

    def enqueue(self, instance, planned):
        by_role = dict(zip(instance.spec.roles, planned.args))
        self.args.append(by_role)
        M, N_, K = (int(by_role[d]) for d in "MNK")
        t = instance.types
        value = lambda role: dt.from_bits(by_role[role].reshape(-1), t.of(role)).astype(np.float64)   # noqa: E731
        batch = int(by_role.get("batch", 1))
        out = by_role.get("D", by_role["C"]).reshape(-1)
        for b in range(1 if self.behaviour == "first_product_only" else batch):
            sa, sb, sc = (int(by_role.get(f"stride_{x}", 0)) for x in "ABC")
            A = value("A")[b * sa:b * sa + M * K].reshape(M, K)
            B = value("B")[b * sb:b * sb + K * N_].reshape(K, N_)
            z = A @ B
            if t.epilogue.bias:
                bias = value("bias")
                z = z + (bias[None, :] if self.behaviour == "bias_on_wrong_axis" else bias[:, None])
            if t.epilogue.roles:
                z = float(by_role["output_scale"]) * (np.maximum(z, 0) + value("residual").reshape(M, N_))
            out[b * sc:b * sc + M * N_] = dt.to_bits(z.reshape(-1), t.D)
        self.gpu.log.append("kernel")
        self.gpu.now += 2 * M * N_ * K * batch / (KERNEL_TFLOPS * 1e12)

    launch = enqueue


@pytest.fixture
def timed(monkeypatch):
    gpu = fake_device(monkeypatch, 3 * N * N * 4)
    planned = []

    class FakeLt:   # cuBLASLt at LIBRARY_TFLOPS on the fake clock, writing outputs of its own
        def __init__(self, gemm, M, N_, K, batch):
            self.gemm, self.m, self.n, self.k, self.batch = gemm, M, N_, K, batch

        def launch(self, A, B, D):
            assert D.size == self.batch * self.m * self.n
            D[...] = 0
            gpu.log.append("cublasLt")
            gpu.now += 2 * self.m * self.n * self.k * self.batch / (LIBRARY_TFLOPS * 1e12)

    def plan(types, M, N_, K, batch=1):
        gemm = library.library_gemms(types)[0]
        planned.append((gemm.name, M, N_, K, batch))
        return FakeLt(gemm, M, N_, K, batch), gemm.label_for(batch)

    monkeypatch.setattr(library, "planned", plan)

    def make(behaviour, batch=4):
        backend = Backend(gpu, behaviour)
        timer = perf.GpuTimer(backend, perf.Timing(warmup=1, max_samples=40, batch=batch))
        s = perf.PerfSession(timer, repeats=6)
        s._copy = perf.Measurement("copy", 2**30, (0.5e-3,) * 5, bytes_moved=2 * 2**30)
        return s, gpu, planned, backend
    return make


def test_a_batched_kernel_is_timed_on_the_timing_batch_against_the_library_strided_batched_gemm(timed):
    session, gpu, planned, backend = timed("honest", batch=4)
    inst = instance_of(BATCHED, "gemm_strided_batched")
    rate = perf.timed_rate(session, inst, N)
    row = session.rows[(inst.id, N)]
    # the FLOPs of 4 products: a rate of one product's FLOPs would read a quarter of it
    assert rate == pytest.approx(KERNEL_TFLOPS, rel=1e-6) and row.cublas.tflops == pytest.approx(LIBRARY_TFLOPS)
    assert row.measurement.flops == 4 * 2 * N**3
    assert planned == [("f32f32f32", N, N, N, 4)]
    assert row.cublas.label == "cuBLASLt f32f32f32 strided-batched x4"
    launched = backend.args[-1]
    assert (launched["batch"], launched["stride_A"], launched["stride_C"]) == (4, N * N, N * N)
    assert launched["C"].shape == (4 * N, N)
    timed_log = [e for e in gpu.log if e != "hold"]
    assert timed_log[-4:] in (["cublasLt", "kernel"] * 2, ["kernel", "cublasLt"] * 2)   # in turn
    header, rows, _ = summary.summary_rows(session)
    cells = dict(zip(header, next(r for r in rows if r[0] == inst.id)))
    assert cells["ceiling"] == "cuBLASLt f32f32f32 strided-batched x4" and cells["% ceiling"] == "17.6"


def test_a_batched_kernel_that_computes_only_its_first_product_is_refused_before_timing(timed):
    session, gpu, planned, _ = timed("first_product_only", batch=4)
    with pytest.raises(perf.WrongOutput, match="output fails the check before timing"):
        perf.timed_rate(session, instance_of(BATCHED, "gemm_strided_batched"), N)
    assert "cublasLt" not in gpu.log


def test_the_check_before_timing_reads_every_product_of_the_batch(timed):
    # A kernel that computes its first product only is wrong first in product 1's rows.
    session, _, _, _ = timed("first_product_only", batch=2)
    inst = instance_of(BATCHED, "gemm_strided_batched")
    check = session.timer.check(inst, N)
    assert not check.ok and check.where[0] >= N     # the first wrong row is in product 1


def test_an_epilogue_kernel_is_timed_with_its_inputs_against_the_library_fused_epilogue(timed):
    session, gpu, planned, backend = timed("honest")
    inst = instance_of(EPILOGUE, "gemm_bias_relu_residual")
    rate = perf.timed_rate(session, inst, N)
    row = session.rows[(inst.id, N)]
    assert rate == pytest.approx(KERNEL_TFLOPS, rel=1e-6) and row.last.ok
    assert planned == [("f32f32f32 epilogue=RELU_BIAS beta=1", N, N, N, 1)]
    assert row.cublas.label.startswith("cuBLASLt f32f32f32 epilogue=RELU_BIAS beta=1 (nearest library GEMM: "
                                       "the residual read as beta C")
    launched = backend.args[-1]
    assert launched["bias"].shape == (N,) and launched["residual"].shape == (N, N)
    assert float(launched["output_scale"]) == 0.5
    # each set's own bias: the last timed launch's is not the check launch's
    biases = {launched["bias"].tobytes() for launched in backend.args}
    assert len(biases) > 1
    assert perf_session.ceiling_key(inst) == inst.types.spelling   # never pooled with cuBLAS float32


def test_an_epilogue_kernel_with_its_bias_on_the_wrong_axis_is_refused_before_timing(timed):
    session, gpu, _, _ = timed("bias_on_wrong_axis")
    with pytest.raises(perf.WrongOutput, match="output fails the check before timing"):
        perf.timed_rate(session, instance_of(EPILOGUE, "broken_bias_on_wrong_axis"), N)
    assert "cublasLt" not in gpu.log


# -- the work and the least traffic of one timed launch ---------------------------------------------

def test_a_timed_launch_holds_the_timing_batch_of_products_only_for_a_batched_kernel():
    timing = perf.Timing(batch=8)
    assert timing.products(instance_of(BATCHED, "gemm_strided_batched")) == 8
    assert timing.products(instance_of(EPILOGUE, "gemm_bias_relu_residual")) == 1


def test_the_least_traffic_counts_every_product_and_the_epilogue_inputs():
    plain = perf_session.min_bytes(instance_of(BATCHED, "gemm_strided_batched"), 1024)
    assert perf_session.min_bytes(instance_of(BATCHED, "gemm_strided_batched"), 1024, 8) == 8 * plain
    fused = perf_session.min_bytes(instance_of(EPILOGUE, "gemm_bias_relu_residual"), 1024)
    assert fused == 3 * 1024**2 * 4 + 1024 * 4 + 1024**2 * 4     # A, B, D; the bias; the residual


@pytest.mark.parametrize("batch", [1, 0, 2.5])
def test_the_timing_batch_must_be_a_real_batch(batch):
    with pytest.raises(perf.ThresholdError, match="'batch' must be an integer >= 2"):
        perf.parse_thresholds({"timing": {"batch": batch}}, "t.toml")


def test_the_builtin_timing_batch_is_read_from_the_thresholds_file():
    assert perf.load_thresholds(perf.BUILTIN_THRESHOLDS).timing.batch == 8


def test_batched_inputs_are_stacked_products_each_its_own_and_the_reference_product_by_product():
    types = operand_types.coerce("float32")
    sets = perf.InputSets(np, types, 8, 0, seed=3, batch=3).upload()
    A, B, C = sets.sets[0]
    assert A.shape == (24, 8) and B.shape == (24, 8) and C.shape == (24, 8)
    ref, _ = sets.reference(0)
    A64, B64 = (dt.from_bits(x, types.A).astype(np.float64) for x in (A, B))
    for b in range(3):
        assert np.array_equal(ref[8 * b:8 * b + 8], A64[8 * b:8 * b + 8] @ B64[8 * b:8 * b + 8])
    assert not np.array_equal(A64[:8], A64[8:16])


def test_a_column_major_operand_of_a_batch_is_stored_product_by_product():
    types = operand_types.coerce("float32")
    rows = perf.InputSets(np, types, 8, 0, seed=3, batch=2).upload()
    cols = perf.InputSets(np, types, 8, 0, seed=3, batch=2, layouts={"A": "col"}).upload()
    A_rows, A_cols = rows.sets[0][0], cols.sets[0][0]
    for b in range(2):
        assert np.array_equal(A_cols[8 * b:8 * b + 8], A_rows[8 * b:8 * b + 8].T)


def test_the_check_applies_the_epilogue_and_its_bound_fires_on_a_bias_on_the_wrong_axis():
    types = operand_types.coerce("float32 epilogue=bias:row,act:gelu_tanh")
    sets = perf.InputSets(np, types, 16, 0, seed=5).upload()
    ref, absprod = sets.reference(0)
    values = sets.epilogue_values(0)
    right = types.epilogue.apply(ref, values)
    got = dt.from_bits(dt.to_bits(right, types.D), types.D).astype(np.float64)   # rounded to float32 once
    assert perf.check_output(np, got, ref, absprod, types, 16, values).ok
    wrong_axis = types.epilogue.activate(ref + values["bias"][None, :])
    assert not perf.check_output(np, wrong_axis, ref, absprod, types, 16, values).ok
    assert not perf.check_output(np, ref, ref, absprod, types, 16, values).ok   # the epilogue left out


# -- grouped kernels: ragged groups against the batched GEMM of the same work -----------------------

GROUPED = "examples/grouped/catalog.toml"


def test_ragged_groups_hold_the_work_of_as_many_square_products():
    assert perf.inputs.ragged_groups(64, 4) == (32, 96, 32, 96)
    assert perf.inputs.ragged_groups(64, 3) == (32, 96, 64)
    assert sum(perf.inputs.ragged_groups(33, 8)) == 8 * 33


class GroupedBackend(Backend):
    """The grouped examples on the fake GPU: contiguous groups by their offsets (honest, or a
    group's end one row too far, the groups computed last to first so that row is the next
    group's first, wrong), masked groups by their counts in slots of M rows."""

    def enqueue(self, instance, planned):
        by_role = dict(zip(instance.spec.roles, planned.args))
        self.args.append(by_role)
        M, N_, K, G = (int(by_role[d]) for d in ("M", "N", "K", "groups"))
        t = instance.types
        A = dt.from_bits(by_role["A"], t.A).astype(np.float64).reshape(-1, K)
        B = dt.from_bits(by_role["B"], t.B).astype(np.float64).reshape(G, K, N_)
        C = by_role["C"].reshape(-1, N_)
        if instance.grouped == "masked":
            counts = by_role["group_counts"].view(np.int32)
            spans = [(g * M, g * M + counts[g]) for g in range(G)]
        else:
            offsets = by_role["group_offsets"].view(np.int32)
            extra = 1 if self.behaviour == "offset_off_by_one" else 0
            spans = [(offsets[g], min(offsets[g + 1] + extra, C.shape[0])) for g in range(G)]
        for g in reversed(range(G)):
            begin, end = spans[g]
            C[begin:end] = dt.to_bits(A[begin:end] @ B[g], t.D)
        self.gpu.log.append("kernel")
        self.gpu.now += sum(2 * (e - b) * N_ * K for b, e in spans) / (KERNEL_TFLOPS * 1e12)

    launch = enqueue


@pytest.mark.parametrize("name, M", [("moe_grouped_gemm", 4 * N), ("moe_masked_gemm", 2 * N - N // 2)])
def test_a_grouped_kernel_is_timed_on_ragged_groups_against_the_batched_gemm_of_the_same_work(name, M, timed):
    session, gpu, planned, _ = timed("honest", batch=4)
    backend = GroupedBackend(gpu, "honest")
    session.timer.backend = backend
    inst = instance_of(GROUPED, name)
    rate = perf.timed_rate(session, inst, N)
    row = session.rows[(inst.id, N)]
    assert rate == pytest.approx(KERNEL_TFLOPS, rel=1e-6) and row.measurement.flops == 4 * 2 * N**3
    assert planned == [("f32f32f32", N, N, N, 4)]
    assert row.cublas.label == f"cuBLASLt f32f32f32 strided-batched x4 (the same work: {library.NO_GROUPED})"
    launched = backend.args[-1]
    assert (launched["M"], launched["groups"]) == (M, 4)
    table = launched["group_counts" if inst.grouped == "masked" else "group_offsets"].view(np.int32)
    expected = (16, 48, 16, 48) if inst.grouped == "masked" else (0, 16, 64, 80, 128)
    assert tuple(table) == expected
    assert perf_session.ceiling_key(inst) == f"float32 grouped {inst.grouped}"


def test_a_grouped_kernel_whose_group_end_is_one_row_too_far_is_refused_before_timing(timed):
    session, gpu, _, _ = timed("honest", batch=4)
    session.timer.backend = GroupedBackend(gpu, "offset_off_by_one")
    with pytest.raises(perf.WrongOutput, match="output fails the check before timing"):
        perf.timed_rate(session, instance_of(GROUPED, "broken_grouped_offset_off_by_one"), N)
    assert "cublasLt" not in gpu.log


def test_masked_groups_sit_at_the_start_of_their_slots_and_only_their_rows_are_judged():
    types = operand_types.coerce("float32")
    sets = perf.InputSets(np, types, 8, 0, seed=2, groups=(4, 12, 0), masked=True).upload()
    A, B, C = sets.sets[0]
    assert A.shape == (36, 8) and B.shape == (24, 8) and C.shape == (36, 8) and sets.M == 12
    assert not A[4:12].any() and A[:4].any() and not A[24:].any()      # the slots' tails and the empty group
    ref, _ = sets.reference(0)
    assert ref.shape == (16, 8)
    C[...] = dt.to_bits(np.zeros((36, 8)), types.D)
    assert sets.result(0).shape == (16, 8)


def test_a_grouped_kernels_table_is_timed_in_its_declared_type_and_an_adding_kernels_c_starts_at_zero():
    """The performance suite's input sets: an int64 table for a kernel that declares one; C zeroed
    before a kernel that adds into it (adds_into_c), poisoned otherwise."""
    types = operand_types.coerce("float32")
    sets = perf.InputSets(np, types, 8, 0, seed=2, groups=(4, 0, 4), table="int64").upload()
    assert sets.group_tables[0].dtype == np.uint64 and list(sets.group_tables[0].view(np.int64)) == [0, 4, 4, 8]
    sets.poison(0, "zeros")
    assert not sets.sets[0][2].any()
    sets.poison(0)
    assert (sets.sets[0][2] == types.D.poison_bits).all()


def test_a_grouped_kernels_column_major_b_is_stored_group_by_group_as_each_blocks_transpose():
    types = operand_types.coerce("float32")
    rows = perf.InputSets(np, types, 8, 0, seed=4, groups=(3, 5)).upload()
    cols = perf.InputSets(np, types, 8, 0, seed=4, groups=(3, 5), layouts={"B": "col"}).upload()
    B_rows, B_cols = rows.sets[0][1], cols.sets[0][1]
    for g in range(2):
        block = B_rows[g * 8:(g + 1) * 8]
        assert np.array_equal(B_cols[g * 8:(g + 1) * 8], block.T)
    with pytest.raises(ValueError, match="grouped kernels are timed with A, C and D row-major"):
        perf.InputSets(np, types, 8, 0, seed=4, groups=(3, 5), layouts={"A": "col"})
