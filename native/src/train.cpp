// The training step: one packed micro-batch in, gradients accumulated into the parameters, the
// loss of docs/architecture.md §6 (prime-rl's three components and the distill one, each over its
// own global token count; the rl component's loss type and reduction from [trainer.loss], its
// math in rl_loss.cpp, distill's in distill.cpp) and its metrics out. Also rlx_loss_eval, the same
// loss over given logprobs (and, for distill, given logits: exact test vectors).
//
// Why two passes over the LM head: full-vocabulary float32 logits for a whole row do not fit in
// memory at real vocabulary sizes. Pass 1 computes the logprob and entropy of every token the loss
// reads (read_rows: not the prompt) chunk by chunk without autograd; the loss is then a small graph
// over those logprobs, giving dL/dlp.
// Pass 2 recomputes each chunk's logits, only for tokens whose dL/dlp is not zero, and
// back-propagates that chunk at once (written out for weights in the compute dtype, with autograd
// for bf16 weights and distill), accumulating into the LM head and into a detached copy of the
// hidden states; one backward through the transformer finishes. The extra cost is one LM-head
// forward over those tokens, the same as a fused kernel's recomputation in backward.
//
// The distill component depends on k + 1 bucket logprobs per member token instead of one: pass 1
// also computes those (temperature 1, member tokens only, one more LM-head forward over them),
// the loss graph gives dL/dbuckets beside dL/dlp, and pass 2 back-propagates both through each
// recomputed chunk with autograd.
#include "distill.h"
#include "loss.h"
#include "model.h"

