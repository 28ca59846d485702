// The model's math: grouped-query attention over packed rows and over a KV cache, the packed
// forward and the decode step built from one layer's blocks (layer.cpp), and the LM head:
// full-vocabulary logits in the compute dtype, and logprobs (with entropies) of given labels chunk
// by chunk, so a row's [T, V] logits never exist at once (docs/architecture.md §7, "Chunked LM
// head"; the train step's own two passes over it are in train.cpp). Shapes are written as suffixes
// or comments:
// T tokens of a packed row, B decode rows, H query heads, G kv heads, R = H / G, D head_dim.
//
// Attention over a packed row runs one causal block per sample (consecutive samples of equal
// length as one batched block), so its cost is the sum of the squared sample lengths, not the
// squared row length, and no T x T mask exists; a sample longer than 256 tokens runs in blocks of
// 256 queries, each against the keys up to its last query (attend_causal). Grouped-query
// attention views the R query heads of a kv head as extra rows of one matrix product against that
// kv head's K, so K and V are never repeated (docs/architecture.md §7).
//
// Without autograd (generation, scoring) on the CPU, RMSNorm and the rotary embedding run as one
// pass per row (norm_cpu.cpp), attention against the K/V cache as plain loops (attention_cpu.cpp:
// a decode step, a short prefill), products of few rows without BLAS (linear_cpu.cpp), and q/k/v
// and gate/up as one product each over the layer's joint buffers (model.h).
//
// libtorch 1.13 has no public scaled_dot_product_attention; 2.x builds use it (fused kernels,
// flash attention on CUDA) unless the model's fused_attention option is off, and 2.4+ uses the
// per-device autocast API. They are the blocks under RLX_TORCH2 and RLX_TORCH_AT_LEAST; CI builds
// and tests them against a PyTorch 2.x wheel when one is on the machine (.ci/run).
#include "layer.h"

#define RLX_TORCH2 (TORCH_VERSION_MAJOR >= 2)
#define RLX_TORCH_AT_LEAST(major, minor) \
  (TORCH_VERSION_MAJOR > (major) || (TORCH_VERSION_MAJOR == (major) && TORCH_VERSION_MINOR >= (minor)))

