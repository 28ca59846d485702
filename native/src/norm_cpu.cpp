// RMSNorm and the rotary embedding on the CPU without autograd (generation and scoring), as one
// pass over each row instead of ATen's chain of elementwise ops. A `tiny` decode step at batch 16
// ran 34 such ops per layer, each a dispatch and a fresh tensor for a few thousand numbers
// (experiments/bench_history.md, "Decode on the CPU"). The arithmetic is forward.cpp's: RMSNorm as
// HF's LlamaRMSNorm, w * (x * 1 / sqrt(mean(x^2) + eps)), whose sum of squares here is cpu_dot.h's
// (the only difference from ATen's, in rounding); the rotary embedding as
// x * cos + rotate_half(x) * sin, each product and the sum rounded as ATen rounds them.
#include "cpu_dot.h"
#include "model.h"

namespace rlx {
namespace {

// out = weight * (x * 1 / sqrt(mean(x^2) + eps)) over one row of n.
template <typename T>
void norm_row(const T* x, const T* weight, T eps, int64_t n, T* out) {
  const T inv = T(1) / std::sqrt(dot(x, x, n) / T(n) + eps);
  for (int64_t i = 0; i < n; ++i) out[i] = weight[i] * (x[i] * inv);
}

// out = x * cos + rotate_half(x) * sin over one head of D; rotate_half(x) = [-x2, x1].
template <typename T>
void rope_row(const T* x, const T* cos, const T* sin, int64_t D, T* out) {
  const int64_t half = D / 2;
  for (int64_t d = 0; d < half; ++d) out[d] = x[d] * cos[d] + -x[d + half] * sin[d];
  for (int64_t d = half; d < D; ++d) out[d] = x[d] * cos[d] + x[d - half] * sin[d];
}

// Rows per parallel chunk: ~32k numbers, ATen's own grain for elementwise work.
int64_t grain_rows(int64_t row) { return std::max<int64_t>(1, 32768 / std::max<int64_t>(1, row)); }

}  // namespace

bool norm_cpu_applies(const at::Tensor& x) {
  const auto dt = x.scalar_type();
  return !at::GradMode::is_enabled() && x.device().is_cpu() && (dt == at::kFloat || dt == at::kDouble) && x.stride(-1) == 1;
}

at::Tensor rms_norm_cpu(const at::Tensor& x_N_C, const at::Tensor& weight, double eps) {
  const int64_t N = x_N_C.size(0), C = x_N_C.size(1), stride = x_N_C.stride(0);
  TORCH_CHECK(x_N_C.dim() == 2 && weight.is_contiguous() && weight.scalar_type() == x_N_C.scalar_type(), "rms_norm_cpu: bad input");
  auto out = at::empty({N, C}, x_N_C.options());
  AT_DISPATCH_FLOATING_TYPES(x_N_C.scalar_type(), "rms_norm_cpu", [&] {
    const scalar_t *x = x_N_C.data_ptr<scalar_t>(), *w = weight.data_ptr<scalar_t>();
    scalar_t* o = out.data_ptr<scalar_t>();
    at::parallel_for(0, N, grain_rows(C), [&](int64_t begin, int64_t end) {
      for (int64_t n = begin; n < end; ++n) norm_row(x + n * stride, w, scalar_t(eps), C, o + n * C);
    });
  });
  return out;
}

at::Tensor norm_rope_cpu(const at::Tensor& x_N_h_D, const at::Tensor& weight, double eps, const at::Tensor& cos_N_D,
                         const at::Tensor& sin_N_D) {
  const int64_t N = x_N_h_D.size(0), heads = x_N_h_D.size(1), D = x_N_h_D.size(2);
  const int64_t stride_n = x_N_h_D.stride(0), stride_h = x_N_h_D.stride(1);
  const auto dt = x_N_h_D.scalar_type();
  TORCH_CHECK(x_N_h_D.dim() == 3 && D % 2 == 0 && cos_N_D.is_contiguous() && sin_N_D.is_contiguous() &&
                  cos_N_D.scalar_type() == dt && sin_N_D.scalar_type() == dt &&
                  (!weight.defined() || (weight.is_contiguous() && weight.scalar_type() == dt)),
              "norm_rope_cpu: bad input");
  auto out = at::empty({N, heads, D}, x_N_h_D.options());
  AT_DISPATCH_FLOATING_TYPES(dt, "norm_rope_cpu", [&] {
    const scalar_t *x = x_N_h_D.data_ptr<scalar_t>(), *c = cos_N_D.data_ptr<scalar_t>(), *s = sin_N_D.data_ptr<scalar_t>();
    const scalar_t* w = weight.defined() ? weight.data_ptr<scalar_t>() : nullptr;
    scalar_t* o = out.data_ptr<scalar_t>();
    at::parallel_for(0, N, grain_rows(heads * D), [&](int64_t begin, int64_t end) {
      std::vector<scalar_t> normed(static_cast<size_t>(D));
      for (int64_t n = begin; n < end; ++n)
        for (int64_t h = 0; h < heads; ++h) {
          const scalar_t* row = x + n * stride_n + h * stride_h;
          if (w) norm_row(row, w, scalar_t(eps), D, normed.data()), row = normed.data();
          rope_row(row, c + n * D, s + n * D, D, o + (n * heads + h) * D);
        }
    });
  });
  return out;
}

}  // namespace rlx
