// Weights to an engine that is not rlx (SGLang's in-memory update; docs/engines.md, "Weights in
// memory"): the trainer's rank 0 and the engine's ranks form one c10d group the way PyTorch's
// Python code forms it in the engine (SGLang's init_custom_process_group over torch 2's
// _new_process_group_helper), and rank 0 broadcasts every parameter, whole and converted to the
// engine's dtype, in the model's order: the order in which the engine's update request names them.
//
// The group's store keys must be exactly the engine's, or the rendezvous never meets. In torch 2:
// a TCPStore at master_address:master_port (served by rank 0, here), under PrefixStore(group_name)
// (SGLang), under PrefixStore(group_name + "/") (_new_process_group_helper), under
// PrefixStore(device + "/") for the first device the backend serves: "cpu" for Gloo, "cuda" for
// NCCL. (torch 2.13's _new_process_group_helper makes one backend when every device maps to the
// same one, as Gloo's "cpu" and "cuda" do, and registers it for both; test/native/
// engine_group_torch.test.ts joins PyTorch's own Python code.)
//
// The parameters travel as bytes over Gloo (the same wire as a typed broadcast, whatever dtypes
// this libtorch's Gloo knows) and typed over NCCL. Every broadcast is bounded by the group's
// timeout; a group that fails is named and left out of the rest, the others finish.
#include "dist.h"
#include "shard.h"

#if defined(RLX_C10D)

namespace rlx {
namespace {

// The device whose prefix the backend's store keys carry (see the header).
std::string first_device(const std::string& backend) { return backend == "gloo" ? "cpu" : "cuda"; }

at::Tensor on_wire(const Group& g, const at::Tensor& t) {
  return g.backend == "gloo" ? t.reshape({-1}).view(at::kByte) : t;
}

c10d::BroadcastOptions from_rank0(const Group& g) {
  c10d::BroadcastOptions o;
  o.rootRank = 0;
  o.timeout = std::chrono::milliseconds(g.timeout_ms);
  return o;
}

}  // namespace
}  // namespace rlx

using namespace rlx;

RLX_API rlx_group* rlx_engine_group_join(const char* backend, const char* address, int port, int rank, int world_size,
                                         const char* group_name, int64_t timeout_ms) {
  RLX_TRY(nullptr, {
    require(backend && address && group_name, "backend, address and group_name must not be null");
    const std::string b = backend, addr = address, name = group_name;
    check_group_args(b, "tcp", addr, rank, world_size, timeout_ms);
    require(!name.empty(), "group_name must not be empty");
    auto g = std::make_unique<Group>();
    g->backend = b, g->rank = rank, g->world = world_size, g->timeout_ms = timeout_ms;
    g->store_kind = "tcp", g->address = addr;
    const std::string where = "tcp://" + addr + ":" + std::to_string(port) + " (group " + name + ")";
    try {
      g->store = open_tcp_store(addr, port, rank, world_size, timeout_ms);
    } catch (...) {
      throw std::runtime_error(who(*g) + ": cannot reach the c10d store " + where + " within " +
                               std::to_string(timeout_ms) + " ms: " + message_of(std::current_exception()));
    }
    c10::intrusive_ptr<c10d::Store> keys = c10::make_intrusive<c10d::PrefixStore>(name, g->store);
    keys = c10::make_intrusive<c10d::PrefixStore>(name + "/", keys);
    keys = c10::make_intrusive<c10d::PrefixStore>(first_device(b) + "/", keys);
    connect_group(*g, keys, where);
    register_handle(g.get(), Kind::Group);
    return reinterpret_cast<rlx_group*>(g.release());
  })
}