namespace rlx {
namespace {

// Per-token metric fields; rlx.h documents them as RLX_M_*.
enum Field : int64_t {
  F_LOSS, F_RL_SUM, F_RL_COUNT, F_CE_SUM, F_CE_COUNT, F_REF_SUM, F_REF_COUNT, F_MISMATCH_KL, F_MISMATCH_COUNT,
  F_ENTROPY, F_ENTROPY_COUNT, F_MASKED_LOW, F_MASKED_HIGH, F_REF_MASKED, F_REF_KL, F_NLL, F_TOKENS,
  F_DISTILL_SUM, F_DISTILL_COUNT, F_COUNT
};
static_assert(F_TOKENS + 1 == RLX_METRICS_FIELDS && F_COUNT == RLX_METRICS_FIELDS_DISTILL,
              "rlx.h metric layout and train.cpp disagree");

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

// docs/architecture.md §6 / prime-rl's trainer/rl/loss.py, per token, then summed. lp: [T], requires grad.
// lengths: the row's samples (for the sequence-level loss types and reductions). d, sb: the distill
// streams and the student's bucket logprobs [T, k + 1] (differentiable), when the row has them.
LossOutput compute_loss(const at::Tensor& lp, const Streams& s, const LossSettings& cfg, const at::Tensor& entropy,
                        const std::vector<int64_t>& lengths, const DistillStreams& d = {}, const at::Tensor& sb = {}) {
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
  auto distill_m = d.present() ? d.member : zeros_b;
  at::Tensor l_distill = at::zeros_like(lpd);
  if (d.present()) {
    require(cfg.has_n_distill || !d.member.any().item<bool>(),
            "distill members need N_distill: pass RLX_LOSS_CONFIG_LEN_DISTILL (16) loss_config doubles");
    l_distill = distill_divergence(sb, d) * d.w;
    per_token = per_token + l_distill / cfg.n_distill;
  }
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
  // Over action tokens of every component that has a ratio or a sampled distribution (distill).
  auto mm_m = s.loss_mask.logical_and(ratio_m.logical_or(distill_m));
  auto mm_lr = lpd - at::where(mm_m, s.ilp, lpd);
  cols[F_MISMATCH_KL] = f(mm_m) * (mm_lr.exp() - mm_lr - 1);
  cols[F_MISMATCH_COUNT] = f(mm_m);
  cols[F_ENTROPY] = entropy.defined() ? mask_f * entropy : at::zeros_like(lpd);
  cols[F_ENTROPY_COUNT] = entropy.defined() ? mask_f : at::zeros_like(lpd);
  cols[F_MASKED_LOW] = rl_f * f(masked_rl.logical_and(adv <= 0));
  cols[F_MASKED_HIGH] = rl_f * f(masked_rl.logical_and(adv > 0));
  cols[F_REF_MASKED] = ref_f * f(masked_ref);
  cols[F_REF_KL] = ref_f * ref_adv;
  cols[F_NLL] = ce_f * -lpd;
  cols[F_TOKENS] = at::ones_like(lpd);
  cols[F_DISTILL_SUM] = l_distill.detach();
  cols[F_DISTILL_COUNT] = f(distill_m);
  return {loss, at::stack(cols, 1)};
}

// Block 0: the whole row; block 1+e: tokens of env e (tokens with a negative env are in block 0 only).
// fields: the caller's block width, RLX_METRICS_FIELDS (ABI 4 calls) or RLX_METRICS_FIELDS_DISTILL.
void write_metrics(const LossOutput& out, const Streams& s, int n_envs, int64_t fields, double* metrics, int64_t n_metrics) {
  const int64_t want = fields * (1 + static_cast<int64_t>(n_envs));
  const char* name = fields == RLX_METRICS_FIELDS ? "RLX_METRICS_FIELDS" : "RLX_METRICS_FIELDS_DISTILL";
  require(metrics != nullptr && n_metrics == want, std::string("metrics buffer must hold ") + name + " * (1 + n_envs) = " +
                                                       std::to_string(want) + " doubles, got " + std::to_string(n_metrics));
  at::NoGradGuard no_grad;
  auto per_token = out.per_token_T_F.narrow(1, 0, fields);
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

// The shared-prefix layout (rlx.h, rlx_train_step_shared): empty when no sample has a parent.
std::vector<int64_t> sample_parents_of(const int32_t* parents, const std::vector<int64_t>& lengths) {
  if (!parents) return {};
  std::vector<int64_t> out(parents, parents + lengths.size());
  bool any = false;
  for (size_t i = 0; i < out.size(); ++i) {
    const auto p = out[i];
    if (p == -1) continue;
    const std::string at = "sample_parents[" + std::to_string(i) + "] = " + std::to_string(p);
    require(p >= 0 && static_cast<size_t>(p) < i, at + ": a parent must be -1 or an earlier sample of the row");
    require(out[p] == -1, at + ": that sample continues another itself (a prefix is one level deep)");
    any = true;
  }
  return any ? out : std::vector<int64_t>{};
}

at::Tensor valid_tokens(const std::vector<int64_t>& lengths, int64_t T, at::Device device) {
  auto valid = at::ones({T}, at::kBool);
  int64_t start = 0;
  for (auto n : lengths) valid[start] = false, start += n;
  return valid.to(device);
}

// [T] bool: the tokens whose logprob the loss or its metrics read (compute_loss masks every use
// of lp by one of these): actions, ce and ref_kl members, distill members.
at::Tensor read_rows(const Streams& s, const DistillStreams& d) {
  auto read = s.loss_mask.clone();
  if (s.ce_w.defined()) read.logical_or_(s.ce_w.ne(0));
  if (s.ref_w.defined()) read.logical_or_(s.ref_w.ne(0));
  if (d.present()) read.logical_or_(d.member);
  return read;
}

// Pass 1 for distill: the student's bucket logprobs [T, k + 1] (no grad) at its member tokens,
// chunk by chunk; 0 elsewhere. hidden, ids, slot: shifted by one (row t - 1 predicts token t).
at::Tensor member_buckets(Model& m, const at::Tensor& hidden, const DistillStreams& d, int64_t T) {
  at::NoGradGuard no_grad;
  auto sb = at::zeros({T, d.k + 1}, d.w.options());
  auto rows = d.member.narrow(0, 1, T - 1).nonzero().squeeze(1);
  const int64_t chunk = m.chunk_tokens();
  for (int64_t start = 0; start < rows.size(0); start += chunk) {
    auto idx = rows.narrow(0, start, std::min(chunk, rows.size(0) - start));
    auto logits = lm_logits(m, hidden.index_select(0, idx));
    auto b = student_buckets(logits, d.ids.narrow(0, 1, T - 1).index_select(0, idx), d.slot.narrow(0, 1, T - 1).index_select(0, idx));
    sb.index_copy_(0, idx + 1, b.to(sb.scalar_type()));
  }
  return sb;
}

// Pass 2 without autograd, for weights in the compute dtype and no distill members: per chunk,
// dL/dlogits = g / t * (onehot(label) - softmax(logits / t)) with g = dL/dlp, then
// W.grad += dlogits^T h in place and dL/dh = dlogits W. Autograd would allocate a fresh [V, H]
// gradient per chunk and add it: with a 152k vocabulary that is 78 MB a chunk, most of a CPU step
// in page faults (bench/README.md, "LM-head chunks").
void lm_head_backward_direct(Model& m, const at::Tensor& hidden_leaf, const at::Tensor& labels,
                             const at::Tensor& temps, const at::Tensor& grad_lp, const at::Tensor& rows) {
  if (rows.size(0) == 0) return;  // no gradient anywhere, as autograd leaves it
  at::NoGradGuard no_grad;
  c10::impl::ExcludeDispatchKeyGuard no_autocast(c10::autocast_dispatch_keyset);  // as lm_logits
  auto& W = m.lm_head;
  if (W.requires_grad() && !W.grad().defined()) W.mutable_grad() = at::zeros_like(W);
  auto grad_h = at::zeros(hidden_leaf.sizes(), W.options());
  const int64_t chunk = m.chunk_tokens();
  for (int64_t start = 0; start < rows.size(0); start += chunk) {
    auto idx = rows.narrow(0, start, std::min(chunk, rows.size(0) - start));
    auto h = hidden_leaf.detach().index_select(0, idx).to(W.scalar_type());  // bf16 under autocast
    auto t = temps.index_select(0, idx);
    auto g_t = grad_lp.index_select(0, idx) / t;  // [n]
    auto dlogits = at::softmax(lm_logits(m, h) / t.unsqueeze(1), -1);
    dlogits.mul_(-g_t.unsqueeze(1)).scatter_add_(1, labels.index_select(0, idx).unsqueeze(1), g_t.unsqueeze(1));
    if (W.requires_grad()) W.mutable_grad().addmm_(dlogits.t(), h);
    grad_h.index_copy_(0, idx, at::mm(dlogits, W));
  }
  hidden_leaf.mutable_grad() = grad_h.to(hidden_leaf.scalar_type());
}

// Pass 2: back-propagates dL/dlp (and dL/dbuckets of the distill members, when given: [T - 1, k + 1])
// through the LM head for the rows that have a gradient.
void lm_head_backward(Model& m, const at::Tensor& hidden_leaf, const at::Tensor& labels, const at::Tensor& temps,
                      const at::Tensor& grad_lp, const DistillStreams& d = {}, const at::Tensor& grad_sb = {}) {
  auto need = grad_lp.ne(0);
  if (grad_sb.defined()) need = need.logical_or(grad_sb.ne(0).any(1));
  auto rows = need.nonzero().squeeze(1);
  if (!grad_sb.defined() && m.lm_head.scalar_type() == m.compute_dtype())
    return lm_head_backward_direct(m, hidden_leaf, labels, temps, grad_lp, rows);
  const int64_t chunk = m.chunk_tokens(), T1 = grad_lp.size(0);
  for (int64_t start = 0; start < rows.size(0); start += chunk) {
    auto idx = rows.narrow(0, start, std::min(chunk, rows.size(0) - start));
    auto logits = lm_logits(m, hidden_leaf.index_select(0, idx));
    auto z = logits / temps.index_select(0, idx).unsqueeze(1);
    auto lp = at::log_softmax(z, -1).gather(1, labels.index_select(0, idx).unsqueeze(1)).squeeze(1);
    if (!grad_sb.defined()) {
      lp.backward(grad_lp.index_select(0, idx));
      continue;
    }
    auto b = student_buckets(logits, d.ids.narrow(0, 1, T1).index_select(0, idx), d.slot.narrow(0, 1, T1).index_select(0, idx));
    ((lp * grad_lp.index_select(0, idx)).sum() + (b * grad_sb.index_select(0, idx)).sum()).backward();
  }
}

}  // namespace

int train_step_any(void* model, int64_t T, const int32_t* token_ids, const int32_t* sample_lengths, int n_samples,
                   const uint8_t* loss_mask, const float* advantages, const float* inference_logprobs,
                   const float* temperatures, const float* ref_logprobs, const float* rl_weights, const float* ce_weights,
                   const float* ref_kl_weights, const float* distill_weights, const float* distill_betas, int distill_k,
                   const int32_t* distill_ids, const float* distill_logprobs, const int32_t* env_index, int n_envs,
                   const double* loss_config, int n_loss_config, double* metrics, int64_t n_metrics, int64_t fields,
                   const int32_t* sample_parents) {
  RLX_TRY(-1, {
    auto& m = get_model(model);
    auto lengths = sample_lengths_of(sample_lengths, n_samples, T);
    auto parents = sample_parents_of(sample_parents, lengths);
    auto settings = parse_settings(loss_config, n_loss_config);
    require(temperatures != nullptr, "temperatures are required");
    auto cd = m.compute_dtype();
    auto ids = token_tensor(m, token_ids, T, "token_ids");
    auto valid = valid_tokens(lengths, T, m.device);
    auto s = make_streams({loss_mask, advantages, inference_logprobs, temperatures, ref_logprobs, rl_weights, ce_weights,
                           ref_kl_weights, env_index, n_envs}, T, valid, cd);
    auto d = make_distill({distill_weights, distill_betas, distill_k, distill_ids, distill_logprobs}, T, m.cfg.vocab_size, valid, cd);
    require(fields == RLX_METRICS_FIELDS_DISTILL || !d.present(), "distill streams need the ABI 6 (_distill) calls");

    AutocastScope autocast(m);
    TrainingScope training(m);
    auto hidden = forward_packed(m, ids, packed_positions(m, lengths, parents), lengths, nullptr, parents);
    // Token t is predicted from hidden state t-1 (within its sample; t = 0 and sample starts are not valid).
    auto hidden_leaf = hidden.detach().narrow(0, 0, T - 1).requires_grad_(true);
    auto labels = ids.narrow(0, 1, T - 1), temps = s.temps.narrow(0, 1, T - 1);
    at::Tensor lp_shift, ent_shift, sb;
    {
      at::NoGradGuard no_grad;
      // Pass 1 over the rows whose logprob a loss component or a metric reads; the others (a
      // prompt, a system prompt and tool schema: most of a tool-use row) keep logprob 0, which every
      // use masks out. With a real vocabulary the LM head is most of the step.
      auto read = read_rows(s, d).narrow(0, 1, T - 1).nonzero().squeeze(1);
      at::Tensor ent_read;
      auto lp_read = chunked_logprobs(m, hidden_leaf.index_select(0, read), labels.index_select(0, read),
                                      temps.index_select(0, read), &ent_read);
      lp_shift = at::zeros({T - 1}, lp_read.options()).index_copy_(0, read, lp_read);
      ent_shift = at::zeros({T - 1}, ent_read.options()).index_copy_(0, read, ent_read);
      if (d.present()) sb = member_buckets(m, hidden_leaf, d, T);
    }
    auto head = at::zeros({1}, lp_shift.options());
    auto lp = at::cat({head, lp_shift}).requires_grad_(true);
    auto entropy = at::cat({head, ent_shift});
    if (sb.defined()) sb.requires_grad_(true);
    auto out = compute_loss(lp, s, settings, entropy, lengths, d, sb);
    write_metrics(out, s, n_envs, fields, metrics, n_metrics);
    if (!std::isfinite(out.loss.item<double>())) {
      *m.nonfinite_loss = true;  // the optimizer skips this step; no backward through NaN
      return 0;
    }
    if (d.present()) {
      auto g = torch::autograd::grad({out.loss}, {lp, sb});
      lm_head_backward(m, hidden_leaf, labels, temps, g[0].narrow(0, 1, T - 1), d, g[1].narrow(0, 1, T - 1));
    } else {
      auto grad_lp = torch::autograd::grad({out.loss}, {lp})[0].narrow(0, 1, T - 1);
      lm_head_backward(m, hidden_leaf, labels, temps, grad_lp);
    }
    if (hidden_leaf.grad().defined()) hidden.narrow(0, 0, T - 1).backward(hidden_leaf.grad());
    return 0;
  })
}

int loss_eval_any(int64_t T, const double* logprobs, const int32_t* sample_lengths, int n_samples, const uint8_t* loss_mask,
                  const float* advantages, const float* inference_logprobs, const float* ref_logprobs,
                  const float* rl_weights, const float* ce_weights, const float* ref_kl_weights,
                  const float* distill_weights, const float* distill_betas, int distill_k, const int32_t* distill_ids,
                  const float* distill_logprobs, int64_t vocab, const double* student_logits, const int32_t* env_index,
                  int n_envs, const double* loss_config, int n_loss_config, double* metrics, int64_t n_metrics,
                  double* grad_out, double* grad_logits_out, int64_t fields) {
  RLX_TRY(-1, {
    require(T >= 0 && logprobs != nullptr, "rlx_loss_eval: logprobs is null or T < 0");
    auto settings = parse_settings(loss_config, n_loss_config);
    auto lengths = sample_lengths ? sample_lengths_of(sample_lengths, n_samples, T) : std::vector<int64_t>{T};
    auto valid = at::ones({T}, at::kBool);
    auto s = make_streams({loss_mask, advantages, inference_logprobs, nullptr, ref_logprobs, rl_weights, ce_weights,
                           ref_kl_weights, env_index, n_envs}, T, valid, at::kDouble);
    auto d = make_distill({distill_weights, distill_betas, distill_k, distill_ids, distill_logprobs}, T, vocab, valid, at::kDouble);
    require(fields == RLX_METRICS_FIELDS_DISTILL || !d.present(), "distill streams need the ABI 6 (_distill) calls");
    auto lp = at::from_blob(const_cast<double*>(logprobs), {T}, at::kDouble).clone().requires_grad_(true);
    at::Tensor logits, sb;
    if (d.present()) {
      require(vocab >= 1, "rlx_loss_eval_distill: vocab must be >= 1");
      require(student_logits || !d.member.any().item<bool>(), "student_logits are required when a token is a distill member");
      logits = student_logits ? at::from_blob(const_cast<double*>(student_logits), {T, vocab}, at::kDouble).clone()
                              : at::zeros({T, vocab}, at::kDouble);
      logits.requires_grad_(true);
      sb = student_buckets(logits, d.ids, d.slot);
    }
    auto out = compute_loss(lp, s, settings, at::Tensor(), lengths, d, sb);
    write_metrics(out, s, n_envs, fields, metrics, n_metrics);
    if (grad_out || grad_logits_out) {
      auto g = d.present() ? torch::autograd::grad({out.loss}, {lp, logits}, {}, c10::nullopt, false, true)
                           : torch::autograd::grad({out.loss}, {lp});
      auto g_lp = g[0].contiguous();
      if (grad_out) std::memcpy(grad_out, g_lp.data_ptr<double>(), sizeof(double) * static_cast<size_t>(T));
      if (grad_logits_out && d.present()) {
        auto g_z = g[1].defined() ? g[1].contiguous() : at::zeros({T, vocab}, at::kDouble);
        std::memcpy(grad_logits_out, g_z.data_ptr<double>(), sizeof(double) * static_cast<size_t>(T * vocab));
      }
    }
    return 0;
  })
}

}  // namespace rlx

using namespace rlx;

RLX_API int rlx_train_step_distill(void* model, int64_t T, const int32_t* token_ids, const int32_t* sample_lengths,
                                   int n_samples, const uint8_t* loss_mask, const float* advantages,
                                   const float* inference_logprobs, const float* temperatures, const float* ref_logprobs,
                                   const float* rl_weights, const float* ce_weights, const float* ref_kl_weights,
                                   const float* distill_weights, const float* distill_betas, int distill_k,
                                   const int32_t* distill_ids, const float* distill_logprobs, const int32_t* env_index,
                                   int n_envs, const double* loss_config, int n_loss_config, double* metrics, int64_t n_metrics) {
  return train_step_any(model, T, token_ids, sample_lengths, n_samples, loss_mask, advantages, inference_logprobs, temperatures,
                        ref_logprobs, rl_weights, ce_weights, ref_kl_weights, distill_weights, distill_betas, distill_k,
                        distill_ids, distill_logprobs, env_index, n_envs, loss_config, n_loss_config, metrics, n_metrics,
                        RLX_METRICS_FIELDS_DISTILL);
}

RLX_API int rlx_train_step_shared(void* model, int64_t T, const int32_t* token_ids, const int32_t* sample_lengths,
                                  const int32_t* sample_parents, int n_samples, const uint8_t* loss_mask,
                                  const float* advantages, const float* inference_logprobs, const float* temperatures,
                                  const float* ref_logprobs, const float* rl_weights, const float* ce_weights,
                                  const float* ref_kl_weights, const float* distill_weights, const float* distill_betas,
                                  int distill_k, const int32_t* distill_ids, const float* distill_logprobs,
                                  const int32_t* env_index, int n_envs, const double* loss_config, int n_loss_config,
                                  double* metrics, int64_t n_metrics) {
  return train_step_any(model, T, token_ids, sample_lengths, n_samples, loss_mask, advantages, inference_logprobs, temperatures,
                        ref_logprobs, rl_weights, ce_weights, ref_kl_weights, distill_weights, distill_betas, distill_k,
                        distill_ids, distill_logprobs, env_index, n_envs, loss_config, n_loss_config, metrics, n_metrics,
                        RLX_METRICS_FIELDS_DISTILL, sample_parents);
}

RLX_API int rlx_loss_eval_distill(int64_t T, const double* logprobs, const int32_t* sample_lengths, int n_samples,
                                  const uint8_t* loss_mask, const float* advantages, const float* inference_logprobs,
                                  const float* ref_logprobs, const float* rl_weights, const float* ce_weights,
                                  const float* ref_kl_weights, const float* distill_weights, const float* distill_betas,
                                  int distill_k, const int32_t* distill_ids, const float* distill_logprobs, int64_t vocab,
                                  const double* student_logits, const int32_t* env_index, int n_envs,
                                  const double* loss_config, int n_loss_config, double* metrics, int64_t n_metrics,
                                  double* grad_out, double* grad_logits_out) {
  return loss_eval_any(T, logprobs, sample_lengths, n_samples, loss_mask, advantages, inference_logprobs, ref_logprobs,
                       rl_weights, ce_weights, ref_kl_weights, distill_weights, distill_betas, distill_k, distill_ids,
                       distill_logprobs, vocab, student_logits, env_index, n_envs, loss_config, n_loss_config, metrics,
                       n_metrics, grad_out, grad_logits_out, RLX_METRICS_FIELDS_DISTILL);
}
