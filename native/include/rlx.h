/*
 * rlx.h: the whole C ABI of the rlx shim over libtorch. Hand-written, coarse calls.
 *
 * Conventions
 *   - Names are rlx_<object>_<verb>. Objects are opaque typed handles; every create has a free.
 *   - Every call catches C++ exceptions. On failure it returns -1 (int), NULL (pointer) or NaN
 *     (double), and rlx_last_error() holds the message for the calling thread.
 *   - Handles are validated: a null, freed or wrong-kind handle is an error, never a crash.
 *   - Bulk data crosses as caller-owned arrays with explicit lengths; the shim copies what it keeps.
 *   - Strings returned by the shim (const char*) stay valid until the next call on the same thread.
 *
 * src/native/symbols.ts mirrors every declaration here; test/native/abi.test.ts checks both agree.
 */
#ifndef RLX_H
#define RLX_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define RLX_ABI_VERSION 8

/* Opaque handles: a model, its AdamW optimizer, a generator over a model, a c10d process group. */
typedef struct rlx_model rlx_model;
typedef struct rlx_optim rlx_optim;
typedef struct rlx_gen rlx_gen;
typedef struct rlx_group rlx_group;

/* ---- runtime ------------------------------------------------------------------------------ */

int rlx_abi_version(void);
const char* rlx_last_error(void);
/* Sets the intra-op thread count (at::set_num_threads); n <= 0 means the number of cores. */
int rlx_set_threads(int n);
/* JSON: {"abi","torch_version","torch_lib","threads","cores","blas","blas_path","cuda","cuda_build",
 *        "nccl_built","cuda_runtime","cudnn","gpus":[{"name","memory_gib","capability"}],"mkldnn",
 *        "cxx11_abi","omp_wait_policy"} */
const char* rlx_runtime_info(void);
/* Measured float32 matmul rate: iters products of two n x n matrices, GFLOP/s. */
double rlx_bench_matmul(int n, int iters);
/* The CUDA caching allocator of `device` ("cuda" or "cuda:N"): out[0] bytes allocated now, out[1]
 * the peak since the last reset, out[2] bytes reserved. reset_peak != 0 then starts a new peak.
 * "cpu" (and every device of a CPU build) reports 0, 0, 0. */
int rlx_device_memory(const char* device, int reset_peak, int64_t* out);

/* ---- models ------------------------------------------------------------------------------- */
/* dtype codes used across the ABI: */
#define RLX_F32 0
#define RLX_BF16 1
#define RLX_F16 2
#define RLX_F64 3

/* A decoder-only Llama/Qwen2/Qwen3 model. config_json is a flat JSON object (numbers and
 * booleans) with exactly the keys vocab_size, hidden_size, intermediate_size, num_hidden_layers,
 * num_attention_heads, num_key_value_heads, head_dim, rms_norm_eps, rope_theta,
 * max_position_embeddings, tie_word_embeddings, attention_bias, qk_norm (src/model/config.ts
 * writes it from config.json); an unknown, missing or mistyped key is an error naming it.
 * RoPE scaling adds the string "rope_type": "default" (as when absent), "llama3" with
 * rope_factor, rope_low_freq_factor, rope_high_freq_factor, rope_original_max_position_embeddings,
 * or "yarn" with rope_factor, rope_beta_fast, rope_beta_slow, rope_attention_factor,
 * rope_original_max_position_embeddings and the boolean rope_truncate (transformers'
 * modeling_rope_utils formulas; every key of the chosen type is required, others are refused).
 * dtype: the parameter dtype; device: "cpu" or "cuda[:N]". Parameters are random-initialized
 * (normal, std 0.02; norms 1; biases 0) from seed, identically on every device; load real weights
 * with set_param. float64 models compute in float64 throughout (for finite-difference tests);
 * other dtypes compute norms, softmax and logprobs in float32. */
