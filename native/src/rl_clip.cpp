// The clipping rl loss types (docs/architecture.md §6), per token over the members m of their
// samples. A is the token's advantage, lr = lp - ilp its log ratio against the logprob the
// inference engine sampled it with (the behaviour policy of an asynchronous step), r = exp(lr),
// n_s the members of its sample s, sg the stop-gradient, [lo, hi] = [1 - clip_low, 1 + clip_high].
//
//   clip_higher  DAPO (Yu et al., arXiv 2503.14476): PPO's clipped objective with its own low and
//                high epsilon (0.2 / 0.28), so a rare token's probability can rise further:
//                  l = -min(r A, clip(r, lo, hi) A),   lr clamped to [-20, 20] first
//                as verl's compute_policy_loss (clip_ratio_low / clip_ratio_high, without dual clip;
//                its clamp too: an A < 0 token's r is unbounded, and exp(lr) overflows past lr ~ 88).
//   cispo        CISPO (MiniMax-M1, arXiv 2506.13585): the importance weight is clipped and
//                detached, never the token, so every token keeps a gradient:
//                  l = -sg(clip(r, lo, hi)) A lp       (value -w A, gradient -w A dlp)
//                as verl's compute_policy_loss_cispo; clip_low 1 (the default) is no lower bound.
//   gspo         GSPO (Zheng et al., arXiv 2507.18071), its token form (GSPO-token): the sample's
//                length-normalized ratio, with each token's own gradient,
//                  log s_s = mean_{t in s} lr_t,   x_t = sg(log s_s) + lp_t - sg(lp_t)   (x_t <= 10)
//                  l = -min(exp(x_t) A, clip(exp(x_t), lo, hi) A)
//                as verl's compute_policy_loss_gspo (clip 3e-4 / 4e-4). With the sequence reduction,
//                its default, the gradient is the sequence objective's: -A s_s mean_t dlp_t.
//   gmpo         GMPO (Zhao et al., arXiv 2507.20673): the geometric mean of the token ratios, each
//                clipped in log space on the side its advantage pushes it,
//                  y_t = min(lr_t, clip_high) if A > 0,  max(lr_t, -clip_low) if A < 0,  0 if A = 0
//                  G_s = exp(mean_{t in s} y_t),   l = -A sg(G_s) exp(y_t - sg(y_t))
//                so with the sequence reduction, its default, a sample adds -A G_s (for a sample-level
//                A, as the paper and verl's compute_policy_loss_geo_mean assume; clip 0.4 / 0.4).
//
// None reads kl_tau or adv_tau (the trust-region types' settings). Clipped members are counted
// (RLX_M_CLIPPED_LOW / HIGH: the token's, or for gspo the sample's, ratio beyond the range) and a
// clipped member without a gradient is "masked" (RLX_M_MASKED_*), as the trust-region types' are.
#include "loss.h"

namespace rlx {

TypeTerms clip_type_loss(const at::Tensor& lr, const at::Tensor& adv, const at::Tensor& m, const at::Tensor& seg,
                         int64_t n_seg, const RlSettings& cfg) {
  auto f = [&](const at::Tensor& b) { return b.to(lr.scalar_type()); };
  auto zero = at::zeros_like(lr);
  auto lrd = lr.detach();
  auto members = [&] { return at::clamp_min(per_sample_sum(f(m), m, seg, n_seg), 1); };
  TypeTerms t;
  if (cfg.type == RLX_RL_GMPO) {
    t.clipped_low = m.logical_and(lrd < -cfg.clip_low);
    t.clipped_high = m.logical_and(lrd > cfg.clip_high);
    t.masked = at::where(adv > 0, t.clipped_high, t.clipped_low.logical_and(adv < 0));
    auto y = at::where(adv > 0, at::clamp_max(lr, cfg.clip_high), at::where(adv < 0, at::clamp_min(lr, -cfg.clip_low), zero));
    auto geo_mean = at::exp(per_sample_sum(y.detach(), m, seg, n_seg) / members());
    t.loss = -f(m) * adv * geo_mean * at::exp(y - y.detach());
    return t;
  }
  const double hi = 1 + cfg.clip_high, lo = 1 - cfg.clip_low;
  const double log_hi = std::log(hi), log_lo = lo > 0 ? std::log(lo) : -std::numeric_limits<double>::infinity();
  if (cfg.type == RLX_RL_CISPO) {
    t.clipped_low = m.logical_and(lrd < log_lo);
    t.clipped_high = m.logical_and(lrd > log_hi);
    t.masked = at::zeros_like(m);
    auto w = at::exp(lo > 0 ? at::clamp(lrd, log_lo, log_hi) : at::clamp_max(lrd, log_hi));
    t.loss = -f(m) * adv * w * at::exp(lr - lrd);
    return t;
  }
  // clip_higher on the token's ratio, gspo on the sample's
  auto x = at::clamp(lr, -20.0, 20.0), tested = lrd;
  if (cfg.type == RLX_RL_GSPO) {
    tested = per_sample_sum(lrd, m, seg, n_seg) / members();
    x = at::clamp_max(tested + lr - lrd, 10.0);
  }
  t.clipped_low = m.logical_and(tested < log_lo);
  t.clipped_high = m.logical_and(tested > log_hi);
  t.masked = at::where(adv > 0, t.clipped_high, t.clipped_low.logical_and(adv < 0));
  auto active = m.logical_and(t.masked.logical_not());
  // a masked member's value is its clipped ratio's, with no gradient (and no exp of its own ratio)
  auto bound = at::where(t.clipped_high, at::full_like(lr, hi), at::full_like(lr, lo));
  auto value = at::where(active, -adv * at::exp(at::where(active, x, zero)), -adv * bound);
  t.loss = f(m) * value;
  return t;
}

}  // namespace rlx
