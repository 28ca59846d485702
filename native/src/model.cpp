// The model object behind the ABI: the flat config parser, parameter creation with HF names,
// parameter and gradient copies in and out, per-model options. The math is in forward.cpp.
#include "shard.h"

#include <map>
#include <sstream>

namespace rlx {

// ---- config: a flat JSON object of numbers, booleans and plain strings (written by src/model/config.ts) ----

namespace {

struct JsonValue {
  bool is_bool = false, is_str = false;
  bool b = false;
  double num = 0;
  std::string str;
};

class FlatJsonParser {
 public:
  explicit FlatJsonParser(const std::string& text) : s_(text) {}

  std::map<std::string, JsonValue> parse() {
    std::map<std::string, JsonValue> out;
    skip_ws();
    expect('{');
    skip_ws();
    if (peek() == '}') return ++i_, out;
    for (;;) {
      skip_ws();
      std::string key = parse_string();
      skip_ws();
      expect(':');
      skip_ws();
      if (!out.emplace(key, parse_value(key)).second) fail("duplicate key \"" + key + "\"");
      skip_ws();
      if (peek() == ',') { ++i_; continue; }
      expect('}');
      break;
    }
    skip_ws();
    if (i_ != s_.size()) fail("trailing characters after the object");
    return out;
  }

 private:
  const std::string& s_;
  size_t i_ = 0;