rlx_model* rlx_model_create(const char* config_json, int dtype, const char* device, uint64_t seed);
int rlx_model_free(rlx_model* model);
/* JSON list of parameters in a fixed order: [{"name": HF name, "shape": [...]}, ...] */
const char* rlx_model_params(rlx_model* model);
/* Copies data (dtype code, shape of ndim dims, which must equal the parameter's) into a parameter,
 * converting to the model's dtype. The error names the parameter and both shapes. */
int rlx_model_set_param(rlx_model* model, const char* name, const void* data, int dtype, const int64_t* shape, int ndim);
/* Copies a parameter out, converted to dtype, into out (nbytes must be exactly its size). */
int rlx_model_get_param(rlx_model* model, const char* name, void* out, int dtype, int64_t nbytes);
/* Copies a parameter's accumulated gradient out like get_param (zeros when it has none). */
int rlx_model_get_grad(rlx_model* model, const char* name, void* out, int dtype, int64_t nbytes);
/* Drops every accumulated gradient (and a pending non-finite-loss mark). */
int rlx_model_zero_grad(rlx_model* model);
/* Options: "autocast_bf16" 0|1 (bf16 autocast for train steps, scoring and generation; default 0),
 * "logits_chunk" tokens per LM-head chunk (0 = auto, the default: 1024, fewer for large vocabularies
 * so a chunk's float32 logits stay near 128 MB on a GPU, under 28 MiB on a CPU), "fused_attention" 0|1 (at::scaled_dot_product_attention
 * on torch >= 2, and a CPU decode step's own attention loops, instead of matmul and softmax; default 1),
 * "cpu_linear" 0|1 (float32 products of at most 32 rows without autograd on an AVX2 CPU, a decode
 * step's and a short prefill's, through rlx's own kernel instead of BLAS; default 1). */
int rlx_model_set_option(rlx_model* model, const char* name, double value);

/* LoRA (docs/lora.md). Adds low-rank adapters to the named projections of every layer:
 * W x + (alpha / rank) B A dropout(x) (PEFT's LoRA Linear), A [rank, d_in] and B [d_out, rank] in
 * float32 (float64 for float64 models) on the model's device, whatever the base dtype. targets:
 * comma-separated PEFT module names among q_proj, k_proj, v_proj, o_proj, gate_proj, up_proj,
 * down_proj. A is kaiming-uniform (PEFT's default init) drawn from seed, B zeros: the model is
 * unchanged until trained. From then on the base parameters are frozen (no gradient),
 * rlx_optim_create and rlx_dist_allreduce_grads cover the adapters only, dropout applies in train
 * steps only, and get_param / set_param / get_grad also take the adapter names
 * rlx_model_lora_params lists (PEFT's saved names: "base_model.model." + module + ".lora_A.weight").
 * The adapters are never merged into the base weights. Once per model. */
int rlx_model_lora_add(rlx_model* model, int rank, double alpha, double dropout, const char* targets, uint64_t seed);
/* JSON list of the adapter tensors, as rlx_model_params ("[]" without LoRA). */
const char* rlx_model_lora_params(rlx_model* model);
/* A base parameter like get_param, with its adapter merged in (W + (alpha / rank) B A, computed in
 * the adapter dtype, then converted) where it has one: full weights for tools without LoRA. */
int rlx_model_get_merged_param(rlx_model* model, const char* name, void* out, int dtype, int64_t nbytes);

