// Context parallelism (context.h): the zigzag split of a row, and attention over it as a custom
// autograd function. The blockwise math is flash attention's, written with ATen products:
//   forward, per query block:  S = q K^T / sqrt(D) (hidden keys -inf), lse = logsumexp(S),
//                              out = exp(S - lse) V
//   backward:                  P = exp(S - lse), dV += P^T dout, dP = dout V^T,
//                              dS = P (dP - rowsum(dout * out)), dq = dS K / sqrt(D),
//                              dK += dS^T q / sqrt(D)
// (Dao, "FlashAttention-2", 2023, Algorithm 2). Scores live one block at a time.
#include <torch/csrc/autograd/custom_function.h>

#include "context.h"
#include "dist.h"
#include "model.h"
#include "shard.h"

namespace rlx {

namespace {

// Queries per block: at most 256, fewer when they see many keys, so one block's scores stay
// near 2^22 elements (16 MB in float32) however long the row: the forward holds one such
// matrix, the backward two, beside activations that a split row has halved.
int64_t block_queries(int64_t heads, int64_t keys) {
  return std::clamp<int64_t>((int64_t{1} << 22) / std::max<int64_t>(1, heads * keys), 16, 256);
}

// Rank r's chunks of the row: r and 2C - 1 - r of 2C near-equal ones.
std::vector<int64_t> zigzag_tokens(int64_t T, int rank, int world) {
  const int64_t chunks = 2 * int64_t{world};
  auto edge = [&](int64_t j) { return j * T / chunks; };
  std::vector<int64_t> out;
  for (int64_t j : {int64_t{rank}, chunks - 1 - rank})
    for (int64_t t = edge(j); t < edge(j + 1); ++t) out.push_back(t);
  return out;
}

at::Tensor long_tensor(const std::vector<int64_t>& v, const Model& m) { return at::tensor(v, at::kLong).to(m.device); }

#if defined(RLX_C10D)

// The whole row's K and V side by side, [T, G, 2D], from every rank's [n, G, 2D].
at::Tensor gather_kv(const ContextRow& row, const at::Tensor& kv_local) {
  auto& g = get_group(row.group);
  const int64_t n = kv_local.size(0);
  auto input = at::zeros({row.most, kv_local.size(1), kv_local.size(2)}, kv_local.options());
  input.narrow(0, 0, n).copy_(kv_local);
  auto buffer = at::empty({row.world * row.most, kv_local.size(1), kv_local.size(2)}, kv_local.options());
  std::vector<at::Tensor> inputs{input};
  std::vector<std::vector<at::Tensor>> outputs(1);
  for (int r = 0; r < row.world; ++r) outputs[0].push_back(buffer.narrow(0, r * row.most, row.most));
  run_collective(g, "context-parallel all-gather of K/V", [&] { return g.pg->allgather(outputs, inputs); });
  return buffer.index_select(0, row.order);
}

#endif

// The keys block b sees, [G, S, D] of x_T_G_D: its parent's, then its own sample's up to its last query.
at::Tensor keys_of(const at::Tensor& x_T_G_D, const ContextRow::Block& b) {
  auto own = x_T_G_D.narrow(0, b.own_start, b.own_len);
  auto keys = b.parent_len ? at::cat({x_T_G_D.narrow(0, b.parent_start, b.parent_len), own}) : own;
  return keys.permute({1, 0, 2});
}

// Adds a block's key gradient [G, S, D] back into the rows it came from in grad_T_G_D.
void add_keys(at::Tensor& grad_T_G_D, const at::Tensor& g_G_S_D, const ContextRow::Block& b) {
  auto g = g_G_S_D.permute({1, 0, 2});
  if (b.parent_len) grad_T_G_D.narrow(0, b.parent_start, b.parent_len).add_(g.narrow(0, 0, b.parent_len));
  grad_T_G_D.narrow(0, b.own_start, b.own_len).add_(g.narrow(0, b.parent_len, b.own_len));
}

// [n, S] bool, the keys query i of a block may not see (broadcast over its scores [G, R, n, S]).
at::Tensor hidden_keys(const ContextRow::Block& b, const at::TensorOptions& opts) {
  const int64_t S = b.parent_len + b.own_len;
  return at::arange(S, opts).unsqueeze(0) > at::arange(S - b.n, S, opts).unsqueeze(1);
}

// Rows at..at+n of x [N, H, D] with each kv head's R query heads as rows of one matrix: [G, R * n, D].
at::Tensor heads_first(const at::Tensor& x, int64_t at, int64_t n, int64_t G) {
  const int64_t R = x.size(1) / G, D = x.size(2);
  return x.narrow(0, at, n).reshape({n, G, R, D}).permute({1, 2, 0, 3}).reshape({G, R * n, D});
}

struct ContextAttention : torch::autograd::Function<ContextAttention> {
  // q [n, H, D], kv [n, G, 2D] (K then V) in the compute dtype -> [n, H, D].
  static at::Tensor forward(torch::autograd::AutogradContext* ctx, const at::Tensor& q, const at::Tensor& kv,
                            const ContextRowPtr& row) {
#if defined(RLX_C10D)
    const int64_t n = q.size(0), H = q.size(1), D = q.size(2), G = kv.size(1), R = H / G;
    const double scale = 1.0 / std::sqrt(double(D));
    auto full = gather_kv(*row, kv);  // [T, G, 2D]
    auto K = full.narrow(2, 0, D), V = full.narrow(2, D, D);
    auto out = at::empty_like(q);
    auto lse = at::empty({n, H}, q.options());
    auto opts = at::TensorOptions().dtype(at::kLong).device(q.device());
    for (const auto& b : row->blocks) {
      auto scores = at::bmm(heads_first(q, b.at, b.n, G), keys_of(K, b).transpose(1, 2)).mul_(scale).view({G, R, b.n, -1});
      scores.masked_fill_(hidden_keys(b, opts), -INFINITY);
      auto lse_G_R_n = at::logsumexp(scores, -1);
      auto probs = scores.sub_(lse_G_R_n.unsqueeze(-1)).exp_().view({G, R * b.n, -1});
      auto o = at::bmm(probs, keys_of(V, b)).view({G, R, b.n, D});
      out.narrow(0, b.at, b.n).copy_(o.permute({2, 0, 1, 3}).reshape({b.n, H, D}));
      lse.narrow(0, b.at, b.n).copy_(lse_G_R_n.permute({2, 0, 1}).reshape({b.n, H}));
    }
    ctx->save_for_backward({q, full, out, lse});
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
    const auto &q = saved[0], &full = saved[1], &out = saved[2], &lse = saved[3];
    auto row = c10::static_intrusive_pointer_cast<ContextRow>(ctx->saved_data["row"].toCapsule());
    const int64_t H = q.size(1), D = q.size(2), G = full.size(1), R = H / G;
    const double scale = 1.0 / std::sqrt(double(D));
    auto dout = grads[0].contiguous();
    auto K = full.narrow(2, 0, D), V = full.narrow(2, D, D);
    auto dq = at::zeros_like(q);
    auto dfull = at::zeros_like(full);
    auto dK = dfull.narrow(2, 0, D), dV = dfull.narrow(2, D, D);
    auto opts = at::TensorOptions().dtype(at::kLong).device(q.device());
    for (const auto& b : row->blocks) {
      auto q_b = heads_first(q, b.at, b.n, G), dout_b = heads_first(dout, b.at, b.n, G);
      auto delta = (dout_b * heads_first(out, b.at, b.n, G)).sum(-1, true);  // [G, R * n, 1]
      auto lse_b = lse.narrow(0, b.at, b.n).view({b.n, G, R}).permute({1, 2, 0}).reshape({G, R * b.n, 1});
      auto Kb = keys_of(K, b), Vb = keys_of(V, b);
      auto scores = at::bmm(q_b, Kb.transpose(1, 2)).mul_(scale);
      scores.view({G, R, b.n, -1}).masked_fill_(hidden_keys(b, opts), -INFINITY);
      auto probs = scores.sub_(lse_b).exp_();  // [G, R * n, S]
      add_keys(dV, at::bmm(probs.transpose(1, 2), dout_b), b);
      auto dS = probs.mul_(at::bmm(dout_b, Vb.transpose(1, 2)).sub_(delta)).mul_(scale);
      auto dq_b = at::bmm(dS, Kb).view({G, R, b.n, D}).permute({2, 0, 1, 3}).reshape({b.n, H, D});
      dq.narrow(0, b.at, b.n).copy_(dq_b);
      add_keys(dK, at::bmm(dS.transpose(1, 2), q_b), b);
    }
    context_sum(*row, dfull, "context-parallel all-reduce of the K/V gradient");
    return {dq, dfull.index_select(0, row->local), torch::autograd::Variable()};
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
  for (int r = 0; r < row->world; ++r)
    row->most = std::max<int64_t>(row->most, zigzag_tokens(row->T, r, row->world).size());
  std::vector<int64_t> order(row->T);
  for (int r = 0; r < row->world; ++r) {
    auto tokens = zigzag_tokens(row->T, r, row->world);
    for (size_t i = 0; i < tokens.size(); ++i) order[tokens[i]] = r * row->most + static_cast<int64_t>(i);
  }
  const auto local = zigzag_tokens(row->T, row->rank, row->world);
  row->local = long_tensor(local, m), row->order = long_tensor(order, m);

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
