"""The performance arithmetic: FLOPs, the seed's intensity model, peaks, roofs, ratios, the plot."""

import math

import numpy as np
import pytest

from gemmcheck.perf import roofline


def test_a_gemm_is_two_flops_per_multiply_add():
    assert roofline.gemm_flops(4096, 4096, 4096) == 2 * 4096**3
    assert roofline.gemm_flops(33, 17, 65) == 2 * 33 * 17 * 65


def test_tflops_of_the_issue_measurement():
    # 4096^3 in 15.6 ms is the seed TILE32's 8.8 TFLOP/s on the H200.
    assert roofline.tflops(2 * 4096**3, 15.6e-3) == pytest.approx(8.81, abs=0.01)
    with pytest.raises(ValueError, match="positive"):
        roofline.tflops(1.0, 0.0)


@pytest.mark.parametrize("policy, tile, shared_tiles, itemsize, expected", [
    ("seed", 32, 2, 4, 8.0),      # the seed's table: TILE / 4 for float32
    ("seed", 16, 2, 4, 4.0),
    ("tile2d", 2, 2, 4, 0.5),
    ("naive", 16, 0, 4, 0.25),    # naive: 0.25 FLOP/byte whatever the block edge
    ("naive", 32, 0, 4, 0.25),
    ("tile2d", 32, 2, 2, 16.0),   # half the bytes per element, twice the intensity
    ("tile2d", 32, 2, 8, 4.0),
    ("tile2d", 32, None, 4, 8.0),  # undeclared shared memory: assumed to tile
])
def test_the_seed_intensity_model(policy, tile, shared_tiles, itemsize, expected):
    assert roofline.model_intensity(policy, tile, shared_tiles, itemsize) == expected


def test_fp32_peak_of_the_h200_from_its_properties():
    # 132 SMs x 128 lanes x 2 x 1.98 GHz, as suites/performance/thresholds.toml's header states.
    assert roofline.fp32_peak_tflops(132, 1.98e9, (9, 0)) == pytest.approx(66.9, abs=0.05)
    # A100: 108 SMs x 64 lanes x 2 x 1.41 GHz = 19.5 TFLOP/s (its datasheet number).
    assert roofline.fp32_peak_tflops(108, 1.41e9, (8, 0)) == pytest.approx(19.5, abs=0.05)
    assert roofline.fp32_peak_tflops(100, 1e9, (3, 5)) is None


def test_roof_bounds_and_ridge():
    roof = roofline.Roof(peak_tflops=66.9, bandwidth_tbs=4.2)
    assert roof.ridge == pytest.approx(15.93, abs=0.01)
    assert roof.bound(8.0) == "memory" and roof.attainable(8.0) == pytest.approx(33.6)
    assert roof.bound(0.25) == "memory" and roof.attainable(0.25) == pytest.approx(1.05)
    assert roof.bound(32.0) == "compute" and roof.attainable(32.0) == 66.9


def test_ratio_rejects_meaningless_baselines():
    assert roofline.ratio(8.8, 50.5) == pytest.approx(0.1743, abs=1e-4)
    for bad in (0.0, -1.0, math.nan, math.inf):
        with pytest.raises(ValueError, match="baseline"):
            roofline.ratio(1.0, bad)
    with pytest.raises(ValueError, match="value"):
        roofline.ratio(math.nan, 1.0)


def test_median_and_spread_agree_with_numpy():
    rng = np.random.default_rng(5)
    for n in (1, 2, 7, 20, 51):
        times = list(rng.uniform(1e-3, 2e-3, n))
        q1, med, q3 = np.quantile(times, [0.25, 0.5, 0.75])
        assert roofline.median(times) == pytest.approx(med)
        assert roofline.spread(times) == pytest.approx((q3 - q1) / med)
    assert roofline.spread([1.0] * 10) == 0.0
    with pytest.raises(ValueError):
        roofline.median([])


