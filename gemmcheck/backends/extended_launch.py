"""Launches that CuPy's kernel call cannot make: a thread-block cluster, a CUtensorMap or a struct
passed by value. cuda.bindings' cuLaunchKernelEx, on the CUfunction CuPy loaded and the stream CuPy
uses, so such a launch is waited for, timed and checked for errors exactly as any other.

The parameters are the void** array cuLaunchKernel documents: one pointer per kernel parameter
to the bytes the driver copies (a device pointer, a by-value argument in the bytes of the type
the kernel declares, as gemmcheck.contract.launch.plan packed it, the 128 bytes of a tensor
map, or a struct's bytes with its members in place); the driver reads each size from the
kernel's image.
"""

from __future__ import annotations

import ctypes
import functools

import numpy as np

from gemmcheck.backends import tensor_map_encoding
from gemmcheck.contract.launch import Launch, StructArgument
from gemmcheck.contract.tensor_map import TensorMapRequest


def device_address(buffer) -> int:
    """A CuPy array's (or anything with __cuda_array_interface__'s) device address."""
    if hasattr(buffer, "data") and hasattr(buffer.data, "ptr"):
        return int(buffer.data.ptr)
    return int(buffer.__cuda_array_interface__["data"][0])


def parameters(args) -> tuple[list, ctypes.Array]:
    """(what must stay alive until the launch is queued, the void** array) for `args` as
    Launch.parameters gives them: device buffers, numpy scalars, TensorMapRequests, structs."""
    keep = []
    for arg in args:
        if isinstance(arg, StructArgument):
            data = arg.packed(device_address)
            value = ctypes.create_string_buffer(data, len(data))
            keep.append((value, ctypes.addressof(value)))
        elif isinstance(arg, TensorMapRequest):
            tmap = _encoded(arg, device_address(arg.buffer))
            keep.append((tmap, tmap.getPtr()))
        elif isinstance(arg, np.generic):
            value = ctypes.create_string_buffer(arg.tobytes(), arg.nbytes)   # its bytes exactly
            keep.append((value, ctypes.addressof(value)))
        else:
            value = ctypes.c_void_p(device_address(arg))
            keep.append((value, ctypes.addressof(value)))
    pointers = (ctypes.c_void_p * max(len(keep), 1))(*[address for _, address in keep])
    return keep, pointers


@functools.lru_cache(maxsize=256)
def _encoded(req: TensorMapRequest, address: int):
    """Encoded once per request and address: timing loops launch one problem many times."""
    return tensor_map_encoding.encode(req, address)


@functools.lru_cache(maxsize=None)
def compile_time_cluster(function_handle: int) -> bool:
    """Whether the kernel fixes its cluster in the source (__cluster_dims__): its launch must
    not set one again (the driver refuses a cluster dimension attribute then). Asked once per
    function: timing loops launch it many times."""
    from cuda.bindings import driver

    err, width = driver.cuFuncGetAttribute(
        driver.CUfunction_attribute.CU_FUNC_ATTRIBUTE_REQUIRED_CLUSTER_WIDTH, driver.CUfunction(function_handle))
    return err == driver.CUresult.CUDA_SUCCESS and width > 0


def enqueue(function_handle: int, stream_handle: int, launch: Launch) -> None:
    """Queue `launch` of the CUfunction `function_handle` on `stream_handle`; raise RuntimeError
    with the driver's error name when it refuses."""
    from cuda.bindings import driver

    keep, pointers = parameters(launch.parameters)
    config = driver.CUlaunchConfig()
    config.gridDimX, config.gridDimY, config.gridDimZ = launch.grid     # in blocks, for the driver
    config.blockDimX, config.blockDimY, config.blockDimZ = launch.block
    config.sharedMemBytes = launch.shared_bytes
    config.hStream = driver.CUstream(stream_handle)
    attributes = []
    if launch.cluster is not None and not compile_time_cluster(function_handle):
        attribute = driver.CUlaunchAttribute()
        attribute.id = driver.CUlaunchAttributeID.CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION
        attribute.value.clusterDim.x, attribute.value.clusterDim.y, attribute.value.clusterDim.z = launch.cluster
        attributes.append(attribute)
    config.attrs = attributes
    config.numAttrs = len(attributes)
    err, = driver.cuLaunchKernelEx(config, driver.CUfunction(function_handle), ctypes.addressof(pointers), 0)
    del keep   # the driver copied every parameter when it queued the launch
    if err != driver.CUresult.CUDA_SUCCESS:
        _, name = driver.cuGetErrorName(err)
        raise ExtendedLaunchError(f"cuLaunchKernelEx: {name.decode() if isinstance(name, bytes) else name}",
                                  int(err))


class ExtendedLaunchError(RuntimeError):
    """The driver refused a cuLaunchKernelEx; `status` is its CUresult (sticky ones lose the context)."""

    def __init__(self, message: str, status: int):
        super().__init__(message)
        self.status = status
