// The decoder-only Llama/Qwen2/Qwen3 model shared by training, scoring and generation.
//
// Parameters are plain at::Tensor leaves with Hugging Face names, so safetensors map 1:1 and
// autograd needs no module system. One forward serves every caller: a packed row of samples
// (block-diagonal causal attention, positions restarting per sample), optionally writing each
// sample's K/V into a KV cache (generation prefill), plus a decode step that attends over that
// cache. Generation and scoring therefore run the same math as training, which is what keeps
// generation logprobs equal to trainer logprobs.
#pragma once
#include "common.h"
#include "context.h"
#include "kv_cache.h"

namespace rlx {

// RoPE frequency scaling: none, Llama 3.1's smooth long-context interpolation, or YaRN.
enum class RopeScaling { None, Llama3, Yarn };

// The normalized flat config written by src/model/config.ts (see rlx_model_create).
struct ModelConfig {
  int64_t vocab_size = 0, hidden_size = 0, intermediate_size = 0, num_hidden_layers = 0;
  int64_t num_attention_heads = 0, num_key_value_heads = 0, head_dim = 0, max_position_embeddings = 0;
  double rms_norm_eps = 0, rope_theta = 0;
  bool tie_word_embeddings = false, attention_bias = false, qk_norm = false;
  // RoPE scaling (rope_type and its rope_* keys; every default already resolved by config.ts).
  RopeScaling rope = RopeScaling::None;
  double rope_factor = 1, rope_original_max_positions = 0;
  double rope_low_freq_factor = 0, rope_high_freq_factor = 0;                        // llama3
  double rope_beta_fast = 0, rope_beta_slow = 0, rope_attention_factor = 1;          // yarn
  bool rope_truncate = true;                                                          // yarn
};

// The RoPE inverse frequencies [head_dim / 2] and the factor cos and sin are multiplied by (YaRN's
// attention scaling; 1 otherwise), in dtype `cd`, computed as transformers' modeling_rope_utils does.
std::pair<at::Tensor, double> rope_inv_freq(const ModelConfig& c, at::ScalarType cd);

// Whether two configs rotate positions identically (a generator's cached keys stay valid).
bool same_rope(const ModelConfig& a, const ModelConfig& b);

// Parses and validates the flat JSON object; an unknown, missing or mistyped key names itself.
ModelConfig parse_model_config(const std::string& json);

// The seven projections LoRA may adapt, in PEFT's module names (lora.cpp).
enum LoraTarget : int { kLoraQ, kLoraK, kLoraV, kLoraO, kLoraGate, kLoraUp, kLoraDown, kLoraTargets };

struct Layer {
  at::Tensor input_norm, q_proj, k_proj, v_proj, o_proj, q_bias, k_bias, v_bias, q_norm, k_norm;
  at::Tensor post_norm, gate_proj, up_proj, down_proj;
  // q/k/v (and their biases) and gate/up are row blocks of one buffer each, every block its own
  // parameter: without autograd a layer computes each group as one product (forward.cpp).
  at::Tensor qkv_proj, qkv_bias, gate_up_proj;
  // LoRA adapters per target (undefined where not adapted): A [rank, d_in], B [d_out, rank].
  at::Tensor lora_A[kLoraTargets], lora_B[kLoraTargets];
};

// LoRA (rlx_model_lora_add): rank 0 = none. The adapter tensors live beside the frozen base
// parameters, under PEFT's tensor names, in float32 (float64 for float64 models).
struct Lora {
  int64_t rank = 0;
  double alpha = 0, dropout = 0, scale = 0;  // scale = alpha / rank
  std::vector<std::pair<std::string, at::Tensor>> params;
  std::unordered_map<std::string, size_t> index;
  std::unordered_map<std::string, std::pair<int64_t, int>> merged;  // adapted base weight -> (layer, target)
  std::string json;  // backing store for rlx_model_lora_params' returned string
};

struct Shards;  // shard.h

struct Model {
  ModelConfig cfg;
  at::ScalarType dtype = at::kFloat;
  at::Device device = at::kCPU;
  // HF name -> tensor, in the fixed order rlx_model_params reports.
  std::vector<std::pair<std::string, at::Tensor>> params;
  std::unordered_map<std::string, size_t> param_index;
  at::Tensor embed, final_norm, lm_head;  // lm_head aliases embed when tied
  std::vector<Layer> layers;
  // RoPE inverse frequencies [head_dim / 2] and attention factor, set by the first rope_rows.
  at::Tensor rope_inv_freq;
  double rope_factor = 1.0;
  // Options (rlx_model_set_option).
  bool autocast_bf16 = false;
  bool fused_attention = true;  // SDPA on torch >= 2; the CPU attention kernels (attention_cpu.cpp)
  bool cpu_linear = true;       // few-row products on the CPU through linear_cpu.cpp
  bool shard_prefetch = true;   // a sliced model starts the next unit's gather before computing (trunk.cpp)
  int64_t logits_chunk = 0;  // tokens per LM-head chunk; 0 = auto (see chunk_tokens)
  // Set by a train step whose loss was not finite; the optimizer skips its next update.
  std::shared_ptr<bool> nonfinite_loss = std::make_shared<bool>(false);
  std::string params_json;  // backing store for rlx_model_params' returned string
  Lora lora;
  // True inside a train step's forward (LoRA dropout applies only there).
  bool training = false;
  // Set by rlx_model_shard: the layout and this rank's slices (shard.h); null when whole.
  std::shared_ptr<Shards> shards;

