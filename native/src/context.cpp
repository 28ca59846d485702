// Context parallelism (context.h): the zigzag split of a row, and attention over it as a custom
// autograd function. The blockwise math is flash attention's, written with ATen products:
//   forward, per query block:  S = q K^T / sqrt(D) (hidden keys -inf), lse = logsumexp(S),
//                              out = exp(S - lse) V
//   backward:                  P = exp(S - lse), dV += P^T dout, dP = dout V^T,
//                              dS = P (dP - rowsum(dout * out)), dq = dS K / sqrt(D),
//                              dK += dS^T q / sqrt(D)
// (Dao, "FlashAttention-2", 2023, Algorithm 2). Scores live one block at a time, in one buffer
// the blocks share, and a block's products read the gathered K/V in place (a strided matrix per kv
// head), so a block allocates only its [queries, head_dim] pieces.
#include <torch/csrc/autograd/custom_function.h>

#include "context.h"
#include "dist.h"
#include "model.h"
#include "shard.h"

namespace rlx {

namespace {

// Queries per block: at most 256, fewer when they see many keys, so one block's scores stay
// near 2^21 elements (8 MiB in float32) however long the row: the forward holds one such
// matrix, the backward two, beside activations that a split row has halved.
int64_t block_queries(int64_t heads, int64_t keys) {
  return std::clamp<int64_t>((int64_t{1} << 21) / std::max<int64_t>(1, heads * keys), 16, 256);
}

// Row position where chunk j of a row's 2C chunks starts: chunks of ceil(T / 2C) tokens, so only
// the last are short and the chunks in order, each padded to full size, are the row padded at its end.
int64_t chunk_start(const ContextRow& row, int64_t j) { return std::min(j * row.chunk, row.T); }

// Rank r's chunks of the row: r and 2C - 1 - r.
std::vector<int64_t> zigzag_tokens(const ContextRow& row) {
  const int64_t chunks = 2 * int64_t{row.world};
  std::vector<int64_t> out;
  for (int64_t j : {int64_t{row.rank}, chunks - 1 - row.rank})
    for (int64_t t = chunk_start(row, j); t < chunk_start(row, j + 1); ++t) out.push_back(t);
  return out;
}

at::Tensor long_tensor(const std::vector<int64_t>& v, const Model& m) { return at::tensor(v, at::kLong).to(m.device); }

#if defined(RLX_C10D)

// The whole row's K and V side by side, [T, G, 2D] in row order, from every rank's [n, G, 2D]:
// every rank's first chunk lands in chunks 0..C-1 of the row, its second in chunks 2C-1..C, so two
// all-gathers of chunk-sized pieces fill the row in place (padded at its end).
at::Tensor gather_kv(const ContextRow& row, const at::Tensor& kv_local) {
  auto& g = get_group(row.group);
  const int64_t chunks = 2 * int64_t{row.world}, c = row.chunk;
  auto full = at::empty({chunks * c, kv_local.size(1), kv_local.size(2)}, kv_local.options());
  const int64_t first = chunk_start(row, row.rank + 1) - chunk_start(row, row.rank);
  for (int half = 0; half < 2; ++half) {
    auto mine = half ? kv_local.narrow(0, first, kv_local.size(0) - first) : kv_local.narrow(0, 0, first);
    auto input = mine.size(0) == c ? mine.contiguous() : at::zeros({c, mine.size(1), mine.size(2)}, mine.options());
    if (mine.size(0) < c) input.narrow(0, 0, mine.size(0)).copy_(mine);
    std::vector<at::Tensor> inputs{input};
    std::vector<std::vector<at::Tensor>> outputs(1);
    for (int r = 0; r < row.world; ++r) outputs[0].push_back(full.narrow(0, (half ? chunks - 1 - r : r) * c, c));
    run_collective(g, "context-parallel all-gather of K/V", [&] { return g.pg->allgather(outputs, inputs); });
  }
  return full.narrow(0, 0, row.T);
}

#endif

// The key ranges a block sees in x_G_T_D: its parent's (possibly empty), then its own sample's up
// to its last query. Views, never copies.
std::pair<at::Tensor, at::Tensor> keys_of(const at::Tensor& x_G_T_D, const ContextRow::Block& b) {
  return {x_G_T_D.narrow(1, b.parent_start, b.parent_len), x_G_T_D.narrow(1, b.own_start, b.own_len)};
}

// out [G, M, P + O] = a [G, M, D] times the parent's and own keys [G, P|O, D] transposed.
void scores_into(at::Tensor& out, const at::Tensor& a, const std::pair<at::Tensor, at::Tensor>& keys) {
  const int64_t P = keys.first.size(1);
  if (P) {
    auto parent = out.narrow(2, 0, P);
    at::bmm_out(parent, a, keys.first.transpose(1, 2));
  }
  auto own = out.narrow(2, P, keys.second.size(1));
  at::bmm_out(own, a, keys.second.transpose(1, 2));
}

// a [G, M, P + O] times the parent's and own keys [G, P|O, D] -> [G, M, D].
at::Tensor times_keys(const at::Tensor& a, const std::pair<at::Tensor, at::Tensor>& keys) {
  const int64_t P = keys.first.size(1);
  auto out = at::bmm(a.narrow(2, P, keys.second.size(1)), keys.second);
  if (P) out.baddbmm_(a.narrow(2, 0, P), keys.first);
  return out;
}

// grad keys [G, P|O, D] += a [G, M, P + O] transposed times b [G, M, D], in place in x_G_T_D.
void add_to_keys(const std::pair<at::Tensor, at::Tensor>& grads, const at::Tensor& a, const at::Tensor& b) {
  const int64_t P = grads.first.size(1);
  auto own = grads.second;
  own.baddbmm_(a.narrow(2, P, own.size(1)).transpose(1, 2), b);
  if (P) {
    auto parent = grads.first;
    parent.baddbmm_(a.narrow(2, 0, P).transpose(1, 2), b);
  }
}

// Hides the keys a block's queries may not see in its scores [G, R, n, S]: the last n keys are the
// block's own queries' positions, and query i may not see the j-th of them when j > i.
void hide_future(at::Tensor& scores_G_R_n_S, int64_t n) {
  auto opts = at::TensorOptions().dtype(at::kLong).device(scores_G_R_n_S.device());
  auto future = at::arange(n, opts).unsqueeze(0) > at::arange(n, opts).unsqueeze(1);
  scores_G_R_n_S.narrow(3, scores_G_R_n_S.size(3) - n, n).masked_fill_(future, -INFINITY);
}

// K (at 0) or V (at D) of x [T, G, 2D] as a view [G, T, D]: each kv head's keys a row-major
// matrix (rows G * 2D apart) that a block's products read in place.
at::Tensor heads_view(const at::Tensor& x_T_G_2D, int64_t at, int64_t D) {
  return x_T_G_2D.narrow(2, at, D).permute({1, 0, 2});
}

// Rows at..at+n of x [N, H, D] with each kv head's R query heads as rows of one matrix: [G, R * n, D].
at::Tensor heads_first(const at::Tensor& x, int64_t at, int64_t n, int64_t G) {
  const int64_t R = x.size(1) / G, D = x.size(2);
  return x.narrow(0, at, n).reshape({n, G, R, D}).permute({1, 2, 0, 3}).reshape({G, R * n, D});
}

// The largest [G, R * n, S] score matrix of the row's blocks, in elements: one buffer of it is
// reused by every block, so the step does not allocate a block's scores anew each time.
int64_t most_scores(const ContextRow& row, int64_t H) {
  int64_t most = 0;
  for (const auto& b : row.blocks) most = std::max(most, H * b.n * (b.parent_len + b.own_len));
  return most;
}

at::Tensor scores_view(at::Tensor& buffer, int64_t G, int64_t M, const ContextRow::Block& b) {
  return buffer.narrow(0, 0, G * M * (b.parent_len + b.own_len)).view({G, M, b.parent_len + b.own_len});
}

struct ContextAttention : torch::autograd::Function<ContextAttention> {
  // q [n, H, D], kv [n, G, 2D] (K then V) in the compute dtype -> [n, H, D].
  static at::Tensor forward(torch::autograd::AutogradContext* ctx, const at::Tensor& q, const at::Tensor& kv,
                            const ContextRowPtr& row) {
#if defined(RLX_C10D)
    const int64_t n = q.size(0), H = q.size(1), D = q.size(2), G = kv.size(1), R = H / G;
    const double scale = 1.0 / std::sqrt(double(D));
    auto kv_T_G_2D = gather_kv(*row, kv);
    auto K = heads_view(kv_T_G_2D, 0, D), V = heads_view(kv_T_G_2D, D, D);
    auto out = at::empty_like(q);
    auto lse = at::empty({n, H}, q.options());
    auto buffer = at::empty({most_scores(*row, H)}, q.options());
    for (const auto& b : row->blocks) {
      auto scores = scores_view(buffer, G, R * b.n, b);
      scores_into(scores, heads_first(q, b.at, b.n, G), keys_of(K, b));
      auto scores_G_R_n_S = scores.mul_(scale).view({G, R, b.n, -1});
      hide_future(scores_G_R_n_S, b.n);
      // lse = max + log(sum(exp(S - max))), in place: at::logsumexp would allocate S's size anew.
      auto max_G_R_n = at::amax(scores_G_R_n_S, -1, true);
      auto sum_G_R_n = scores_G_R_n_S.sub_(max_G_R_n).exp_().sum(-1, true);
      auto probs = scores_G_R_n_S.div_(sum_G_R_n).view({G, R * b.n, -1});
      auto lse_G_R_n = max_G_R_n.add_(sum_G_R_n.log_()).squeeze(-1);
      auto o = times_keys(probs, keys_of(V, b)).view({G, R, b.n, D});
      out.narrow(0, b.at, b.n).copy_(o.permute({2, 0, 1, 3}).reshape({b.n, H, D}));
      lse.narrow(0, b.at, b.n).copy_(lse_G_R_n.permute({2, 0, 1}).reshape({b.n, H}));
    }
    // The gathered K/V are not kept: the backward gathers them again from this rank's kv, so a
    // layer's whole-row K/V live only while its own attention runs, not beside the MLP's
    // activations (recomputed or kept) and not once per layer without checkpointing.
    ctx->save_for_backward({q, kv, out, lse});
    ctx->saved_data["row"] = at::IValue::make_capsule(c10::intrusive_ptr<torch::CustomClassHolder>(row));
    return out;
#else
    (void)ctx, (void)kv, (void)row;
    throw ArgError("context parallelism needs a shim built with a c10d backend (gloo or nccl)");
    return q;
#endif
  }