def test_roofline_plot_on_made_up_numbers():
    points = [roofline.Point("naive", 0.25, 5.3), roofline.Point("tiled TILE16", 4.0, 8.1),
              roofline.Point("tiled TILE32", 8.0, 8.8)]
    png = roofline.plot(points, peak_tflops=66.9, bandwidth_tbs=4.2,
                        ceilings={"cuBLAS float32": 50.5, "cuBLAS float64": 61.6}, title="made up")
    assert png[:8] == b"\x89PNG\r\n\x1a\n"
    import matplotlib.image

    import io
    image = matplotlib.image.imread(io.BytesIO(png))
    assert image.shape[0] > 300 and image.shape[1] > 500
    # Not blank: lines and points leave many distinct colours.
    assert len(np.unique(image.reshape(-1, image.shape[-1]), axis=0)) > 20


def test_roofline_plot_without_a_bandwidth_still_draws_the_peak():
    png = roofline.plot([roofline.Point("k", 8.0, 8.8)], peak_tflops=66.9, bandwidth_tbs=None)
    assert png[:4] == b"\x89PNG"


def test_roofline_plot_of_nothing_is_an_error():
    with pytest.raises(ValueError, match="nothing to plot"):
        roofline.plot([], peak_tflops=1.0, bandwidth_tbs=1.0)


# -- the bounds no kernel can beat, and the model roof that a kernel can -------------------------

def test_peak_per_dtype_counts_tensor_cores_and_is_unknown_where_the_table_is_silent():
    # H100/H200 dense: TF32 2048, FP16/BF16 4096, FP64 (tensor) 256 FLOP per SM per clock.
    assert roofline.peak_tflops(132, 1.83e9, (9, 0), "float16") == pytest.approx(989.4, abs=0.1)
    assert roofline.peak_tflops(132, 1.83e9, (9, 0), "float32") == pytest.approx(494.7, abs=0.1)
    assert roofline.peak_tflops(108, 1.41e9, (8, 0), "float64") == pytest.approx(19.5, abs=0.05)
    assert roofline.peak_tflops(80, 1.53e9, (7, 0), "bfloat16") is None
    assert roofline.peak_tflops(100, 1e9, (12, 0), "float32") is None


def test_min_bytes_reads_each_operand_once_and_writes_c_once():
    assert roofline.min_bytes(4096, 4096, 4096, 4) == 3 * 4096 * 4096 * 4
    assert roofline.min_bytes(2, 3, 5, 2) == (2 * 5 + 5 * 3 + 2 * 3) * 2


@pytest.mark.parametrize("seconds, peak, bandwidth, refused, says", [
    (0.10e-3, 500.0, None, True, "exceeds the device's peak 500.0 TFLOP/s"),   # compute bound
    (0.30e-3, 500.0, None, False, None),                                      # 0.275 ms is the floor
    (0.26e-3, 500.0, None, False, None),                                      # within the 10 % slack
    (0.02e-3, None, 4.0, True, "exceeds the copy bandwidth 4.00 TB/s"),       # memory bound only
    (0.02e-3, None, None, False, None),                                       # nothing known: no claim
])
def test_an_impossible_time_is_refused_and_a_possible_one_is_not(seconds, peak, bandwidth, refused, says):
    flops, nbytes = 2 * 4096**3, 3 * 4096 * 4096 * 4      # 137.4 GFLOP, 192 MiB
    why = roofline.impossible(seconds, flops=flops, nbytes=nbytes, peak_tflops=peak, bandwidth_tbs=bandwidth)
    assert (why is not None) == refused, why
    if refused:
        assert says in why and "skipped work or replayed a cached result" in why


def test_the_model_roof_is_never_shown_above_100_percent():
    assert roofline.model_roof_cell(8.0, 16.0) == "50.0"
    assert roofline.model_roof_cell(16.0, 16.0) == "100.0"
    # The naive kernel on the H200: 6.15 TFLOP/s against a model roof of 0.25 x 4.3 = 1.07.
    assert roofline.model_roof_cell(6.15, 1.07) == roofline.MODEL_EXCEEDED
    assert "%" not in roofline.MODEL_EXCEEDED and "caches reuse more" in roofline.MODEL_EXCEEDED
