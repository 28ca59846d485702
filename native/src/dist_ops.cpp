// The collectives on a process group (dist.cpp creates it). The trainer ranks use them for four
// things: the gradient all-reduce after backward, the step's token counts before the first
// micro-batch, identical weights at start (broadcast or verify), and barriers. Compiled only when
// the build has a c10d backend (dist.h); otherwise dist.cpp defines these entry points as errors.
//
// Why each collective is waited on here and wrapped: c10d reports a dead peer as a bare socket
// error from a worker thread ("Connection closed by peer"), and a peer that stopped answering as
// a timeout. The message a user needs names this rank, the call, the timeout and what to look at;
// and after one failure the pairs are broken, so the group refuses further calls instead of
// hanging or reporting stale errors.
#include "dist.h"
#include "model.h"

#if defined(RLX_C10D)

namespace rlx {

Group& get_group(void* handle) {
  auto& g = *get<Group>(handle, Kind::Group);
  require(g.failure.empty(), "this process group failed earlier and cannot be used (" + g.failure +
                                 "); end every rank and restart them (rlx train --resume)");
  return g;
}

// Waits for every launched piece of one call; the first error marks the group failed and is
// rethrown naming this rank and the call. Every work is waited for, so none is left queued.
void wait_all(Group& g, const std::string& what, std::vector<c10::intrusive_ptr<c10d::Work>>& works) {
  std::exception_ptr first;
  for (auto& w : works) {
    try {
      w->wait();
    } catch (...) {
      if (!first) first = std::current_exception();
    }
  }
  if (!first) return;
  g.failure = who(g) + ": " + what + " failed: " + message_of(first);
  throw std::runtime_error(g.failure + " (another rank exited, or did not reach the same call within timeout_ms = " +
                           std::to_string(g.timeout_ms) + "; see that rank's log)");
}

namespace {

c10d::ReduceOp reduce_op(int op) {
  switch (op) {
    case RLX_DIST_SUM: return c10d::ReduceOp::SUM;
    case RLX_DIST_MIN: return c10d::ReduceOp::MIN;
    case RLX_DIST_MAX: return c10d::ReduceOp::MAX;
  }
  throw ArgError("unknown reduce op " + std::to_string(op) + " (0 sum, 1 min, 2 max)");
}

c10::intrusive_ptr<c10d::Work> allreduce(Group& g, std::vector<at::Tensor>& tensors, c10d::ReduceOp op, const std::string& what) {
  return launch(g, what, [&] {
    c10d::AllreduceOptions opts;
    opts.reduceOp = op;
    return g.pg->allreduce(tensors, opts);
  });
}

// Consecutive parameters grouped so each bucket holds about `cap` elements (at least one parameter).
std::vector<std::vector<size_t>> buckets_of(const std::vector<std::pair<std::string, at::Tensor>>& params, int64_t cap) {
  std::vector<std::vector<size_t>> buckets(1);
  int64_t filled = 0;
  for (size_t i = 0; i < params.size(); ++i) {
    int64_t n = params[i].second.numel();
    if (!buckets.back().empty() && filled + n > cap) buckets.emplace_back(), filled = 0;
    buckets.back().push_back(i);
    filled += n;
  }
  return buckets;
}

// A 64-bit digest of a parameter's bits: its 16-bit words, each times a position weight below
// 2^17, summed in int64 (no overflow below 2^30 words per parameter). Exact and deterministic.
at::Tensor digest(const at::Tensor& p) {
  auto words = p.detach().contiguous().reshape(-1).view(at::kShort).to(at::kInt).bitwise_and(0xFFFF).to(at::kLong);
  auto weights = at::arange(words.numel(), words.options()).remainder(65521).add(1);
  return words.mul(weights).sum();
}

}  // namespace
}  // namespace rlx

using namespace rlx;

RLX_API int rlx_dist_allreduce_grads(rlx_group* group, rlx_model* model, int64_t bucket_bytes) {
  RLX_TRY(-1, {
    auto& g = get_group(group);
    auto& m = get_model(model);
    require(!m.shards || m.lora.rank, "the model is sharded: its gradients reach the slices by reduce-scatter (in the "
                                      "train step for \"full\", the optimizer step for \"optimizer\"), not by this all-reduce");
    require(m.device.type() == g.device.type(), "the model is on " + m.device.str() + " but this " + g.backend +
                                                    " group reduces on " + g.device.str());
    at::NoGradGuard no_grad;
    // float64 models reduce in float64; every other dtype in float32 (bf16 sums lose too much).
    const auto rdt = m.dtype == at::kDouble ? at::kDouble : at::kFloat;
    const auto opts = m.opts(rdt);
    const int64_t cap = std::max<int64_t>(1, (bucket_bytes > 0 ? bucket_bytes : int64_t(25) << 20) / int64_t(c10::elementSize(rdt)));
    const auto& params = m.trainable();  // the adapters only, when the model has LoRA
    auto buckets = buckets_of(params, cap);
    std::vector<std::vector<at::Tensor>> flats(buckets.size());
    std::vector<c10::intrusive_ptr<c10d::Work>> works;
    for (size_t b = 0; b < buckets.size(); ++b) {
      std::vector<at::Tensor> parts;
      for (size_t i : buckets[b]) {
        const auto& p = params[i].second;
        parts.push_back(p.grad().defined() ? p.grad().detach().reshape(-1).to(rdt) : at::zeros({p.numel()}, opts));
      }
      // One extra element carries this rank's non-finite-loss mark; its sum says whether any rank had one.
      if (b + 1 == buckets.size()) parts.push_back(at::full({1}, *m.nonfinite_loss ? 1.0 : 0.0, opts));
      flats[b].push_back(at::cat(parts));
      works.push_back(allreduce(g, flats[b], c10d::ReduceOp::SUM, "gradient all-reduce"));
    }
    wait_all(g, "gradient all-reduce", works);
    for (size_t b = 0; b < buckets.size(); ++b) {
      const auto& flat = flats[b][0];
      int64_t offset = 0;
      for (size_t i : buckets[b]) {
        auto& p = params[i].second;
        auto summed = flat.narrow(0, offset, p.numel()).view(p.sizes()).to(p.scalar_type());
        if (p.grad().defined()) p.mutable_grad().copy_(summed);
        else p.mutable_grad() = summed.clone();
        offset += p.numel();
      }
      if (b + 1 == buckets.size() && flat[offset].item<double>() > 0) *m.nonfinite_loss = true;
    }
    return 0;
  })
}

