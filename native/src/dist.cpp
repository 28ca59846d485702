// Data-parallel process groups over PyTorch's own c10d: a store for the rendezvous (TCPStore, or
// FileStore on a shared filesystem), Gloo on CPU, NCCL on CUDA builds. This file creates and frees
// groups (and says which backends this build has); the collectives the trainer ranks run on a
// group are in dist_ops.cpp. In a build without c10d (see dist.h) the collectives' entry points
// are defined here too, at the end, as handle errors.
#include "dist.h"

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

}  // namespace

bool nccl_compiled() {
#if defined(RLX_NCCL)
  return true;
#else
  return false;
#endif
}

namespace {

std::string not_built(const std::string& backend) {
  if (backend == "gloo")
    return "this shim was built without c10d Gloo (gloo headers were missing at build time): install libgloo-dev "
           "(`apt-get install -y libgloo-dev`) and rebuild with `bun build.ts --shim`";
  return "this shim has no NCCL process groups: it needs a CUDA libtorch with nccl.h at build time (a CPU build "
         "has none); use backend \"gloo\" on CPU";
}

#if defined(RLX_C10D)

bool is_loopback(const std::string& host) { return host == "127.0.0.1" || host == "localhost" || host == "::1"; }

#if defined(RLX_GLOO)
// Where Gloo listens: GLOO_SOCKET_IFNAME (as in PyTorch) wins; a loopback or file rendezvous stays
// on 127.0.0.1 (one machine); otherwise this host's own address.
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
#if TORCH_VERSION_MAJOR > 2 || (TORCH_VERSION_MAJOR == 2 && TORCH_VERSION_MINOR >= 4)
    // The libuv server (the default since 2.4) would bind libtorch's uv_* calls to the host process's own:
    // Bun exports stubs of them for N-API, and its uv_loop_init aborts the process. The classic
    // server has no libuv.
    o.useLibUV = false;
#endif
    return c10::make_intrusive<c10d::TCPStore>(address, o);
  }
  auto store = c10::make_intrusive<c10d::FileStore>(address, world);
  store->setTimeout(timeout);
  return store;
}

#endif  // RLX_C10D

}  // namespace

void check_group_args(const std::string& b, const std::string& kind, const std::string& addr, int rank, int world_size,
                      int64_t timeout_ms) {
  require(b == "gloo" || b == "nccl", "unknown backend \"" + b + "\" (\"gloo\" on CPU, \"nccl\" on CUDA)");
  require(kind == "tcp" || kind == "file", "unknown store \"" + kind + "\" (\"tcp\" or \"file\")");
  require(!addr.empty(), kind == "tcp" ? "tcp store needs a host address" : "file store needs a path");
  require(world_size >= 1, "world_size must be >= 1, got " + std::to_string(world_size));
  require(rank >= 0 && rank < world_size,
          "rank must be in 0.." + std::to_string(world_size - 1) + ", got " + std::to_string(rank));
  require(timeout_ms > 0, "timeout_ms must be > 0, got " + std::to_string(timeout_ms));
  require(backend_built(b), not_built(b));
}

#if defined(RLX_C10D)

namespace {

// The backend's process group over a store the group's ranks share.
void connect(Group& g, const c10::intrusive_ptr<c10d::Store>& store, const std::string& where) {
  const auto timeout = std::chrono::milliseconds(g.timeout_ms);
  try {
    if (g.backend == "gloo") {
#if defined(RLX_GLOO)
      auto opts = c10d::ProcessGroupGloo::Options::create(timeout);
      opts->devices.push_back(gloo_device(g.store_kind, g.address));
      g.pg = c10::make_intrusive<c10d::ProcessGroupGloo>(store, g.rank, g.world, opts);
#endif
    } else {
#if defined(RLX_NCCL)
      auto opts = c10d::ProcessGroupNCCL::Options::create();
      opts->timeout = timeout;
      g.pg = c10::make_intrusive<c10d::ProcessGroupNCCL>(store, g.rank, g.world, opts);
      g.device = at::Device(at::kCUDA);  // the current device: one GPU per rank (CUDA_VISIBLE_DEVICES)
#endif
    }
  } catch (...) {
    throw std::runtime_error(who(g) + ": the " + g.backend + " rendezvous over " + where + " failed (did every rank start, with "
                             "the same world size and a fresh store, within " + std::to_string(g.timeout_ms) +
                             " ms?): " + message_of(std::current_exception()));
  }
}

}  // namespace

std::unique_ptr<Group> join_group(const std::string& b, const std::string& kind, const std::string& addr, int port, int rank,
                                  int world_size, int64_t timeout_ms) {
  auto g = std::make_unique<Group>();
  g->backend = b, g->rank = rank, g->world = world_size, g->timeout_ms = timeout_ms;
  g->store_kind = kind, g->address = addr;
  const std::string where = kind == "tcp" ? "tcp://" + addr + ":" + std::to_string(port) : "file " + addr;
  try {
    g->store = make_store(kind, addr, port, rank, world_size, std::chrono::milliseconds(timeout_ms));
  } catch (const ArgError&) {
    throw;
  } catch (...) {
    throw std::runtime_error(who(*g) + ": cannot join the c10d store " + where + " within " + std::to_string(timeout_ms) +
                             " ms: " + message_of(std::current_exception()));
  }
  connect(*g, g->store, where);
  return g;
}

