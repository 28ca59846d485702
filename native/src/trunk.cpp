// The train step's transformer trunk (trunk.h): whole, recomputed, or sliced over a shard group.
#include "trunk.h"

namespace rlx {

Trunk::Trunk(Model& m, bool recompute, ContextRowPtr context)
    : m_(m),
      recompute_(recompute || is_sliced(m)),
      sliced_(is_sliced(m)),
      trains_base_(!m.lora.rank),
      context_(std::move(context)) {}

Trunk::~Trunk() { release_head(); }

// The unit gathered: the one started ahead for it, else gathered now.
Gathered Trunk::take(PendingGather& next, size_t unit, bool trains) {
  return next.started() ? next.wait() : PendingGather(m_, unit, trains).wait();
}

// Starts the unit's gather now, to overlap the computation until take() (shard_prefetch).
void Trunk::ahead(PendingGather& next, size_t unit, bool trains) {
  if (m_.shard_prefetch) next = PendingGather(m_, unit, trains);
}

void Trunk::release_head() {
  if (!sliced_) return;
  m_.final_norm = m_.lm_head = m_.embed = at::Tensor();
  head_ = embed_ = Gathered();
}

// LoRA dropout is the layers' only randomness: its generator's state before each layer, so the
// recomputation draws the masks the forward drew.
void Trunk::save_rng() {
  if (!(m_.training && m_.lora.rank && m_.lora.dropout > 0)) return;
  auto gen = at::globalContext().defaultGenerator(m_.device);
  std::lock_guard<std::mutex> lock(gen.mutex());
  rng_.push_back(gen.get_state());
}

void Trunk::restore_rng(size_t layer) {
  if (rng_.empty()) return;
  auto gen = at::globalContext().defaultGenerator(m_.device);
  std::lock_guard<std::mutex> lock(gen.mutex());
  gen.set_state(layer < rng_.size() ? rng_[layer] : rng_after_);
}

at::Tensor Trunk::forward(const at::Tensor& ids, const at::Tensor& positions, const std::vector<int64_t>& lengths,
                          const std::vector<int64_t>& parents) {
  if (!recompute_) return hidden_ = forward_packed(m_, ids, positions, lengths, nullptr, parents, context_);
  ids_ = ids;
  row_ = plan_row(m_, positions, lengths, nullptr, parents, context_);
  at::NoGradGuard no_grad;
  const size_t n_layers = m_.layers.size();
  at::Tensor x;
  if (!sliced_) {
    x = at::embedding(m_.embed, ids);
    for (size_t l = 0; l < n_layers; ++l) {
      save_rng();
      inputs_.push_back(x);
      x = layer_packed(m_, m_.layers[l], l, x, row_);
    }
    last_ = x;
    return rms_norm(m_, x, m_.final_norm);
  }
  const auto& units = m_.shards->units;  // embed, layer.0 .. layer.L-1, head
  PendingGather next;
  {
    auto g = take(next, 0, false);
    ahead(next, 1, n_layers == 0 && trains_base_);  // layer.0, or the head
    model_view(m_, units[0], g, false);
    x = at::embedding(m_.embed, ids);
    m_.embed = at::Tensor();
  }
  for (size_t l = 0; l < n_layers; ++l) {
    auto g = take(next, l + 1, false);
    ahead(next, l + 2, l + 1 == n_layers && trains_base_);  // after the last layer: the head
    auto L = layer_view(m_, units[l + 1], g, false);
    save_rng();
    inputs_.push_back(x);
    x = layer_packed(m_, L, l, x, row_);
  }
  head_ = take(next, units.size() - 1, trains_base_);
  model_view(m_, units.back(), head_, trains_base_);
  if (m_.cfg.tie_word_embeddings) {  // the LM head is the embedding, gathered again for its gradient
    embed_ = PendingGather(m_, 0, trains_base_).wait();
    model_view(m_, units[0], embed_, trains_base_);
    m_.lm_head = m_.embed;
  }
  last_ = x;
  return rms_norm(m_, x, m_.final_norm);
}

void Trunk::backward(at::Tensor grad_hidden) {
  if (!recompute_) return hidden_.backward(grad_hidden);
  const size_t n_layers = m_.layers.size();
  // the recomputation replays the forward's draws; the generator then goes on from where the
  // forward left it, as without recomputation (the next step draws new masks)
  if (!rng_.empty()) {
    auto gen = at::globalContext().defaultGenerator(m_.device);
    std::lock_guard<std::mutex> lock(gen.mutex());
    rng_after_ = gen.get_state();
  }
  struct Resume {
    Trunk& t;
    ~Resume() { t.restore_rng(t.rng_.size()); }
  } resume{*this};
  auto through = [&](const at::Tensor& input, const std::function<at::Tensor(const at::Tensor&)>& fn, const at::Tensor& g) {
    auto leaf = input.detach().requires_grad_(true);
    fn(leaf).backward(g);
    return leaf.grad();
  };
  auto g = through(last_, [&](const at::Tensor& x) { return rms_norm(m_, x, m_.final_norm); }, grad_hidden);
  last_ = grad_hidden = at::Tensor();
  if (!sliced_) {
    for (size_t l = n_layers; l-- > 0;) {
      restore_rng(l);
      g = through(inputs_[l], [&](const at::Tensor& x) { return layer_packed(m_, m_.layers[l], l, x, row_); }, g);
      inputs_[l] = at::Tensor();
    }
    if (m_.embed.requires_grad()) at::embedding(m_.embed, ids_).backward(g);
    return;
  }
  const auto& units = m_.shards->units;
  PendingGather next;
  ahead(next, n_layers, trains_base_);  // the last layer's unit
  if (trains_base_) {
    reduce_scatter_add(m_, units.size() - 1, head_.grad);
    if (embed_.grad.defined()) reduce_scatter_add(m_, 0, embed_.grad);  // the tied LM head's part
  }
  release_head();
  for (size_t l = n_layers; l-- > 0;) {
    auto gathered = take(next, l + 1, trains_base_);
    if (l > 0) ahead(next, l, trains_base_);
    auto L = layer_view(m_, units[l + 1], gathered, trains_base_);
    restore_rng(l);
    g = through(inputs_[l], [&](const at::Tensor& x) { return layer_packed(m_, L, l, x, row_); }, g);
    inputs_[l] = at::Tensor();
    if (trains_base_) reduce_scatter_add(m_, l + 1, gathered.grad);
  }
  if (!trains_base_) return;
  at::NoGradGuard no_grad;  // the embedding's gradient needs only the ids, not its weights
  const auto& embed = units[0];
  auto grad = at::zeros({embed.chunk * m_.shards->world}, embed.local.options());
  grad.narrow(0, 0, embed.numel).view(embed.fields[0].shape).index_add_(0, ids_, g.to(grad.scalar_type()));
  reduce_scatter_add(m_, 0, grad);
}

}  // namespace rlx
