// The layout of a sharded model (shard.h): its units and each rank's slices, rlx_model_shard that
// cuts a loaded model into them, the gathered views the train step computes with, and the calls a
// checkpoint reads and writes a rank's slices through.
#include "shard.h"

namespace rlx {

namespace {

// A layer's tensors in the order they are stored; joint buffers come before their blocks, so the
// blocks take their offsets from them (an empty suffix: a buffer, not a parameter).
struct LayerTensor {
  at::Tensor Layer::*field;
  const char* suffix;
  at::Tensor Layer::*joint;  // the buffer this tensor is a row block of, or null
};
const LayerTensor kLayerTensors[] = {
    {&Layer::input_norm, "input_layernorm.weight", nullptr},
    {&Layer::qkv_proj, "", nullptr},
    {&Layer::q_proj, "self_attn.q_proj.weight", &Layer::qkv_proj},
    {&Layer::k_proj, "self_attn.k_proj.weight", &Layer::qkv_proj},
    {&Layer::v_proj, "self_attn.v_proj.weight", &Layer::qkv_proj},
    {&Layer::qkv_bias, "", nullptr},
    {&Layer::q_bias, "self_attn.q_proj.bias", &Layer::qkv_bias},
    {&Layer::k_bias, "self_attn.k_proj.bias", &Layer::qkv_bias},
    {&Layer::v_bias, "self_attn.v_proj.bias", &Layer::qkv_bias},
    {&Layer::o_proj, "self_attn.o_proj.weight", nullptr},
    {&Layer::q_norm, "self_attn.q_norm.weight", nullptr},
    {&Layer::k_norm, "self_attn.k_norm.weight", nullptr},
    {&Layer::post_norm, "post_attention_layernorm.weight", nullptr},
    {&Layer::gate_up_proj, "", nullptr},
    {&Layer::gate_proj, "mlp.gate_proj.weight", &Layer::gate_up_proj},
    {&Layer::up_proj, "mlp.up_proj.weight", &Layer::gate_up_proj},
    {&Layer::down_proj, "mlp.down_proj.weight", nullptr},
};

ShardField whole_field(at::Tensor Model::*field, const char* name, const at::Tensor& t, int64_t offset) {
  ShardField f;
  f.model_field = field, f.name = name, f.offset = offset, f.shape = t.sizes().vec();
  return f;
}

void finish_unit(ShardUnit& u, int world) {
  for (const auto& f : u.fields) u.numel = std::max(u.numel, f.offset + f.numel());
  u.chunk = (u.numel + world - 1) / world;
}

std::vector<ShardUnit> layout_of(const Model& m, int world) {
  std::vector<ShardUnit> units;
  ShardUnit embed{"embed"};
  embed.fields.push_back(whole_field(&Model::embed, "model.embed_tokens.weight", m.embed, 0));
  finish_unit(embed, world);
  units.push_back(std::move(embed));
  for (size_t l = 0; l < m.layers.size(); ++l) {
    const Layer& L = m.layers[l];
    ShardUnit u{"layer." + std::to_string(l)};
    int64_t end = 0;
    for (const auto& t : kLayerTensors) {
      const at::Tensor& x = L.*(t.field);
      if (!x.defined()) continue;
      ShardField f;
      f.layer = static_cast<int64_t>(l), f.layer_field = t.field, f.shape = x.sizes().vec();
      if (*t.suffix) f.name = "model.layers." + std::to_string(l) + "." + t.suffix;
      if (t.joint) {  // a row block: where it starts inside its buffer
        const at::Tensor& buffer = L.*(t.joint);
        auto joint = std::find_if(u.fields.begin(), u.fields.end(), [&](const ShardField& g) { return g.layer_field == t.joint; });
        TORCH_CHECK(joint != u.fields.end() && x.is_alias_of(buffer), "shard layout: ", f.name, " is not in its joint buffer");
        f.offset = joint->offset + (x.storage_offset() - buffer.storage_offset());
      } else {
        f.offset = end;
        end += f.numel();
      }
      u.fields.push_back(std::move(f));
    }
    finish_unit(u, world);
    units.push_back(std::move(u));
  }
  ShardUnit head{"head"};
  head.fields.push_back(whole_field(&Model::final_norm, "model.norm.weight", m.final_norm, 0));
  if (!m.cfg.tie_word_embeddings)
    head.fields.push_back(whole_field(&Model::lm_head, "lm_head.weight", m.lm_head, m.final_norm.numel()));
  finish_unit(head, world);
  units.push_back(std::move(head));
  return units;
}

const at::Tensor& field_of(const Model& m, const ShardField& f) {
  return f.layer < 0 ? m.*(f.model_field) : m.layers[static_cast<size_t>(f.layer)].*(f.layer_field);
}

std::string layout_json(const Model& m, const Shards& s) {
  std::ostringstream out;
  const char* mode = s.mode == ShardMode::Full ? "full" : "optimizer";
  out << "{\"mode\":\"" << mode << "\",\"rank\":" << s.rank << ",\"world\":" << s.world << ",\"dtype\":\""
      << c10::toString(m.dtype) << "\",\"units\":[";
  for (size_t i = 0; i < s.units.size(); ++i) {
    const auto& u = s.units[i];
    out << (i ? "," : "") << "{\"name\":\"" << u.name << "\",\"numel\":" << u.numel << ",\"chunk\":" << u.chunk
        << ",\"params\":[";
    bool first = true;
    for (const auto& f : u.fields) {
      if (f.name.empty()) continue;
      out << (first ? "" : ",") << "{\"name\":\"" << f.name << "\",\"offset\":" << f.offset << ",\"shape\":[";
      for (size_t d = 0; d < f.shape.size(); ++d) out << (d ? "," : "") << f.shape[d];
      out << "]}";
      first = false;
    }
    out << "]}";
  }
  out << "]}";
  return out.str();
}

// The view of a field in a gathered unit; with `trains`, a parameter becomes a leaf requiring grad
// whose gradient accumulates into its block of g.grad (autograd adds into a defined .grad() in place).
at::Tensor view_of(const ShardField& f, Gathered& g, bool trains) {
  auto v = g.full.narrow(0, f.offset, f.numel()).view(f.shape);
  if (trains && !f.name.empty()) {
    v.set_requires_grad(true);
    v.mutable_grad() = g.grad.narrow(0, f.offset, f.numel()).view(f.shape);
  }
  return v;
}

Shards& shards_of(Model& m) {
  require(m.shards != nullptr, "the model is not sharded (rlx_model_shard)");
  return *m.shards;
}

ShardUnit& unit_at(Shards& s, int unit) {
  require(unit >= 0 && static_cast<size_t>(unit) < s.units.size(),
          "unit " + std::to_string(unit) + " is not in 0.." + std::to_string(s.units.size() - 1));
  return s.units[static_cast<size_t>(unit)];
}

}  // namespace

Model& whole_model(void* handle, const char* what) {
  auto& m = get_model(handle);
  require(!is_sliced(m), std::string(what) + ": the model is sharded \"full\" and holds only its slices of the weights "
                             "(a trainer rank's); load the published weights for this");
  return m;
}

Layer layer_view(const Model& m, const ShardUnit& unit, Gathered& g, bool trains) {
  Layer L = m.layers[static_cast<size_t>(unit.fields.front().layer)];  // its LoRA adapters
  for (const auto& f : unit.fields) L.*(f.layer_field) = view_of(f, g, trains);
  return L;
}

void model_view(Model& m, const ShardUnit& unit, Gathered& g, bool trains) {
  for (const auto& f : unit.fields) m.*(f.model_field) = view_of(f, g, trains);
}

}  // namespace rlx

