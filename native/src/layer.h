// One decoder layer's blocks besides attention, shared by the packed forward and the decode step
// (forward.cpp); layer.cpp holds them.
#pragma once

#include "model.h"

namespace rlx {

// HF LlamaRMSNorm: normalize in float32 (float64 for float64 models), scale in the input dtype.
at::Tensor rms_norm(const Model& m, const at::Tensor& x, const at::Tensor& weight);

// cos/sin rows for the given positions, [N, D], in the model's dtype.
std::pair<at::Tensor, at::Tensor> rope_rows(Model& m, const at::Tensor& positions);

struct Qkv {
  at::Tensor q, k, v;  // q [N, H, D], k and v [N, G, D], positions applied
};

// h [N, hidden] (normed) -> q/k/v with q/k norms and the rotary embedding applied.
Qkv project_qkv(Model& m, const Layer& L, const at::Tensor& h, const at::Tensor& cos, const at::Tensor& sin);

// The post-attention RMSNorm and SwiGLU of layer L: x [N, hidden] -> [N, hidden].
at::Tensor mlp(Model& m, const Layer& L, const at::Tensor& x);

}  // namespace rlx