/* ---- training ----------------------------------------------------------------------------- */
/* A packed row is n_tokens (T) tokens holding samples of the given lengths (summing to T). Position
 * ids restart at 0 per sample, attention is causal within a sample only, and token t is predicted
 * from token t-1 of its own sample: a sample's first token has no logprob and is left out of every
 * loss component whatever its streams say. The loss (docs/architecture.md §6) is
 *   L = sum(l_rl)/N_rl + sum(l_ce)/N_ce + sum(l_ref_kl)/N_ref_kl + sum(l_distill)/N_distill,
 * members rl = loss_mask & rl_w != 0, ce = ce_w != 0, ref_kl = ref_kl_w != 0, distill =
 * distill_w != 0 (only rl is gated by loss_mask); the N are the caller's max(1, member count) over
 * the whole step (all ranks).
 *
 * Both calls take their inputs as structs whose first field is the struct's size as the caller
 * knows it. The shim reads the fields it knows: a longer struct (a newer caller) is accepted, its
 * extra fields unread; a shorter one (an older caller) is an error naming both sizes. Every field
 * is 8 bytes, so no struct has padding; rlx_abi_layout() gives each field's offset. New inputs are
 * appended, never inserted: the next ones are planned as
 *   rlx_batch: the shard group and which layers a step gathers (sharded training), then the
 *              context-parallel chunk (its offset in the full row, the full length, its ring or
 *              all-to-all group);
 *   rlx_loss:  a per-sample loss table (a loss code and its parameters for each sample). */

/* The packed row. Per-token streams are [T], float ones float32. */
typedef struct rlx_batch {
  int64_t size;                     /* sizeof(rlx_batch) of the caller */
  int64_t n_tokens;                 /* T >= 1 (rlx_loss_eval: >= 0) */
  int64_t n_samples;
  int64_t n_envs;                   /* metric blocks after the row's: env 0..n_envs-1 */
  int64_t distill_k;                /* top-k slots per distill member token */
  const int32_t* token_ids;         /* rlx_loss_eval ignores it */
  const int32_t* sample_lengths;    /* [n_samples]; rlx_loss_eval: NULL = one sample */
  const int32_t* sample_parents;    /* [n_samples] or NULL; see below; rlx_loss_eval ignores it */
  const uint8_t* loss_mask;         /* 1 = sampled action token */
  const float* advantages;
  const float* inference_logprobs;
  const float* temperatures;        /* > 0, logits are divided by it; rlx_loss_eval ignores it */
  const float* ref_logprobs;        /* NULL: none */
  const float* rl_weights;          /* NULL: 1 */
  const float* ce_weights;          /* NULL: 0 */
  const float* ref_kl_weights;      /* NULL: 0 */
  const float* distill_weights;     /* NULL: no distill member */
  const float* distill_betas;       /* NULL: 0 */
  const int32_t* distill_ids;       /* [T * distill_k], -1 = empty slot */
  const float* distill_logprobs;    /* [T * distill_k] */
  const int32_t* env_index;         /* NULL, or each token's env (-1 = none) */
} rlx_batch;
/* Shared prefixes (docs/architecture.md §4): sample_parents gives each sample the earlier sample
 * whose tokens it continues, or -1. A continuation attends to all of its parent's tokens and
 * causally to its own, its positions go on from the parent's length, and its loss and gradient
 * are those of it packed after its own copy of the parent. A parent is never a continuation (one
 * level); a continuation's first token is predicted by nothing (a packer repeats the parent's last
 * token there).
 * Distill: per member token the target is distill_k (id, logprob) slots (ids distinct) plus one
 * tail bucket holding the rest of its mass, max(1 - sum exp, 1e-8); the student's buckets are its
 * temperature-1 logprobs of those ids and of every other id. distill_betas picks the divergence:
 * 0 forward KL(target || student), 1 reverse KL, between them the generalized JSD. */