  [[noreturn]] void fail(const std::string& what) const {
    throw ArgError("model config JSON: " + what + " (at offset " + std::to_string(i_) + ")");
  }
  char peek() const { return i_ < s_.size() ? s_[i_] : '\0'; }
  void skip_ws() {
    while (i_ < s_.size() && std::isspace(static_cast<unsigned char>(s_[i_]))) ++i_;
  }
  void expect(char c) {
    if (peek() != c) fail(std::string("expected '") + c + "'");
    ++i_;
  }
  std::string parse_string() {
    expect('"');
    size_t start = i_;
    while (i_ < s_.size() && s_[i_] != '"') {
      if (s_[i_] == '\\') fail("escapes are not allowed in keys and strings");
      ++i_;
    }
    if (i_ >= s_.size()) fail("unterminated string");
    return s_.substr(start, i_++ - start);
  }
  JsonValue parse_value(const std::string& key) {
    JsonValue v;
    if (s_.compare(i_, 4, "true") == 0) return i_ += 4, v.is_bool = true, v.b = true, v;
    if (s_.compare(i_, 5, "false") == 0) return i_ += 5, v.is_bool = true, v;
    if (peek() == '"') {  // a plain string: rope_type's name
      v.is_str = true;
      v.str = parse_string();
      return v;
    }
    const char* begin = s_.c_str() + i_;
    char* end = nullptr;
    v.num = std::strtod(begin, &end);
    if (end == begin) fail("the value of \"" + key + "\" must be a number, a boolean or a string");
    i_ += static_cast<size_t>(end - begin);
    return v;
  }
};

}  // namespace

ModelConfig parse_model_config(const std::string& json) {
  auto values = FlatJsonParser(json).parse();
  ModelConfig c;
  std::map<std::string, int64_t*> ints = {
      {"vocab_size", &c.vocab_size},
      {"hidden_size", &c.hidden_size},
      {"intermediate_size", &c.intermediate_size},
      {"num_hidden_layers", &c.num_hidden_layers},
      {"num_attention_heads", &c.num_attention_heads},
      {"num_key_value_heads", &c.num_key_value_heads},
      {"head_dim", &c.head_dim},
      {"max_position_embeddings", &c.max_position_embeddings},
  };
  std::map<std::string, double*> reals = {{"rms_norm_eps", &c.rms_norm_eps}, {"rope_theta", &c.rope_theta}};
  std::map<std::string, bool*> bools = {
      {"tie_word_embeddings", &c.tie_word_embeddings}, {"attention_bias", &c.attention_bias}, {"qk_norm", &c.qk_norm}};

  // RoPE scaling (optional): rope_type names the scheme and decides which rope_* reals it needs.
  std::string rope_type = "default";
  if (auto it = values.find("rope_type"); it != values.end()) {
    require(it->second.is_str, "model config: \"rope_type\" must be a string");
    rope_type = it->second.str;
  }
  if (rope_type == "llama3") {
    c.rope = RopeScaling::Llama3;
    reals.insert({{"rope_factor", &c.rope_factor},
                  {"rope_low_freq_factor", &c.rope_low_freq_factor},
                  {"rope_high_freq_factor", &c.rope_high_freq_factor},
                  {"rope_original_max_position_embeddings", &c.rope_original_max_positions}});
  } else if (rope_type == "yarn") {
    c.rope = RopeScaling::Yarn;
    reals.insert({{"rope_factor", &c.rope_factor},
                  {"rope_beta_fast", &c.rope_beta_fast},
                  {"rope_beta_slow", &c.rope_beta_slow},
                  {"rope_attention_factor", &c.rope_attention_factor},
                  {"rope_original_max_position_embeddings", &c.rope_original_max_positions}});
    bools.insert({"rope_truncate", &c.rope_truncate});
  } else {
    require(rope_type == "default", "model config: \"rope_type\" must be \"default\", \"llama3\" or \"yarn\", got \"" +
                                        rope_type + "\"");
  }

  for (const auto& [key, v] : values)
    require(key == "rope_type" || ints.count(key) || reals.count(key) || bools.count(key),
            "model config: unknown key \"" + key + "\"" +
                (key.rfind("rope_", 0) == 0 ? " (for rope_type \"" + rope_type + "\")" : ""));
  auto find = [&](const std::string& key) -> const JsonValue& {
    auto it = values.find(key);
    require(it != values.end(), "model config: missing key \"" + key + "\"");
    return it->second;
  };
  for (auto& [key, dst] : ints) {
    const auto& v = find(key);
    require(!v.is_bool && v.num >= 1 && v.num == std::floor(v.num) && v.num < 9e15,
            "model config: \"" + key + "\" must be a positive integer");
    *dst = static_cast<int64_t>(v.num);
  }
  for (auto& [key, dst] : reals) {
    const auto& v = find(key);
    require(!v.is_bool && v.num > 0 && std::isfinite(v.num), "model config: \"" + key + "\" must be a positive number");
    *dst = v.num;
  }
  for (auto& [key, dst] : bools) {
    const auto& v = find(key);
    require(v.is_bool, "model config: \"" + key + "\" must be true or false");
    *dst = v.b;
  }
  require(c.num_attention_heads % c.num_key_value_heads == 0,
          "model config: num_attention_heads (" + std::to_string(c.num_attention_heads) +
              ") must be a multiple of num_key_value_heads (" + std::to_string(c.num_key_value_heads) + ")");
  require(c.head_dim % 2 == 0, "model config: head_dim must be even (rotary embedding)");
  if (c.rope == RopeScaling::Llama3)
    require(c.rope_high_freq_factor > c.rope_low_freq_factor,
            "model config: rope_high_freq_factor must be greater than rope_low_freq_factor");
  require(c.vocab_size < (int64_t(1) << 31), "model config: vocab_size must fit in int32 token ids");
  return c;
}

at::ScalarType dtype_from_code(int code) {
  switch (code) {
    case RLX_F32: return at::kFloat;
    case RLX_BF16: return at::kBFloat16;
    case RLX_F16: return at::kHalf;
    case RLX_F64: return at::kDouble;
  }
  throw ArgError("unknown dtype code " + std::to_string(code) + " (0 f32, 1 bf16, 2 f16, 3 f64)");
}

Model& get_model(void* handle) { return *get<Model>(handle, Kind::Model); }

static std::string shape_str(at::IntArrayRef shape) {
  std::ostringstream out;
  out << "[";
  for (size_t i = 0; i < shape.size(); ++i) out << (i ? ", " : "") << shape[i];
  return out.str() + "]";
}

// Parameters are drawn in float32 on the CPU from one seeded generator in the fixed parameter
// order, then converted and moved: the same seed gives the same model on every device and dtype.
// Without `draw` they are left uninitialized (a model about to be overwritten whole).
std::unique_ptr<Model> build_model(const ModelConfig& c, at::ScalarType dtype, at::Device device, uint64_t seed,
                                   bool draw) {
  auto m = std::make_unique<Model>();
  m->cfg = c;
  m->dtype = dtype;
  m->device = device;
  auto gen = at::make_generator<at::CPUGeneratorImpl>(seed);
  const double init_std = 0.02;  // HF initializer_range default for Llama/Qwen
  // A parameter drawn into `into` (a row block of a layer's joint buffer) when given.
  auto add = [&](const std::string& name, std::vector<int64_t> shape, char init, at::Tensor into = {}) {
    at::Tensor t = into.defined() ? into : at::empty(shape, m->opts(dtype));
    if (draw)
      t.copy_(init == 'n'   ? at::normal(0.0, init_std, shape, gen, at::kFloat)
              : init == '1' ? at::ones(shape, at::kFloat) : at::zeros(shape, at::kFloat));
    t.set_requires_grad(true);
    m->param_index[name] = m->params.size();
    m->params.emplace_back(name, t);
    return t;
  };
  const int64_t d = c.hidden_size, hd = c.head_dim, H = c.num_attention_heads, kvh = c.num_key_value_heads;
  m->embed = add("model.embed_tokens.weight", {c.vocab_size, d}, 'n');
  for (int64_t i = 0; i < c.num_hidden_layers; ++i) {
    const std::string p = "model.layers." + std::to_string(i) + ".";
    Layer L;
    L.input_norm = add(p + "input_layernorm.weight", {d}, '1');
    L.qkv_proj = at::empty({(H + 2 * kvh) * hd, d}, m->opts(dtype));
    if (c.attention_bias) L.qkv_bias = at::empty({(H + 2 * kvh) * hd}, m->opts(dtype));
    auto rows = [](const at::Tensor& joint, int64_t first, int64_t n) { return joint.narrow(0, first, n); };
    L.q_proj = add(p + "self_attn.q_proj.weight", {H * hd, d}, 'n', rows(L.qkv_proj, 0, H * hd));
    if (c.attention_bias) L.q_bias = add(p + "self_attn.q_proj.bias", {H * hd}, '0', rows(L.qkv_bias, 0, H * hd));
    L.k_proj = add(p + "self_attn.k_proj.weight", {kvh * hd, d}, 'n', rows(L.qkv_proj, H * hd, kvh * hd));
    if (c.attention_bias) L.k_bias = add(p + "self_attn.k_proj.bias", {kvh * hd}, '0', rows(L.qkv_bias, H * hd, kvh * hd));
    L.v_proj = add(p + "self_attn.v_proj.weight", {kvh * hd, d}, 'n', rows(L.qkv_proj, (H + kvh) * hd, kvh * hd));
    if (c.attention_bias)
      L.v_bias = add(p + "self_attn.v_proj.bias", {kvh * hd}, '0', rows(L.qkv_bias, (H + kvh) * hd, kvh * hd));
    L.o_proj = add(p + "self_attn.o_proj.weight", {d, H * hd}, 'n');
    if (c.qk_norm) {
      L.q_norm = add(p + "self_attn.q_norm.weight", {hd}, '1');
      L.k_norm = add(p + "self_attn.k_norm.weight", {hd}, '1');
    }
    L.post_norm = add(p + "post_attention_layernorm.weight", {d}, '1');
    const int64_t I = c.intermediate_size;
    L.gate_up_proj = at::empty({2 * I, d}, m->opts(dtype));
    L.gate_proj = add(p + "mlp.gate_proj.weight", {I, d}, 'n', rows(L.gate_up_proj, 0, I));
    L.up_proj = add(p + "mlp.up_proj.weight", {I, d}, 'n', rows(L.gate_up_proj, I, I));
    L.down_proj = add(p + "mlp.down_proj.weight", {d, c.intermediate_size}, 'n');
    m->layers.push_back(L);
  }
  m->final_norm = add("model.norm.weight", {d}, '1');
  m->lm_head = c.tie_word_embeddings ? m->embed : add("lm_head.weight", {c.vocab_size, d}, 'n');

  std::string json = "[";
  for (size_t i = 0; i < m->params.size(); ++i) {
    const auto& [name, t] = m->params[i];
    json += (i ? "," : "") + std::string("{\"name\":\"") + name + "\",\"shape\":" + shape_str(t.sizes()) + "}";
  }
  m->params_json = json + "]";
  return m;
}

// A base parameter by HF name, or a LoRA adapter tensor by its PEFT name.
static at::Tensor& find_param(Model& m, const char* name) {
  require(name != nullptr, "parameter name is null");
  auto it = m.param_index.find(name);
  if (it != m.param_index.end()) return m.params[it->second].second;
  auto lora = m.lora.index.find(name);
  require(lora != m.lora.index.end(), std::string("the model has no parameter \"") + name + "\"");
  return m.lora.params[lora->second].second;
}

// Copies t (any device/dtype) into a caller buffer as dtype, checking the buffer's exact size.
static void copy_out(const at::Tensor& t, const char* name, void* out, int dtype, int64_t nbytes) {
  auto dt = dtype_from_code(dtype);
  int64_t want = t.numel() * static_cast<int64_t>(c10::elementSize(dt));
  require(out != nullptr, "output buffer is null");
  require(nbytes == want, std::string("\"") + name + "\" " + shape_str(t.sizes()) + " needs " + std::to_string(want) +
                              " bytes as this dtype; the buffer has " + std::to_string(nbytes));
  at::NoGradGuard no_grad;
  if (t.is_cuda()) {
    // Weight publishing reads every parameter: through one reused pinned buffer the device copy
    // runs at full PCIe speed (a pageable destination is staged by the driver, several times slower).
    static thread_local at::Tensor pinned;
    if (!pinned.defined() || pinned.numel() < want)
      pinned = at::empty({want}, at::TensorOptions().dtype(at::kByte).pinned_memory(true));
    auto staged = pinned.narrow(0, 0, want).view(dt).view(t.sizes());
    staged.copy_(t.detach());
    std::memcpy(out, staged.data_ptr(), static_cast<size_t>(want));
    return;
  }
  auto src = t.detach().to(at::kCPU, dt).contiguous();
  std::memcpy(out, src.data_ptr(), static_cast<size_t>(want));
}

}  // namespace rlx

