/*
 * rlx.h: the whole C ABI of the rlx shim over libtorch. Hand-written, coarse calls.
 *
 * Conventions
 *   - Names are rlx_<object>_<verb>. Objects are opaque handles (void*); every create has a free.
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

#define RLX_ABI_VERSION 7

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
 * RoPE scaling (ABI 3) adds the string "rope_type": "default" (as when absent), "llama3" with
 * rope_factor, rope_low_freq_factor, rope_high_freq_factor, rope_original_max_position_embeddings,
 * or "yarn" with rope_factor, rope_beta_fast, rope_beta_slow, rope_attention_factor,
 * rope_original_max_position_embeddings and the boolean rope_truncate (transformers'
 * modeling_rope_utils formulas; every key of the chosen type is required, others are refused).
 * dtype: the parameter dtype; device: "cpu" or "cuda[:N]". Parameters are random-initialized
 * (normal, std 0.02; norms 1; biases 0) from seed, identically on every device; load real weights
 * with set_param. float64 models compute in float64 throughout (for finite-difference tests);
 * other dtypes compute norms, softmax and logprobs in float32. */
void* rlx_model_create(const char* config_json, int dtype, const char* device, uint64_t seed);
int rlx_model_free(void* model);
/* JSON list of parameters in a fixed order: [{"name": HF name, "shape": [...]}, ...] */
const char* rlx_model_params(void* model);
/* Copies data (dtype code, shape of ndim dims, which must equal the parameter's) into a parameter,
 * converting to the model's dtype. The error names the parameter and both shapes. */
int rlx_model_set_param(void* model, const char* name, const void* data, int dtype, const int64_t* shape, int ndim);
/* Copies a parameter out, converted to dtype, into out (nbytes must be exactly its size). */
int rlx_model_get_param(void* model, const char* name, void* out, int dtype, int64_t nbytes);
/* Copies a parameter's accumulated gradient out like get_param (zeros when it has none). */
int rlx_model_get_grad(void* model, const char* name, void* out, int dtype, int64_t nbytes);
/* Drops every accumulated gradient (and a pending non-finite-loss mark). */
int rlx_model_zero_grad(void* model);
/* Options: "autocast_bf16" 0|1 (bf16 autocast for train steps, scoring and generation; default 0),
 * "logits_chunk" tokens per LM-head chunk (0 = auto, the default: 1024, fewer for large vocabularies
 * so a chunk's float32 logits stay near 128 MB on a GPU, under 28 MiB on a CPU), "fused_attention" 0|1 (at::scaled_dot_product_attention
 * on torch >= 2, and a CPU decode step's own attention loops, instead of matmul and softmax; default 1),
 * "cpu_linear" 0|1 (float32 products of at most 32 rows without autograd on an AVX2 CPU, a decode
 * step's and a short prefill's, through rlx's own kernel instead of BLAS; default 1). */
int rlx_model_set_option(void* model, const char* name, double value);

/* ABI 5: LoRA (docs/lora.md). Adds low-rank adapters to the named projections of every layer:
 * W x + (alpha / rank) B A dropout(x) (PEFT's LoRA Linear), A [rank, d_in] and B [d_out, rank] in
 * float32 (float64 for float64 models) on the model's device, whatever the base dtype. targets:
 * comma-separated PEFT module names among q_proj, k_proj, v_proj, o_proj, gate_proj, up_proj,
 * down_proj. A is kaiming-uniform (PEFT's default init) drawn from seed, B zeros: the model is
 * unchanged until trained. From then on the base parameters are frozen (no gradient),
 * rlx_optim_create and rlx_dist_allreduce_grads cover the adapters only, dropout applies in train
 * steps only, and get_param / set_param / get_grad also take the adapter names
 * rlx_model_lora_params lists (PEFT's saved names: "base_model.model." + module + ".lora_A.weight").
 * The adapters are never merged into the base weights. Once per model. */
int rlx_model_lora_add(void* model, int rank, double alpha, double dropout, const char* targets, uint64_t seed);
/* JSON list of the adapter tensors, as rlx_model_params ("[]" without LoRA). */
const char* rlx_model_lora_params(void* model);
/* A base parameter like get_param, with its adapter merged in (W + (alpha / rank) B A, computed in
 * the adapter dtype, then converted) where it has one: full weights for tools without LoRA. */
int rlx_model_get_merged_param(void* model, const char* name, void* out, int dtype, int64_t nbytes);

