// LoRA: low-rank adapters on the attention and MLP projections (docs/lora.md). A target
// projection W x becomes W x + (alpha / rank) B A dropout(x), A [rank, d_in] and B [d_out, rank],
// as PEFT's LoRA layer computes it (peft/tuners/lora/layer.py, Linear.forward). The adapters are
// float32 tensors (float64 for float64 models) beside the base weights, which stay in the model's
// dtype (bf16 on a GPU) and are frozen: no gradient, no optimizer state. They are never merged into
// the base: a server applies them at every forward, so a weight update moves only the adapters.
//
// Tensor names are PEFT's saved names (`base_model.model.` + the module path + `.lora_A.weight`;
// save_pretrained drops the adapter name), so an adapter written by rlx loads in PEFT and back.
#include "model.h"

namespace rlx {
namespace {

const char* kTargetNames[kLoraTargets] = {"q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"};

std::string module_path(int64_t layer, int target) {
  const bool attention = target <= kLoraO;
  return "model.layers." + std::to_string(layer) + (attention ? ".self_attn." : ".mlp.") + kTargetNames[target];
}

// The parsed targets list: comma-separated PEFT module names, each at most once.
std::vector<int> parse_targets(const char* targets) {
  require(targets != nullptr && *targets, "LoRA targets are empty: name one or more of q_proj, k_proj, v_proj, o_proj, "
                                          "gate_proj, up_proj, down_proj");
  std::vector<int> out;
  std::string list = targets;
  size_t start = 0;
  while (start <= list.size()) {
    size_t end = list.find(',', start);
    if (end == std::string::npos) end = list.size();
    const std::string name = list.substr(start, end - start);
    int found = -1;
    for (int t = 0; t < kLoraTargets; ++t)
      if (name == kTargetNames[t]) found = t;
    require(found >= 0, "unknown LoRA target \"" + name +
                            "\" (q_proj, k_proj, v_proj, o_proj, gate_proj, up_proj, down_proj)");
    require(std::find(out.begin(), out.end(), found) == out.end(), "LoRA target \"" + name + "\" is listed twice");
    out.push_back(found);
    start = end + 1;
  }
  std::sort(out.begin(), out.end());
  return out;
}

at::Tensor& base_weight(Layer& L, int target) {
  at::Tensor* weights[kLoraTargets] = {&L.q_proj, &L.k_proj, &L.v_proj, &L.o_proj, &L.gate_proj, &L.up_proj, &L.down_proj};
  return *weights[target];
}

std::string shape_json(at::IntArrayRef shape) {
  std::string out = "[";
  for (size_t i = 0; i < shape.size(); ++i) out += (i ? "," : "") + std::to_string(shape[i]);
  return out + "]";
}

}  // namespace

at::Tensor merged_weight(const Model& m, const std::string& name) {
  auto it = m.lora.merged.find(name);
  if (it == m.lora.merged.end()) return at::Tensor();
  const auto& [layer, target] = it->second;
  const Layer& L = m.layers[static_cast<size_t>(layer)];
  at::NoGradGuard no_grad;
  const auto& A = L.lora_A[target];
  auto w = const_cast<Layer&>(L);
  return base_weight(w, target).to(A.scalar_type()) + at::matmul(L.lora_B[target], A) * m.lora.scale;
}

at::Tensor project(const Model& m, const Layer& L, LoraTarget target, const at::Tensor& x, const at::Tensor& w,
                   const at::Tensor& b) {
  auto y = linear(m, x, w, b);
  const auto& A = L.lora_A[target];
  if (!A.defined()) return y;
  const auto& B = L.lora_B[target];
  // PEFT casts the input to the adapter's dtype and the result back to the base output's.
  auto xa = x.to(A.scalar_type());
  if (m.lora.dropout > 0 && m.training) xa = at::dropout(xa, m.lora.dropout, true);
  auto delta = at::linear(at::linear(xa, A), B) * m.lora.scale;
  return y + delta.to(y.scalar_type());
}

}  // namespace rlx

