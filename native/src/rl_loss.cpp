// The rl component of the loss (docs/architecture.md §6): the loss settings' checks, the dispatch
// of a row's samples to their loss (each sample's code into the step's table), the per-token loss
// of the trust-region types (DPPO+KL, IPO) and the importance-sampling types, and the sequence and
// constant reductions' per-token factors. The clipping types are rl_clip.cpp.
#include "abi.h"
#include "loss.h"

namespace rlx {
namespace {

// One table entry, checked; `at` names it in errors.
RlSettings rl_settings(const rlx_rl_loss& l, const std::string& at) {
  RlSettings s{static_cast<int>(l.type), static_cast<int>(l.reduction), l.constant, l.mask_low, l.mask_high,
               l.adv_tau, l.kl_tau, l.ipo_threshold, l.is_low, l.is_high, l.is_cap, l.clip_low, l.clip_high};
  require(l.type >= RLX_RL_DPPO_KL && l.type <= RLX_RL_GMPO,
          at + "loss type " + std::to_string(l.type) + " is not one of RLX_RL_* (0..10)");
  require(l.reduction >= RLX_REDUCE_TOKEN && l.reduction <= RLX_REDUCE_CONSTANT,
          at + "loss reduction " + std::to_string(l.reduction) + " is not one of RLX_REDUCE_* (0..2)");
  require(s.mask_low >= 0 && s.mask_high >= 0 && s.adv_tau >= 0 && s.kl_tau >= 0,
          at + "dppo_mask_low, dppo_mask_high, adv_tau and kl_tau must be >= 0");
  require(s.constant > 0, at + "the constant reduction's divisor must be > 0");
  require(s.ipo_threshold >= 0, at + "ipo_threshold must be >= 0");
  require(s.is_low > 0 && s.is_high >= s.is_low && s.is_cap > 0,
          at + "importance-sampling bounds need 0 < is_low <= is_high and is_cap > 0");
  require(s.clip_low >= 0 && s.clip_high >= 0, at + "clip_low and clip_high must be >= 0");
  return s;
}

// The importance weight w of each rl member for the IS loss types (no gradient): IcePop and the
// masked types set w = 0 outside their range (keep false), the truncated ones clip it at is_cap.
// Sequence types use the sample's ratio, the product of its members' ratios. Ranges are tested on
// log ratios, so a ratio that overflows a double is masked, never inf * 0.
at::Tensor is_weight(const at::Tensor& lr, const at::Tensor& rl_m, const at::Tensor& seg, int64_t n_seg,
                     const RlSettings& cfg, at::Tensor& keep) {
  auto log_ratio = lr;
  if (cfg.type == RLX_RL_SEQ_TIS || cfg.type == RLX_RL_SEQ_MIS) log_ratio = per_sample_sum(lr, rl_m, seg, n_seg);
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

// The trust-region and IS types' per-token loss over members m (docs/architecture.md §6).
TypeTerms type_loss(const at::Tensor& lr, const at::Tensor& dp, const at::Tensor& adv, const at::Tensor& m,
                    const at::Tensor& seg, int64_t n_seg, const RlSettings& cfg) {
  if (cfg.type >= RLX_RL_GSPO) return clip_type_loss(lr, adv, m, seg, n_seg, cfg);
  auto f = [&](const at::Tensor& b) { return b.to(lr.scalar_type()); };
  TypeTerms t;
  if (cfg.type == RLX_RL_DPPO_KL || cfg.type == RLX_RL_IPO) {
    t.masked = cfg.type == RLX_RL_DPPO_KL ? at::where(adv > 0, dp > cfg.mask_high, dp < -cfg.mask_low)
                                          : dp.abs() > cfg.ipo_threshold;
    auto keep = m.logical_and(t.masked.logical_not());
    t.loss = -(f(keep) * cfg.adv_tau * adv * at::exp(lr)) + cfg.kl_tau * f(m) * lr.pow(2);
    return t;
  }
  // IS types: value -A * w, gradient -A * w (w detached), and the KL term on kept members only, so
  // a masked token has zero loss and zero gradient whatever its ratio.
  at::Tensor keep;
  auto w = is_weight(lr.detach(), m, seg, n_seg, cfg, keep);
  t.masked = m.logical_and(keep.logical_not());
  auto lr_kept = at::where(keep, lr, at::zeros_like(lr));
  auto unit = at::exp(lr_kept - lr_kept.detach());  // 1, with d/dlp = 1
  t.loss = f(keep) * (-(cfg.adv_tau * adv * w * unit) + cfg.kl_tau * lr_kept.pow(2));
  return t;
}

// Per-token factor of a reduction over members m: 1/(n_s * N_rl_seq) (mean over each sample's
// members, then over the step's samples) or 1/(constant * N_rl_seq) (Dr. GRPO: each sample's sum
// over one constant, averaged over samples). Samples are never split across rows, so n_s is known
// in the row and the step is invariant to its rows.
at::Tensor rl_scale(const at::Tensor& m, const at::Tensor& seg, int64_t n_seg, const RlSettings& cfg, double n_rl_seq) {
  auto like = at::zeros_like(m, m.options().dtype(at::kDouble));
  if (cfg.reduction == RLX_REDUCE_CONSTANT) return like + 1.0 / (cfg.constant * n_rl_seq);
  auto members = at::zeros({n_seg}, like.options()).index_add_(0, seg, m.to(at::kDouble));
  return 1.0 / (at::clamp_min(members, 1).index_select(0, seg) * n_rl_seq);
}

}  // namespace

// The caller's rlx_loss and its table, checked.
LossSettings parse_settings(const rlx_loss& l) {
  LossSettings s{l.n_rl, l.n_ce, l.n_ref_kl};
  require(s.n_rl >= 1 && s.n_ce >= 1 && s.n_ref >= 1,
          "loss denominators N_rl, N_ce, N_ref_kl must be >= 1 (max(1, member count over the whole step))");
  s.n_rl_seq = l.n_rl_sequences;
  require(s.n_rl_seq >= 1, "N_rl_sequences must be >= 1 (max(1, sequences with an rl member over the whole step))");
  s.n_distill = l.n_distill == 0 ? 1 : l.n_distill, s.has_n_distill = l.n_distill != 0;
  require(l.n_distill == 0 || l.n_distill >= 1,
          "N_distill must be >= 1 (max(1, distill member count over the whole step)), or 0 without distill members");
  const rlx_rl_loss own{0, l.type, l.reduction, l.constant, l.mask_low, l.mask_high, l.adv_tau, l.kl_tau,
                        l.ipo_threshold, l.is_low, l.is_high, l.is_cap, l.clip_low, l.clip_high};
  s.losses.push_back(rl_settings(own, ""));
  const auto table = rl_losses_of(l);
  for (size_t k = 0; k < table.size(); ++k)
    s.losses.push_back(rl_settings(table[k], "rlx_loss.losses[" + std::to_string(k) + "]: "));
  return s;
}

std::vector<int64_t> sample_codes_of(const int32_t* codes, size_t n_samples, const LossSettings& cfg) {
  if (!codes) return {};
  std::vector<int64_t> out(codes, codes + n_samples);
  for (size_t i = 0; i < n_samples; ++i)
    require(out[i] >= 0 && static_cast<size_t>(out[i]) < cfg.losses.size(),
            "sample_losses[" + std::to_string(i) + "] = " + std::to_string(out[i]) + " but the loss table has " +
                std::to_string(cfg.losses.size()) + " entries (rlx_loss's own and n_losses more)");
  return out;
}

// Each token's sample (0..n-1) from the sample lengths, on like's device.
at::Tensor sample_index(const std::vector<int64_t>& lengths, const at::Tensor& like) {
  auto counts = at::tensor(lengths, at::kLong);
  return at::repeat_interleave(at::arange(static_cast<int64_t>(lengths.size()), at::kLong), counts).to(like.device());
}

at::Tensor per_sample_sum(const at::Tensor& x, const at::Tensor& m, const at::Tensor& seg, int64_t n_seg) {
  auto sums = at::zeros({n_seg}, x.options()).index_add_(0, seg, at::where(m, x, at::zeros_like(x)));
  return sums.index_select(0, seg);
}

// Each loss code present in the row over its own members: lr is zeroed off them, so another
// sample's ratio (one an IS type masks, possibly inf) never reaches this type's gradient. With one
// code the arithmetic is exactly that of a row without a table.
RlTerms rl_component(const at::Tensor& log_ratio, const at::Tensor& dp, const at::Tensor& adv, const at::Tensor& rl_w,
                     const at::Tensor& rl_m, const at::Tensor& seg, int64_t n_seg, const std::vector<int64_t>& codes,
                     const LossSettings& cfg) {
  std::vector<int64_t> present = codes.empty() ? std::vector<int64_t>{0} : codes;
  std::sort(present.begin(), present.end());
  present.erase(std::unique(present.begin(), present.end()), present.end());
  at::Tensor code_T;
  if (present.size() > 1) code_T = at::tensor(codes, at::kLong).to(seg.device()).index_select(0, seg);
  auto none = at::zeros_like(rl_m);
  RlTerms out{at::Tensor(), at::Tensor(), none, none, none};
  for (auto k : present) {
    const auto& c = cfg.losses[static_cast<size_t>(k)];
    auto m = present.size() > 1 ? rl_m.logical_and(code_T == k) : rl_m;
    auto lr = at::where(m, log_ratio, at::zeros_like(log_ratio));
    auto t = type_loss(lr, dp, adv, m, seg, n_seg, c);
    auto weighted = t.loss * rl_w;
    auto part = c.reduction == RLX_REDUCE_TOKEN ? weighted / cfg.n_rl
                                                : weighted * rl_scale(m, seg, n_seg, c, cfg.n_rl_seq).to(lr.scalar_type());
    out.part = out.part.defined() ? out.part + part : part;
    out.weighted = out.weighted.defined() ? out.weighted + weighted : weighted;
    out.masked = out.masked.logical_or(t.masked.logical_and(m));
    if (t.clipped_low.defined()) out.clipped_low = out.clipped_low.logical_or(t.clipped_low.logical_and(m));
    if (t.clipped_high.defined()) out.clipped_high = out.clipped_high.logical_or(t.clipped_high.logical_and(m));
  }
  return out;
}

}  // namespace rlx
