#include <cstdio>
// Host code only: no __global__ function.
int main() { std::puts("hello"); return 0; }