/* ---- training ----------------------------------------------------------------------------- */
/* A packed row is T tokens holding samples of the given lengths (summing to T). Position ids
 * restart at 0 per sample, attention is causal within a sample only, and token t is predicted
 * from token t-1 of its own sample: the first token of each sample has no logprob and is left
 * out of every loss component whatever its mask or weights say.
 *
 * Per-token streams (length T; float streams are float32):
 *   loss_mask (uint8, 1 = sampled action token), advantages, inference_logprobs, temperatures
 *   (> 0; the sampling temperature of each token: logits are divided by it) are required;
 *   ref_logprobs, rl_weights, ce_weights, ref_kl_weights and env_index (int32, -1 = no env) may
 *   be NULL. Absent weights mean rl 1 on loss_mask, ce 0, ref_kl 0.
 * Loss (docs/architecture.md §6): L = sum(l_rl)/N_rl + sum(l_ce)/N_ce + sum(l_ref_kl)/N_ref_kl, members
 *   rl = loss_mask & rl_w != 0, ce = ce_w != 0 (not gated by loss_mask), ref_kl = ref_kl_w != 0;
 *   the denominators are the caller's max(1, member count) over the whole step (all ranks). */
#define RLX_LOSS_N_RL 0
#define RLX_LOSS_N_CE 1
#define RLX_LOSS_N_REF_KL 2
#define RLX_LOSS_MASK_LOW 3  /* dppo_mask_low, default 0.2 */
#define RLX_LOSS_MASK_HIGH 4 /* dppo_mask_high, default 0.2 */
#define RLX_LOSS_ADV_TAU 5   /* default 1.0 */
#define RLX_LOSS_KL_TAU 6    /* default 1e-3 */
#define RLX_LOSS_CONFIG_LEN 7
/* ABI 4: the rl component's loss type and reduction (docs/architecture.md §6), read by the _ext
 * calls when they are given RLX_LOSS_CONFIG_LEN_EXT doubles (with RLX_LOSS_CONFIG_LEN: DPPO+KL,
 * token mean, as the ABI 3 calls). */
#define RLX_LOSS_TYPE 7             /* RLX_RL_*, default RLX_RL_DPPO_KL */
#define RLX_LOSS_REDUCTION 8        /* RLX_REDUCE_*, default RLX_REDUCE_TOKEN */
#define RLX_LOSS_N_RL_SEQUENCES 9   /* max(1, samples with an rl member over the whole step, all ranks) */
#define RLX_LOSS_CONSTANT 10        /* RLX_REDUCE_CONSTANT's divisor per sample (Dr. GRPO: max tokens) */
#define RLX_LOSS_IPO_THRESHOLD 11   /* RLX_RL_IPO: masked where |exp(lp) - exp(ilp)| > this; 0.1 */
#define RLX_LOSS_IS_LOW 12          /* RLX_RL_ICEPOP keeps ratios in [is_low, is_high]; 0.5 */
#define RLX_LOSS_IS_HIGH 13         /* 5.0 */
#define RLX_LOSS_IS_CAP 14          /* TIS clips, MIS masks the (token or sequence) ratio above it; 2.0 */
#define RLX_LOSS_CONFIG_LEN_EXT 15
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
/* ABI 6: the distill component's denominator, read by the _distill calls when they are given
 * RLX_LOSS_CONFIG_LEN_DISTILL doubles (a row with distill members needs it). */
#define RLX_LOSS_N_DISTILL 15       /* max(1, distill members over the whole step, all ranks) */
#define RLX_LOSS_CONFIG_LEN_DISTILL 16

/* Metrics: RLX_METRICS_FIELDS doubles for the whole row, then the same block for each env
 * 0..n_envs-1 (tokens of that env_index). All are sums over tokens, so blocks from several
 * micro-batches add up; divide by the matching count for means. */
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
#define RLX_METRICS_FIELDS 17
/* ABI 6: the _distill calls' metric blocks are RLX_METRICS_FIELDS_DISTILL wide, the 17 above then: */
#define RLX_M_DISTILL_SUM 17     /* sum of l_distill (before / N_distill) */
#define RLX_M_DISTILL_COUNT 18
#define RLX_METRICS_FIELDS_DISTILL 19

/* Forward + backward of one packed micro-batch; gradients accumulate into the parameters across
 * calls. A micro-batch with no member tokens gives loss 0 and adds zero gradient. A non-finite
 * loss skips the backward and makes the next rlx_optim_step skip its update. metrics: n_metrics
 * must be RLX_METRICS_FIELDS * (1 + n_envs). */