using rlx::require;

RLX_API rlx_model* rlx_model_create(const char* config_json, int dtype, const char* device, uint64_t seed) {
  RLX_TRY(nullptr, {
    require(config_json != nullptr, "rlx_model_create: config_json is null");
    auto cfg = rlx::parse_model_config(config_json);
    auto dt = rlx::dtype_from_code(dtype);
    at::Device dev(device && *device ? std::string(device) : std::string("cpu"));
    require(dev.is_cpu() || dev.is_cuda(), "device must be \"cpu\" or \"cuda[:N]\", got \"" + dev.str() + "\"");
    require(!dev.is_cuda() || at::hasCUDA(), "device \"" + dev.str() + "\" asked for, but this libtorch has no CUDA");
    auto model = rlx::build_model(cfg, dt, dev, seed, true);
    rlx::register_handle(model.get(), rlx::Kind::Model);
    return reinterpret_cast<rlx_model*>(model.release());
  })
}

RLX_API int rlx_model_free(rlx_model* model) {
  RLX_TRY(-1, {
    auto* m = rlx::get<rlx::Model>(model, rlx::Kind::Model);
    rlx::unregister_handle(m, rlx::Kind::Model);
    delete m;
    return 0;
  })
}

RLX_API const char* rlx_model_params(rlx_model* model) {
  RLX_TRY(nullptr, { return rlx::get_model(model).params_json.c_str(); })
}

