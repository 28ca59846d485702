// One decoder layer's blocks besides attention (forward.cpp): RMSNorm, the rotary embedding, the
// q/k/v projections with Qwen3's q/k norms, and the SwiGLU MLP, each with autograd (training) or
// through the CPU kernels and the layer's joint buffers (generation, scoring).
#include "layer.h"

namespace rlx {

// HF LlamaRMSNorm: normalize in float32 (float64 for float64 models), scale in the input dtype.
at::Tensor rms_norm(const Model& m, const at::Tensor& x, const at::Tensor& weight) {
  if (x.dim() == 2 && norm_cpu_applies(x) && weight.scalar_type() == x.scalar_type())
    return rms_norm_cpu(x, weight, m.cfg.rms_norm_eps);
  auto xf = x.to(m.compute_dtype());
  auto normed = xf * at::rsqrt(xf.pow(2).mean(-1, true) + m.cfg.rms_norm_eps);
  return weight * normed.to(x.scalar_type());
}

// cos/sin rows for the given positions, [N, D], in the model's dtype, computed the way HF computes
// them (inverse frequencies, with any RoPE scaling (rope.cpp), and angles in float32, or float64
// for float64 models; YaRN's attention factor multiplies cos and sin). Only the inverse
// frequencies are kept: a table of every position up to the longest would be a fixed cost of
// 512 bytes a position on a 64-wide head, 16 MiB at 32k, on every context-parallel rank alike.
std::pair<at::Tensor, at::Tensor> rope_rows(Model& m, const at::Tensor& positions) {
  at::NoGradGuard no_grad;
  auto cd = m.compute_dtype();
  if (!m.rope_inv_freq.defined()) {
    auto [inv_freq, attention_factor] = rope_inv_freq(m.cfg, cd);  // [D/2]
    m.rope_inv_freq = inv_freq.to(m.device);
    m.rope_factor = attention_factor;
  }
  auto angles = positions.to(cd).unsqueeze(1) * m.rope_inv_freq;  // [N, D/2]
  auto emb = at::cat({angles, angles}, 1);
  return {(emb.cos() * m.rope_factor).to(m.dtype), (emb.sin() * m.rope_factor).to(m.dtype)};
}

static at::Tensor rotate_half(const at::Tensor& x) {
  const int64_t half = x.size(-1) / 2;
  return at::cat({-x.narrow(-1, half, half), x.narrow(-1, 0, half)}, -1);
}

// x [N, heads, D]; cos/sin [N, D].
static at::Tensor apply_rope(const at::Tensor& x, const at::Tensor& cos, const at::Tensor& sin) {
  return x * cos.unsqueeze(1) + rotate_half(x) * sin.unsqueeze(1);
}

// Without autograd (generation, scoring) q/k/v run as one product of the layer's joint buffer and
// gate/up as another: fewer, larger products. Under autograd, which must reach each block's own
// parameter, or with a LoRA adapter on one of them, each runs apart.
static bool joint(const Layer& L, std::initializer_list<LoraTarget> targets) {
  if (at::GradMode::is_enabled()) return false;
  return std::none_of(targets.begin(), targets.end(), [&](LoraTarget t) { return L.lora_A[t].defined(); });
}

Qkv project_qkv(Model& m, const Layer& L, const at::Tensor& h, const at::Tensor& cos, const at::Tensor& sin) {
  const auto& c = m.cfg;
  const int64_t N = h.size(0), H = c.num_attention_heads, G = c.num_key_value_heads, D = c.head_dim;
  at::Tensor q, k, v;
  if (joint(L, {kLoraQ, kLoraK, kLoraV})) {
    auto qkv = linear(m, h, L.qkv_proj, L.qkv_bias);
    q = qkv.narrow(1, 0, H * D).view({N, H, D});
    k = qkv.narrow(1, H * D, G * D).view({N, G, D});
    v = qkv.narrow(1, (H + G) * D, G * D).view({N, G, D});
  } else {
    q = project(m, L, kLoraQ, h, L.q_proj, L.q_bias).view({N, H, D});
    k = project(m, L, kLoraK, h, L.k_proj, L.k_bias).view({N, G, D});
    v = project(m, L, kLoraV, h, L.v_proj, L.v_bias).view({N, G, D});
  }
  if (norm_cpu_applies(q) && cos.scalar_type() == q.scalar_type()) {
    const double eps = c.rms_norm_eps;
    return {norm_rope_cpu(q, c.qk_norm ? L.q_norm : at::Tensor(), eps, cos, sin),
            norm_rope_cpu(k, c.qk_norm ? L.k_norm : at::Tensor(), eps, cos, sin), v};
  }
  if (c.qk_norm) {
    q = rms_norm(m, q, L.q_norm);
    k = rms_norm(m, k, L.k_norm);
  }
  return {apply_rope(q, cos, sin), apply_rope(k, cos, sin), v};
}

at::Tensor mlp(Model& m, const Layer& L, const at::Tensor& x) {
  auto h = rms_norm(m, x, L.post_norm);
  at::Tensor gated;
  if (joint(L, {kLoraGate, kLoraUp})) {
    const int64_t I = m.cfg.intermediate_size;
    auto gate_up = linear(m, h, L.gate_up_proj);
    gated = at::silu(gate_up.narrow(1, 0, I)) * gate_up.narrow(1, I, I);
  } else {
    gated = at::silu(project(m, L, kLoraGate, h, L.gate_proj)) * project(m, L, kLoraUp, h, L.up_proj);
  }
  return project(m, L, kLoraDown, gated, L.down_proj);
}

}  // namespace rlx
