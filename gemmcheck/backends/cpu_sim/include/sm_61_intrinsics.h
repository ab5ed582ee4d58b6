// The integer dot products of sm_61_intrinsics.h for gemmcheck's CPU simulator: __dp4a (four
// 8-bit products) and __dp2a_lo / __dp2a_hi (two 16-bit by 8-bit products, from the low or
// high half of the 8-bit operand), signed and unsigned, added to c. The sum wraps modulo 2^32
// as the GPU's does (never C++'s signed overflow).
#pragma once

namespace cudasim_dp {
template <typename Lane> inline int lane(unsigned word, int index)
{
    return (Lane)(word >> (8 * sizeof(Lane) * index));
}
template <typename A, typename B>
inline unsigned dot(unsigned a, unsigned b, unsigned c, int count, int b_first)
{
    long long sum = 0;
    for (int i = 0; i < count; i++)
        sum += (long long)lane<A>(a, i) * lane<B>(b, b_first + i);
    return (unsigned)((unsigned long long)sum + c);
}
}  // namespace cudasim_dp

inline int __dp4a(int a, int b, int c)
{
    return (int)cudasim_dp::dot<signed char, signed char>((unsigned)a, (unsigned)b, (unsigned)c, 4, 0);
}
inline unsigned __dp4a(unsigned a, unsigned b, unsigned c)
{
    return cudasim_dp::dot<unsigned char, unsigned char>(a, b, c, 4, 0);
}
inline int __dp4a(char4 a, char4 b, int c)
{
    unsigned ua, ub;
    __builtin_memcpy(&ua, &a, 4);
    __builtin_memcpy(&ub, &b, 4);
    return __dp4a((int)ua, (int)ub, c);
}
inline unsigned __dp4a(uchar4 a, uchar4 b, unsigned c)
{
    unsigned ua, ub;
    __builtin_memcpy(&ua, &a, 4);
    __builtin_memcpy(&ub, &b, 4);
    return __dp4a(ua, ub, c);
}
inline int __dp2a_lo(int a, int b, int c)
{
    return (int)cudasim_dp::dot<short, signed char>((unsigned)a, (unsigned)b, (unsigned)c, 2, 0);
}
inline unsigned __dp2a_lo(unsigned a, unsigned b, unsigned c)
{
    return cudasim_dp::dot<unsigned short, unsigned char>(a, b, c, 2, 0);
}
inline int __dp2a_hi(int a, int b, int c)
{
    return (int)cudasim_dp::dot<short, signed char>((unsigned)a, (unsigned)b, (unsigned)c, 2, 2);
}
inline unsigned __dp2a_hi(unsigned a, unsigned b, unsigned c)
{
    return cudasim_dp::dot<unsigned short, unsigned char>(a, b, c, 2, 2);
}