  // What the optimizer updates and the gradient all-reduce sums: the adapters when LoRA is on.
  const std::vector<std::pair<std::string, at::Tensor>>& trainable() const { return lora.rank ? lora.params : params; }

  // float64 models compute everything in float64 (finite-difference tests); all others use
  // float32 for norms, softmax and logprobs.
  at::ScalarType compute_dtype() const { return dtype == at::kDouble ? at::kDouble : at::kFloat; }
  at::TensorOptions opts(at::ScalarType t) const { return at::TensorOptions().dtype(t).device(device); }
  // Auto: 1024 tokens, fewer for large vocabularies so one chunk's float32 logits stay near
  // 128 MB on a GPU (a 152k vocabulary gets 220 tokens; the chunk's temporaries are a few times
  // that) and under 28 MiB on a CPU (48 tokens): glibc serves blocks of 32 MiB or more with a fresh
  // mmap whose pages fault in and are zeroed on every use, and a trainer step of 1,128 tokens on a
  // 152k vocabulary ran 2-3x slower with 220-token chunks than with 48
  // (experiments/bench_history.md, "LM-head chunks").
  int64_t chunk_tokens() const {
    if (logits_chunk > 0) return logits_chunk;
    const int64_t elements = device.is_cuda() ? int64_t(1) << 25 : int64_t(7) << 20;
    return std::max<int64_t>(16, std::min<int64_t>(1024, elements / cfg.vocab_size));
  }
};

// A model of config c (rlx_model_create), its parameters drawn from seed, or left uninitialized
// without `draw` (a model about to be overwritten whole, as a received weight transfer is).
std::unique_ptr<Model> build_model(const ModelConfig& c, at::ScalarType dtype, at::Device device, uint64_t seed,
                                   bool draw);
Model& get_model(void* handle);
// get_model for a call that needs the whole weights: a model sharded "full" is refused, naming `what`.
Model& whole_model(void* handle, const char* what);
at::ScalarType dtype_from_code(int code);

// Enables bf16 autocast for the model's device type while alive, if the model asks for it.
class AutocastScope {
 public:
  explicit AutocastScope(const Model& m);
  ~AutocastScope();
  AutocastScope(const AutocastScope&) = delete;
  AutocastScope& operator=(const AutocastScope&) = delete;

 private:
  bool active_ = false, was_enabled_ = false;
  at::DeviceType device_type_ = at::kCPU;
};

// A projection of x by a base weight (and bias), plus its LoRA adapter's (alpha / rank) B A x
// where the layer has one (lora.cpp); dropout on the adapter's input in train steps only.
at::Tensor project(const Model& m, const Layer& L, LoraTarget target, const at::Tensor& x, const at::Tensor& w,
                   const at::Tensor& b = at::Tensor());

// W + (alpha / rank) B A for an adapted base weight's HF name, in the adapter dtype; undefined for
// every other name (lora.cpp).
at::Tensor merged_weight(const Model& m, const std::string& name);

// Marks a model as training (LoRA dropout on) while alive.
class TrainingScope {
 public:
  explicit TrainingScope(Model& m) : m_(m) { m_.training = true; }
  ~TrainingScope() { m_.training = false; }
  TrainingScope(const TrainingScope&) = delete;
  TrainingScope& operator=(const TrainingScope&) = delete;

