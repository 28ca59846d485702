// The training step: one packed micro-batch in, gradients accumulated into the parameters, the
// loss of docs/architecture.md §6 (prime-rl's three components, each over its own global token count;
// the rl component's loss type and reduction from [trainer.loss]) and its metrics out. Also
// rlx_loss_eval, the same loss over given logprobs (exact test vectors).
//
// Why two passes over the LM head: full-vocabulary float32 logits for a whole row do not fit in
// memory at real vocabulary sizes. Pass 1 computes the logprob and entropy of every token chunk by
// chunk without autograd; the loss is then a small graph over those logprobs, giving dL/dlp.
// Pass 2 recomputes each chunk's logits with autograd, only for tokens whose dL/dlp is not zero,
// and back-propagates that chunk at once, accumulating into the LM head and into a detached copy
// of the hidden states; one backward through the transformer finishes. The extra cost is one
// LM-head forward, the same as a fused kernel's recomputation in backward.
#include "model.h"

namespace rlx {
namespace {

// Per-token metric fields; rlx.h documents them as RLX_M_*.
enum Field : int64_t {
  F_LOSS, F_RL_SUM, F_RL_COUNT, F_CE_SUM, F_CE_COUNT, F_REF_SUM, F_REF_COUNT, F_MISMATCH_KL, F_MISMATCH_COUNT,
  F_ENTROPY, F_ENTROPY_COUNT, F_MASKED_LOW, F_MASKED_HIGH, F_REF_MASKED, F_REF_KL, F_NLL, F_TOKENS, F_COUNT
};
static_assert(F_COUNT == RLX_METRICS_FIELDS, "rlx.h metric layout and train.cpp disagree");

struct LossSettings {
  double n_rl, n_ce, n_ref, mask_low, mask_high, adv_tau, kl_tau;
  // ABI 4 (absent from a 7-field config: DPPO+KL with the token mean, as before).
  int type = RLX_RL_DPPO_KL, reduction = RLX_REDUCE_TOKEN;
  double n_rl_seq = 1, constant = 1, ipo_threshold = 0.1, is_low = 0.5, is_high = 5.0, is_cap = 2.0;
};

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

// n: how many doubles the caller sent: RLX_LOSS_CONFIG_LEN (the ABI 3 calls) or RLX_LOSS_CONFIG_LEN_EXT.
LossSettings parse_settings(const double* cfg, int n) {
  require(cfg != nullptr, "loss_config is null (RLX_LOSS_CONFIG_LEN doubles)");
  require(n == RLX_LOSS_CONFIG_LEN || n == RLX_LOSS_CONFIG_LEN_EXT,
          "loss_config must hold RLX_LOSS_CONFIG_LEN (7) or RLX_LOSS_CONFIG_LEN_EXT (15) doubles, got " + std::to_string(n));
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
  return s;
}

at::Tensor float_stream(const float* p, int64_t T, const at::TensorOptions& to) {
  return at::from_blob(const_cast<float*>(p), {T}, at::kFloat).to(to.device(), to.dtype().toScalarType());
}

// valid: [T] bool on the target device, false where a token has no prediction.
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

struct LossOutput {
  at::Tensor loss;           // scalar, differentiable in lp
  at::Tensor per_token_T_F;  // metric contributions, no grad
};

// Each token's sample (0..n-1) from the sample lengths, on lp's device.
at::Tensor sample_index(const std::vector<int64_t>& lengths, const at::Tensor& like) {
  auto counts = at::tensor(lengths, at::kLong);
  return at::repeat_interleave(at::arange(static_cast<int64_t>(lengths.size()), at::kLong), counts).to(like.device());
}

// The importance weight w of each rl member for the IS loss types (no gradient): IcePop and the
// masked types set w = 0 outside their range (keep false), the truncated ones clip it at is_cap.
// Sequence types use the sample's ratio, the product of its members' ratios. Ranges are tested on
// log ratios, so a ratio that overflows a double is masked, never inf * 0.
at::Tensor is_weight(const at::Tensor& lr, const at::Tensor& rl_m, const at::Tensor& seg, int64_t n_seg,
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

// docs/architecture.md §6 / prime-rl's trainer/rl/loss.py, per token, then summed. lp: [T], requires grad.
// lengths: the row's samples (for the sequence-level loss types and reductions).
LossOutput compute_loss(const at::Tensor& lp, const Streams& s, const LossSettings& cfg, const at::Tensor& entropy,
                        const std::vector<int64_t>& lengths) {
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
  auto ratio = at::exp(log_ratio);
  auto dp = at::exp(lpd) - at::exp(ilp);  // probability difference: the trust-region test

  auto adv = at::where(rl_m, s.adv, at::zeros_like(lpd));  // off members: whatever was sent, no effect
  auto seg = sample_index(lengths, lpd);
  const auto n_seg = static_cast<int64_t>(lengths.size());
  at::Tensor masked_rl;
  auto w_rl = s.rl_w.defined() ? s.rl_w : at::ones_like(lpd);
  auto l_rl = rl_loss(log_ratio, ratio, dp, adv, rl_m, seg, n_seg, cfg, masked_rl) * w_rl;

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

  auto rl_part = cfg.reduction == RLX_REDUCE_TOKEN ? l_rl / cfg.n_rl : l_rl * rl_scale(rl_m, seg, n_seg, cfg).to(lp.scalar_type());
  auto per_token = rl_part + l_ce / cfg.n_ce + l_ref / cfg.n_ref;
  // The anchor keeps lp in the graph when every component is empty: loss 0, gradient exactly 0.
  auto loss = per_token.sum() + lp.sum() * 0;

  at::NoGradGuard no_grad;
  auto rl_f = f(rl_m), ref_f = f(ref_m), ce_f = f(ce_m), policy_f = f(policy_m), mask_f = f(s.loss_mask);
  std::vector<at::Tensor> cols(F_COUNT);
  cols[F_LOSS] = per_token.detach();
  cols[F_RL_SUM] = l_rl.detach();
  cols[F_RL_COUNT] = rl_f;
  cols[F_CE_SUM] = l_ce.detach();
  cols[F_CE_COUNT] = ce_f;
  cols[F_REF_SUM] = l_ref.detach();
  cols[F_REF_COUNT] = ref_f;
  cols[F_MISMATCH_KL] = policy_f * (ratio.detach() - log_ratio.detach() - 1);
  cols[F_MISMATCH_COUNT] = policy_f;
  cols[F_ENTROPY] = entropy.defined() ? mask_f * entropy : at::zeros_like(lpd);
  cols[F_ENTROPY_COUNT] = entropy.defined() ? mask_f : at::zeros_like(lpd);
  cols[F_MASKED_LOW] = rl_f * f(masked_rl.logical_and(adv <= 0));
  cols[F_MASKED_HIGH] = rl_f * f(masked_rl.logical_and(adv > 0));
  cols[F_REF_MASKED] = ref_f * f(masked_ref);
  cols[F_REF_KL] = ref_f * ref_adv;
  cols[F_NLL] = ce_f * -lpd;
  cols[F_TOKENS] = at::ones_like(lpd);
  return {loss, at::stack(cols, 1)};
}

// Block 0: the whole row; block 1+e: tokens of env e (tokens with a negative env are in block 0 only).
void write_metrics(const LossOutput& out, const Streams& s, int n_envs, double* metrics, int64_t n_metrics) {
  const int64_t want = RLX_METRICS_FIELDS * (1 + static_cast<int64_t>(n_envs));
  require(metrics != nullptr && n_metrics == want,
          "metrics buffer must hold RLX_METRICS_FIELDS * (1 + n_envs) = " + std::to_string(want) + " doubles, got " + std::to_string(n_metrics));
  at::NoGradGuard no_grad;
  auto blocks = at::zeros({1 + n_envs, RLX_METRICS_FIELDS}, out.per_token_T_F.options());
  blocks[0] = out.per_token_T_F.sum(0);
  blocks[0][F_LOSS] = out.loss.detach();
  if (s.env.defined() && n_envs > 0) {
    auto tagged = s.env.ge(0).nonzero().squeeze(1);
    blocks.narrow(0, 1, n_envs).index_add_(0, s.env.index_select(0, tagged), out.per_token_T_F.index_select(0, tagged));
  }
  auto host = blocks.to(at::kCPU, at::kDouble).contiguous();
  std::memcpy(metrics, host.data_ptr<double>(), sizeof(double) * static_cast<size_t>(want));
}

std::vector<int64_t> sample_lengths_of(const int32_t* lengths, int n_samples, int64_t T) {
  require(T >= 1, "a packed row needs at least one token, got T = " + std::to_string(T));
  require(lengths != nullptr && n_samples >= 1, "sample_lengths is null or n_samples < 1");
  std::vector<int64_t> out(lengths, lengths + n_samples);
  int64_t sum = 0;
  for (int i = 0; i < n_samples; ++i) {
    require(out[i] >= 1, "sample_lengths[" + std::to_string(i) + "] = " + std::to_string(out[i]) + " must be >= 1");
    sum += out[i];
  }
  require(sum == T, "sample_lengths sum to " + std::to_string(sum) + " but the row has T = " + std::to_string(T) + " tokens");
  return out;
}

at::Tensor valid_tokens(const std::vector<int64_t>& lengths, int64_t T, at::Device device) {
  auto valid = at::ones({T}, at::kBool);
  int64_t start = 0;
  for (auto n : lengths) valid[start] = false, start += n;
  return valid.to(device);
}

// Pass 2: back-propagates dL/dlp through the LM head for the rows that have a gradient.
void lm_head_backward(Model& m, const at::Tensor& hidden_leaf, const at::Tensor& labels, const at::Tensor& temps,
                      const at::Tensor& grad_lp) {
  auto rows = grad_lp.ne(0).nonzero().squeeze(1);
  const int64_t chunk = m.chunk_tokens();
  for (int64_t start = 0; start < rows.size(0); start += chunk) {
    auto idx = rows.narrow(0, start, std::min(chunk, rows.size(0) - start));
    auto z = lm_logits(m, hidden_leaf.index_select(0, idx)) / temps.index_select(0, idx).unsqueeze(1);
    auto lp = at::log_softmax(z, -1).gather(1, labels.index_select(0, idx).unsqueeze(1)).squeeze(1);
    lp.backward(grad_lp.index_select(0, idx));
  }
}

}  // namespace
}  // namespace rlx

using namespace rlx;

RLX_API int rlx_train_step_ext(void* model, int64_t T, const int32_t* token_ids, const int32_t* sample_lengths, int n_samples,
                               const uint8_t* loss_mask, const float* advantages, const float* inference_logprobs,
                               const float* temperatures, const float* ref_logprobs, const float* rl_weights,
                               const float* ce_weights, const float* ref_kl_weights, const int32_t* env_index, int n_envs,
                               const double* loss_config, int n_loss_config, double* metrics, int64_t n_metrics) {
  RLX_TRY(-1, {
    auto& m = get_model(model);
    auto lengths = sample_lengths_of(sample_lengths, n_samples, T);
    auto settings = parse_settings(loss_config, n_loss_config);
    require(temperatures != nullptr, "temperatures are required");
    auto cd = m.compute_dtype();
    auto ids = token_tensor(m, token_ids, T, "token_ids");
    auto valid = valid_tokens(lengths, T, m.device);
    auto s = make_streams({loss_mask, advantages, inference_logprobs, temperatures, ref_logprobs, rl_weights, ce_weights,
                           ref_kl_weights, env_index, n_envs}, T, valid, cd);

    AutocastScope autocast(m);
    TrainingScope training(m);
    auto hidden = forward_packed(m, ids, packed_positions(m, lengths), lengths);
    // Token t is predicted from hidden state t-1 (within its sample; t = 0 and sample starts are not valid).
    auto hidden_leaf = hidden.detach().narrow(0, 0, T - 1).requires_grad_(true);
    auto labels = ids.narrow(0, 1, T - 1), temps = s.temps.narrow(0, 1, T - 1);
    at::Tensor lp_shift, ent_shift;
    {
      at::NoGradGuard no_grad;
      lp_shift = chunked_logprobs(m, hidden_leaf, labels, temps, &ent_shift);
    }
    auto head = at::zeros({1}, lp_shift.options());
    auto lp = at::cat({head, lp_shift}).requires_grad_(true);
    auto entropy = at::cat({head, ent_shift});
    auto out = compute_loss(lp, s, settings, entropy, lengths);
    write_metrics(out, s, n_envs, metrics, n_metrics);
    if (!std::isfinite(out.loss.item<double>())) {
      *m.nonfinite_loss = true;  // the optimizer skips this step; no backward through NaN
      return 0;
    }
    auto grad_lp = torch::autograd::grad({out.loss}, {lp})[0].narrow(0, 1, T - 1);
    lm_head_backward(m, hidden_leaf, labels, temps, grad_lp);
    if (hidden_leaf.grad().defined()) hidden.narrow(0, 0, T - 1).backward(hidden_leaf.grad());
    return 0;
  })
}

RLX_API int rlx_loss_eval_ext(int64_t T, const double* logprobs, const int32_t* sample_lengths, int n_samples,
                              const uint8_t* loss_mask, const float* advantages, const float* inference_logprobs,
                              const float* ref_logprobs, const float* rl_weights, const float* ce_weights,
                              const float* ref_kl_weights, const int32_t* env_index, int n_envs, const double* loss_config,
                              int n_loss_config, double* metrics, int64_t n_metrics, double* grad_out) {
  RLX_TRY(-1, {
    require(T >= 0 && logprobs != nullptr, "rlx_loss_eval: logprobs is null or T < 0");
    auto settings = parse_settings(loss_config, n_loss_config);
    auto lengths = sample_lengths ? sample_lengths_of(sample_lengths, n_samples, T) : std::vector<int64_t>{T};
    auto valid = at::ones({T}, at::kBool);
    auto s = make_streams({loss_mask, advantages, inference_logprobs, nullptr, ref_logprobs, rl_weights, ce_weights,
                           ref_kl_weights, env_index, n_envs}, T, valid, at::kDouble);
    auto lp = at::from_blob(const_cast<double*>(logprobs), {T}, at::kDouble).clone().requires_grad_(true);
    auto out = compute_loss(lp, s, settings, at::Tensor(), lengths);
    write_metrics(out, s, n_envs, metrics, n_metrics);
    if (grad_out) {
      auto g = torch::autograd::grad({out.loss}, {lp})[0].contiguous();
      std::memcpy(grad_out, g.data_ptr<double>(), sizeof(double) * static_cast<size_t>(T));
    }
    return 0;
  })
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