/* The loss settings: the rl component's type and reduction, the global denominators, the knobs. */
typedef struct rlx_loss {
  int64_t size;                     /* sizeof(rlx_loss) of the caller */
  int64_t type;                     /* RLX_RL_* */
  int64_t reduction;                /* RLX_REDUCE_* */
  double n_rl, n_ce, n_ref_kl;      /* >= 1 */
  double n_distill;                 /* >= 1, or 0 when no token is a distill member */
  double n_rl_sequences;            /* max(1, samples with an rl member): sequence, constant */
  double constant;                  /* RLX_REDUCE_CONSTANT's divisor per sample (Dr. GRPO) */
  double mask_low, mask_high;       /* dppo_mask_low / high: 0.2 */
  double adv_tau, kl_tau;           /* 1.0, 1e-3 */
  double ipo_threshold;             /* RLX_RL_IPO: masked where |exp(lp) - exp(ilp)| > it; 0.1 */
  double is_low, is_high;           /* RLX_RL_ICEPOP keeps ratios in [is_low, is_high]; 0.5, 5 */
  double is_cap;                    /* TIS clips, MIS masks the ratio above it; 2.0 */
} rlx_loss;
#define RLX_RL_DPPO_KL 0  /* prime-rl's default: probability-difference trust region + KL */
#define RLX_RL_IPO 1      /* the same with a symmetric mask |dp| > ipo_threshold */
#define RLX_RL_ICEPOP 2   /* token ratio outside [is_low, is_high] masked */
#define RLX_RL_TIS 3      /* token ratio truncated at is_cap */
#define RLX_RL_MIS 4      /* token ratio above is_cap masked */
#define RLX_RL_SEQ_TIS 5  /* the sample's ratio (product over its rl members) truncated at is_cap */
#define RLX_RL_SEQ_MIS 6  /* the whole sample masked when its ratio exceeds is_cap */
#define RLX_REDUCE_TOKEN 0     /* sum / N_rl */
#define RLX_REDUCE_SEQUENCE 1  /* each sample's mean over its members, averaged over N_rl_sequences */
#define RLX_REDUCE_CONSTANT 2  /* each sample's sum / constant, averaged over N_rl_sequences */

/* Metrics: RLX_METRICS_FIELDS doubles for the whole row, then the same block for each env. All are
 * sums over tokens, so blocks from several micro-batches add up. */
#define RLX_M_LOSS 0             /* this micro-batch's contribution to L */
#define RLX_M_RL_SUM 1           /* sum of l_rl (before / N_rl) */
#define RLX_M_RL_COUNT 2
#define RLX_M_CE_SUM 3
#define RLX_M_CE_COUNT 4
#define RLX_M_REF_KL_SUM 5
#define RLX_M_REF_KL_COUNT 6
#define RLX_M_MISMATCH_KL_SUM 7  /* ratio - log ratio - 1 over loss_mask & (rl | ref_kl member) */
#define RLX_M_MISMATCH_KL_COUNT 8
#define RLX_M_ENTROPY_SUM 9      /* entropy of the tempered distribution over loss_mask tokens */
#define RLX_M_ENTROPY_COUNT 10
#define RLX_M_MASKED_LOW 11      /* rl members dropped from the policy term, A <= 0 side */
#define RLX_M_MASKED_HIGH 12     /* rl members dropped from the policy term, A > 0 side */
#define RLX_M_REF_KL_MASKED 13   /* ref_kl members dropped from the policy term */
#define RLX_M_REF_KL_ADV_SUM 14  /* sum of ref_lp - lp over ref_kl members (the "ref_kl" metric) */
#define RLX_M_NLL_SUM 15         /* sum of -lp over ce members (unweighted) */
#define RLX_M_TOKENS 16          /* tokens in the row (or env) */
#define RLX_M_DISTILL_SUM 17     /* sum of l_distill (before / N_distill) */
#define RLX_M_DISTILL_COUNT 18
#define RLX_METRICS_FIELDS 19

/* JSON: {"rlx_batch": {"size": bytes, "fields": {name: offset, ...}}, "rlx_loss": {...}}, the
 * layout this shim was compiled with (src/native/abi_layout.ts packs the same). */
const char* rlx_abi_layout(void);
/* Forward + backward of one packed micro-batch; gradients accumulate into the parameters across
 * calls. No member tokens: loss 0, zero gradient. A non-finite loss skips the backward and makes
 * the next rlx_optim_step skip its update. n_metrics must be RLX_METRICS_FIELDS * (1 + n_envs).
 * Errors: a struct shorter than the shim's, a stream of the wrong length or range (named). */
