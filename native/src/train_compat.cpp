// The ABI 3 and ABI 4 training calls, kept working unchanged: each forwards to the one
// implementation in train.cpp with no distill streams and the 17-field metric blocks they were
// written for (rlx.h: never fork the ABI, extend it).
#include "loss.h"

using namespace rlx;

RLX_API int rlx_train_step_ext(void* model, int64_t T, const int32_t* token_ids, const int32_t* sample_lengths, int n_samples,
                               const uint8_t* loss_mask, const float* advantages, const float* inference_logprobs,
                               const float* temperatures, const float* ref_logprobs, const float* rl_weights,
                               const float* ce_weights, const float* ref_kl_weights, const int32_t* env_index, int n_envs,
                               const double* loss_config, int n_loss_config, double* metrics, int64_t n_metrics) {
  return train_step_any(model, T, token_ids, sample_lengths, n_samples, loss_mask, advantages, inference_logprobs, temperatures,
                        ref_logprobs, rl_weights, ce_weights, ref_kl_weights, nullptr, nullptr, 0, nullptr, nullptr, env_index,
                        n_envs, loss_config, n_loss_config, metrics, n_metrics, RLX_METRICS_FIELDS);
}

RLX_API int rlx_loss_eval_ext(int64_t T, const double* logprobs, const int32_t* sample_lengths, int n_samples,
                              const uint8_t* loss_mask, const float* advantages, const float* inference_logprobs,
                              const float* ref_logprobs, const float* rl_weights, const float* ce_weights,
                              const float* ref_kl_weights, const int32_t* env_index, int n_envs, const double* loss_config,
                              int n_loss_config, double* metrics, int64_t n_metrics, double* grad_out) {
  return loss_eval_any(T, logprobs, sample_lengths, n_samples, loss_mask, advantages, inference_logprobs, ref_logprobs,
                       rl_weights, ce_weights, ref_kl_weights, nullptr, nullptr, 0, nullptr, nullptr, 0, nullptr, env_index,
                       n_envs, loss_config, n_loss_config, metrics, n_metrics, grad_out, nullptr, RLX_METRICS_FIELDS);
}

// The ABI 3 calls: a 7-field loss config (DPPO+KL, token mean), forwarded unchanged.
RLX_API int rlx_train_step(void* model, int64_t T, const int32_t* token_ids, const int32_t* sample_lengths, int n_samples,
                           const uint8_t* loss_mask, const float* advantages, const float* inference_logprobs,
                           const float* temperatures, const float* ref_logprobs, const float* rl_weights,
                           const float* ce_weights, const float* ref_kl_weights, const int32_t* env_index, int n_envs,
                           const double* loss_config, double* metrics, int64_t n_metrics) {
  return rlx_train_step_ext(model, T, token_ids, sample_lengths, n_samples, loss_mask, advantages, inference_logprobs,
                            temperatures, ref_logprobs, rl_weights, ce_weights, ref_kl_weights, env_index, n_envs, loss_config,
                            RLX_LOSS_CONFIG_LEN, metrics, n_metrics);
}

RLX_API int rlx_loss_eval(int64_t T, const double* logprobs, const uint8_t* loss_mask, const float* advantages,
                          const float* inference_logprobs, const float* ref_logprobs, const float* rl_weights,
                          const float* ce_weights, const float* ref_kl_weights, const int32_t* env_index, int n_envs,
                          const double* loss_config, double* metrics, int64_t n_metrics, double* grad_out) {
  return rlx_loss_eval_ext(T, logprobs, nullptr, 0, loss_mask, advantages, inference_logprobs, ref_logprobs, rl_weights,
                           ce_weights, ref_kl_weights, env_index, n_envs, loss_config, RLX_LOSS_CONFIG_LEN, metrics,
                           n_metrics, grad_out);
}
