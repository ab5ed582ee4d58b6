"""The driver call that turns a TensorMapRequest (gemmcheck.contract.tensor_map) into the
128-byte CUtensorMap a kernel takes by value: cuda.bindings' cuTensorMapEncodeTiled, rank 2.

Every rule TMA has was checked before (encoding_problem): what the driver could still refuse
is said with the request in words, never as a bare error code."""

from __future__ import annotations

from gemmcheck.contract.launch import LaunchError
from gemmcheck.contract.tensor_map import TensorMapRequest, encoding_problem

# element type name -> CUtensorMapDataType member (8-bit floats travel as bytes, as CUTLASS's maps do)
_DATA_TYPES = {"float16": "CU_TENSOR_MAP_DATA_TYPE_FLOAT16", "bfloat16": "CU_TENSOR_MAP_DATA_TYPE_BFLOAT16",
               "float32": "CU_TENSOR_MAP_DATA_TYPE_FLOAT32", "float64": "CU_TENSOR_MAP_DATA_TYPE_FLOAT64",
               "tf32": "CU_TENSOR_MAP_DATA_TYPE_FLOAT32", "int32": "CU_TENSOR_MAP_DATA_TYPE_INT32",
               **dict.fromkeys(("float8_e4m3fn", "float8_e5m2", "int8", "uint8"), "CU_TENSOR_MAP_DATA_TYPE_UINT8")}
_SWIZZLES = {"none": "CU_TENSOR_MAP_SWIZZLE_NONE", "32B": "CU_TENSOR_MAP_SWIZZLE_32B",
             "64B": "CU_TENSOR_MAP_SWIZZLE_64B", "128B": "CU_TENSOR_MAP_SWIZZLE_128B"}


def encode(req: TensorMapRequest, address: int):
    """The CUtensorMap (cuda.bindings.driver.CUtensorMap) of `req` at device address `address`.
    Raises LaunchError naming the operand and the rule it breaks."""
    from cuda.bindings import driver

    why = encoding_problem(req, address)
    if why:
        raise LaunchError(f"{req.kernel}: {why}")
    # L2 promotion 256B for boxes whose inner line is long, as CUTLASS picks; else 128B
    promotion = "CU_TENSOR_MAP_L2_PROMOTION_L2_256B" if req.box[0] * req.itemsize >= 128 \
        else "CU_TENSOR_MAP_L2_PROMOTION_L2_128B"
    err, tmap = driver.cuTensorMapEncodeTiled(
        getattr(driver.CUtensorMapDataType, _DATA_TYPES[req.dtype]), 2, address,
        [driver.cuuint64_t(d) for d in req.dims], [driver.cuuint64_t(req.stride_bytes)],
        [driver.cuuint32_t(b) for b in req.box], [driver.cuuint32_t(1), driver.cuuint32_t(1)],
        driver.CUtensorMapInterleave.CU_TENSOR_MAP_INTERLEAVE_NONE,
        getattr(driver.CUtensorMapSwizzle, _SWIZZLES[req.swizzle]),
        getattr(driver.CUtensorMapL2promotion, promotion),
        driver.CUtensorMapFloatOOBfill.CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE)
    if err != driver.CUresult.CUDA_SUCCESS:
        raise LaunchError(f"{req.kernel}: tensor map for {req.operand}: the driver refused dims {list(req.dims)}, "
                          f"{req.line} stride {req.stride_bytes} bytes, box {list(req.box)}, swizzle {req.swizzle} "
                          f"at {address:#x} ({err.name})")
    return tmap
