// Sharded training over a c10d group (docs/scaling.md, "Sharded training"): how a model's
// parameters are cut into units and sliced over the ranks (shard.cpp), and the collectives that move
// a unit (shard_ops.cpp): its gather before it computes, the reduce-scatter of its gradient after,
// and the optimizer's side of the "optimizer" mode.
//
// A unit is what is gathered at once: the embedding, one decoder layer, the final norm (with the LM
// head when it is not tied). Its parameters are laid end to end in the order they are stored (a
// layer's q/k/v and gate/up stay the row blocks of their joint buffers), padded to a multiple of
// the world size, and rank r keeps elements [r * chunk, (r + 1) * chunk) of that flat: its slice.
//
//   "optimizer" (ZeRO-1): every rank keeps the whole model and computes whole gradients; the
//                optimizer reduce-scatters them, updates its slice of float32 masters with its slice
//                of the AdamW state, and all-gathers the updated slices into the parameters.
//   "full" (ZeRO-3): a rank keeps only its slices. The train step gathers a unit just before it
//                computes and frees it after, recomputing each layer in the backward (trunk.cpp),
//                and reduce-scatters the unit's gradient into the slice's; AdamW updates slices.
#pragma once
#include "model.h"

namespace rlx {

enum class ShardMode : int { None = RLX_SHARD_NONE, Optimizer = RLX_SHARD_OPTIMIZER, Full = RLX_SHARD_FULL };

// Where one tensor of a unit lives in the unit's flat: a Model field (layer < 0) or a Layer field
// of layer `layer`, at `offset`, with its shape. `name` is the HF name of a parameter; a joint
// buffer (qkv_proj, gate_up_proj) has none: its blocks are the parameters.
struct ShardField {
  int64_t layer = -1;
  at::Tensor Model::*model_field = nullptr;
  at::Tensor Layer::*layer_field = nullptr;
  std::string name;
  int64_t offset = 0;
  std::vector<int64_t> shape;
  int64_t numel() const { return c10::multiply_integers(shape); }
};

struct ShardUnit {
  std::string name;  // "embed", "layer.N", "head"
  std::vector<ShardField> fields;
  int64_t numel = 0, chunk = 0;  // chunk = ceil(numel / world)
  // This rank's slice [chunk] of the master weights (its gradient on .grad()), in the model's dtype.
  at::Tensor local;
};

struct Shards {
  ShardMode mode = ShardMode::None;
  void* group = nullptr;  // the rlx_group handle; must outlive the model
  int rank = 0, world = 1;
  bool frozen = false;    // LoRA: the sharded base does not train, the adapters stay whole
  std::vector<ShardUnit> units;  // embed, layer.0 .. layer.L-1, head
  std::string layout_json;       // backing store for rlx_model_shard_layout
  size_t head() const { return units.size() - 1; }
};

// The rank and world size of an rlx_group handle (shard_ops.cpp; an error without c10d).
std::pair<int, int> group_rank_world(void* group);

// Whether the model keeps only its slices (a "full" sharded model): it cannot generate or score.
inline bool is_sliced(const Model& m) { return m.shards && m.shards->mode == ShardMode::Full; }

// A unit gathered whole: `full` [chunk * world], and when it trains, `grad` of the same shape, into
// which the gathered parameters' gradients accumulate in place (their .grad() are views of it).
struct Gathered {
  at::Tensor full, grad;
};

// The views of a gathered unit as the fields it holds: a Layer (its LoRA adapters from the model's
// layer), or the model-level fields written into `m` (embed; final_norm and an untied lm_head).
// With `trains`, every parameter is a leaf requiring grad whose .grad() is its block of g.grad.
Layer layer_view(const Model& m, const ShardUnit& unit, Gathered& g, bool trains);
void model_view(Model& m, const ShardUnit& unit, Gathered& g, bool trains);

// ---- collectives (shard_ops.cpp; a build without c10d throws) ---------------------------------

// A gather in flight: wait() returns the unit whole.
class PendingGather {
 public:
  PendingGather() = default;
  PendingGather(Model& m, size_t unit, bool trains);
  Gathered wait();
  bool started() const { return started_; }

 private:
  struct Impl;
  std::shared_ptr<Impl> impl_;
  bool started_ = false;
};

// Sums the unit's whole gradient `grad` [chunk * world] over the ranks and adds this rank's slice
// into the unit's local .grad().
void reduce_scatter_add(Model& m, size_t unit, const at::Tensor& grad);

// The sum over the ranks of one double (the optimizer's squared norm and non-finite mark).
double all_sum(Model& m, double value);

// "optimizer" mode, around AdamW: the whole gradients reduce-scattered into the slices, and the
// updated slices all-gathered into the whole parameters.
void slices_from_grads(Model& m);
void params_from_slices(Model& m);

// A parameter gathered whole by its HF name (collective: every rank calls it, in the same order).
at::Tensor gather_param(Model& m, const std::string& name);

}  // namespace rlx
