// The loss settings and the rl component's loss (docs/architecture.md §6): the loss config as the
// caller sends it (the step's denominators and its table of rl losses, one per sample code), and
// the rl component over a row whose samples may each use another loss type and reduction.
// step_loss.cpp combines the components; rl_loss.cpp is the rl one's dispatch and the
// trust-region and importance-sampling types, rl_clip.cpp the clipping types.
#pragma once
#include "common.h"

namespace rlx {

// One rl loss: a type, a reduction and their settings (rlx.h rlx_rl_loss), every one set by
// parse_settings from the caller's (the defaults live in the config: src/data/loss_types.ts).
struct RlSettings {
  int type, reduction;
  double constant, mask_low, mask_high, adv_tau, kl_tau, ipo_threshold, is_low, is_high, is_cap, clip_low, clip_high;
};

struct LossSettings {
  double n_rl, n_ce, n_ref;
  double n_rl_seq = 1, n_distill = 1;
  bool has_n_distill = false;     // rlx_loss.n_distill 0: no distill member is allowed
  std::vector<RlSettings> losses;  // [0]: rlx_loss's own, [k]: rlx_loss.losses[k - 1]
};

// Checks and converts the caller's loss settings and its table.
LossSettings parse_settings(const rlx_loss& loss);

// Each sample's loss code from rlx_batch.sample_losses (NULL: all 0), checked against the table.
std::vector<int64_t> sample_codes_of(const int32_t* codes, size_t n_samples, const LossSettings& cfg);

// Each token's sample (0..n-1) from the sample lengths, on like's device.
at::Tensor sample_index(const std::vector<int64_t>& lengths, const at::Tensor& like);

// The rl component of a row. log_ratio = lp - ilp (differentiable in lp), dp = exp(lp) - exp(ilp)
// (no grad), adv and rl_w the streams (adv 0 off members), rl_m its members, seg each token's
// sample (n_seg samples), codes each sample's loss (empty: all 0).
struct RlTerms {
  at::Tensor part;           // per-token contribution to L: weighted and reduced
  at::Tensor weighted;       // l_rl * rl_w before the reduction (RLX_M_RL_SUM)
  at::Tensor masked;         // members dropped from the policy term
  at::Tensor clipped_low, clipped_high;  // members whose ratio is beyond a clipping type's range
};
RlTerms rl_component(const at::Tensor& log_ratio, const at::Tensor& dp, const at::Tensor& adv, const at::Tensor& rl_w,
                     const at::Tensor& rl_m, const at::Tensor& seg, int64_t n_seg, const std::vector<int64_t>& codes,
                     const LossSettings& cfg);

// One type's per-token loss before its weight and reduction, over its members m (lr is 0 off
// them). The clipping types (rl_clip.cpp) also say which members are beyond their range.
struct TypeTerms {
  at::Tensor loss, masked, clipped_low, clipped_high;
};
TypeTerms clip_type_loss(const at::Tensor& lr, const at::Tensor& adv, const at::Tensor& m, const at::Tensor& seg,
                         int64_t n_seg, const RlSettings& cfg);

// A per-sample sum over members m of x, broadcast back to each token.
at::Tensor per_sample_sum(const at::Tensor& x, const at::Tensor& m, const at::Tensor& seg, int64_t n_seg);

}  // namespace rlx
