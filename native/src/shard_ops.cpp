// The collectives of sharded training (shard.h) on the model's c10d group: a unit's all-gather, the
// reduce-scatter of its gradient, the optimizer's sums, and a parameter gathered by name.
//
// NCCL has every collective as one flat call (_allgather_base, _reduce_scatter_base). Gloo on
// libtorch 1.13 has neither flat form and no reduce-scatter at all, so on Gloo the gather is the
// list all-gather into views of one buffer, and the reduce-scatter is an all-reduce of the whole
// gradient of which each rank keeps its slice: exact, but it moves 2 (N - 1) / N of the unit per
// rank instead of (N - 1) / N, and the whole gradient of one unit exists on every rank meanwhile
// (docs/scaling.md, "What each mode costs").
//
// A gather is started and waited for apart (PendingGather), so the train step starts the next
// unit's while it computes this one's: Gloo moves the bytes on its own threads and NCCL on its own
// stream, and either overlaps with the computation.
#include "dist.h"
#include "shard.h"

namespace rlx {

#if defined(RLX_C10D)

namespace {

Group& group_of(Model& m) {
  TORCH_CHECK(m.shards, "the model is not sharded");
  auto& g = get_group(m.shards->group);
  require(m.device.type() == g.device.type(),
          "the model is on " + m.device.str() + " but its shard group runs on " + g.device.str());
  return g;
}

}  // namespace

std::pair<int, int> group_rank_world(void* group) {
  auto& g = get_group(group);
  return {g.rank, g.world};
}

struct PendingGather::Impl {
  Group* g = nullptr;
  std::string what;
  c10::intrusive_ptr<c10d::Work> work;
  std::vector<at::Tensor> input;
  std::vector<std::vector<at::Tensor>> outputs;
  Gathered gathered;
};

PendingGather::PendingGather(Model& m, size_t unit, bool trains) : impl_(std::make_shared<Impl>()), started_(true) {
  auto& s = *m.shards;
  auto& u = s.units[unit];
  auto& g = group_of(m);
  impl_->g = &g;
  impl_->what = "all-gather of " + u.name;
  impl_->gathered.full = at::empty({u.chunk * s.world}, u.local.options());
  if (trains) impl_->gathered.grad = at::zeros_like(impl_->gathered.full);
  impl_->input = {u.local};
  auto& full = impl_->gathered.full;
  impl_->work = launch(g, impl_->what, [&] {
    if (g.backend == "nccl") return g.pg->_allgather_base(full, impl_->input[0]);
    impl_->outputs.resize(1);
    for (int r = 0; r < s.world; ++r) impl_->outputs[0].push_back(full.narrow(0, r * u.chunk, u.chunk));
    return g.pg->allgather(impl_->outputs, impl_->input);
  });
}

Gathered PendingGather::wait() {
  TORCH_CHECK(started_, "PendingGather::wait on a gather never started");
  std::vector<c10::intrusive_ptr<c10d::Work>> works{impl_->work};  // launched ahead (the constructor)
  wait_all(*impl_->g, impl_->what, works);
  auto out = std::move(impl_->gathered);
  impl_.reset();
  started_ = false;
  return out;
}

void reduce_scatter_add(Model& m, size_t unit, const at::Tensor& grad) {
  auto& s = *m.shards;
  auto& u = s.units[unit];
  auto& g = group_of(m);
  const std::string what = "reduce-scatter of " + u.name + "'s gradient";
  at::Tensor slice;
  if (g.backend == "nccl") {
    slice = at::empty({u.chunk}, grad.options());
    auto input = grad;
    run_collective(g, what, [&] { return g.pg->_reduce_scatter_base(slice, input); });
  } else {
    std::vector<at::Tensor> whole{grad};
    run_collective(g, what, [&] { return g.pg->allreduce(whole); });
    slice = grad.narrow(0, s.rank * u.chunk, u.chunk);
  }
  at::NoGradGuard no_grad;
  if (u.local.grad().defined()) u.local.mutable_grad().add_(slice);
  else u.local.mutable_grad() = slice.clone();
}

double all_sum(Model& m, double value) {
  auto& g = group_of(m);
  std::vector<at::Tensor> t{at::full({1}, value, at::TensorOptions().dtype(at::kDouble).device(g.device))};
  run_collective(g, "all-reduce of the gradient norm", [&] { return g.pg->allreduce(t); });
  return t[0].item<double>();
}

void slices_from_grads(Model& m) {
  at::NoGradGuard no_grad;
  for (size_t i = 0; i < m.shards->units.size(); ++i) {
    auto& u = m.shards->units[i];
    auto grad = at::zeros({u.chunk * m.shards->world}, u.local.options());
    for (const auto& f : u.fields) {
      if (f.name.empty()) continue;
      const auto& p = m.params[m.param_index.at(f.name)].second;
      if (p.grad().defined()) grad.narrow(0, f.offset, f.numel()).copy_(p.grad().reshape(-1));
    }
    reduce_scatter_add(m, i, grad);
  }
}

void params_from_slices(Model& m) {
  at::NoGradGuard no_grad;
  for (size_t i = 0; i < m.shards->units.size(); ++i) {
    auto g = PendingGather(m, i, false).wait();
    for (const auto& f : m.shards->units[i].fields)
      if (!f.name.empty())
        m.params[m.param_index.at(f.name)].second.copy_(g.full.narrow(0, f.offset, f.numel()).view(f.shape));
  }
}

at::Tensor gather_param(Model& m, const std::string& name) {
  auto& s = *m.shards;
  auto& g = group_of(m);
  for (auto& u : s.units)
    for (const auto& f : u.fields) {
      if (f.name != name) continue;
      // Rank r holds [r * chunk, (r + 1) * chunk) of the unit: its part of this parameter is the
      // overlap with [offset, offset + numel). Every rank sends `most` elements, its part first.
      auto part = [&](int r) {
        const int64_t a = std::max(f.offset, r * u.chunk), b = std::min(f.offset + f.numel(), (r + 1) * u.chunk);
        return std::pair<int64_t, int64_t>{a, std::max(a, b)};
      };
      int64_t most = 0;
      for (int r = 0; r < s.world; ++r) most = std::max(most, part(r).second - part(r).first);
      auto [a, b] = part(s.rank);
      auto mine = at::zeros({most}, u.local.options());
      if (b > a) mine.narrow(0, 0, b - a).copy_(u.local.narrow(0, a - s.rank * u.chunk, b - a));
      auto all = at::empty({most * s.world}, u.local.options());
      const std::string what = "all-gather of " + name;
      std::vector<at::Tensor> input{mine};
      std::vector<std::vector<at::Tensor>> outputs(1);
      for (int r = 0; r < s.world; ++r) outputs[0].push_back(all.narrow(0, r * most, most));
      run_collective(g, what, [&] {
        return g.backend == "nccl" ? g.pg->_allgather_base(all, mine) : g.pg->allgather(outputs, input);
      });
      auto out = at::empty({f.numel()}, u.local.options());
      for (int r = 0; r < s.world; ++r) {
        auto [ra, rb] = part(r);
        if (rb > ra) out.narrow(0, ra - f.offset, rb - ra).copy_(all.narrow(0, r * most, rb - ra));
      }
      return out.view(f.shape);
    }
  throw ArgError("the model has no parameter \"" + name + "\"");
}

#else  // no c10d: a model cannot be sharded (rlx_model_shard fails here), so nothing below runs

[[noreturn]] static void no_c10d() {
  throw ArgError("this shim has no c10d backend: sharded training needs Gloo (install libgloo-dev and rebuild with "
                 "`bun build.ts --shim`) or NCCL");
}
std::pair<int, int> group_rank_world(void*) { no_c10d(); }
struct PendingGather::Impl {};
PendingGather::PendingGather(Model&, size_t, bool) { no_c10d(); }
Gathered PendingGather::wait() { no_c10d(); }
void reduce_scatter_add(Model&, size_t, const at::Tensor&) { no_c10d(); }
double all_sum(Model&, double) { no_c10d(); }
void slices_from_grads(Model&) { no_c10d(); }
void params_from_slices(Model&) { no_c10d(); }
at::Tensor gather_param(Model&, const std::string&) { no_c10d(); }

#endif

}  // namespace rlx
