// The loss of one packed row over its logprobs, and its metrics (step_loss.h).
#include "step_loss.h"

namespace rlx {
namespace {

// Per-token metric fields; rlx.h documents them as RLX_M_*.
enum Field : int64_t {
  F_LOSS, F_RL_SUM, F_RL_COUNT, F_CE_SUM, F_CE_COUNT, F_REF_SUM, F_REF_COUNT, F_MISMATCH_KL, F_MISMATCH_COUNT,
  F_ENTROPY, F_ENTROPY_COUNT, F_MASKED_LOW, F_MASKED_HIGH, F_REF_MASKED, F_REF_KL, F_NLL, F_TOKENS,
  F_DISTILL_SUM, F_DISTILL_COUNT, F_CLIPPED_LOW, F_CLIPPED_HIGH, F_COUNT
};
static_assert(F_TOKENS == RLX_M_TOKENS && F_COUNT == RLX_METRICS_FIELDS,
              "rlx.h metric layout and step_loss.cpp disagree");

at::Tensor float_stream(const float* p, int64_t T, const at::TensorOptions& to) {
  return at::from_blob(const_cast<float*>(p), {T}, at::kFloat).to(to.device(), to.dtype().toScalarType());
}

}  // namespace

Streams make_streams(const StreamArgs& a, int64_t T, const at::Tensor& valid, at::ScalarType cd) {
  require(a.loss_mask && a.adv && a.ilp, "loss_mask, advantages and inference_logprobs are required");
  require(a.n_envs >= 0, "n_envs must be >= 0");
  auto to = at::TensorOptions().dtype(cd).device(valid.device());
  auto valid_f = valid.to(cd);
  Streams s;
  s.loss_mask = at::from_blob(const_cast<uint8_t*>(a.loss_mask), {T}, at::kByte).to(valid.device()).ne(0).logical_and(valid);
  s.adv = float_stream(a.adv, T, to);
  s.ilp = float_stream(a.ilp, T, to);
  if (a.temps) {
    for (int64_t i = 0; i < T; ++i)
      require(a.temps[i] > 0 && std::isfinite(a.temps[i]),
              "temperatures[" + std::to_string(i) + "] = " + std::to_string(a.temps[i]) + " must be > 0 (use 1.0 for greedy samples)");
    s.temps = float_stream(a.temps, T, to);
  }
  if (a.ref_lp) s.ref_lp = float_stream(a.ref_lp, T, to);
  if (a.rl_w) s.rl_w = float_stream(a.rl_w, T, to) * valid_f;
  if (a.ce_w) s.ce_w = float_stream(a.ce_w, T, to) * valid_f;
  if (a.ref_w) {
    s.ref_w = float_stream(a.ref_w, T, to) * valid_f;
    require(a.ref_lp || !s.ref_w.ne(0).any().item<bool>(),
            "ref_kl weights are set but ref_logprobs is null (ref_kl needs reference logprobs: use the opd or opsd algorithm)");
  }
  if (a.env) {
    for (int64_t i = 0; i < T; ++i)
      require(a.env[i] < a.n_envs, "env_index[" + std::to_string(i) + "] = " + std::to_string(a.env[i]) +
                                       " but n_envs is " + std::to_string(a.n_envs));
    s.env = at::from_blob(const_cast<int32_t*>(a.env), {T}, at::kInt).to(valid.device(), at::kLong);
  }
  return s;
}


// docs/architecture.md §6 / prime-rl's trainer/rl/loss.py, per token, then summed. lp: [T], requires grad.
// lengths: the row's samples (for the sequence-level loss types and reductions). d, sb: the distill
// streams and the student's bucket logprobs [T, k + 1] (differentiable), when the row has them.
LossOutput compute_loss(const at::Tensor& lp, const Streams& s, const LossSettings& cfg, const at::Tensor& entropy,
                        const std::vector<int64_t>& lengths, const std::vector<int64_t>& codes, const DistillStreams& d,
                        const at::Tensor& sb) {
  auto lpd = lp.detach();
  auto f = [&](const at::Tensor& b) { return b.to(lp.scalar_type()); };
  auto zeros_b = at::zeros_like(s.loss_mask);
  auto rl_m = s.rl_w.defined() ? s.loss_mask.logical_and(s.rl_w.ne(0)) : s.loss_mask;
  auto ce_m = s.ce_w.defined() ? s.ce_w.ne(0) : zeros_b;
  auto ref_m = s.ref_w.defined() ? s.ref_w.ne(0) : zeros_b;
  auto ratio_m = rl_m.logical_or(ref_m);
  auto policy_m = s.loss_mask.logical_and(ratio_m);

  // Off the ratio's members the inference logprob means nothing (0 by convention): use lp there so
  // ratio is exactly 1 and no inf can leak into a gradient through a multiplication by zero.
  auto ilp = at::where(ratio_m, s.ilp, lpd);
  auto log_ratio = lp - ilp;
  auto dp = at::exp(lpd) - at::exp(ilp);  // probability difference: the trust-region test

  auto adv = at::where(rl_m, s.adv, at::zeros_like(lpd));  // off members: whatever was sent, no effect
  auto seg = sample_index(lengths, lpd);
  const auto n_seg = static_cast<int64_t>(lengths.size());
  auto w_rl = s.rl_w.defined() ? s.rl_w : at::ones_like(lpd);
  auto rl = rl_component(log_ratio, dp, adv, w_rl, rl_m, seg, n_seg, codes, cfg);

  auto l_ce = s.ce_w.defined() ? -lp * s.ce_w : lp * 0;

  auto ref_lp = s.ref_lp.defined() ? at::where(ref_m, s.ref_lp, lpd) : lpd;
  auto ref_adv = ref_lp - lpd;  // stop-gradient: a constant advantage per token
  auto masked_ref = dp < -0.2;
  auto keep_ref = ref_m.logical_and(masked_ref.logical_not());
  auto w_ref = s.ref_w.defined() ? s.ref_w : at::zeros_like(lpd);
  // The ratio of ref_kl members only: a non-member's huge ratio (an rl token an IS type masks)
  // would turn its zero coefficient's gradient into inf * 0 through exp's backward.
  auto ratio_ref = at::exp(at::where(ref_m, log_ratio, at::zeros_like(log_ratio)));
  auto l_ref = (-(f(keep_ref) * ref_adv * ratio_ref) + 1e-3 * f(ref_m) * log_ratio.pow(2)) * w_ref;

  auto per_token = rl.part + l_ce / cfg.n_ce + l_ref / cfg.n_ref;
  auto distill_m = d.present() ? d.member : zeros_b;
  at::Tensor l_distill = at::zeros_like(lpd);
  if (d.present()) {
    require(cfg.has_n_distill || !d.member.any().item<bool>(),
            "distill members need N_distill: rlx_loss.n_distill is 0");
    l_distill = distill_divergence(sb, d) * d.w;
    per_token = per_token + l_distill / cfg.n_distill;
  }
  // The anchor keeps lp in the graph when every component is empty: loss 0, gradient exactly 0.
  auto loss = per_token.sum() + lp.sum() * 0;

  at::NoGradGuard no_grad;
  auto rl_f = f(rl_m), ref_f = f(ref_m), ce_f = f(ce_m), policy_f = f(policy_m), mask_f = f(s.loss_mask);
  std::vector<at::Tensor> cols(F_COUNT);
  cols[F_LOSS] = per_token.detach();
  cols[F_RL_SUM] = rl.weighted.detach();
  cols[F_RL_COUNT] = rl_f;
  cols[F_CE_SUM] = l_ce.detach();
  cols[F_CE_COUNT] = ce_f;
  cols[F_REF_SUM] = l_ref.detach();
  cols[F_REF_COUNT] = ref_f;
  // Over action tokens of every component that has a ratio or a sampled distribution (distill).
  auto mm_m = s.loss_mask.logical_and(ratio_m.logical_or(distill_m));
  auto mm_lr = lpd - at::where(mm_m, s.ilp, lpd);
  cols[F_MISMATCH_KL] = f(mm_m) * (mm_lr.exp() - mm_lr - 1);
  cols[F_MISMATCH_COUNT] = f(mm_m);
  cols[F_ENTROPY] = entropy.defined() ? mask_f * entropy : at::zeros_like(lpd);
  cols[F_ENTROPY_COUNT] = entropy.defined() ? mask_f : at::zeros_like(lpd);
  cols[F_MASKED_LOW] = rl_f * f(rl.masked.logical_and(adv <= 0));
  cols[F_MASKED_HIGH] = rl_f * f(rl.masked.logical_and(adv > 0));
  cols[F_CLIPPED_LOW] = rl_f * f(rl.clipped_low);
  cols[F_CLIPPED_HIGH] = rl_f * f(rl.clipped_high);
  cols[F_REF_MASKED] = ref_f * f(masked_ref);
  cols[F_REF_KL] = ref_f * ref_adv;
  cols[F_NLL] = ce_f * -lpd;
  cols[F_TOKENS] = at::ones_like(lpd);
  cols[F_DISTILL_SUM] = l_distill.detach();
  cols[F_DISTILL_COUNT] = f(distill_m);
  return {loss, at::stack(cols, 1)};
}


void write_metrics(const LossOutput& out, const Streams& s, int n_envs, double* metrics, int64_t n_metrics) {
  const int64_t fields = RLX_METRICS_FIELDS, want = fields * (1 + static_cast<int64_t>(n_envs));
  require(metrics != nullptr && n_metrics == want, "metrics buffer must hold RLX_METRICS_FIELDS * (1 + n_envs) = " +
                                                       std::to_string(want) + " doubles, got " + std::to_string(n_metrics));
  at::NoGradGuard no_grad;
  const auto& per_token = out.per_token_T_F;
  auto blocks = at::zeros({1 + n_envs, fields}, per_token.options());
  blocks[0] = per_token.sum(0);
  blocks[0][F_LOSS] = out.loss.detach();
  if (s.env.defined() && n_envs > 0) {
    auto tagged = s.env.ge(0).nonzero().squeeze(1);
    blocks.narrow(0, 1, n_envs).index_add_(0, s.env.index_select(0, tagged), per_token.index_select(0, tagged));
  }
  auto host = blocks.to(at::kCPU, at::kDouble).contiguous();
  std::memcpy(metrics, host.data_ptr<double>(), sizeof(double) * static_cast<size_t>(want));
}

}  // namespace rlx