 private:
  Model& m_;
};

// A packed row's attention plan, made once and read by every layer: each sample's first token,
// runs of consecutive samples of equal length and parent that attend as one batched block, the
// rotary rows of every token, and where K/V are written.
struct RowPlan {
  std::vector<int64_t> lengths, parents, starts;
  std::vector<std::pair<size_t, size_t>> runs;  // [first sample, end sample)
  const KVWrite* kv = nullptr;
  std::vector<at::Tensor> run_writes;  // each run's K/V rows in the cache (kv_rows)
  // Each run's query tokens as (block table, position), for the short prefill's cache attention.
  std::vector<std::pair<std::vector<const BlockTable*>, std::vector<int64_t>>> run_queries;
  at::Tensor cos, sin;
  ContextRowPtr context;  // set when the row is split over ranks: the tokens are this rank's share
};
RowPlan plan_row(Model& m, const at::Tensor& positions, const std::vector<int64_t>& sample_lengths, const KVWrite* kv,
                 const std::vector<int64_t>& parents, ContextRowPtr context = {});

// Layer l of a packed row, with parameters L (the model's own, or a gathered shard's): x [T, hidden]
// -> [T, hidden]. forward_packed is the embedding, this for every layer, and the final norm.
at::Tensor layer_packed(Model& m, const Layer& L, size_t l, const at::Tensor& x, const RowPlan& row);

// Hidden states after the final norm, [T, hidden], for one packed row: token_ids and positions
// are [T] int64 on the model's device; sample_lengths sum to T. Attention never crosses samples,
// except into a shared prefix: parents (empty, or one per sample) gives each sample the earlier
// sample it continues, or -1. A continuation attends to all of its parent's tokens and causally
// to its own; its positions go on from the parent's length (packed_positions). Parents are never
// continuations themselves, and a row with parents writes no K/V (kv must be null). With a
// context split (context.h), token_ids and positions are this rank's tokens of the row and the
// result their hidden states.
at::Tensor forward_packed(Model& m, const at::Tensor& token_ids, const at::Tensor& positions,
                          const std::vector<int64_t>& sample_lengths, const KVWrite* kv = nullptr,
                          const std::vector<int64_t>& parents = {}, const ContextRowPtr& context = {});

// One decode step of B sequences: token_ids [B] int64 on the device, positions and block tables
// (host, B entries each): row b attends to its positions 0..positions[b], its new K/V written at
// positions[b] first (its table covers it). Returns hidden states after the final norm, [B, hidden].
at::Tensor forward_decode(Model& m, KVCache& cache, const at::Tensor& token_ids, const std::vector<int64_t>& positions,
                          const std::vector<const BlockTable*>& tables);

// RMSNorm and the rotary embedding in one pass per row, on the CPU without autograd
// (norm_cpu.cpp): x [N, C] (rows may be strided) -> [N, C]; x [N, heads, D] -> RMSNorm over each
// head (when weight is defined), then the rotary embedding with cos/sin rows [N, D]. Apply to
// float32 / float64 tensors whose last dimension is contiguous.
bool norm_cpu_applies(const at::Tensor& x);
at::Tensor rms_norm_cpu(const at::Tensor& x_N_C, const at::Tensor& weight, double eps);
at::Tensor norm_rope_cpu(const at::Tensor& x_N_h_D, const at::Tensor& weight, double eps, const at::Tensor& cos_N_D,
                         const at::Tensor& sin_N_D);

// at::linear(x, w, b) with b optional; at most 32 rows of float32 without autograd on an AVX2 CPU
// run linear_cpu.cpp's kernel instead (the cpu_linear option): a decode step's products and a
// short prefill's, without BLAS's packing of w.
at::Tensor linear(const Model& m, const at::Tensor& x, const at::Tensor& w, const at::Tensor& b = {});

// Full-vocabulary logits of hidden states [N, hidden] in the compute dtype (float32 or float64).
at::Tensor lm_logits(Model& m, const at::Tensor& hidden);

// Log-probabilities of labels [N] under logits/temperatures (temperatures [N], compute dtype),
// computed m.logits_chunk rows at a time so [N, vocab] float32 logits never exist at once.
// entropy_out, when given, receives the entropy of each row's tempered distribution (no grad).
at::Tensor chunked_logprobs(Model& m, const at::Tensor& hidden, const at::Tensor& labels,
                            const at::Tensor& temperatures, at::Tensor* entropy_out = nullptr);

// Copies a caller array of n elements into a new int64 tensor on the model's device, checking
// every id is inside the vocabulary (the error names the position and the id).
at::Tensor token_tensor(const Model& m, const int32_t* ids, int64_t n, const char* what);

// Positions restarting at 0 for each sample (at its parent's length for a continuation, as
// forward_packed), [T] int64 on the model's device.
at::Tensor packed_positions(const Model& m, const std::vector<int64_t>& sample_lengths,
                            const std::vector<int64_t>& parents = {});

}  // namespace rlx
