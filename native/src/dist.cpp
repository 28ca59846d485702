// Data-parallel process groups over PyTorch's own c10d (DESIGN §7 "Distributed"): a store for the
// rendezvous (TCPStore, or FileStore on a shared filesystem), Gloo on CPU, NCCL on CUDA builds.
// The trainer ranks use it for four things: the gradient all-reduce after backward, the step's
// token counts before the first micro-batch, identical weights at start (broadcast or verify),
// and barriers.
//
// Why the guards: Gloo's header needs libgloo-dev and -DUSE_C10D_GLOO (build.ts adds it when the
// headers exist), NCCL needs a CUDA libtorch and nccl.h. Without them the shim still builds and
// every call here fails with a message saying what was missing.
//
// Why each collective is waited on here and wrapped: c10d reports a dead peer as a bare socket
// error from a worker thread ("Connection closed by peer"), and a peer that stopped answering as
// a timeout. The message a user needs names this rank, the call, the timeout and what to look at;
// and after one failure the pairs are broken, so the group refuses further calls instead of
// hanging or reporting stale errors.
#include "model.h"

#if defined(USE_C10D_GLOO)
#include <torch/csrc/distributed/c10d/ProcessGroupGloo.hpp>
#define RLX_GLOO 1
#endif
// NCCL only where its headers and CUDA's are on the include path (build.ts does not add them yet:
// pip torch keeps nccl.h under site-packages/nvidia/nccl/include), so a GPU build never breaks here.
#if defined(RLX_CUDA) && __has_include(<nccl.h>) && __has_include(<cuda_runtime_api.h>) && \
    __has_include(<torch/csrc/distributed/c10d/ProcessGroupNCCL.hpp>)
#ifndef USE_C10D_NCCL
#define USE_C10D_NCCL
#endif
#include <torch/csrc/distributed/c10d/ProcessGroupNCCL.hpp>
#define RLX_NCCL 1
#endif
#if defined(RLX_GLOO) || defined(RLX_NCCL)
#define RLX_C10D 1
#include <torch/csrc/distributed/c10d/FileStore.hpp>
#include <torch/csrc/distributed/c10d/TCPStore.hpp>
#endif

#include <chrono>
#include <cstdlib>