  static torch::autograd::variable_list backward(torch::autograd::AutogradContext* ctx,
                                                 torch::autograd::variable_list grads) {
#if defined(RLX_C10D)
    auto saved = ctx->get_saved_variables();
    const auto &q = saved[0], &out = saved[2], &lse = saved[3];
    auto row = c10::static_intrusive_pointer_cast<ContextRow>(ctx->saved_data["row"].toCapsule());
    const auto kv_T_G_2D = gather_kv(*row, saved[1]);
    const int64_t H = q.size(1), D = q.size(2), G = kv_T_G_2D.size(1), R = H / G;
    const double scale = 1.0 / std::sqrt(double(D));
    auto dout = grads[0].contiguous();
    auto K = heads_view(kv_T_G_2D, 0, D), V = heads_view(kv_T_G_2D, D, D);
    auto dq = at::empty_like(q);
    auto dkv_T_G_2D = at::zeros_like(kv_T_G_2D);
    auto dK = heads_view(dkv_T_G_2D, 0, D), dV = heads_view(dkv_T_G_2D, D, D);
    const int64_t most = most_scores(*row, H);
    auto probs_buffer = at::empty({most}, q.options()), dprobs_buffer = at::empty({most}, q.options());
    for (const auto& b : row->blocks) {
      auto q_b = heads_first(q, b.at, b.n, G), dout_b = heads_first(dout, b.at, b.n, G);
      auto delta = (dout_b * heads_first(out, b.at, b.n, G)).sum(-1, true);  // [G, R * n, 1]
      auto lse_b = lse.narrow(0, b.at, b.n).view({b.n, G, R}).permute({1, 2, 0}).reshape({G, R * b.n, 1});
      auto probs = scores_view(probs_buffer, G, R * b.n, b);
      scores_into(probs, q_b, keys_of(K, b));
      auto scores_G_R_n_S = probs.mul_(scale).view({G, R, b.n, -1});
      hide_future(scores_G_R_n_S, b.n);
      probs.sub_(lse_b).exp_();  // [G, R * n, S]
      add_to_keys(keys_of(dV, b), probs, dout_b);
      auto dprobs = scores_view(dprobs_buffer, G, R * b.n, b);
      scores_into(dprobs, dout_b, keys_of(V, b));
      auto dS = probs.mul_(dprobs.sub_(delta)).mul_(scale);
      auto dq_b = times_keys(dS, keys_of(K, b)).view({G, R, b.n, D}).permute({2, 0, 1, 3}).reshape({b.n, H, D});
      dq.narrow(0, b.at, b.n).copy_(dq_b);
      add_to_keys(keys_of(dK, b), dS, q_b);
    }
    context_sum(*row, dkv_T_G_2D, "context-parallel all-reduce of the K/V gradient");
    return {dq, dkv_T_G_2D.index_select(0, row->local), torch::autograd::Variable()};
#else
    (void)ctx, (void)grads;
    return {};
#endif
  }
};

}  // namespace

ContextRowPtr split_row(const Model& m, void* group, const std::vector<int64_t>& lengths,
                        const std::vector<int64_t>& parents) {
  auto row = c10::make_intrusive<ContextRow>();
  row->group = group;
  std::tie(row->rank, row->world) = group_rank_world(group);
  for (auto n : lengths) row->T += n;
  row->chunk = std::max<int64_t>(1, (row->T + 2 * row->world - 1) / (2 * row->world));
  const auto local = zigzag_tokens(*row);
  row->local = long_tensor(local, m);

  std::vector<int64_t> starts, sample_of(row->T);
  for (size_t s = 0, at = 0; s < lengths.size(); at += lengths[s++]) {
    starts.push_back(static_cast<int64_t>(at));
    for (int64_t i = 0; i < lengths[s]; ++i) sample_of[at + i] = static_cast<int64_t>(s);
  }
  const int64_t heads = m.cfg.num_attention_heads;
  for (size_t i = 0; i < local.size();) {
    const int64_t s = sample_of[local[i]], p = parents.empty() ? -1 : parents[s];
    const int64_t parent_len = p >= 0 ? lengths[p] : 0, offset = local[i] - starts[s];
    const int64_t cap = block_queries(heads, parent_len + offset + 256);
    size_t j = i + 1;
    while (j < local.size() && int64_t(j - i) < cap && local[j] == local[j - 1] + 1 && sample_of[local[j]] == s) ++j;
    const int64_t n = static_cast<int64_t>(j - i);
    row->blocks.push_back({static_cast<int64_t>(i), n, p >= 0 ? starts[p] : 0, parent_len, starts[s], offset + n});
    i = j;
  }
  return row;
}

at::Tensor context_attention(const Model& m, const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                             const ContextRowPtr& row) {
  const auto cd = m.compute_dtype();
  const int64_t n = q.size(0), H = q.size(1), D = q.size(2);
  auto out = ContextAttention::apply(q.to(cd), at::cat({k, v}, 2).to(cd), row);
  return out.to(q.scalar_type()).view({n, H * D});
}

void context_sum(const ContextRow& row, at::Tensor& t, const std::string& what) {
#if defined(RLX_C10D)
  auto& g = get_group(row.group);
  std::vector<at::Tensor> tensors{t};
  run_collective(g, what, [&] { return g.pg->allreduce(tensors); });
#else
  (void)row, (void)t;
  throw ArgError(what + ": this shim has no c10d backend");
#endif
}

}  // namespace rlx