namespace rlx {

#if RLX_TORCH2
// An absent attention mask must be an empty optional: an undefined Tensor inside one reaches SDPA
// as a mask of dtype "nullptr" and is refused.
using OptionalTensor = c10::optional<at::Tensor>;  // std::optional since 2.4, c10's own before
#endif

// ---- autocast ---------------------------------------------------------------------------------

AutocastScope::AutocastScope(const Model& m) {
  if (!m.autocast_bf16) return;
  active_ = true;
  device_type_ = m.device.type();
#if RLX_TORCH_AT_LEAST(2, 4)
  was_enabled_ = at::autocast::is_autocast_enabled(device_type_);
  at::autocast::set_autocast_dtype(device_type_, at::kBFloat16);
  at::autocast::set_autocast_enabled(device_type_, true);
#else
  if (device_type_ == at::kCPU) {
    was_enabled_ = at::autocast::is_cpu_enabled();
    at::autocast::set_autocast_cpu_dtype(at::kBFloat16);
    at::autocast::set_cpu_enabled(true);
  } else {
    was_enabled_ = at::autocast::is_enabled();
    at::autocast::set_autocast_gpu_dtype(at::kBFloat16);
    at::autocast::set_enabled(true);
  }
#endif
  at::autocast::increment_nesting();
}

AutocastScope::~AutocastScope() {
  if (!active_) return;
  if (at::autocast::decrement_nesting() == 0) at::autocast::clear_cache();
#if RLX_TORCH_AT_LEAST(2, 4)
  at::autocast::set_autocast_enabled(device_type_, was_enabled_);
#else
  if (device_type_ == at::kCPU) at::autocast::set_cpu_enabled(was_enabled_);
  else at::autocast::set_enabled(was_enabled_);
#endif
}

// Queries per block of the hand-written attention (attend_causal).
constexpr int64_t kQueryBlock = 256;

// Prefill samples of at most this many new tokens attend through the K/V cache they just wrote
// (cache_attention_cpu) instead of attend_causal's products: one call a layer for the whole run.
constexpr int64_t kCachePrefill = 128;

// Causal attention within each of `count` samples of equal length n laid end to end:
// q [count*n, H, D], k/v [count*n, G, D] -> [count*n, H*D]. Equal-length samples (a GRPO group's
// prompts, a batch of prompts) run as one batched product instead of one per sample. With a shared
// prefix (kp/vp [P, G, D], the K/V of the segment these samples continue), query i of each sample
// sees all P prefix keys and its own keys 0..i: the prefix's K/V are computed once for the whole
// group of continuations, and its gradient sums theirs. The fused kernels' is_causal aligns the
// diagonal top-left, so a prefix goes to SDPA as an explicit mask (on CUDA the memory-efficient
// kernel takes one; flash attention does not).
static at::Tensor attend_causal(const Model& m, const at::Tensor& q, const at::Tensor& k, const at::Tensor& v, int64_t count,
                                const at::Tensor& kp = {}, const at::Tensor& vp = {}) {
  const int64_t n = q.size(0) / count, H = q.size(1), G = k.size(1), D = q.size(2), R = H / G;
  const int64_t P = kp.defined() ? kp.size(0) : 0;
  auto keys_of = [&](const at::Tensor& x, const at::Tensor& xp) {  // [count, G, P + n, D]
    auto own = x.view({count, n, G, D});
    if (P) own = at::cat({xp.unsqueeze(0).expand({count, P, G, D}), own}, 1);
    return own.permute({0, 2, 1, 3});
  };
  auto k_c_G_S_D = keys_of(k, kp), v_c_G_S_D = keys_of(v, vp);
  auto opts = at::TensorOptions().dtype(at::kLong).device(q.device());
#if RLX_TORCH2
  if (m.fused_attention) {
    auto qh = q.view({count, n, H, D}).permute({0, 2, 1, 3});
    OptionalTensor mask;  // [n, P + n]: query i (at key P + i) sees keys 0..P + i
    if (P) mask = at::arange(P + n, opts).unsqueeze(0) <= at::arange(n, opts).unsqueeze(1) + P;
#if RLX_TORCH_AT_LEAST(2, 5)
    auto out = at::scaled_dot_product_attention(qh, k_c_G_S_D, v_c_G_S_D, mask, 0.0, P == 0, {}, /*enable_gqa=*/true);
#else
    auto out = at::scaled_dot_product_attention(qh, k_c_G_S_D.repeat_interleave(R, 1), v_c_G_S_D.repeat_interleave(R, 1),
                                                mask, 0.0, P == 0);
#endif
    return out.permute({0, 2, 1, 3}).reshape({count * n, H * D});
  }
#endif
  // Blocks of kQueryBlock queries: a block's scores are [count, G, R * block, keys] with keys
  // cut at its last query's position, so a long sample never holds its whole [n, S] score matrix
  // (at 1,300 tokens those temporaries made the forward ~20x slower than at 650) and the causal
  // half above the diagonal is never computed. A sample of at most one block runs as one product.
  const int64_t block = n <= kQueryBlock ? n : kQueryBlock;
  auto q_c_G_R_n_D = q.view({count, n, G, R, D}).permute({0, 2, 3, 1, 4});
  std::vector<at::Tensor> outs;
  for (int64_t i0 = 0; i0 < n; i0 += block) {
    const int64_t b = std::min(block, n - i0), keys = P + i0 + b;
    auto q_block = q_c_G_R_n_D.narrow(3, i0, b).reshape({count, G, R * b, D});
    auto scores = at::matmul(q_block, k_c_G_S_D.narrow(2, 0, keys).transpose(2, 3)).view({count, G, R, b, keys}) *
                  (1.0 / std::sqrt(double(D)));
    auto hidden_b_keys = at::arange(keys, opts).unsqueeze(0) > at::arange(i0, i0 + b, opts).unsqueeze(1) + P;
    auto probs = at::softmax(scores.masked_fill(hidden_b_keys, -INFINITY), -1, m.compute_dtype()).to(v.scalar_type());
    outs.push_back(at::matmul(probs.view({count, G, R * b, keys}), v_c_G_S_D.narrow(2, 0, keys)).view({count, G, R, b, D}));
  }
  auto out = outs.size() == 1 ? outs[0] : at::cat(outs, 3);  // [count, G, R, n, D]
  return out.permute({0, 3, 1, 2, 4}).reshape({count * n, H * D});
}

// ---- packed forward ---------------------------------------------------------------------------

static int64_t parent_of(const std::vector<int64_t>& parents, size_t i) { return parents.empty() ? -1 : parents[i]; }

RowPlan plan_row(Model& m, const at::Tensor& positions, const std::vector<int64_t>& sample_lengths, const KVWrite* kv,
                 const std::vector<int64_t>& parents, ContextRowPtr context) {
  TORCH_CHECK(parents.empty() || (!kv && parents.size() == sample_lengths.size()), "forward_packed: bad parents");
  TORCH_CHECK(!context || !kv, "forward_packed: a context-parallel row writes no K/V");
  RowPlan row;
  row.lengths = sample_lengths, row.parents = parents, row.kv = kv, row.context = std::move(context);
  auto past_of = [&](size_t i) { return kv ? kv->past_of(i) : 0; };
  for (size_t i = 0, at = 0; i < sample_lengths.size(); at += sample_lengths[i++])
    row.starts.push_back(static_cast<int64_t>(at));
  std::tie(row.cos, row.sin) = rope_rows(m, positions);
  // Runs of consecutive samples of equal length and the same parent, none continuing cached
  // tokens (each of those attends to its own slot's): [first sample, end sample).
  for (size_t i = 0, j; i < sample_lengths.size(); i = j) {
    for (j = i + 1; j < sample_lengths.size() && sample_lengths[j] == sample_lengths[i] &&
                    parent_of(parents, j) == parent_of(parents, i) && past_of(i) == 0 && past_of(j) == 0;)
      ++j;
    row.runs.emplace_back(i, j);
  }
  row.run_queries.resize(row.runs.size());
  if (kv)
    for (size_t r = 0; r < row.runs.size(); ++r) {
      auto& [tables, at] = row.run_queries[r];
      for (size_t s = row.runs[r].first; s < row.runs[r].second; ++s)
        for (int64_t t = 0; t < sample_lengths[s]; ++t) tables.push_back(kv->tables[s]), at.push_back(past_of(s) + t);
      row.run_writes.push_back(kv_rows(*kv->cache, tables, at, m.device));
    }
  return row;
}

at::Tensor layer_packed(Model& m, const Layer& L, size_t l, const at::Tensor& x, const RowPlan& row) {
  const KVWrite* kv = row.kv;
  auto [q, k, v] = project_qkv(m, L, rms_norm(m, x, L.input_norm), row.cos, row.sin);
  if (row.context) {
    auto h = x + project(m, L, kLoraO, context_attention(m, q, k, v, row.context), L.o_proj);
    return h + mlp(m, L, h);
  }
  std::vector<at::Tensor> outs;
  for (size_t r = 0; r < row.runs.size(); ++r) {
    const int64_t n = row.lengths[row.runs[r].first], count = static_cast<int64_t>(row.runs[r].second - row.runs[r].first);
    const int64_t start = row.starts[row.runs[r].first], p = parent_of(row.parents, row.runs[r].first);
    const bool whole = row.runs.size() == 1;
    auto qs = whole ? q : q.narrow(0, start, count * n);
    auto ks = whole ? k : k.narrow(0, start, count * n), vs = whole ? v : v.narrow(0, start, count * n);
    const int64_t past = kv ? kv->past_of(row.runs[r].first) : 0;
    if (kv) {
      at::NoGradGuard no_grad;
      kv_write(*kv->cache, l, row.run_writes[r], ks, vs);
    }
    const KVCache* cache = kv ? kv->cache : nullptr;
    if (kv && n <= kCachePrefill && m.fused_attention && cache_attention_cpu_applies(qs, cache->k[l])) {
      const auto& [tables, positions] = row.run_queries[r];
      outs.push_back(cache_attention_cpu(qs, cache->k[l], cache->v[l], positions, tables, cache->capacity));
    } else if (past > 0) {  // [P, G, D]: the cached K/V the sample continues
      const auto& table = *kv->tables[row.runs[r].first];
      auto cached = [&](const at::Tensor& c) { return kv_gather(c, table, past).to(qs.scalar_type()); };
      outs.push_back(attend_causal(m, qs, ks, vs, count, cached(cache->k[l]), cached(cache->v[l])));
    } else if (p < 0)
      outs.push_back(attend_causal(m, qs, ks, vs, count));
    else
      outs.push_back(attend_causal(m, qs, ks, vs, count, k.narrow(0, row.starts[p], row.lengths[p]),
                                   v.narrow(0, row.starts[p], row.lengths[p])));
  }
  auto attn = outs.size() == 1 ? outs[0] : at::cat(outs, 0);
  auto h = x + project(m, L, kLoraO, attn, L.o_proj);
  return h + mlp(m, L, h);
}

at::Tensor forward_packed(Model& m, const at::Tensor& token_ids, const at::Tensor& positions,
                          const std::vector<int64_t>& sample_lengths, const KVWrite* kv, const std::vector<int64_t>& parents,
                          const ContextRowPtr& context) {
  auto row = plan_row(m, positions, sample_lengths, kv, parents, context);
  auto x = at::embedding(m.embed, token_ids);  // [T, hidden]
  for (size_t l = 0; l < m.layers.size(); ++l) x = layer_packed(m, m.layers[l], l, x, row);
  TORCH_CHECK(x.size(0) == token_ids.size(0), "packed forward lost tokens");
  return rms_norm(m, x, m.final_norm);
}

// ---- decode step over a KV cache --------------------------------------------------------------

// A decode step's attention through ATen, where attention_cpu.cpp does not apply (CUDA, bf16) or
// the fused_attention option is off: each row's blocks gathered into [B, G, span, D] (a copy of
// the keys the step reads: there is no paged kernel here), then SDPA on 2.x unless that option is
// off, else scores and softmax. q [B, H, D]; visible_B_span says which positions each row sees
// -> [B, H * D].
static at::Tensor attend_cache(const Model& m, const at::Tensor& q, const at::Tensor& kc, const at::Tensor& vc,
                               const at::Tensor& tables_B_n, const at::Tensor& visible_B_span) {
  const int64_t B = q.size(0), H = q.size(1), D = q.size(2), G = kc.size(0), R = H / G, span = visible_B_span.size(1);
  auto k_B_G_S_D = kv_gather_rows(kc, tables_B_n), v_B_G_S_D = kv_gather_rows(vc, tables_B_n);
#if RLX_TORCH2
  if (m.fused_attention) {
    OptionalTensor mask = visible_B_span.view({B, 1, 1, span});
#if RLX_TORCH_AT_LEAST(2, 5)
    auto attn = at::scaled_dot_product_attention(q.unsqueeze(2), k_B_G_S_D, v_B_G_S_D, mask, 0.0, false, {}, true);
#else
    auto attn = at::scaled_dot_product_attention(q.unsqueeze(2), k_B_G_S_D.repeat_interleave(R, 1),
                                                 v_B_G_S_D.repeat_interleave(R, 1), mask, 0.0, false);
#endif
    return attn.reshape({B, H * D});
  }
#endif
  auto q_B_G_R_D = q.view({B, G, R, D});
  auto scores = at::matmul(q_B_G_R_D, k_B_G_S_D.transpose(2, 3)) * (1.0 / std::sqrt(double(D)));  // [B, G, R, span]
  scores = scores.masked_fill(visible_B_span.logical_not().view({B, 1, 1, span}), -INFINITY);
  auto probs = at::softmax(scores, -1, m.compute_dtype()).to(v_B_G_S_D.scalar_type());
  return at::matmul(probs, v_B_G_S_D).reshape({B, H * D});
}

at::Tensor forward_decode(Model& m, KVCache& cache, const at::Tensor& token_ids, const std::vector<int64_t>& positions_host,
                          const std::vector<const BlockTable*>& tables) {
  const int64_t B = token_ids.size(0);
  const int64_t longest = 1 + *std::max_element(positions_host.begin(), positions_host.end());
  TORCH_CHECK(longest <= cache.capacity, "decode position past the KV cache capacity");
  auto positions = at::tensor(positions_host, at::kLong).to(m.device);
  auto [cos, sin] = rope_rows(m, positions);
  auto writes = kv_rows(cache, tables, positions_host, m.device);
  at::Tensor tables_B_n, visible_B_span;  // the ATen path's gather and mask, made when first needed
  auto aten_attention = [&](const at::Tensor& q, size_t l) {
    if (!tables_B_n.defined()) {
      const int64_t n = blocks_for(longest);
      std::vector<int64_t> ids(static_cast<size_t>(B * n), 0);  // block 0 pads short tables; masked
      for (int64_t b = 0; b < B; ++b)
        std::copy_n(tables[b]->begin(), blocks_for(positions_host[b] + 1), ids.begin() + b * n);
      tables_B_n = at::tensor(ids, at::kLong).view({B, n}).to(m.device);
      visible_B_span = at::arange(n * kKVBlock, positions.options()).unsqueeze(0) <= positions.unsqueeze(1);
    }
    return attend_cache(m, q, cache.k[l], cache.v[l], tables_B_n, visible_B_span);
  };
  auto x = at::embedding(m.embed, token_ids);  // [B, hidden]
  for (size_t l = 0; l < m.layers.size(); ++l) {
    const Layer& L = m.layers[l];
    auto [q, k, v] = project_qkv(m, L, rms_norm(m, x, L.input_norm), cos, sin);
    kv_write(cache, l, writes, k, v);
    auto attn = m.fused_attention && cache_attention_cpu_applies(q, cache.k[l])
                    ? cache_attention_cpu(q, cache.k[l], cache.v[l], positions_host, tables, cache.capacity)
                    : aten_attention(q, l);
    x = x + project(m, L, kLoraO, attn, L.o_proj);
    x = x + mlp(m, L, x);
  }
  return rms_norm(m, x, m.final_norm);
}

// ---- LM head ---------------------------------------------------------------------------------

// The LM head runs in the compute dtype (float32) even inside a bf16 autocast scope: every logprob
// the losses, the sampler and the importance ratios use comes from these logits, and bf16 keeps 8
// bits of mantissa (at logits of ~10 a step of 0.06 nats), which made bf16-autocast SFT learn
// far worse than float32 (experiments/scripts/bf16_sft.sh; docs/gpu.md). Low-precision weights
// are widened per chunk.
at::Tensor lm_logits(Model& m, const at::Tensor& hidden) {
  c10::impl::ExcludeDispatchKeyGuard no_autocast(c10::autocast_dispatch_keyset);
  const auto cd = m.compute_dtype();
  return linear(m, hidden.to(cd), m.lm_head.to(cd));
}

at::Tensor chunked_logprobs(Model& m, const at::Tensor& hidden, const at::Tensor& labels,
                            const at::Tensor& temperatures, at::Tensor* entropy_out) {
  const int64_t N = hidden.size(0);
  std::vector<at::Tensor> logprobs, entropies;
  const int64_t chunk = m.chunk_tokens();
  for (int64_t start = 0; start < N; start += chunk) {
    const int64_t n = std::min(chunk, N - start);
    auto z = lm_logits(m, hidden.narrow(0, start, n)) / temperatures.narrow(0, start, n).unsqueeze(1);
    auto logp = at::log_softmax(z, -1);
    logprobs.push_back(logp.gather(1, labels.narrow(0, start, n).unsqueeze(1)).squeeze(1));
    if (entropy_out) {
      at::NoGradGuard no_grad;
      entropies.push_back(-(logp.exp() * logp).sum(-1));
    }
  }
  if (entropy_out) *entropy_out = N ? at::cat(entropies) : at::zeros({0}, hidden.options().dtype(m.compute_dtype()));
  return N ? at::cat(logprobs) : at::zeros({0}, hidden.options().dtype(m.compute_dtype()));
}

// ---- inputs -----------------------------------------------------------------------------------

at::Tensor token_tensor(const Model& m, const int32_t* ids, int64_t n, const char* what) {
  require(ids != nullptr || n == 0, std::string(what) + " is null");
  const int64_t V = m.cfg.vocab_size;
  for (int64_t i = 0; i < n; ++i)
    require(ids[i] >= 0 && ids[i] < V, std::string(what) + "[" + std::to_string(i) + "] = " + std::to_string(ids[i]) +
                                           " is outside the vocabulary (size " + std::to_string(V) + ")");
  auto t = at::from_blob(const_cast<int32_t*>(ids), {n}, at::kInt).to(at::kLong);
  return t.to(m.device);
}

at::Tensor packed_positions(const Model& m, const std::vector<int64_t>& sample_lengths, const std::vector<int64_t>& parents) {
  std::vector<int64_t> pos;
  for (size_t s = 0; s < sample_lengths.size(); ++s) {
    const int64_t p = parent_of(parents, s), first = p >= 0 ? sample_lengths[p] : 0;
    for (int64_t i = 0; i < sample_lengths[s]; ++i) pos.push_back(first + i);
  }
  return at::tensor(pos, at::kLong).to(m.device);
}

}  // namespace rlx
