// A packed row's per-token streams and the loss over them (step_loss.cpp): the rl, ce and ref_kl
// components and distill, each over its own global token count (docs/architecture.md §6), and the
// metric blocks the step returns. train.cpp computes the logprobs they read and back-propagates.
#pragma once
#include "distill.h"
#include "loss.h"

namespace rlx {

// One row's per-token streams as tensors: masks bool, values in the compute dtype. Optional streams
// are undefined when absent. Tokens that are not valid (the first of each sample: nothing predicts
// them) are removed from every component.
struct Streams {
  at::Tensor loss_mask, adv, ilp, temps, ref_lp, rl_w, ce_w, ref_w, env;
};

struct StreamArgs {
  const uint8_t* loss_mask;
  const float *adv, *ilp, *temps, *ref_lp, *rl_w, *ce_w, *ref_w;
  const int32_t* env;
  int n_envs;
};

// valid: [T] bool on the target device, false where a token has no prediction.
Streams make_streams(const StreamArgs& a, int64_t T, const at::Tensor& valid, at::ScalarType cd);

struct LossOutput {
  at::Tensor loss;           // scalar, differentiable in lp
  at::Tensor per_token_T_F;  // metric contributions, no grad
};

// docs/architecture.md §6 / prime-rl's trainer/rl/loss.py, per token, then summed. lp: [T], requires grad.
// lengths: the row's samples (for the sequence-level loss types and reductions); codes: each
// sample's rl loss in cfg.losses (empty: all 0). d, sb: the distill streams and the student's
// bucket logprobs [T, k + 1] (differentiable), when the row has them.
LossOutput compute_loss(const at::Tensor& lp, const Streams& s, const LossSettings& cfg, const at::Tensor& entropy,
                        const std::vector<int64_t>& lengths, const std::vector<int64_t>& codes,
                        const DistillStreams& d = {}, const at::Tensor& sb = {});

// Block 0: the whole row; block 1+e: tokens of env e (tokens with a negative env are in block 0 only).
void write_metrics(const LossOutput& out, const Streams& s, int n_envs, double* metrics, int64_t n_metrics);

}  // namespace rlx