int rlx_train_step(rlx_model* model, const rlx_batch* batch, const rlx_loss* loss, double* metrics, int64_t n_metrics);
/* The same loss over given trainer logprobs [T] (float64, every token valid), without a model:
 * metrics as above (entropy 0); grad_out (may be NULL) receives dL/dlogprobs [T]. Distill members
 * need the student's temperature-1 logits [T * vocab] (NULL when none is a member) and
 * grad_logits_out (may be NULL) receives dL/dlogits. */
int rlx_loss_eval(const rlx_batch* batch, const rlx_loss* loss, const double* logprobs, int64_t vocab,
                  const double* student_logits, double* metrics, int64_t n_metrics, double* grad_out,
                  double* grad_logits_out);

/* ---- optimizer ---------------------------------------------------------------------------- */
/* AdamW over all of the model's parameters (decoupled weight decay, as torch.optim.AdamW); over
 * its LoRA adapters only when it has them (create it after rlx_model_lora_add). The optimizer
 * keeps its own references to the parameters. */
rlx_optim* rlx_optim_create(rlx_model* model, double beta1, double beta2, double eps, double weight_decay);
int rlx_optim_free(rlx_optim* optim);
int rlx_optim_zero_grad(rlx_optim* optim);
/* Global grad-norm clipping (max_grad_norm <= 0: none), then the AdamW update, then the gradients
 * are cleared. If the gradient norm is not finite, or a train step since the last update had a
 * non-finite loss, the update is skipped (skipped = 1) and the gradients are cleared. */
#define RLX_OPTIM_GRAD_NORM 0 /* the global norm before clipping */
#define RLX_OPTIM_SKIPPED 1
#define RLX_OPTIM_STEP 2      /* updates applied so far */
#define RLX_OPTIM_OUT_LEN 3
int rlx_optim_step(rlx_optim* optim, double lr, double max_grad_norm, double* out, int n_out);
/* Optimizer state (step count, exp_avg and exp_avg_sq per parameter) as a byte image for
 * checkpoints: size, save into a caller buffer of exactly that size, load from one. */
int64_t rlx_optim_state_size(rlx_optim* optim);
int rlx_optim_state_save(rlx_optim* optim, void* out, int64_t nbytes);
int rlx_optim_state_load(rlx_optim* optim, const void* data, int64_t nbytes);

/* ---- generation and scoring --------------------------------------------------------------- */
/* A generator: a KV cache of `slots` sequences of up to `capacity` tokens each (prompt plus
 * generated), for continuous batching. Sequences are added (batched prefill), stepped together
 * (one token each per step) and free their slot when they finish. Logprobs are
 * log_softmax(logits / temperature) of the chosen token over the full distribution, before
 * top-k/top-p truncation, i.e. what the trainer computes; temperature 0 is greedy and reports the
 * temperature-1 logprob. Each sequence samples from its own generator seeded with its seed. */
rlx_gen* rlx_gen_create(rlx_model* model, int slots, int capacity);
int rlx_gen_free(rlx_gen* gen);
int rlx_gen_free_slots(rlx_gen* gen);
/* Rebinds a generator to another model of the same architecture (layers, attention and KV
 * heads, head dim, hidden size, vocabulary, rope_theta and RoPE scaling, dtype, device; an error names the first
 * that differs). The KV cache and every running sequence are kept: later steps run the new
 * weights over K/V the old ones computed (in-flight weight updates, PipelineRL). The generator
 * no longer uses the old model, which may then be freed. */
