// The dot product the CPU kernels share (attention_cpu.cpp, norm_cpu.cpp): eight partial sums,
// which the vectorizer turns into vector operations without reassociating a single running sum,
// so every build (and attention_cpu.cpp's AVX2 copy) computes the same number. Always inlined so
// that it takes the instruction set of the function it lands in.
#pragma once
#include <cstdint>

namespace rlx {

// Dots of a against N rows of b (rows `stride` apart), each summed exactly as dot() sums it: the
// N chains are independent, so the CPU overlaps their latencies instead of waiting on one.
template <int N, typename T>
[[gnu::always_inline]] inline void dots(const T* __restrict__ a, const T* __restrict__ b, int64_t stride, int64_t n,
                                        T* __restrict__ out) {
  T part[N][8] = {};
  int64_t i = 0;
  for (; i + 8 <= n; i += 8)
#pragma GCC unroll 8
    for (int r = 0; r < N; ++r)
      for (int j = 0; j < 8; ++j) part[r][j] += a[i + j] * b[r * stride + i + j];
#pragma GCC unroll 8
  for (int r = 0; r < N; ++r) {
    T rest = 0;
    for (int64_t t = i; t < n; ++t) rest += a[t] * b[r * stride + t];
    const T* p = part[r];
    out[r] = ((p[0] + p[4]) + (p[1] + p[5])) + ((p[2] + p[6]) + (p[3] + p[7])) + rest;
  }
}

template <typename T>
[[gnu::always_inline]] inline T dot(const T* __restrict__ a, const T* __restrict__ b, int64_t n) {
  T out;
  dots<1>(a, b, 0, n, &out);
  return out;
}

}  // namespace rlx