using namespace rlx;

RLX_API int rlx_model_shard(rlx_model* model, rlx_group* group, int mode) {
  RLX_TRY(-1, {
    auto& m = get_model(model);
    require(!m.shards, "the model is sharded already");
    require(mode == RLX_SHARD_OPTIMIZER || mode == RLX_SHARD_FULL,
            "shard mode " + std::to_string(mode) + " is not RLX_SHARD_OPTIMIZER (1) or RLX_SHARD_FULL (2)");
    require(mode == RLX_SHARD_FULL || !m.lora.rank,
            "shard mode \"optimizer\" is for full fine-tuning: LoRA adapters' AdamW state is a few MB; use \"full\" to shard "
            "the frozen base, or \"none\"");
    auto [rank, world] = group_rank_world(group);
    auto s = std::make_shared<Shards>();
    s->mode = static_cast<ShardMode>(mode), s->group = group, s->rank = rank, s->world = world;
    s->frozen = m.lora.rank > 0;
    s->units = layout_of(m, world);
    size_t named = 0;
    at::NoGradGuard no_grad;
    for (auto& u : s->units) {
      auto flat = at::zeros({u.chunk * world}, m.opts(m.dtype));
      for (const auto& f : u.fields) {
        flat.narrow(0, f.offset, f.numel()).copy_(field_of(m, f).reshape(-1));
        named += !f.name.empty();
      }
      u.local = flat.narrow(0, rank * u.chunk, u.chunk).clone();
    }
    TORCH_CHECK(named == m.params.size(), "shard layout covers ", named, " of ", m.params.size(), " parameters");
    s->layout_json = layout_json(m, *s);
    if (s->mode == ShardMode::Full) {  // the whole tensors go; the slices are the weights now
      for (auto& [name, p] : m.params) p = at::Tensor();
      for (auto& L : m.layers)
        for (const auto& t : kLayerTensors) L.*(t.field) = at::Tensor();
      m.embed = m.final_norm = m.lm_head = at::Tensor();
    }
    m.shards = std::move(s);
    return 0;
  })
}

RLX_API const char* rlx_model_shard_layout(rlx_model* model) {
  RLX_TRY(nullptr, { return shards_of(get_model(model)).layout_json.c_str(); })
}

RLX_API int rlx_model_shard_local(rlx_model* model, int unit, void* data, int64_t nbytes, int write) {
  RLX_TRY(-1, {
    auto& m = get_model(model);
    auto& u = unit_at(shards_of(m), unit);
    const int64_t want = u.local.numel() * static_cast<int64_t>(u.local.element_size());
    require(data != nullptr && nbytes == want, "unit " + u.name + "'s slice is " + std::to_string(want) + " bytes (" +
                                                   std::to_string(u.chunk) + " x " + c10::toString(m.dtype) + "), got " +
                                                   std::to_string(nbytes));
    at::NoGradGuard no_grad;
    auto host = at::from_blob(data, {u.chunk}, at::TensorOptions().dtype(m.dtype));
    if (write) {
      u.local.copy_(host);
    } else {
      auto src = u.local.to(at::kCPU).contiguous();
      std::memcpy(data, src.data_ptr(), static_cast<size_t>(want));
    }
    return 0;
  })
}

RLX_API int rlx_model_shard_gather(rlx_model* model) {
  RLX_TRY(-1, {
    auto& m = get_model(model);
    if (shards_of(m).mode == ShardMode::Optimizer) params_from_slices(m);
    return 0;
  })
}