int rlx_train_step(void* model, int64_t T, const int32_t* token_ids, const int32_t* sample_lengths, int n_samples,
                   const uint8_t* loss_mask, const float* advantages, const float* inference_logprobs,
                   const float* temperatures, const float* ref_logprobs, const float* rl_weights,
                   const float* ce_weights, const float* ref_kl_weights, const int32_t* env_index, int n_envs,
                   const double* loss_config, double* metrics, int64_t n_metrics);
/* ABI 4: rlx_train_step with the loss config's length: RLX_LOSS_CONFIG_LEN or
 * RLX_LOSS_CONFIG_LEN_EXT (the loss type and reduction); rlx_train_step is this call with 7. */
int rlx_train_step_ext(void* model, int64_t T, const int32_t* token_ids, const int32_t* sample_lengths, int n_samples,
                       const uint8_t* loss_mask, const float* advantages, const float* inference_logprobs,
                       const float* temperatures, const float* ref_logprobs, const float* rl_weights,
                       const float* ce_weights, const float* ref_kl_weights, const int32_t* env_index, int n_envs,
                       const double* loss_config, int n_loss_config, double* metrics, int64_t n_metrics);
/* ABI 6: rlx_train_step_ext with the distill component (docs/architecture.md §6), a fourth term
 * sum(l_distill)/N_distill over members distill_w != 0 (not gated by loss_mask). Per member token
 * t, a target distribution is given as distill_k slots: distill_ids [T * k] (-1 = empty slot; the
 * ids of one token distinct) and distill_logprobs [T * k] (its logprob of each id), the rest of
 * its mass, max(1 - sum exp, 1e-8), one tail bucket; the student's buckets are its
 * temperature-1 logprobs of the k ids and of every other id (no tail when the ids cover the
 * vocabulary: the divergence is then the exact one). distill_betas [T] (NULL = 0) chooses the
 * divergence per token: 0 forward KL(target || student), 1 reverse KL(student || target), in
 * between the generalized JSD beta KL(target || M) + (1 - beta) KL(student || M), M = beta target
 * + (1 - beta) student. l_distill = divergence * distill_w. distill_weights NULL: no member (the
 * ABI 4 step, bit-identical). loss_config: 7, 15 or RLX_LOSS_CONFIG_LEN_DISTILL doubles (the
 * last needed when a member exists); metrics: RLX_METRICS_FIELDS_DISTILL * (1 + n_envs). */
int rlx_train_step_distill(void* model, int64_t T, const int32_t* token_ids, const int32_t* sample_lengths,
                           int n_samples, const uint8_t* loss_mask, const float* advantages,
                           const float* inference_logprobs, const float* temperatures, const float* ref_logprobs,
                           const float* rl_weights, const float* ce_weights, const float* ref_kl_weights,
                           const float* distill_weights, const float* distill_betas, int distill_k,
                           const int32_t* distill_ids, const float* distill_logprobs, const int32_t* env_index,
                           int n_envs, const double* loss_config, int n_loss_config, double* metrics, int64_t n_metrics);
/* ABI 7: rlx_train_step_distill over a shared-prefix row (docs/architecture.md §4). sample_parents
 * [n_samples] (may be NULL: none shared) gives each sample the earlier sample of the row whose
 * tokens it continues, or -1. A continuation attends to all of its parent's tokens and causally to
 * its own, and its positions go on from the parent's length, so the parent (a group's prompt, an
 * env's system prompt) is computed once for all its continuations; the loss and gradient are those
 * of each continuation packed after its own copy of the parent. A parent is never a continuation
 * (one level), and, as every sample's first token, a continuation's first token is predicted by
 * nothing: a packer puts the parent's last token there again. */
int rlx_train_step_shared(void* model, int64_t T, const int32_t* token_ids, const int32_t* sample_lengths,
                          const int32_t* sample_parents, int n_samples, const uint8_t* loss_mask, const float* advantages,
                          const float* inference_logprobs, const float* temperatures, const float* ref_logprobs,
                          const float* rl_weights, const float* ce_weights, const float* ref_kl_weights,
                          const float* distill_weights, const float* distill_betas, int distill_k,
                          const int32_t* distill_ids, const float* distill_logprobs, const int32_t* env_index,
                          int n_envs, const double* loss_config, int n_loss_config, double* metrics, int64_t n_metrics);
/* The same loss over given trainer logprobs (float64, every token valid), in float64 without a
 * model: metrics as above (entropy fields 0) and, if grad_out is not NULL, dL/dlogprobs [T]. */
int rlx_loss_eval(int64_t T, const double* logprobs, const uint8_t* loss_mask, const float* advantages,
                  const float* inference_logprobs, const float* ref_logprobs, const float* rl_weights,
                  const float* ce_weights, const float* ref_kl_weights, const int32_t* env_index, int n_envs,
                  const double* loss_config, double* metrics, int64_t n_metrics, double* grad_out);
