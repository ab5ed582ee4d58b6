"""The prelude every device compile includes first (package data beside this file).

``gemmcheck_prelude.h`` gives device code what nvcc's host headers give it: glibc's
``uint``, ``ushort``, ``ulong``; the CUDA math constants (``CUDART_PI_F`` ...); under NVRTC
also ``assert``, the ``<cfloat>`` / ``<climits>`` macros and ``<cstdint>``'s types. NVRTC takes it with
``--pre-include``; a host compiler (the CPU simulator's g++) through the first line of the
device part (gemmcheck.contract.cuda_source.device_part).
"""

from pathlib import Path

PRELUDE = Path(__file__).resolve().parent / "gemmcheck_prelude.h"