int rlx_gen_set_model(rlx_gen* gen, rlx_model* model);
/* Per-sequence sampling settings: RLX_SAMPLING_FIELDS doubles each. */
#define RLX_SAMPLE_TEMPERATURE 0
#define RLX_SAMPLE_TOP_P 1          /* (0, 1]; 1 = off */
#define RLX_SAMPLE_TOP_K 2          /* 0 = off */
#define RLX_SAMPLE_MAX_NEW_TOKENS 3
#define RLX_SAMPLE_SEED 4           /* an integer below 2^53 */
#define RLX_SAMPLING_FIELDS 5
/* Finish reasons */
#define RLX_FINISH_NONE 0
#define RLX_FINISH_STOP 1   /* a stop token was sampled (it is the last token returned) */
#define RLX_FINISH_LENGTH 2 /* max_new_tokens reached, or prompt + generated reached capacity */
/* Adds n sequences: prompts concatenated in prompt_ids with prompt_lengths, sampling settings
 * [n * RLX_SAMPLING_FIELDS], stop token ids concatenated with stop_counts[n]; a prompt is 1 to
 * capacity - 1 tokens. There must be n free slots (rlx_gen_free_slots). Prefills them and
 * samples each one's first token; out_* [n] receive the slot, token, logprob, finish reason. */
int rlx_gen_add(rlx_gen* gen, int n, const int32_t* prompt_ids, const int32_t* prompt_lengths, const double* sampling,
                const int32_t* stop_ids, const int32_t* stop_counts, int32_t* out_slots, int32_t* out_tokens,
                float* out_logprobs, int32_t* out_finish);
/* One decode step for every running sequence. Returns how many tokens were produced (0 when
 * none is running); entry j of out_* is (slot, token, logprob, finish). n_out >= slots. */
int rlx_gen_step(rlx_gen* gen, int32_t* out_slots, int32_t* out_tokens, float* out_logprobs, int32_t* out_finish, int n_out);
/* Cancels the sequence in a slot. */
int rlx_gen_remove(rlx_gen* gen, int slot);
/* The k most likely tokens of each distribution the last rlx_gen_add or rlx_gen_step
 * sampled from (n must be the count it reported; entry j is that call's entry j): out_ids and
 * out_logprobs [n * k], most likely first, log_softmax(logits / temperature) as the reported
 * logprob (temperature 1 for greedy rows), before top-k/top-p truncation. out_ranks (may be NULL)
 * [n]: the 1-based rank of the chosen token (tokens at least as likely, itself included). k may
 * be 0 (ranks only). Computed in the shim from the distributions the call kept (the sampler's CPU
 * copy): only n * k values cross to the caller. */
int rlx_gen_top_logprobs(rlx_gen* gen, int n, int k, int32_t* out_ids, float* out_logprobs, int32_t* out_ranks);
/* A slot keeps its K/V after its sequence ends, with the tokens they belong to, until the
 * slot is needed; a prompt added later that begins with at least 16 of those tokens takes that
 * slot over and prefills only the rest (a tool episode's next turn: its previous turn plus the
 * tool's reply). Tokens, logprobs and sampling are those of a full prefill (to rounding).
 * Prompts without a match take empty slots first, then the least recently used kept ones;
 * rlx_gen_set_model drops every kept prefix. out[RLX_GEN_STATS_LEN]: since creation, the prompts
 * added, their tokens, and the tokens taken from kept K/V instead of prefilled. */
#define RLX_GEN_STATS_PROMPTS 0
#define RLX_GEN_STATS_PROMPT_TOKENS 1
#define RLX_GEN_STATS_REUSED_TOKENS 2
#define RLX_GEN_STATS_LEN 3
int rlx_gen_cache_stats(rlx_gen* gen, int64_t* out, int n_out);
/* Generator options: "keep_prefixes" 1 (default) or 0, where a prompt never continues a
 * kept slot and takes the lowest free slots (every prefill is a full one, and what comes out no
 * longer depends on which requests came before; rlx train's deterministic mode). */