/* ABI 4: rlx_loss_eval with the row's samples (sample_lengths may be NULL: one sample; every token
 * stays valid) for the sequence-level types and reductions, and the loss config's length. */
int rlx_loss_eval_ext(int64_t T, const double* logprobs, const int32_t* sample_lengths, int n_samples,
                      const uint8_t* loss_mask, const float* advantages, const float* inference_logprobs,
                      const float* ref_logprobs, const float* rl_weights, const float* ce_weights,
                      const float* ref_kl_weights, const int32_t* env_index, int n_envs, const double* loss_config,
                      int n_loss_config, double* metrics, int64_t n_metrics, double* grad_out);

/* ABI 6: rlx_loss_eval_ext with the distill component: the student's distribution at each token
 * is given as float64 logits [T * vocab] (temperature 1; may be NULL when no token is a distill
 * member), and grad_logits_out (may be NULL) receives dL/dlogits [T * vocab]. Metrics are
 * RLX_METRICS_FIELDS_DISTILL wide. */
int rlx_loss_eval_distill(int64_t T, const double* logprobs, const int32_t* sample_lengths, int n_samples,
                          const uint8_t* loss_mask, const float* advantages, const float* inference_logprobs,
                          const float* ref_logprobs, const float* rl_weights, const float* ce_weights,
                          const float* ref_kl_weights, const float* distill_weights, const float* distill_betas,
                          int distill_k, const int32_t* distill_ids, const float* distill_logprobs, int64_t vocab,
                          const double* student_logits, const int32_t* env_index, int n_envs,
                          const double* loss_config, int n_loss_config, double* metrics, int64_t n_metrics,
                          double* grad_out, double* grad_logits_out);

/* ---- optimizer ---------------------------------------------------------------------------- */
/* AdamW over all of the model's parameters (decoupled weight decay, as torch.optim.AdamW); over
 * its LoRA adapters only when it has them (create it after rlx_model_lora_add). The optimizer
 * keeps its own references to the parameters. */
void* rlx_optim_create(void* model, double beta1, double beta2, double eps, double weight_decay);
int rlx_optim_free(void* optim);
int rlx_optim_zero_grad(void* optim);
/* Global grad-norm clipping (max_grad_norm <= 0: none), then the AdamW update, then the gradients
 * are cleared. If the gradient norm is not finite, or a train step since the last update had a
 * non-finite loss, the update is skipped (skipped = 1) and the gradients are cleared. */
#define RLX_OPTIM_GRAD_NORM 0 /* the global norm before clipping */
#define RLX_OPTIM_SKIPPED 1
#define RLX_OPTIM_STEP 2      /* updates applied so far */
#define RLX_OPTIM_OUT_LEN 3
int rlx_optim_step(void* optim, double lr, double max_grad_norm, double* out, int n_out);
/* Optimizer state (step count, exp_avg and exp_avg_sq per parameter) as a byte image for
 * checkpoints: size, save into a caller buffer of exactly that size, load from one. */
int64_t rlx_optim_state_size(void* optim);
int rlx_optim_state_save(void* optim, void* out, int64_t nbytes);
int rlx_optim_state_load(void* optim, const void* data, int64_t nbytes);

/* ---- generation and scoring --------------------------------------------------------------- */
/* A generator: a KV cache of `slots` sequences of up to `capacity` tokens each (prompt plus
 * generated), for continuous batching. Sequences are added (batched prefill), stepped together
 * (one token each per step) and free their slot when they finish. Logprobs are
 * log_softmax(logits / temperature) of the chosen token over the full distribution, before
 * top-k/top-p truncation, i.e. what the trainer computes; temperature 0 is greedy and reports the
 * temperature-1 logprob. Each sequence samples from its own generator seeded with its seed. */
void* rlx_gen_create(void* model, int slots, int capacity);
int rlx_gen_free(void* gen);
int rlx_gen_free_slots(void* gen);
/* Rebinds a generator to another model of the same architecture (layers, attention and KV
 * heads, head dim, hidden size, vocabulary, rope_theta and RoPE scaling, dtype, device; an error names the first
 * that differs). The KV cache and every running sequence are kept: later steps run the new
 * weights over K/V the old ones computed (in-flight weight updates, PipelineRL). The generator
 * no longer uses the old model, which may then be freed. */
int rlx_gen_set_model(void* gen, void* model);
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
int rlx_gen_add(void* gen, int n, const int32_t* prompt_ids, const int32_t* prompt_lengths, const double* sampling,
                const int32_t* stop_ids, const int32_t* stop_counts, int32_t* out_slots, int32_t* out_tokens,
                float* out_logprobs, int32_t* out_finish);
