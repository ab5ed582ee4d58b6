"""parse_asan reads AddressSanitizer's report whatever libasan's wording (GCC 12 says
"to the right of", GCC 13+ "after": the H200 image's compiler is the newer one)."""

import pytest

from gemmcheck.backends.cpu_sim import parse_asan

LOG = """cudasim-buffer 0 0x625000000100 8580
cudasim-buffer 1 0x621000001500 4420
cudasim-buffer 2 0x61d000000080 2244
==4828==ERROR: AddressSanitizer: heap-buffer-overflow on address 0x61d000000944 at pc 0x55c061ab5d30 bp 0x7f74 sp 0x7f74
WRITE of size 4 at 0x61d000000944 thread T0
    #0 0x55c061ab5d2f in void flawed_body<float, 16, (Flaw)5>(float const*, float const*, float*, int, int, int) /work/main/kernels/broken_tiled.cu:75
    #1 0x55c061ab5e00 in run_3 /tmp/launcher.cpp:12
0x61d000000944 is located {distance} bytes {where} 2244-byte region [0x61d000000080,0x61d000000944)
allocated by thread T0 here:
    #0 0x7f74566b89cf in __interceptor_malloc ../../../../src/libsanitizer/asan/asan_malloc_linux.cpp:69
"""


@pytest.mark.parametrize("where, distance, past", [
    ("to the right of", 0, 0), ("after", 0, 0), ("after", 8, 8),
    ("to the left of", 4, -4), ("before", 4, -4)])
def test_the_buffer_and_distance_are_read_in_either_wording(where, distance, past):
    (error,) = parse_asan(LOG.format(where=where, distance=distance))
    assert (error.access, error.buffer, error.bytes_past, error.size) == ("write", "C", past, 4)
    assert error.frame == ("void flawed_body<float, 16, (Flaw)5>"
                           "(float const*, float const*, float*, int, int, int)")
