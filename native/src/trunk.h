// The transformer part of a train step: token ids to the hidden states the LM head reads (forward),
// and their gradient back into the parameters (backward); train.cpp runs the LM head and the loss
// in between. Three ways, by the model and the step:
//   whole:      one autograd graph over every layer, every layer's activations kept;
//   recomputed: activation checkpointing: only each layer's input is kept, and the backward runs
//               the layer again with autograd (with the random state its LoRA dropout drew);
//   sliced:     a "full" sharded model (shard.h), always recomputed: each unit is gathered just
//               before it computes, with the next unit's gather in flight meanwhile, and freed
//               after; in the backward its gradient is reduce-scattered into the slices.
// Every rank of a sliced model must run forward and backward the same number of times (the
// gathers are collective): a row without a gradient still runs the backward, with zeros.
#pragma once
#include "layer.h"
#include "shard.h"

namespace rlx {

class Trunk {
 public:
  // context: the row is split over ranks (context.h); forward then takes this rank's tokens.
  Trunk(Model& m, bool recompute, ContextRowPtr context = {});
  ~Trunk();
  Trunk(const Trunk&) = delete;
  Trunk& operator=(const Trunk&) = delete;

  // hidden [T, hidden] after the final norm. Whole: in the autograd graph; otherwise without one.
  // A sliced model keeps its head unit (final norm, LM head) gathered until backward.
  at::Tensor forward(const at::Tensor& ids, const at::Tensor& positions, const std::vector<int64_t>& lengths,
                     const std::vector<int64_t>& parents);
  // Back-propagates dL/dhidden [T, hidden] into the parameters' gradients (a sliced model's: its
  // slices'). Call once, after forward. Takes the gradient by value and drops it once the final
  // norm has used it.
  void backward(at::Tensor grad_hidden);
  // Whether every rank must run backward even without a gradient (its collectives are the others').
  bool collective() const { return sliced_ || context_; }

 private:
  void save_rng();
  void restore_rng(size_t layer);
  void release_head();
  Gathered take(PendingGather& next, size_t unit, bool trains);
  void ahead(PendingGather& next, size_t unit, bool trains);

  Model& m_;
  bool recompute_, sliced_, trains_base_;
  ContextRowPtr context_;
  RowPlan row_;
  at::Tensor ids_, hidden_, last_;
  std::vector<at::Tensor> inputs_, rng_;
  at::Tensor rng_after_;  // the generator's state after the forward
  Gathered head_, embed_;  // a sliced model's gathered head (and embedding, when tied to the LM head)
};

}  // namespace rlx
