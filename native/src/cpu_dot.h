// The dot product the CPU kernels share (attention_cpu.cpp, norm_cpu.cpp): eight partial sums,
// which the vectorizer turns into vector operations without reassociating a single running sum,
// so every build (and attention_cpu.cpp's AVX2 copy) computes the same number. Always inlined so
// that it takes the instruction set of the function it lands in.
#pragma once
#include <cstdint>

namespace rlx {

template <typename T>
[[gnu::always_inline]] inline T dot(const T* __restrict__ a, const T* __restrict__ b, int64_t n) {
  T part[8] = {};
  int64_t i = 0;
  for (; i + 8 <= n; i += 8)
    for (int j = 0; j < 8; ++j) part[j] += a[i + j] * b[i + j];
  T rest = 0;
  for (; i < n; ++i) rest += a[i] * b[i];
  return ((part[0] + part[4]) + (part[1] + part[5])) + ((part[2] + part[6]) + (part[3] + part[7])) + rest;
}

}  // namespace rlx
