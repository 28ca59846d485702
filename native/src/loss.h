// The loss settings and the rl component's loss (docs/architecture.md §6): the loss config as the
// caller sends it, and the per-token rl loss of each [trainer.loss] type with its reduction.
// step_loss.cpp combines the components; this file is the rl one's math.
#pragma once
#include "common.h"

namespace rlx {

struct LossSettings {
  double n_rl, n_ce, n_ref, mask_low, mask_high, adv_tau, kl_tau;
  // ABI 4 (absent from a 7-field config: DPPO+KL with the token mean, as before).
  int type = RLX_RL_DPPO_KL, reduction = RLX_REDUCE_TOKEN;
  double n_rl_seq = 1, constant = 1, ipo_threshold = 0.1, is_low = 0.5, is_high = 5.0, is_cap = 2.0;
  // ABI 6 (absent from a 7- or 15-field config: 1, and no distill member is allowed).
  double n_distill = 1;
  bool has_n_distill = false;
};


// Parses loss_config: n is RLX_LOSS_CONFIG_LEN (the ABI 3 calls), RLX_LOSS_CONFIG_LEN_EXT (ABI 4)
// or RLX_LOSS_CONFIG_LEN_DISTILL (ABI 6).
LossSettings parse_settings(const double* cfg, int n);

// Each token's sample (0..n-1) from the sample lengths, on like's device.
at::Tensor sample_index(const std::vector<int64_t>& lengths, const at::Tensor& like);

// The rl component's per-token loss before its weight and reduction; masked: members dropped from
// the policy term (metrics).
at::Tensor rl_loss(const at::Tensor& log_ratio, const at::Tensor& ratio, const at::Tensor& dp, const at::Tensor& adv,
                   const at::Tensor& rl_m, const at::Tensor& seg, int64_t n_seg, const LossSettings& cfg, at::Tensor& masked);

// Per-token factor of the rl component's sequence and constant reductions.
at::Tensor rl_scale(const at::Tensor& rl_m, const at::Tensor& seg, int64_t n_seg, const LossSettings& cfg);

// The training step and the loss over given logprobs (train.cpp), behind every ABI version's calls:
// fields is the caller's metric block width (RLX_METRICS_FIELDS for the ABI 3 and 4 calls, which
// take no distill streams, or RLX_METRICS_FIELDS_DISTILL).
int train_step_any(void* model, int64_t T, const int32_t* token_ids, const int32_t* sample_lengths, int n_samples,
                   const uint8_t* loss_mask, const float* advantages, const float* inference_logprobs,
                   const float* temperatures, const float* ref_logprobs, const float* rl_weights, const float* ce_weights,
                   const float* ref_kl_weights, const float* distill_weights, const float* distill_betas, int distill_k,
                   const int32_t* distill_ids, const float* distill_logprobs, const int32_t* env_index, int n_envs,
                   const double* loss_config, int n_loss_config, double* metrics, int64_t n_metrics, int64_t fields,
                   const int32_t* sample_parents = nullptr);
int loss_eval_any(int64_t T, const double* logprobs, const int32_t* sample_lengths, int n_samples, const uint8_t* loss_mask,
                  const float* advantages, const float* inference_logprobs, const float* ref_logprobs,
                  const float* rl_weights, const float* ce_weights, const float* ref_kl_weights,
                  const float* distill_weights, const float* distill_betas, int distill_k, const int32_t* distill_ids,
                  const float* distill_logprobs, int64_t vocab, const double* student_logits, const int32_t* env_index,
                  int n_envs, const double* loss_config, int n_loss_config, double* metrics, int64_t n_metrics,
                  double* grad_out, double* grad_logits_out, int64_t fields);

}  // namespace rlx