namespace rlx {
namespace {

bool backend_built(const std::string& backend) {
#if defined(RLX_GLOO)
  if (backend == "gloo") return true;
#endif
#if defined(RLX_NCCL)
  if (backend == "nccl") return at::hasCUDA();
#endif
  return false;
}

std::string not_built(const std::string& backend) {
  if (backend == "gloo")
    return "this shim was built without c10d Gloo (gloo headers were missing at build time): install libgloo-dev "
           "(`apt-get install -y libgloo-dev`) and rebuild with `bun build.ts --shim`";
  return "this shim has no NCCL process groups: it needs a CUDA libtorch with nccl.h at build time (a CPU build "
         "has none); use backend \"gloo\" on CPU";
}

#if defined(RLX_C10D)

// In 1.13 the process group classes derive from ProcessGroup; in 2.x they are Backends.
#if TORCH_VERSION_MAJOR >= 2
using Backend = c10d::Backend;
#else
using Backend = c10d::ProcessGroup;
#endif

struct Group {
  c10::intrusive_ptr<c10d::Store> store;
  c10::intrusive_ptr<Backend> pg;
  std::string backend;
  int rank = 0, world = 1;
  int64_t timeout_ms = 0;
  at::Device device = at::kCPU;
  std::string failure;  // the first failed call; the group refuses every call after it
};

Group& get_group(void* handle) {
  auto& g = *get<Group>(handle, Kind::Group);
  require(g.failure.empty(), "this process group failed earlier and cannot be used (" + g.failure +
                                 "); end every rank and restart them (rlx train --resume)");
  return g;
}

std::string who(const Group& g) { return "rank " + std::to_string(g.rank) + " of " + std::to_string(g.world); }

std::string message_of(std::exception_ptr error) {
  try {
    std::rethrow_exception(error);
  } catch (const c10::Error& e) {
    return e.what_without_backtrace();
  } catch (const std::exception& e) {
    return e.what();
  } catch (...) {
    return "unknown error";
  }
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

// Launching can fail too (a broken pair): the same message and the same failed state.
template <typename Launch>
c10::intrusive_ptr<c10d::Work> launch(Group& g, const std::string& what, Launch&& fn) {
  try {
    return fn();
  } catch (...) {
    g.failure = who(g) + ": " + what + " failed: " + message_of(std::current_exception());
    throw std::runtime_error(g.failure);
  }
}

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

bool is_loopback(const std::string& host) { return host == "127.0.0.1" || host == "localhost" || host == "::1"; }

#if defined(RLX_GLOO)
// Where Gloo listens: GLOO_SOCKET_IFNAME (as in PyTorch) wins; a loopback or file rendezvous stays
// on 127.0.0.1 (one machine; the feasibility recipe); otherwise this host's own address.
std::shared_ptr<::gloo::transport::Device> gloo_device(const std::string& store, const std::string& address) {
  if (const char* ifname = std::getenv("GLOO_SOCKET_IFNAME"); ifname && *ifname)
    return c10d::ProcessGroupGloo::createDeviceForInterface(ifname);
  if (store == "file" || is_loopback(address)) return c10d::ProcessGroupGloo::createDeviceForHostname("127.0.0.1");
  return c10d::ProcessGroupGloo::createDefaultDevice();
}
#endif

c10::intrusive_ptr<c10d::Store> make_store(const std::string& kind, const std::string& address, int port, int rank,
                                           int world, std::chrono::milliseconds timeout) {
  if (kind == "tcp") {
    require(port > 0 && port < 65536, "tcp store port must be in 1..65535, got " + std::to_string(port));
    c10d::TCPStoreOptions o;
    o.port = static_cast<std::uint16_t>(port);
    o.isServer = rank == 0;
    o.numWorkers = world;
    o.waitWorkers = false;  // the process group's rendezvous waits for everyone, under the same timeout
    o.timeout = timeout;
    return c10::make_intrusive<c10d::TCPStore>(address, o);
  }
  auto store = c10::make_intrusive<c10d::FileStore>(address, world);
  store->setTimeout(timeout);
  return store;
}

// Consecutive parameters grouped so each bucket holds about `cap` elements (at least one parameter).
std::vector<std::vector<size_t>> buckets_of(const Model& m, int64_t cap) {
  std::vector<std::vector<size_t>> buckets(1);
  int64_t filled = 0;
  for (size_t i = 0; i < m.params.size(); ++i) {
    int64_t n = m.params[i].second.numel();
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

#endif  // RLX_C10D

}  // namespace
}  // namespace rlx

using namespace rlx;

RLX_API int rlx_dist_available(const char* backend) {
  RLX_TRY(-1, {
    require(backend != nullptr, "backend is null (\"gloo\" or \"nccl\")");
    return backend_built(backend) ? 1 : 0;
  })
}

RLX_API void* rlx_dist_create(const char* backend, const char* store, const char* address, int port, int rank, int world_size,
                              int64_t timeout_ms) {
  RLX_TRY(nullptr, {
    require(backend && store && address, "backend, store and address must not be null");
    const std::string b = backend, kind = store, addr = address;
    require(b == "gloo" || b == "nccl", "unknown backend \"" + b + "\" (\"gloo\" on CPU, \"nccl\" on CUDA)");
    require(kind == "tcp" || kind == "file", "unknown store \"" + kind + "\" (\"tcp\" or \"file\")");
    require(!addr.empty(), kind == "tcp" ? "tcp store needs a host address" : "file store needs a path");
    require(world_size >= 1, "world_size must be >= 1, got " + std::to_string(world_size));
    require(rank >= 0 && rank < world_size,
            "rank must be in 0.." + std::to_string(world_size - 1) + ", got " + std::to_string(rank));
    require(timeout_ms > 0, "timeout_ms must be > 0, got " + std::to_string(timeout_ms));
    require(backend_built(b), not_built(b));
#if defined(RLX_C10D)
    auto g = std::make_unique<Group>();
    g->backend = b, g->rank = rank, g->world = world_size, g->timeout_ms = timeout_ms;
    const auto timeout = std::chrono::milliseconds(timeout_ms);
    const std::string where = kind == "tcp" ? "tcp://" + addr + ":" + std::to_string(port) : "file " + addr;
    try {
      g->store = make_store(kind, addr, port, rank, world_size, timeout);
    } catch (const ArgError&) {
      throw;
    } catch (...) {
      throw std::runtime_error(who(*g) + ": cannot join the c10d store " + where + " within " + std::to_string(timeout_ms) +
                               " ms: " + message_of(std::current_exception()));
    }
    try {
      if (b == "gloo") {
#if defined(RLX_GLOO)
        auto opts = c10d::ProcessGroupGloo::Options::create(timeout);
        opts->devices.push_back(gloo_device(kind, addr));
        g->pg = c10::make_intrusive<c10d::ProcessGroupGloo>(g->store, rank, world_size, opts);
#endif
      } else {
#if defined(RLX_NCCL)
        auto opts = c10d::ProcessGroupNCCL::Options::create();
        opts->timeout = timeout;
        g->pg = c10::make_intrusive<c10d::ProcessGroupNCCL>(g->store, rank, world_size, opts);
        g->device = at::Device(at::kCUDA);  // the current device: one GPU per rank (CUDA_VISIBLE_DEVICES)
#endif
      }
    } catch (...) {
      throw std::runtime_error(who(*g) + ": the " + b + " rendezvous over " + where + " failed (did every rank start, with "
                               "the same world size and a fresh store, within " + std::to_string(timeout_ms) +
                               " ms?): " + message_of(std::current_exception()));
    }
    register_handle(g.get(), Kind::Group);
    return static_cast<void*>(g.release());
#else
    return nullptr;  // unreachable: backend_built() is false without c10d
#endif
  })
}

#if defined(RLX_C10D)

RLX_API int rlx_dist_free(void* group) {
  RLX_TRY(-1, {
    auto* g = get<Group>(group, Kind::Group);  // a failed group can still be freed
    unregister_handle(g, Kind::Group);
    delete g;
    return 0;
  })
}

RLX_API int rlx_dist_allreduce_grads(void* group, void* model, int64_t bucket_bytes) {
  RLX_TRY(-1, {
    auto& g = get_group(group);
    auto& m = get_model(model);
    require(m.device.type() == g.device.type(), "the model is on " + m.device.str() + " but this " + g.backend +
                                                    " group reduces on " + g.device.str());
    at::NoGradGuard no_grad;
    // float64 models reduce in float64; every other dtype in float32 (bf16 sums lose too much).
    const auto rdt = m.dtype == at::kDouble ? at::kDouble : at::kFloat;
    const auto opts = m.opts(rdt);
    const int64_t cap = std::max<int64_t>(1, (bucket_bytes > 0 ? bucket_bytes : int64_t(25) << 20) / int64_t(c10::elementSize(rdt)));
    auto buckets = buckets_of(m, cap);
    std::vector<std::vector<at::Tensor>> flats(buckets.size());
    std::vector<c10::intrusive_ptr<c10d::Work>> works;
    for (size_t b = 0; b < buckets.size(); ++b) {
      std::vector<at::Tensor> parts;
      for (size_t i : buckets[b]) {
        const auto& p = m.params[i].second;
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
        auto& p = m.params[i].second;
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

RLX_API int rlx_dist_allreduce(void* group, void* data, int dtype, int64_t n, int op) {
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

RLX_API int rlx_dist_broadcast_params(void* group, void* model, int root) {
  RLX_TRY(-1, {
    auto& g = get_group(group);
    auto& m = get_model(model);
    require(root >= 0 && root < g.world, "root must be in 0.." + std::to_string(g.world - 1) + ", got " + std::to_string(root));
    at::NoGradGuard no_grad;
    // As raw bytes: bit-exact for every parameter dtype, and every backend supports uint8.
    const int64_t elem = static_cast<int64_t>(c10::elementSize(m.dtype));
    auto buckets = buckets_of(m, (int64_t(25) << 20) / elem);
    std::vector<std::vector<at::Tensor>> flats(buckets.size());
    std::vector<c10::intrusive_ptr<c10d::Work>> works;
    const std::string what = "parameter broadcast from rank " + std::to_string(root);
    for (size_t b = 0; b < buckets.size(); ++b) {
      std::vector<at::Tensor> parts;
      for (size_t i : buckets[b]) parts.push_back(m.params[i].second.detach().contiguous().reshape(-1).view(at::kByte));
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
        auto& p = m.params[i].second;
        const int64_t bytes = p.numel() * elem;
        p.copy_(flats[b][0].narrow(0, offset, bytes).view(p.scalar_type()).view(p.sizes()));
        offset += bytes;
      }
    }
    return 0;
  })
}

RLX_API int rlx_dist_verify_params(void* group, void* model) {
  RLX_TRY(-1, {
    auto& g = get_group(group);
    auto& m = get_model(model);
    at::NoGradGuard no_grad;
    std::vector<at::Tensor> digests;
    for (const auto& [name, p] : m.params) digests.push_back(digest(p));
    auto low = at::stack(digests).to(g.device), high = low.clone();
    std::vector<at::Tensor> lows{low}, highs{high};
    std::vector<c10::intrusive_ptr<c10d::Work>> works{allreduce(g, lows, c10d::ReduceOp::MIN, "parameter check"),
                                                      allreduce(g, highs, c10d::ReduceOp::MAX, "parameter check")};
    wait_all(g, "parameter check", works);
    auto differs = lows[0].ne(highs[0]).to(at::kCPU);
    const int64_t count = differs.sum().item<int64_t>();
    if (count > 0) {
      const int64_t first = differs.nonzero()[0][0].item<int64_t>();
      throw std::runtime_error(who(g) + ": " + std::to_string(count) + " of " + std::to_string(m.params.size()) +
                               " parameters differ across ranks (first: " + m.params[static_cast<size_t>(first)].first +
                               "); load the same weights on every rank, or broadcast them from rank 0");
    }
    return 0;
  })
}

RLX_API int rlx_dist_barrier(void* group) {
  RLX_TRY(-1, {
    auto& g = get_group(group);
    std::vector<c10::intrusive_ptr<c10d::Work>> works{launch(g, "barrier", [&] { return g.pg->barrier(); })};
    wait_all(g, "barrier", works);
    return 0;
  })
}

#else  // no c10d backend compiled in: every call but create (which says why) is a handle error

RLX_API int rlx_dist_free(void* group) { RLX_TRY(-1, { get<void>(group, Kind::Group); return 0; }) }
RLX_API int rlx_dist_allreduce_grads(void* group, void*, int64_t) { RLX_TRY(-1, { get<void>(group, Kind::Group); return 0; }) }
RLX_API int rlx_dist_allreduce(void* group, void*, int, int64_t, int) { RLX_TRY(-1, { get<void>(group, Kind::Group); return 0; }) }
RLX_API int rlx_dist_broadcast_params(void* group, void*, int) { RLX_TRY(-1, { get<void>(group, Kind::Group); return 0; }) }
RLX_API int rlx_dist_verify_params(void* group, void*) { RLX_TRY(-1, { get<void>(group, Kind::Group); return 0; }) }
RLX_API int rlx_dist_barrier(void* group) { RLX_TRY(-1, { get<void>(group, Kind::Group); return 0; }) }

#endif