RLX_API int rlx_dist_allreduce(rlx_group* group, void* data, int dtype, int64_t n, int op) {
  RLX_TRY(-1, {
    auto& g = get_group(group);
    require(data != nullptr || n == 0, "data is null");
    require(n >= 0, "n must be >= 0");
    at::ScalarType st;
    if (dtype == RLX_F32) st = at::kFloat;
    else if (dtype == RLX_F64) st = at::kDouble;
    else if (dtype == RLX_I64) st = at::kLong;
    else throw ArgError("rlx_dist_allreduce: dtype must be RLX_F32 (0), RLX_F64 (3) or RLX_I64 (4), got " + std::to_string(dtype));
    auto red = reduce_op(op);
    std::vector<at::Tensor> tensors{at::from_blob(data, {n}, st).to(g.device, st, false, true)};
    std::vector<c10::intrusive_ptr<c10d::Work>> works{allreduce(g, tensors, red, "all-reduce of " + std::to_string(n) + " values")};
    wait_all(g, "all-reduce of " + std::to_string(n) + " values", works);
    auto host = tensors[0].to(at::kCPU).contiguous();
    std::memcpy(data, host.data_ptr(), static_cast<size_t>(n) * c10::elementSize(st));
    return 0;
  })
}

RLX_API int rlx_dist_broadcast_params(rlx_group* group, rlx_model* model, int root) {
  RLX_TRY(-1, {
    auto& g = get_group(group);
    auto& m = whole_model(model, "rlx_dist_broadcast_params");
    require(root >= 0 && root < g.world, "root must be in 0.." + std::to_string(g.world - 1) + ", got " + std::to_string(root));
    at::NoGradGuard no_grad;
    // As raw bytes: bit-exact for every parameter dtype, and every backend supports uint8. The base
    // parameters, then any LoRA adapters (float32 beside a bf16 base: one dtype per pass).
    const std::string what = "parameter broadcast from rank " + std::to_string(root);
    for (const auto* params : {&m.params, &m.lora.params}) {
      if (params->empty()) continue;
      const int64_t elem = static_cast<int64_t>(params->front().second.element_size());
      auto buckets = buckets_of(*params, (int64_t(25) << 20) / elem);
      std::vector<std::vector<at::Tensor>> flats(buckets.size());
      std::vector<c10::intrusive_ptr<c10d::Work>> works;
      for (size_t b = 0; b < buckets.size(); ++b) {
        std::vector<at::Tensor> parts;
        for (size_t i : buckets[b]) parts.push_back((*params)[i].second.detach().contiguous().reshape(-1).view(at::kByte));
        flats[b].push_back(at::cat(parts));
        works.push_back(launch(g, what, [&] {
          c10d::BroadcastOptions opts;
          opts.rootRank = root;
          return g.pg->broadcast(flats[b], opts);
        }));
      }
      wait_all(g, what, works);
      for (size_t b = 0; b < buckets.size(); ++b) {
        int64_t offset = 0;
        for (size_t i : buckets[b]) {
          auto& p = (*params)[i].second;
          const int64_t bytes = p.numel() * elem;
          p.copy_(flats[b][0].narrow(0, offset, bytes).view(p.scalar_type()).view(p.sizes()));
          offset += bytes;
        }
      }
    }
    return 0;
  })
}

RLX_API int rlx_dist_verify_params(rlx_group* group, rlx_model* model) {
  RLX_TRY(-1, {
    auto& g = get_group(group);
    auto& m = whole_model(model, "rlx_dist_verify_params");
    at::NoGradGuard no_grad;
    std::vector<at::Tensor> digests;
    std::vector<std::string> names;
    for (const auto* params : {&m.params, &m.lora.params})
      for (const auto& [name, p] : *params) digests.push_back(digest(p)), names.push_back(name);
    auto low = at::stack(digests).to(g.device), high = low.clone();
    std::vector<at::Tensor> lows{low}, highs{high};
    std::vector<c10::intrusive_ptr<c10d::Work>> works{allreduce(g, lows, c10d::ReduceOp::MIN, "parameter check"),
                                                      allreduce(g, highs, c10d::ReduceOp::MAX, "parameter check")};
    wait_all(g, "parameter check", works);
    auto differs = lows[0].ne(highs[0]).to(at::kCPU);
    const int64_t count = differs.sum().item<int64_t>();
    if (count > 0) {
      const int64_t first = differs.nonzero()[0][0].item<int64_t>();
      throw std::runtime_error(who(g) + ": " + std::to_string(count) + " of " + std::to_string(names.size()) +
                               " parameters differ across ranks (first: " + names[static_cast<size_t>(first)] +
                               "); load the same weights on every rank, or broadcast them from rank 0");
    }
    return 0;
  })
}

RLX_API int rlx_dist_barrier(rlx_group* group) {
  RLX_TRY(-1, {
    auto& g = get_group(group);
    run_collective(g, "barrier", [&] { return g.pg->barrier(); });
    return 0;
  })
}

#endif  // RLX_C10D
