// The loss settings and the rl component's loss (docs/architecture.md §6): the loss config as the
// caller sends it, and the per-token rl loss of each [trainer.loss] type with its reduction.
// step_loss.cpp combines the components; this file is the rl one's math.
#pragma once
#include "common.h"

namespace rlx {

struct LossSettings {
  double n_rl, n_ce, n_ref, mask_low, mask_high, adv_tau, kl_tau;
  int type = RLX_RL_DPPO_KL, reduction = RLX_REDUCE_TOKEN;
  double n_rl_seq = 1, constant = 1, ipo_threshold = 0.1, is_low = 0.5, is_high = 5.0, is_cap = 2.0;
  double n_distill = 1;
  bool has_n_distill = false;  // rlx_loss.n_distill 0: no distill member is allowed
};

// Checks and converts the caller's loss settings.
LossSettings parse_settings(const rlx_loss& loss);

// Each token's sample (0..n-1) from the sample lengths, on like's device.
at::Tensor sample_index(const std::vector<int64_t>& lengths, const at::Tensor& like);

// The rl component's per-token loss before its weight and reduction; masked: members dropped from
// the policy term (metrics).
at::Tensor rl_loss(const at::Tensor& log_ratio, const at::Tensor& ratio, const at::Tensor& dp, const at::Tensor& adv,
                   const at::Tensor& rl_m, const at::Tensor& seg, int64_t n_seg, const LossSettings& cfg, at::Tensor& masked);

// Per-token factor of the rl component's sequence and constant reductions.
at::Tensor rl_scale(const at::Tensor& rl_m, const at::Tensor& seg, int64_t n_seg, const LossSettings& cfg);

}  // namespace rlx
