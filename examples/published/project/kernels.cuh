// Every kernel of the project, one header each.
#pragma once
#include "kernels/1_naive.cuh"
#include "kernels/2_smem_tiled.cuh"
