"""alpha, beta and output_scale as the kernel declares them: a number, or a pointer to one
(``const float *alpha``: cuBLAS's pointer mode device), which the suite passes as a guarded
buffer of the pointer's type; and a kernel taking alpha and no beta is run at alpha 2, not
only at 1 (tests/data/scalar_pointers: its twins drop alpha or write into it)."""

import json
from pathlib import Path

import numpy as np
import pytest

from child_env import judge_catalog
from gemmcheck.contract import catalog, dtypes as dt, launch, parameters
from gemmcheck.judge.hazards import exposing_problems
from gemmcheck.problems import harness
from gemmcheck.problems.harness import OPERAND_VARIANTS, fitted_variant, operand_variants

ROOT = Path(__file__).resolve().parents[1]
DATA = ROOT / "tests" / "data" / "scalar_pointers"
SPECS = {s.name: s for s in catalog.load(DATA / "catalog.toml")}


def parameter(declared: str, position: int = 3) -> parameters.Parameter:
    name = declared.split()[-1].lstrip("*")
    return parameters.Parameter(position, name, declared, parameters.read_type(declared[:declared.rfind(name)]))


@pytest.mark.parametrize("declared", ["const float *alpha", "float *alpha", "const __half *alpha",
                                      "const double *alpha", "const int *alpha"])
def test_a_scalar_through_a_pointer_to_a_number_fits_its_role(declared):
    assert launch.misfit("alpha", parameter(declared)) is None


@pytest.mark.parametrize("declared", ["const float **alpha", "const float2 *alpha"])
def test_a_scalar_through_anything_else_is_named(declared):
    why = launch.misfit("alpha", parameter(declared))
    assert why.startswith(f"role 'alpha' is parameter 4 '{declared}'")
    assert "passed as a number, or through a pointer to one of float, double, __half, __nv_bfloat16, int" in why


def test_each_scalar_is_packed_as_declared_a_pointer_in_its_type_or_a_number():
    device = SPECS["device_scalars"].instances()[0]
    assert device.name_expression == "mylib::kernels::gemm_device_scalars<16, 16, 0>"
    assert launch.scalar_pointee(device, "alpha").name == "float32" and launch.scalar_pointee(device, "beta").name == "float32"
    half = SPECS["half_scalars"].instances()[0]
    assert launch.scalar_pointee(half, "alpha").name == "float16"
    assert launch.scalar_pointee(SPECS["alpha_only"].instances()[0], "alpha") is None   # float alpha: a number


def test_a_value_the_pointers_type_cannot_hold_exactly_is_refused():
    half = SPECS["half_scalars"].instances()[0]
    assert dt.from_bits(harness._exact_bits(half, "alpha", 2, dt.get("float16")), dt.get("float16")).item() == 2
    with pytest.raises(launch.LaunchError, match=r"alpha = 0.1 is 0.0999755859375 in the __half the kernel's pointer"):
        harness._exact_bits(half, "alpha", 0.1, dt.get("float16"))


def test_a_kernel_with_alpha_and_no_beta_runs_its_variants_at_alpha_2():
    spec = SPECS["alpha_only"]
    assert {(v.leading_dimensions, v.alpha, v.beta) for v in operand_variants(spec)} == {("tight", 1, 0), ("tight", 2, 0)}
    scaled = next(v for v in OPERAND_VARIANTS if v.id == "tight-alpha2-beta-1")
    assert fitted_variant(spec, scaled)[0] == harness.OperandVariant("tight", 2, 0)
    problems = dict(exposing_problems(spec.instances()[0]))
    assert (problems["alpha and beta"].alpha, problems["alpha and beta"].beta) == (2, 0)
    # a kernel that takes neither gets no such variant, and says why
    plain = catalog.KernelSpec(name="plain", source=catalog.BUILTIN, entry="plain", signature="mnk", policy="tile2d",
                               tiles=(16,), dtypes=("float32",))
    assert fitted_variant(plain, scaled) == (None, "plain takes no alpha or beta to vary: as it takes them, this is "
                                                   "variant tight-alpha1-beta0")
    assert "alpha and beta" not in dict(exposing_problems(plain.instances()[0]))


def test_the_twins_are_caught_and_the_references_pass_on_the_simulator(tmp_path):
    """Green only when the references (scalars through float and half pointers, in namespaces;
    alpha with no beta) pass and each twin is caught with its declared defect: alpha ignored
    and alpha dropped as wrong values (seen at alpha 2 only), *alpha written as an input changed."""
    out, instances = judge_catalog(DATA / "catalog.toml", tmp_path)
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-2000:]
    rows = {r["kernel"]: r for r in instances}   # one instantiation each
    assert {k: (r["verdict"], r["status"]) for k, r in rows.items()} == {
        "device_scalars": ("correct", "as_expected"), "half_scalars": ("correct", "as_expected"),
        "alpha_only": ("correct", "as_expected"), "device_scalars_alpha_ignored": ("defective", "as_expected"),
        "alpha_only_dropped": ("defective", "as_expected"), "device_scalars_writes_alpha": ("defective", "as_expected")}
    assert list(rows["device_scalars_alpha_ignored"]["defects"]) == list(rows["alpha_only_dropped"]["defects"]) == \
        ["wrong_values"]
    # the changed alpha changes the next launch's values too: those follow the input changed
    assert "input_mutation" in rows["device_scalars_writes_alpha"]["defects"]
    assert "alpha 2" in json.dumps(rows["alpha_only_dropped"]["causes"])