int rlx_gen_set_option(rlx_gen* gen, const char* name, double value);
/* Prefill logprobs of n sequences (concatenated, total tokens): out_logprobs[t] = log p(token t |
 * tokens before it in its sequence) under logits / temperatures[t] (NULL = 1); the first token of
 * each sequence gets 0 (no prediction). out_entropy (may be NULL): the entropy of that
 * distribution. Sequences are packed into rows of at most row_tokens (<= 0: one row). */
int rlx_score(rlx_model* model, int64_t total, const int32_t* token_ids, const int32_t* lengths, int n,
              const float* temperatures, int64_t row_tokens, float* out_logprobs, float* out_entropy);
/* rlx_score with, per token t, out_ranks[t] (may be NULL): the 1-based rank of token t in
 * its tempered distribution (tokens at least as likely, itself included), and out_top_ids /
 * out_top_logprobs [total * k] (k in 0..vocab_size): the k most likely tokens, most likely first.
 * The first token of each sequence gets logprob 0, rank 0, ids -1 and logprobs 0. The top-k is
 * taken chunk by chunk in the shim; out_logprobs are bit-identical to rlx_score's. */
int rlx_score_top(rlx_model* model, int64_t total, const int32_t* token_ids, const int32_t* lengths, int n,
                  const float* temperatures, int64_t row_tokens, int k, float* out_logprobs, int32_t* out_ranks,
                  int32_t* out_top_ids, float* out_top_logprobs);

/* ---- distributed (data-parallel trainer ranks over c10d) --------------------------------- */
/* A process group of world_size ranks joined by a c10d store. backend: "gloo" (CPU; needs a
 * shim built with -DUSE_C10D_GLOO) or "nccl" (CUDA libtorch only; tensors on the current CUDA
 * device). store: "tcp" (address = host, rank 0 serves the TCPStore on port) or "file"
 * (address = a path on a filesystem every rank sees; it must not hold a previous run's store).
 * timeout_ms bounds the rendezvous and every collective: a rank that dies or never arrives makes
 * the others fail with an error naming this rank and the call, never a hang. After a failed
 * collective the group refuses further calls. Where the backend was not compiled in, create
 * fails saying so; rlx_dist_available tells beforehand (1 yes, 0 no). */
int rlx_dist_available(const char* backend);
rlx_group* rlx_dist_create(const char* backend, const char* store, const char* address, int port, int rank, int world_size,
                      int64_t timeout_ms);
int rlx_dist_free(rlx_group* group);
/* Sums every parameter's gradient over the ranks, in place, in buckets of about bucket_bytes
 * (<= 0: 25 MiB). SUM, not mean: rlx's losses are divided by global token counts (all ranks), so
 * the summed gradient is the single-rank gradient of the whole step. A parameter without a
 * gradient counts as zeros and has one afterwards. A non-finite-loss mark on any rank is set on
 * all, so every rank skips the same optimizer update. */
int rlx_dist_allreduce_grads(rlx_group* group, rlx_model* model, int64_t bucket_bytes);
/* Reduces n values in place over the ranks. dtype: RLX_F32, RLX_F64 or RLX_I64; op: below. */
#define RLX_I64 4 /* int64: rlx_dist_allreduce only */
#define RLX_DIST_SUM 0
#define RLX_DIST_MIN 1
#define RLX_DIST_MAX 2
int rlx_dist_allreduce(rlx_group* group, void* data, int dtype, int64_t n, int op);
/* Copies root's parameters to every rank (bit-exact, any dtype). */
int rlx_dist_broadcast_params(rlx_group* group, rlx_model* model, int root);
/* Checks that every rank holds bit-identical parameters (a 64-bit digest per parameter): 0, or an
 * error naming how many differ and the first one. */
int rlx_dist_verify_params(rlx_group* group, rlx_model* model);
int rlx_dist_barrier(rlx_group* group);

#ifdef __cplusplus
}
#endif

#endif /* RLX_H */
