// The rl component of the loss (docs/architecture.md §6): the loss config's parsing, the
// per-token loss of each [trainer.loss] type (DPPO+KL, IPO and the importance-sampling types) and
// the sequence and constant reductions' per-token factors. Split from train.cpp so the step's
// two-pass driver and the components' math each stay one file.
#include "loss.h"

namespace rlx {

// n: how many doubles the caller sent: RLX_LOSS_CONFIG_LEN (the ABI 3 calls) or RLX_LOSS_CONFIG_LEN_EXT.
LossSettings parse_settings(const double* cfg, int n) {
  require(cfg != nullptr, "loss_config is null (RLX_LOSS_CONFIG_LEN doubles)");
  require(n == RLX_LOSS_CONFIG_LEN || n == RLX_LOSS_CONFIG_LEN_EXT || n == RLX_LOSS_CONFIG_LEN_DISTILL,
          "loss_config must hold RLX_LOSS_CONFIG_LEN (7), RLX_LOSS_CONFIG_LEN_EXT (15) or RLX_LOSS_CONFIG_LEN_DISTILL (16) doubles, got " +
              std::to_string(n));
  LossSettings s{cfg[RLX_LOSS_N_RL], cfg[RLX_LOSS_N_CE], cfg[RLX_LOSS_N_REF_KL], cfg[RLX_LOSS_MASK_LOW],
                 cfg[RLX_LOSS_MASK_HIGH], cfg[RLX_LOSS_ADV_TAU], cfg[RLX_LOSS_KL_TAU]};
  require(s.n_rl >= 1 && s.n_ce >= 1 && s.n_ref >= 1,
          "loss denominators N_rl, N_ce, N_ref_kl must be >= 1 (max(1, member count over the whole step))");
  require(s.mask_low >= 0 && s.mask_high >= 0 && s.adv_tau >= 0 && s.kl_tau >= 0,
          "dppo_mask_low, dppo_mask_high, adv_tau and kl_tau must be >= 0");
  if (n == RLX_LOSS_CONFIG_LEN) return s;
  s.type = static_cast<int>(cfg[RLX_LOSS_TYPE]), s.reduction = static_cast<int>(cfg[RLX_LOSS_REDUCTION]);
  s.n_rl_seq = cfg[RLX_LOSS_N_RL_SEQUENCES], s.constant = cfg[RLX_LOSS_CONSTANT];
  s.ipo_threshold = cfg[RLX_LOSS_IPO_THRESHOLD], s.is_low = cfg[RLX_LOSS_IS_LOW], s.is_high = cfg[RLX_LOSS_IS_HIGH];
  s.is_cap = cfg[RLX_LOSS_IS_CAP];
  require(s.type >= RLX_RL_DPPO_KL && s.type <= RLX_RL_SEQ_MIS && s.type == cfg[RLX_LOSS_TYPE],
          "loss type " + c10::str(cfg[RLX_LOSS_TYPE]) + " is not one of RLX_RL_* (0..6)");
  require(s.reduction >= RLX_REDUCE_TOKEN && s.reduction <= RLX_REDUCE_CONSTANT && s.reduction == cfg[RLX_LOSS_REDUCTION],
          "loss reduction " + c10::str(cfg[RLX_LOSS_REDUCTION]) + " is not one of RLX_REDUCE_* (0..2)");
  require(s.n_rl_seq >= 1, "N_rl_sequences must be >= 1 (max(1, sequences with an rl member over the whole step))");
  require(s.constant > 0, "the constant reduction's divisor must be > 0");
  require(s.ipo_threshold >= 0, "ipo_threshold must be >= 0");
  require(s.is_low > 0 && s.is_high >= s.is_low && s.is_cap > 0, "importance-sampling bounds need 0 < is_low <= is_high and is_cap > 0");
  if (n == RLX_LOSS_CONFIG_LEN_EXT) return s;
  s.n_distill = cfg[RLX_LOSS_N_DISTILL], s.has_n_distill = true;
  require(s.n_distill >= 1, "N_distill must be >= 1 (max(1, distill member count over the whole step))");
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