c10::intrusive_ptr<c10d::Store> open_tcp_store(const std::string& addr, int port, int rank, int world_size,
                                               int64_t timeout_ms) {
  return make_store("tcp", addr, port, rank, world_size, std::chrono::milliseconds(timeout_ms));
}

void connect_group(Group& g, const c10::intrusive_ptr<c10d::Store>& store, const std::string& where) {
  connect(g, store, where);
}

std::unique_ptr<Group> join_subgroup(Group& parent, const std::vector<int>& ranks) {
  std::string list;
  for (size_t i = 0; i < ranks.size(); ++i) {
    require(ranks[i] >= 0 && ranks[i] < parent.world && (i == 0 || ranks[i] > ranks[i - 1]),
            "subgroup ranks must be distinct ranks of the parent (0.." + std::to_string(parent.world - 1) +
                "), ascending");
    list += (i ? "," : "") + std::to_string(ranks[i]);
  }
  const auto own = std::find(ranks.begin(), ranks.end(), parent.rank);
  require(own != ranks.end(), who(parent) + " is not among the subgroup's ranks [" + list + "]");
  auto g = std::make_unique<Group>();
  g->backend = parent.backend, g->timeout_ms = parent.timeout_ms, g->device = parent.device;
  g->store_kind = parent.store_kind, g->address = parent.address;
  g->rank = static_cast<int>(own - ranks.begin()), g->world = static_cast<int>(ranks.size());
  const std::string prefix = "subgroup/" + std::to_string(++parent.subgroups) + "/" + list;
  g->store = c10::make_intrusive<c10d::PrefixStore>(prefix, parent.store);
  connect(*g, g->store, "the parent group's store (" + prefix + ")");
  return g;
}

#endif  // RLX_C10D

}  // namespace rlx

using namespace rlx;

RLX_API int rlx_dist_available(const char* backend) {
  RLX_TRY(-1, {
    require(backend != nullptr, "backend is null (\"gloo\" or \"nccl\")");
    return backend_built(backend) ? 1 : 0;
  })
}

RLX_API rlx_group* rlx_dist_create(const char* backend, const char* store, const char* address, int port, int rank, int world_size,
                              int64_t timeout_ms) {
  RLX_TRY(nullptr, {
    require(backend && store && address, "backend, store and address must not be null");
    const std::string b = backend, kind = store, addr = address;
    check_group_args(b, kind, addr, rank, world_size, timeout_ms);
#if defined(RLX_C10D)
    auto g = join_group(b, kind, addr, port, rank, world_size, timeout_ms);
    register_handle(g.get(), Kind::Group);
    return reinterpret_cast<rlx_group*>(g.release());
#else
    return nullptr;  // unreachable: backend_built() is false without c10d
#endif
  })
}

#if defined(RLX_C10D)

RLX_API rlx_group* rlx_dist_subgroup(rlx_group* parent, const int32_t* ranks, int n) {
  RLX_TRY(nullptr, {
    auto& p = get_group(parent);
    require(ranks != nullptr && n >= 1, "a subgroup needs n >= 1 ranks");
    auto g = join_subgroup(p, std::vector<int>(ranks, ranks + n));
    register_handle(g.get(), Kind::Group);
    return reinterpret_cast<rlx_group*>(g.release());
  })
}

RLX_API int rlx_dist_free(rlx_group* group) {
  RLX_TRY(-1, {
    auto* g = get<Group>(group, Kind::Group);  // a failed group can still be freed
    unregister_handle(g, Kind::Group);
    delete g;
    return 0;
  })
}

#else  // no c10d backend compiled in: every call but create (which says why) is a handle error

// The collectives' entry points too: dist_ops.cpp compiles to nothing in this build.

RLX_API int rlx_dist_free(rlx_group* group) { RLX_TRY(-1, { get<void>(group, Kind::Group); return 0; }) }
RLX_API rlx_group* rlx_dist_subgroup(rlx_group* parent, const int32_t*, int) {
  RLX_TRY(nullptr, { get<void>(parent, Kind::Group); return nullptr; })
}
RLX_API int rlx_dist_allreduce_grads(rlx_group* group, rlx_model*, int64_t) { RLX_TRY(-1, { get<void>(group, Kind::Group); return 0; }) }
RLX_API int rlx_dist_allreduce(rlx_group* group, void*, int, int64_t, int) { RLX_TRY(-1, { get<void>(group, Kind::Group); return 0; }) }
RLX_API int rlx_dist_broadcast_params(rlx_group* group, rlx_model*, int) { RLX_TRY(-1, { get<void>(group, Kind::Group); return 0; }) }
RLX_API int rlx_dist_verify_params(rlx_group* group, rlx_model*) { RLX_TRY(-1, { get<void>(group, Kind::Group); return 0; }) }
RLX_API int rlx_dist_barrier(rlx_group* group) { RLX_TRY(-1, { get<void>(group, Kind::Group); return 0; }) }

#endif