RLX_API int rlx_engine_broadcast(rlx_model* model, rlx_group* const* groups, int n, int dtype, int32_t* failed) {
  RLX_TRY(-1, {
    auto& m = get_model(model);
    require(m.lora.rank == 0, "an engine's in-memory update carries full weights, and this model has LoRA adapters");
    require(n >= 0 && (n == 0 || (groups != nullptr && failed != nullptr)),
            "rlx_engine_broadcast: n groups >= 0, with the groups and a failed[n] array");
    const auto dt = dtype_from_code(dtype);
    at::NoGradGuard no_grad;
    std::vector<Group*> list;
    std::vector<std::string> errors(n);
    for (int i = 0; i < n; ++i) {
      auto& g = get_group(groups[i]);
      require(g.rank == 0, "group " + std::to_string(i) + " is not the sending end (rank 0), it is " + who(g));
      list.push_back(&g);
      failed[i] = 0;
    }
    const auto total = m.params.size();
    for (size_t p = 0; p < total; ++p) {
      const auto& [name, param] = m.params[p];
      const auto whole = is_sliced(m) ? gather_param(m, name) : param;  // the gather is collective
      if (n == 0) continue;  // another rank of a model sharded "full": its part in the gathers only
      const std::string what = "parameter " + name + " (" + std::to_string(p + 1) + " of " + std::to_string(total) + ")";
      std::vector<std::pair<int, c10::intrusive_ptr<c10d::Work>>> works;
      std::vector<at::Tensor> keep;
      for (int i = 0; i < n; ++i) {
        auto& g = *list[i];
        if (!errors[i].empty()) continue;
        try {
          keep.push_back(on_wire(g, whole.to(g.device, dt).contiguous()));
          std::vector<at::Tensor> v{keep.back()};
          works.emplace_back(i, g.pg->broadcast(v, from_rank0(g)));
        } catch (...) {
          errors[i] = "group " + std::to_string(i) + ": " + what + " failed: " + message_of(std::current_exception());
        }
      }
      for (auto& [i, work] : works) {
        try {
          work->wait(std::chrono::milliseconds(list[i]->timeout_ms));
        } catch (...) {
          errors[i] = "group " + std::to_string(i) + ": " + what + " failed: " + message_of(std::current_exception());
        }
      }
    }
    int count = 0;
    std::string joined;
    for (int i = 0; i < n; ++i) {
      if (errors[i].empty()) continue;
      failed[i] = 1, ++count;
      list[i]->failure = errors[i];
      joined += (joined.empty() ? "" : "; ") + errors[i];
    }
    last_error() = joined;
    return count;
  })
}

RLX_API int rlx_group_broadcast_bytes(rlx_group* group, void* data, int64_t nbytes, int root) {
  RLX_TRY(-1, {
    auto& g = get_group(group);
    require(data != nullptr && nbytes > 0, "rlx_group_broadcast_bytes: data and nbytes > 0");
    require(root >= 0 && root < g.world, "root must be a rank of the group, got " + std::to_string(root));
    auto host = at::from_blob(data, {nbytes}, at::TensorOptions().dtype(at::kByte));
    auto t = host.to(g.device).clone();
    c10d::BroadcastOptions o;
    o.rootRank = root;
    o.timeout = std::chrono::milliseconds(g.timeout_ms);
    run_collective(g, "a broadcast of " + std::to_string(nbytes) + " bytes", [&] {
      std::vector<at::Tensor> v{t};
      return g.pg->broadcast(v, o);
    });
    host.copy_(t.cpu());
    return 0;
  })
}

#else  // no c10d backend compiled in

using namespace rlx;

RLX_API rlx_group* rlx_engine_group_join(const char* backend, const char* address, int, int rank, int world_size,
                                         const char*, int64_t timeout_ms) {
  RLX_TRY(nullptr, {
    require(backend && address, "backend and address must not be null");
    check_group_args(backend, "tcp", address, rank, world_size, timeout_ms);
    return nullptr;  // unreachable: check_group_args refuses every backend without c10d
  })
}
RLX_API int rlx_engine_broadcast(rlx_model*, rlx_group* const* groups, int n, int, int32_t*) {
  RLX_TRY(-1, {
    require(n == 0 || groups != nullptr, "rlx_engine_broadcast: groups is null");
    for (int i = 0; i < n; ++i) get<void>(groups[i], Kind::Group);
    return 0;
  })
}
RLX_API int rlx_group_broadcast_bytes(rlx_group* group, void*, int64_t, int) {
  RLX_TRY(-1, { get<void>(group, Kind::Group); return 0; })
}

#endif