RLX_API int rlx_model_set_param(rlx_model* model, const char* name, const void* data, int dtype, const int64_t* shape, int ndim) {
  RLX_TRY(-1, {
    auto& m = rlx::whole_model(model, "rlx_model_set_param");
    auto& p = rlx::find_param(m, name);
    auto dt = rlx::dtype_from_code(dtype);
    require(data != nullptr, std::string("rlx_model_set_param: data for \"") + name + "\" is null");
    require(ndim >= 0 && (ndim == 0 || shape != nullptr), "rlx_model_set_param: bad shape");
    std::vector<int64_t> dims(shape, shape + ndim);
    require(p.sizes().vec() == dims, std::string("parameter \"") + name + "\" has shape " + rlx::shape_str(p.sizes()) +
                                         ", the data has shape " + rlx::shape_str(dims));
    at::NoGradGuard no_grad;
    p.copy_(at::from_blob(const_cast<void*>(data), dims, at::TensorOptions().dtype(dt)));
    return 0;
  })
}

RLX_API int rlx_model_get_param(rlx_model* model, const char* name, void* out, int dtype, int64_t nbytes) {
  RLX_TRY(-1, {
    auto& m = rlx::get_model(model);
    if (rlx::is_sliced(m) && !m.lora.index.count(name ? name : "")) {
      require(name != nullptr, "parameter name is null");
      rlx::copy_out(rlx::gather_param(m, name), name, out, dtype, nbytes);  // collective
      return 0;
    }
    rlx::copy_out(rlx::find_param(m, name), name, out, dtype, nbytes);
    return 0;
  })
}

