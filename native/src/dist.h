// What the two halves of the process-group code share: which c10d backends this build has, the
// Group behind an rlx_dist handle, and how a failure is worded. dist.cpp creates and frees
// groups; dist_ops.cpp runs the collectives on them.
//
// Why the guards: Gloo's header needs libgloo-dev and -DUSE_C10D_GLOO (build.ts adds it when the
// headers exist), NCCL needs a CUDA libtorch and nccl.h. Without them the shim still builds,
// RLX_C10D stays undefined, and every call fails with a message saying what was missing.
#pragma once
#include "common.h"

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
#include <torch/csrc/distributed/c10d/PrefixStore.hpp>
#include <torch/csrc/distributed/c10d/TCPStore.hpp>
#endif

namespace rlx {
// Refuses what no group can be made of (an unknown backend or store, a rank outside the world, a
// backend this build lacks), naming the argument and the fix.
void check_group_args(const std::string& backend, const std::string& store, const std::string& address, int rank,
                      int world_size, int64_t timeout_ms);
}  // namespace rlx

#if defined(RLX_C10D)

namespace rlx {

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
  std::string store_kind, address;  // how it was joined (a subgroup's Gloo device follows them)
  int subgroups = 0;                // made from it so far (each one's store prefix)
  std::string failure;  // the first failed call; the group refuses every call after it
  // A weight channel's sending end: each tensor's sum in the last transfer its server took whole,
  // what the next transfer's delta is taken against (weights_send.cpp); empty when there is none.
  std::vector<uint64_t> sent_sums;
};

inline std::string who(const Group& g) { return "rank " + std::to_string(g.rank) + " of " + std::to_string(g.world); }

// The text of a caught exception, without c10's backtrace.
inline std::string message_of(std::exception_ptr error) {
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

// Joins a group (dist.cpp, after check_group_args): returns once every rank has joined, or throws
// after timeout_ms naming the store and what to check.
std::unique_ptr<Group> join_group(const std::string& backend, const std::string& store, const std::string& address,
                                  int port, int rank, int world_size, int64_t timeout_ms);

// The pieces of join_group, for a group whose store keys follow another layout
// (weights_broadcast.cpp): rank 0 serves a TCP store; connect_group makes g's backend over a store.
c10::intrusive_ptr<c10d::Store> open_tcp_store(const std::string& address, int port, int rank, int world_size,
                                               int64_t timeout_ms);
void connect_group(Group& g, const c10::intrusive_ptr<c10d::Store>& store, const std::string& where);

// A subgroup of parent (rlx_dist_subgroup): ranks are parent ranks, ascending, this one among them.
std::unique_ptr<Group> join_subgroup(Group& parent, const std::vector<int>& ranks);

// The group behind a handle; one that failed earlier is refused (dist_ops.cpp).
Group& get_group(void* handle);

// Waits for every launched piece of one call; the first error marks the group failed and is
// rethrown naming this rank and the call (dist_ops.cpp).
void wait_all(Group& g, const std::string& what, std::vector<c10::intrusive_ptr<c10d::Work>>& works);

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

// One collective, launched and waited for (launch's and wait_all's errors).
template <typename Launch>
void run_collective(Group& g, const std::string& what, Launch&& fn) {
  std::vector<c10::intrusive_ptr<c10d::Work>> works{launch(g, what, std::forward<Launch>(fn))};
  wait_all(g, what, works);
}

}  // namespace rlx

#endif  // RLX_C10D
