// The project's runner: its kernels come from include/kernels.cuh (draft needs -I ../include).
#include <cstdio>
#include "kernels.cuh"

int main() { return 0; }
