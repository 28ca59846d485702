// The rl component of the loss (docs/architecture.md §6): the loss settings' checks, the
// per-token loss of each [trainer.loss] type (DPPO+KL, IPO and the importance-sampling types) and
// the sequence and constant reductions' per-token factors. Split from train.cpp so the step's
// two-pass driver and the components' math each stay one file.
#include "loss.h"

namespace rlx {

// The caller's rlx_loss, checked.
LossSettings parse_settings(const rlx_loss& l) {
  LossSettings s{l.n_rl, l.n_ce, l.n_ref_kl, l.mask_low, l.mask_high, l.adv_tau, l.kl_tau};
  require(s.n_rl >= 1 && s.n_ce >= 1 && s.n_ref >= 1,
          "loss denominators N_rl, N_ce, N_ref_kl must be >= 1 (max(1, member count over the whole step))");
  require(s.mask_low >= 0 && s.mask_high >= 0 && s.adv_tau >= 0 && s.kl_tau >= 0,
          "dppo_mask_low, dppo_mask_high, adv_tau and kl_tau must be >= 0");
  s.type = static_cast<int>(l.type), s.reduction = static_cast<int>(l.reduction);
  s.n_rl_seq = l.n_rl_sequences, s.constant = l.constant;
  s.ipo_threshold = l.ipo_threshold, s.is_low = l.is_low, s.is_high = l.is_high, s.is_cap = l.is_cap;
  require(l.type >= RLX_RL_DPPO_KL && l.type <= RLX_RL_SEQ_MIS,
          "loss type " + std::to_string(l.type) + " is not one of RLX_RL_* (0..6)");
  require(l.reduction >= RLX_REDUCE_TOKEN && l.reduction <= RLX_REDUCE_CONSTANT,
          "loss reduction " + std::to_string(l.reduction) + " is not one of RLX_REDUCE_* (0..2)");
  require(s.n_rl_seq >= 1, "N_rl_sequences must be >= 1 (max(1, sequences with an rl member over the whole step))");
  require(s.constant > 0, "the constant reduction's divisor must be > 0");
  require(s.ipo_threshold >= 0, "ipo_threshold must be >= 0");
  require(s.is_low > 0 && s.is_high >= s.is_low && s.is_cap > 0, "importance-sampling bounds need 0 < is_low <= is_high and is_cap > 0");
  s.n_distill = l.n_distill == 0 ? 1 : l.n_distill, s.has_n_distill = l.n_distill != 0;
  require(l.n_distill == 0 || l.n_distill >= 1,
          "N_distill must be >= 1 (max(1, distill member count over the whole step)), or 0 without distill members");
  return s;
}

// Each token's sample (0..n-1) from the sample lengths, on lp's device.
at::Tensor sample_index(const std::vector<int64_t>& lengths, const at::Tensor& like) {
  auto counts = at::tensor(lengths, at::kLong);
  return at::repeat_interleave(at::arange(static_cast<int64_t>(lengths.size()), at::kLong), counts).to(like.device());
}

// The importance weight w of each rl member for the IS loss types (no gradient): IcePop and the
// masked types set w = 0 outside their range (keep false), the truncated ones clip it at is_cap.
// Sequence types use the sample's ratio, the product of its members' ratios. Ranges are tested on
// log ratios, so a ratio that overflows a double is masked, never inf * 0.
static at::Tensor is_weight(const at::Tensor& lr, const at::Tensor& rl_m, const at::Tensor& seg, int64_t n_seg,
                            const LossSettings& cfg, at::Tensor& keep) {
  auto log_ratio = lr;
  if (cfg.type == RLX_RL_SEQ_TIS || cfg.type == RLX_RL_SEQ_MIS) {
    auto per_seq = at::zeros({n_seg}, lr.options()).index_add_(0, seg, at::where(rl_m, lr, at::zeros_like(lr)));
    log_ratio = per_seq.index_select(0, seg);
  }
  const double log_cap = std::log(cfg.is_cap);
  switch (cfg.type) {
    case RLX_RL_ICEPOP:
      keep = rl_m.logical_and(log_ratio >= std::log(cfg.is_low)).logical_and(log_ratio <= std::log(cfg.is_high));
      break;
    case RLX_RL_MIS:
    case RLX_RL_SEQ_MIS:
      keep = rl_m.logical_and(log_ratio <= log_cap);
      break;
    default:  // truncated: every member kept, its weight clipped
      keep = rl_m;
      log_ratio = at::clamp_max(log_ratio, log_cap);
  }
  return at::where(keep, at::exp(at::where(keep, log_ratio, at::zeros_like(log_ratio))), at::zeros_like(lr));
}

// The rl component's per-token loss before its weight and reduction (docs/architecture.md §6).
// masked: members dropped from the policy term (metrics).
at::Tensor rl_loss(const at::Tensor& log_ratio, const at::Tensor& ratio, const at::Tensor& dp, const at::Tensor& adv,
                   const at::Tensor& rl_m, const at::Tensor& seg, int64_t n_seg, const LossSettings& cfg, at::Tensor& masked) {
  auto f = [&](const at::Tensor& b) { return b.to(log_ratio.scalar_type()); };
  if (cfg.type == RLX_RL_DPPO_KL || cfg.type == RLX_RL_IPO) {
    masked = cfg.type == RLX_RL_DPPO_KL ? at::where(adv > 0, dp > cfg.mask_high, dp < -cfg.mask_low) : dp.abs() > cfg.ipo_threshold;
    auto keep = rl_m.logical_and(masked.logical_not());
    return -(f(keep) * cfg.adv_tau * adv * ratio) + cfg.kl_tau * f(rl_m) * log_ratio.pow(2);
  }
  // IS types: value -A * w, gradient -A * w (w detached), and the KL term on kept members only, so
  // a masked token has zero loss and zero gradient whatever its ratio.
  at::Tensor keep;
  auto w = is_weight(log_ratio.detach(), rl_m, seg, n_seg, cfg, keep);
  masked = rl_m.logical_and(keep.logical_not());
  auto lr_kept = at::where(keep, log_ratio, at::zeros_like(log_ratio));
  auto unit = at::exp(lr_kept - lr_kept.detach());  // 1, with d/dlp = 1
  return f(keep) * (-(cfg.adv_tau * adv * w * unit) + cfg.kl_tau * lr_kept.pow(2));
}

// Per-token factor of the rl component's reduction: 1/N_rl (token mean over the step), 1/(n_s *
// N_rl_seq) (mean over each sample's members, then over the step's samples) or 1/(constant *
// N_rl_seq) (Dr. GRPO: each sample's sum over one constant, averaged over samples). Samples are
// never split across rows, so n_s is known in the row and the step is invariant to its rows.
at::Tensor rl_scale(const at::Tensor& rl_m, const at::Tensor& seg, int64_t n_seg, const LossSettings& cfg) {
  auto like = at::zeros_like(rl_m, rl_m.options().dtype(at::kDouble));
  if (cfg.reduction == RLX_REDUCE_CONSTANT) return like + 1.0 / (cfg.constant * cfg.n_rl_seq);
  auto members = at::zeros({n_seg}, like.options()).index_add_(0, seg, rl_m.to(at::kDouble));
  return 1.0 / (at::clamp_min(members, 1).index_select(0, seg) * cfg.n_rl_seq);
}

}  // namespace rlx