using namespace rlx;

RLX_API int rlx_model_lora_add(rlx_model* model, int rank, double alpha, double dropout, const char* targets, uint64_t seed) {
  RLX_TRY(-1, {
    auto& m = whole_model(model, "rlx_model_lora_add");
    require(m.lora.rank == 0, "this model already has LoRA adapters (rlx_model_lora_add is called once per model)");
    require(rank >= 1, "LoRA rank must be >= 1, got " + std::to_string(rank));
    require(alpha > 0 && std::isfinite(alpha), "LoRA alpha must be a positive number");
    require(dropout >= 0 && dropout < 1, "LoRA dropout must be in [0, 1)");
    auto chosen = parse_targets(targets);
    const auto dt = m.dtype == at::kDouble ? at::kDouble : at::kFloat;
    // Drawn in float32 on the CPU from one seeded generator in a fixed order (layer, then target),
    // like the base parameters: the same seed gives the same adapters on every device and rank.
    auto gen = at::make_generator<at::CPUGeneratorImpl>(seed);
    Lora lora;
    lora.rank = rank, lora.alpha = alpha, lora.dropout = dropout, lora.scale = alpha / rank;
    std::vector<Layer> layers = m.layers;
    for (size_t l = 0; l < layers.size(); ++l) {
      for (int t : chosen) {
        const auto& w = base_weight(layers[l], t);
        const int64_t d_out = w.size(0), d_in = w.size(1);
        // PEFT's default init (init_lora_weights=True): A kaiming-uniform with a = sqrt(5), i.e.
        // U(-1/sqrt(d_in), 1/sqrt(d_in)); B zeros, so the adapted model starts equal to the base.
        const double bound = 1.0 / std::sqrt(double(d_in));
        auto A = at::empty({rank, d_in}, at::kFloat).uniform_(-bound, bound, gen).to(m.device, dt).set_requires_grad(true);
        auto B = at::zeros({d_out, rank}, m.opts(dt)).set_requires_grad(true);
        layers[l].lora_A[t] = A, layers[l].lora_B[t] = B;
        lora.merged[module_path(static_cast<int64_t>(l), t) + ".weight"] = {static_cast<int64_t>(l), t};
        const std::string prefix = "base_model.model." + module_path(static_cast<int64_t>(l), t);
        for (auto& [name, tensor] : {std::pair{prefix + ".lora_A.weight", A}, std::pair{prefix + ".lora_B.weight", B}}) {
          lora.index[name] = lora.params.size();
          lora.params.emplace_back(name, tensor);
        }
      }
    }
    std::string json = "[";
    for (size_t i = 0; i < lora.params.size(); ++i)
      json += (i ? "," : "") + std::string("{\"name\":\"") + lora.params[i].first + "\",\"shape\":" +
              shape_json(lora.params[i].second.sizes()) + "}";
    lora.json = json + "]";
    // Nothing above can fail past this point: the model changes all at once.
    m.layers = std::move(layers);
    m.lora = std::move(lora);
    for (auto& [name, p] : m.params) {
      p.mutable_grad().reset();
      p.set_requires_grad(false);
    }
    // Dropout draws from the device's default generator, which libtorch seeds at random per process:
    // seeded here, a run's masks follow from its seed (and activation checkpointing replays them).
    if (dropout > 0) {
      auto dropout_gen = at::globalContext().defaultGenerator(m.device);
      std::lock_guard<std::mutex> lock(dropout_gen.mutex());
      dropout_gen.set_current_seed(seed);
    }
    return 0;
  })
}

RLX_API const char* rlx_model_lora_params(rlx_model* model) {
  RLX_TRY(nullptr, {
    auto& m = get_model(model);
    return m.lora.rank ? m.lora.json.c_str() : "[]";
  })
}
