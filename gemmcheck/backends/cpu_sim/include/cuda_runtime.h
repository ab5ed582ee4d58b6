// CUDA runtime header for the CPU simulator: the execution model is in cudasim.h.
#pragma once
#include "cudasim.h"
