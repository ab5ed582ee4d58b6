// The project's kernels, one header each.
#pragma once
#include "kernels/nested_tiled.cuh"
