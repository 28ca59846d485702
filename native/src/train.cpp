// The training step: one packed micro-batch in, gradients accumulated into the parameters, the
// loss of docs/architecture.md §6 (prime-rl's three components and the distill one, each over its
// own global token count; each sample's rl loss type and reduction from the step's loss table, its
// math in rl_loss.cpp and rl_clip.cpp, distill's in distill.cpp) and its metrics out. Also rlx_loss_eval, the same
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
//
// The loss itself, over the logprobs of pass 1, is step_loss.cpp.
#include "abi.h"
#include "heap.h"
#include "model.h"
#include "step_loss.h"
#include "trunk.h"

namespace rlx {
namespace {

std::vector<int64_t> sample_lengths_of(const int32_t* lengths, int64_t n_samples, int64_t T) {
  require(T >= 1, "a packed row needs at least one token, got T = " + std::to_string(T));
  require(lengths != nullptr && n_samples >= 1, "sample_lengths is null or n_samples < 1");
  std::vector<int64_t> out(lengths, lengths + n_samples);
  int64_t sum = 0;
  for (int64_t i = 0; i < n_samples; ++i) {
    require(out[i] >= 1, "sample_lengths[" + std::to_string(i) + "] = " + std::to_string(out[i]) + " must be >= 1");
    sum += out[i];
  }
  require(sum == T, "sample_lengths sum to " + std::to_string(sum) + " but the row has T = " + std::to_string(T) + " tokens");
  return out;
}

// The shared-prefix layout (rlx.h, rlx_batch.sample_parents): empty when no sample has a parent.
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

// The batch's counts that the streams take as int: n_envs and distill_k.
int n_envs_of(const rlx_batch& b) {
  require(b.n_envs >= 0 && b.n_envs <= INT32_MAX, "n_envs = " + std::to_string(b.n_envs) + " must be >= 0");
  return static_cast<int>(b.n_envs);
}

// The batch names the group a sharded model's slices are spread over, or none for a whole model.
void check_shard_group(const Model& m, const rlx_batch& b) {
  if (!m.shards) {
    require(b.shard_group == nullptr, "rlx_batch.shard_group is set but the model is not sharded (rlx_model_shard)");
    return;
  }
  require(b.shard_group == m.shards->group,
          "rlx_batch.shard_group must be the group the model was sharded over (rlx_model_shard)");
}

int distill_k_of(const rlx_batch& b) {
  require(b.distill_k >= 0 && b.distill_k <= INT32_MAX, "distill_k = " + std::to_string(b.distill_k) + " must be >= 0");
  return static_cast<int>(b.distill_k);
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
// chunk by chunk; 0 elsewhere. Row i of hidden predicts token dst[i].
at::Tensor member_buckets(Model& m, const at::Tensor& hidden, const DistillStreams& d, const at::Tensor& dst, int64_t T) {
  at::NoGradGuard no_grad;
  auto sb = at::zeros({T, d.k + 1}, d.w.options());
  auto rows = d.member.index_select(0, dst).nonzero().squeeze(1);
  const int64_t chunk = m.chunk_tokens();
  for (int64_t start = 0; start < rows.size(0); start += chunk) {
    auto idx = rows.narrow(0, start, std::min(chunk, rows.size(0) - start));
    auto tokens = dst.index_select(0, idx);
    auto logits = lm_logits(m, hidden.index_select(0, idx));
    auto b = student_buckets(logits, d.ids.index_select(0, tokens), d.slot.index_select(0, tokens));
    sb.index_copy_(0, tokens, b.to(sb.scalar_type()));
  }
  return sb;
}

// Pass 2 without autograd, for weights in the compute dtype and no distill members: per chunk,
// dL/dlogits = g / t * (onehot(label) - softmax(logits / t)) with g = dL/dlp, then
// W.grad += dlogits^T h in place and dL/dh = dlogits W. Autograd would allocate a fresh [V, H]
// gradient per chunk and add it: with a 152k vocabulary that is 78 MB a chunk, most of a CPU step
// in page faults (experiments/bench_history.md, "LM-head chunks").
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

// Pass 2: back-propagates dL/dlp (and dL/dbuckets of the distill members, when given: a row per
// hidden row, [n, k + 1]) through the LM head for the rows that have a gradient. Row i of
// hidden_leaf predicts token dst[i].
void lm_head_backward(Model& m, const at::Tensor& hidden_leaf, const at::Tensor& labels, const at::Tensor& temps,
                      const at::Tensor& grad_lp, const at::Tensor& dst, const DistillStreams& d = {},
                      const at::Tensor& grad_sb = {}) {
  auto need = grad_lp.ne(0);
  if (grad_sb.defined()) need = need.logical_or(grad_sb.ne(0).any(1));
  auto rows = need.nonzero().squeeze(1);
  if (!grad_sb.defined() && m.lm_head.scalar_type() == m.compute_dtype())
    return lm_head_backward_direct(m, hidden_leaf, labels, temps, grad_lp, rows);
  const int64_t chunk = m.chunk_tokens();
  for (int64_t start = 0; start < rows.size(0); start += chunk) {
    auto idx = rows.narrow(0, start, std::min(chunk, rows.size(0) - start));
    auto logits = lm_logits(m, hidden_leaf.index_select(0, idx));
    auto z = logits / temps.index_select(0, idx).unsqueeze(1);
    auto lp = at::log_softmax(z, -1).gather(1, labels.index_select(0, idx).unsqueeze(1)).squeeze(1);
    if (!grad_sb.defined()) {
      lp.backward(grad_lp.index_select(0, idx));
      continue;
    }
    auto tokens = dst.index_select(0, idx);
    auto b = student_buckets(logits, d.ids.index_select(0, tokens), d.slot.index_select(0, tokens));
    ((lp * grad_lp.index_select(0, idx)).sum() + (b * grad_sb.index_select(0, idx)).sum()).backward();
  }
}

}  // namespace

}  // namespace rlx

using namespace rlx;

RLX_API int rlx_train_step(rlx_model* model, const rlx_batch* batch, const rlx_loss* loss, double* metrics, int64_t n_metrics) {
  RLX_TRY(-1, {
    auto& m = get_model(model);
    const auto b = batch_of(batch);
    const auto settings = parse_settings(loss_of(loss));
    const int64_t T = b.n_tokens;
    const int n_envs = n_envs_of(b);
    auto lengths = sample_lengths_of(b.sample_lengths, b.n_samples, T);
    auto parents = sample_parents_of(b.sample_parents, lengths);
    auto codes = sample_codes_of(b.sample_losses, lengths.size(), settings);
    require(b.temperatures != nullptr, "temperatures are required");
    auto cd = m.compute_dtype();
    auto ids = token_tensor(m, b.token_ids, T, "token_ids");
    auto valid = valid_tokens(lengths, T, m.device);
    auto s = make_streams({b.loss_mask, b.advantages, b.inference_logprobs, b.temperatures, b.ref_logprobs, b.rl_weights,
                           b.ce_weights, b.ref_kl_weights, b.env_index, n_envs}, T, valid, cd);
    auto d = make_distill({b.distill_weights, b.distill_betas, distill_k_of(b), b.distill_ids, b.distill_logprobs}, T,
                          m.cfg.vocab_size, valid, cd);

    check_shard_group(m, b);
    require(b.activation_checkpointing == 0 || b.activation_checkpointing == 1,
            "rlx_batch.activation_checkpointing must be 0 or 1, got " + std::to_string(b.activation_checkpointing));

    // A context split (context.h): this rank runs the trunk and the LM head over its own tokens;
    // the logprobs are summed over the group, so every rank computes the whole row's loss.
    ContextRowPtr context;
    if (b.context_group) context = split_row(m, b.context_group, lengths, parents);
    SplitRowHeap heap(m.device.is_cpu(), context ? context->world : 1);
    auto positions = packed_positions(m, lengths, parents);
    // Hidden row src[i] predicts token dst[i], the next of its sample (first tokens are not valid).
    at::Tensor src, dst, own_ids = ids, own_positions = positions;
    if (!context) {
      src = at::arange(T - 1, ids.options()), dst = src + 1;
    } else {
      own_ids = ids.index_select(0, context->local), own_positions = positions.index_select(0, context->local);
      src = context->local.lt(T - 1).nonzero().squeeze(1), dst = context->local.index_select(0, src) + 1;
    }

    AutocastScope autocast(m);
    TrainingScope training(m);
    Trunk trunk(m, b.activation_checkpointing == 1, context);
    auto hidden = trunk.forward(own_ids, own_positions, lengths, parents);
    auto hidden_leaf = (context ? hidden.detach().index_select(0, src) : hidden.detach().narrow(0, 0, T - 1)).requires_grad_(true);
    // The trunk's backward takes a gradient of its output's shape; the output itself is not read
    // again (a split row's leaf is a copy of it), so it goes now instead of living through the
    // backward.
    const auto grad_of_hidden = [shape = hidden.sizes().vec(), options = hidden.options()] { return at::zeros(shape, options); };
    hidden = at::Tensor();
    auto labels = ids.index_select(0, dst), temps = s.temps.index_select(0, dst);
    at::Tensor lp_all, entropy, sb;
    {
      at::NoGradGuard no_grad;
      // Pass 1 over the rows whose logprob a loss component or a metric reads; the others (a
      // prompt, a system prompt and tool schema: most of a tool-use row) keep logprob 0, which every
      // use masks out. With a real vocabulary the LM head is most of the step.
      auto read = read_rows(s, d).index_select(0, dst).nonzero().squeeze(1);
      at::Tensor ent_read;
      auto lp_read = chunked_logprobs(m, hidden_leaf.index_select(0, read), labels.index_select(0, read),
                                      temps.index_select(0, read), &ent_read);
      auto tokens = dst.index_select(0, read);
      lp_all = at::zeros({T}, lp_read.options()).index_copy_(0, tokens, lp_read);
      entropy = at::zeros({T}, ent_read.options()).index_copy_(0, tokens, ent_read);
      if (d.present()) sb = member_buckets(m, hidden_leaf, d, dst, T);
      if (context) {
        std::vector<at::Tensor> parts{lp_all.unsqueeze(1), entropy.unsqueeze(1)};
        if (sb.defined()) parts.push_back(sb.to(lp_all.scalar_type()));
        auto whole = at::cat(parts, 1);
        context_sum(*context, whole, "context-parallel all-reduce of the row's logprobs");
        lp_all = whole.select(1, 0).contiguous(), entropy = whole.select(1, 1).contiguous();
        if (sb.defined()) sb = whole.narrow(1, 2, sb.size(1)).to(sb.scalar_type()).contiguous();
      }
    }
    auto lp = lp_all.requires_grad_(true);
    if (sb.defined()) sb.requires_grad_(true);
    auto out = compute_loss(lp, s, settings, entropy, lengths, codes, d, sb);
    write_metrics(out, s, n_envs, metrics, n_metrics);
    if (!std::isfinite(out.loss.item<double>())) {
      *m.nonfinite_loss = true;  // the optimizer skips this step; no backward through NaN
      if (trunk.collective()) trunk.backward(grad_of_hidden());  // the other ranks' collectives need this one's
      return 0;
    }
    if (d.present()) {
      auto g = torch::autograd::grad({out.loss}, {lp, sb});
      lm_head_backward(m, hidden_leaf, labels, temps, g[0].index_select(0, dst), dst, d, g[1].index_select(0, dst));
    } else {
      auto grad_lp = torch::autograd::grad({out.loss}, {lp})[0].index_select(0, dst);
      lm_head_backward(m, hidden_leaf, labels, temps, grad_lp, dst);
    }
    auto grad_hidden = hidden_leaf.grad().defined() ? grad_of_hidden().index_copy_(0, src, hidden_leaf.grad()) : at::Tensor();
    hidden_leaf = at::Tensor();  // and its gradient: neither lives through the trunk's backward
    if (grad_hidden.defined())
      trunk.backward(std::move(grad_hidden));
    else if (trunk.collective())
      trunk.backward(grad_of_hidden());
    return 0;
  })
}

RLX_API int rlx_loss_eval(const rlx_batch* batch, const rlx_loss* loss, const double* logprobs, int64_t vocab,
                          const double* student_logits, double* metrics, int64_t n_metrics, double* grad_out,
                          double* grad_logits_out) {
  RLX_TRY(-1, {
    const auto b = batch_of(batch);
    const auto settings = parse_settings(loss_of(loss));
    const int64_t T = b.n_tokens;
    const int n_envs = n_envs_of(b);
    require(T >= 0 && logprobs != nullptr, "rlx_loss_eval: logprobs is null or T < 0");
    auto lengths = b.sample_lengths ? sample_lengths_of(b.sample_lengths, b.n_samples, T) : std::vector<int64_t>{T};
    auto codes = sample_codes_of(b.sample_losses, lengths.size(), settings);
    auto valid = at::ones({T}, at::kBool);
    auto s = make_streams({b.loss_mask, b.advantages, b.inference_logprobs, nullptr, b.ref_logprobs, b.rl_weights,
                           b.ce_weights, b.ref_kl_weights, b.env_index, n_envs}, T, valid, at::kDouble);
    auto d = make_distill({b.distill_weights, b.distill_betas, distill_k_of(b), b.distill_ids, b.distill_logprobs}, T, vocab,
                          valid, at::kDouble);
    auto lp = at::from_blob(const_cast<double*>(logprobs), {T}, at::kDouble).clone().requires_grad_(true);
    at::Tensor logits, sb;
    if (d.present()) {
      require(vocab >= 1, "rlx_loss_eval: vocab must be >= 1");
      require(student_logits || !d.member.any().item<bool>(), "student_logits are required when a token is a distill member");
      logits = student_logits ? at::from_blob(const_cast<double*>(student_logits), {T, vocab}, at::kDouble).clone()
                              : at::zeros({T, vocab}, at::kDouble);
      logits.requires_grad_(true);
      sb = student_buckets(logits, d.ids, d.slot);
    }
    auto out = compute_loss(lp, s, settings, at::Tensor(), lengths, codes, d, sb);
    write_metrics(out, s, n_envs, metrics, n_metrics);
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

