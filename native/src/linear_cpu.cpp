// A product of few rows on the CPU, without autograd: y [M, N] = x [M, K] w [N, K]^T (+ b), for
// M <= 32 (a decode step's rows, a short prefill's tokens). OpenBLAS packs w into its panel layout
// on every call; profiling a `tiny` decode step at batch 16 found that packing (sgemm_incopy) at a
// third of the products' samples, a sixth of the step. Here each block of four rows of w is read
// straight from the row-major weights into twelve float32 vector sums against three rows of x at a
// time, so the block stays in L1 while every row of x passes it (experiments/bench_history.md,
// "Few-row products"). AVX2 with FMA only; elsewhere, and for float64, linear() keeps at::linear.
#include "model.h"

#if defined(__x86_64__)
#include <immintrin.h>
#endif

namespace rlx {
namespace {

#if defined(__x86_64__)
__attribute__((target("avx2,fma"))) inline float sum8(__m256 v) {
  __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  s = _mm_add_ps(s, _mm_movehl_ps(s, s));
  return _mm_cvtss_f32(_mm_add_ss(s, _mm_movehdup_ps(s)));
}

// Rows [m0, m0 + MR) of y against weight rows [n0, n0 + NR): MR * NR vector sums over K.
template <int MR, int NR>
__attribute__((target("avx2,fma"))) inline void block(const float* x, const float* w, const float* b, float* y,
                                                      int64_t m0, int64_t n0, int64_t K, int64_t N) {
  // Unrolled so that the MR * NR sums stay in registers (-O2 leaves such loops rolled and the
  // sums on the stack, at about half the speed).
  __m256 acc[MR][NR];
#pragma GCC unroll 8
  for (int i = 0; i < MR; ++i)
#pragma GCC unroll 8
    for (int j = 0; j < NR; ++j) acc[i][j] = _mm256_setzero_ps();
  int64_t k = 0;
  for (; k + 8 <= K; k += 8) {
    __m256 xs[MR];
#pragma GCC unroll 8
    for (int i = 0; i < MR; ++i) xs[i] = _mm256_loadu_ps(x + (m0 + i) * K + k);
#pragma GCC unroll 8
    for (int j = 0; j < NR; ++j) {
      const __m256 wv = _mm256_loadu_ps(w + (n0 + j) * K + k);
#pragma GCC unroll 8
      for (int i = 0; i < MR; ++i) acc[i][j] = _mm256_fmadd_ps(xs[i], wv, acc[i][j]);
    }
  }
  for (int i = 0; i < MR; ++i)
    for (int j = 0; j < NR; ++j) {
      float total = sum8(acc[i][j]);
      for (int64_t t = k; t < K; ++t) total += x[(m0 + i) * K + t] * w[(n0 + j) * K + t];
      y[(m0 + i) * N + n0 + j] = b ? total + b[n0 + j] : total;
    }
}

// Weight rows [n_begin, n_end) against every input row.
__attribute__((target("avx2,fma"))) void rows(const float* x, const float* w, const float* b, float* y, int64_t M,
                                              int64_t K, int64_t N, int64_t n_begin, int64_t n_end) {
  int64_t n = n_begin;
  for (; n + 4 <= n_end; n += 4) {
    int64_t m = 0;
    for (; m + 3 <= M; m += 3) block<3, 4>(x, w, b, y, m, n, K, N);
    if (M - m == 2) block<2, 4>(x, w, b, y, m, n, K, N);
    else if (M - m == 1) block<1, 4>(x, w, b, y, m, n, K, N);
  }
  for (; n < n_end; ++n)
    for (int64_t m = 0; m < M; ++m) block<1, 1>(x, w, b, y, m, n, K, N);
}
#endif

}  // namespace

// Rows up to which small_linear_cpu runs instead of at::linear.
constexpr int64_t kSmallLinearRows = 32;

static bool small_linear_cpu_applies(const Model& m, const at::Tensor& x, const at::Tensor& w) {
#if defined(__x86_64__)
  static const bool avx2 = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
  return avx2 && m.cpu_linear && !m.autocast_bf16 && x.dim() == 2 && x.size(0) <= kSmallLinearRows && x.device().is_cpu() &&
         x.scalar_type() == at::kFloat && w.scalar_type() == at::kFloat && w.is_contiguous() && !at::GradMode::is_enabled();
#else
  return false;
#endif
}

static at::Tensor small_linear_cpu(const at::Tensor& x_M_K, const at::Tensor& w_N_K, const at::Tensor& b_N) {
  auto x = x_M_K.contiguous();
  const int64_t M = x.size(0), K = x.size(1), N = w_N_K.size(0);
  TORCH_CHECK(w_N_K.size(1) == K && (!b_N.defined() || (b_N.numel() == N && b_N.is_contiguous())),
              "small_linear_cpu: shapes do not match");
  auto y = at::empty({M, N}, x.options());
#if defined(__x86_64__)
  const float *xp = x.data_ptr<float>(), *wp = w_N_K.data_ptr<float>();
  const float* bp = b_N.defined() ? b_N.data_ptr<float>() : nullptr;
  float* yp = y.data_ptr<float>();
  // A parallel region costs tens of microseconds to wake its threads: ~256k multiply-adds a chunk
  // at least (a chunk edge inside a block of four weight rows runs those rows one at a time).
  const int64_t grain = std::max<int64_t>(4, ((int64_t(1) << 18) / std::max<int64_t>(1, M * K) + 3) / 4 * 4);
  at::parallel_for(0, N, grain, [&](int64_t begin, int64_t end) { rows(xp, wp, bp, yp, M, K, N, begin, end); });
#endif
  return y;
}

at::Tensor linear(const Model& m, const at::Tensor& x, const at::Tensor& w, const at::Tensor& b) {
  if (small_linear_cpu_applies(m, x, w)) return small_linear_cpu(x, w, b);
  return b.defined() ? at::linear(x, w, b) : at::linear(x, w);
}

}  // namespace rlx