RLX_API int rlx_model_get_merged_param(rlx_model* model, const char* name, void* out, int dtype, int64_t nbytes) {
  RLX_TRY(-1, {
    auto& m = rlx::whole_model(model, "rlx_model_get_merged_param");
    auto& p = rlx::find_param(m, name);
    require(!m.lora.index.count(name), std::string("\"") + name + "\" is an adapter tensor, not a base parameter");
    auto merged = rlx::merged_weight(m, name);
    rlx::copy_out(merged.defined() ? merged : p, name, out, dtype, nbytes);
    return 0;
  })
}

RLX_API int rlx_model_get_grad(rlx_model* model, const char* name, void* out, int dtype, int64_t nbytes) {
  RLX_TRY(-1, {
    auto& m = rlx::whole_model(model, "rlx_model_get_grad");
    auto& p = rlx::find_param(m, name);
    rlx::copy_out(p.grad().defined() ? p.grad() : at::zeros_like(p), name, out, dtype, nbytes);
    return 0;
  })
}

RLX_API int rlx_model_zero_grad(rlx_model* model) {
  RLX_TRY(-1, {
    auto& m = rlx::get_model(model);
    for (auto& [name, p] : m.params)
      if (p.defined()) p.mutable_grad().reset();
    for (auto& [name, p] : m.lora.params) p.mutable_grad().reset();
    if (m.shards)
      for (auto& u : m.shards->units) u.local.mutable_grad().reset();
    *m.nonfinite_loss = false;
    return 0;
  })
}

RLX_API int rlx_model_set_option(rlx_model* model, const char* name, double value) {
  RLX_TRY(-1, {
    auto& m = rlx::get_model(model);
    require(name != nullptr, "rlx_model_set_option: name is null");
    const std::string key = name;
    auto flag = [&] {
      require(value == 0 || value == 1, "model option \"" + key + "\" is 0 or 1");
      return value == 1;
    };
    if (key == "autocast_bf16") m.autocast_bf16 = flag();
    else if (key == "fused_attention") m.fused_attention = flag();
    else if (key == "cpu_linear") m.cpu_linear = flag();
    else if (key == "shard_prefetch") m.shard_prefetch = flag();
    else if (key == "logits_chunk") {
      require(value >= 0 && value == std::floor(value), "model option \"logits_chunk\" is an integer >= 0 (0 = auto)");
      m.logits_chunk = static_cast<int64_t>(value);
    } else {
      throw rlx::ArgError("unknown model option \"" + key + "\" (autocast_bf16, fused_attention, cpu_linear, logits_chunk, shard_prefetch)");
    }
    return 0;
  })
}