/* One decode step for every running sequence. Returns how many tokens were produced (0 when
 * none is running); entry j of out_* is (slot, token, logprob, finish). n_out >= slots. */
int rlx_gen_step(void* gen, int32_t* out_slots, int32_t* out_tokens, float* out_logprobs, int32_t* out_finish, int n_out);
/* Cancels the sequence in a slot. */
int rlx_gen_remove(void* gen, int slot);
/* ABI 4. The k most likely tokens of each distribution the last rlx_gen_add or rlx_gen_step
 * sampled from (n must be the count it reported; entry j is that call's entry j): out_ids and
 * out_logprobs [n * k], most likely first, log_softmax(logits / temperature) as the reported
 * logprob (temperature 1 for greedy rows), before top-k/top-p truncation. out_ranks (may be NULL)
 * [n]: the 1-based rank of the chosen token (tokens at least as likely, itself included). k may
 * be 0 (ranks only). Computed in the shim from the distributions the call kept (the sampler's CPU
 * copy): only n * k values cross to the caller. */
int rlx_gen_top_logprobs(void* gen, int n, int k, int32_t* out_ids, float* out_logprobs, int32_t* out_ranks);
/* ABI 7. A slot keeps its K/V after its sequence ends, with the tokens they belong to, until the
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
int rlx_gen_cache_stats(void* gen, int64_t* out, int n_out);
/* ABI 7. Generator options: "keep_prefixes" 1 (default) or 0, where a prompt never continues a
 * kept slot and takes the lowest free slots (every prefill is a full one, and what comes out no
 * longer depends on which requests came before; rlx train's deterministic mode). */
int rlx_gen_set_option(void* gen, const char* name, double value);
/* Prefill logprobs of n sequences (concatenated, total tokens): out_logprobs[t] = log p(token t |
 * tokens before it in its sequence) under logits / temperatures[t] (NULL = 1); the first token of
 * each sequence gets 0 (no prediction). out_entropy (may be NULL): the entropy of that
 * distribution. Sequences are packed into rows of at most row_tokens (<= 0: one row). */
int rlx_score(void* model, int64_t total, const int32_t* token_ids, const int32_t* lengths, int n,
              const float* temperatures, int64_t row_tokens, float* out_logprobs, float* out_entropy);
/* ABI 4. rlx_score with, per token t, out_ranks[t] (may be NULL): the 1-based rank of token t in
 * its tempered distribution (tokens at least as likely, itself included), and out_top_ids /
 * out_top_logprobs [total * k] (k in 0..vocab_size): the k most likely tokens, most likely first.
 * The first token of each sequence gets logprob 0, rank 0, ids -1 and logprobs 0. The top-k is
 * taken chunk by chunk in the shim; out_logprobs are bit-identical to rlx_score's. */
int rlx_score_top(void* model, int64_t total, const int32_t* token_ids, const int32_t* lengths, int n,
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
void* rlx_dist_create(const char* backend, const char* store, const char* address, int port, int rank, int world_size,
                      int64_t timeout_ms);
int rlx_dist_free(void* group);
/* Sums every parameter's gradient over the ranks, in place, in buckets of about bucket_bytes
 * (<= 0: 25 MiB). SUM, not mean: rlx's losses are divided by global token counts (all ranks), so
 * the summed gradient is the single-rank gradient of the whole step. A parameter without a
 * gradient counts as zeros and has one afterwards. A non-finite-loss mark on any rank is set on
 * all, so every rank skips the same optimizer update. */
int rlx_dist_allreduce_grads(void* group, void* model, int64_t bucket_bytes);
/* Reduces n values in place over the ranks. dtype: RLX_F32, RLX_F64 or RLX_I64; op: below. */
#define RLX_I64 4 /* int64: rlx_dist_allreduce only */
#define RLX_DIST_SUM 0
#define RLX_DIST_MIN 1
#define RLX_DIST_MAX 2
int rlx_dist_allreduce(void* group, void* data, int dtype, int64_t n, int op);
/* Copies root's parameters to every rank (bit-exact, any dtype). */
int rlx_dist_broadcast_params(void* group, void* model, int root);
/* Checks that every rank holds bit-identical parameters (a 64-bit digest per parameter): 0, or an
 * error naming how many differ and the first one. */
int rlx_dist_verify_params(void* group, void* model);
int rlx_dist_barrier(void* group);

#ifdef __cplusplus
}
#endif

#endif /* RLX_H */
