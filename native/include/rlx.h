/*
 * rlx.h: the whole C ABI of the rlx shim over libtorch. Hand-written, coarse calls.
 *
 * Conventions
 *   - Names are rlx_<object>_<verb>. Objects are opaque typed handles; every create has a free.
 *   - Every call catches C++ exceptions. On failure it returns -1 (int), NULL (pointer) or NaN
 *     (double), and rlx_last_error() holds the message for the calling thread. A null, freed or
 *     wrong-kind handle is such an error, never a crash.
 *   - Bulk data crosses as caller-owned arrays with explicit lengths; the shim copies what it keeps.
 *     A wrong length, a null required array or a value out of range is an error naming it.
 *   - Strings returned by the shim (const char*) stay valid until the next call on the same thread.
 *
 * src/native/symbols.ts mirrors every declaration here and src/native/abi_layout.ts every struct;
 * test/native/abi.test.ts checks that they agree.
 */
#ifndef RLX_H
#define RLX_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define RLX_ABI_VERSION 14

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
/* The CUDA caching allocator of `device` ("cuda[:N]"): out[0] bytes allocated, out[1] the peak
 * since the last reset, out[2] bytes reserved; reset_peak != 0 then starts a new peak. "cpu" (and
 * a CPU build) reports 0, 0, 0. */
int rlx_device_memory(const char* device, int reset_peak, int64_t* out);

/* ---- models ------------------------------------------------------------------------------- */
#define RLX_F32 0 /* dtype codes used across the ABI */
#define RLX_BF16 1
#define RLX_F16 2
#define RLX_F64 3

/* A decoder-only Llama/Qwen2/Qwen3 model on device "cpu" or "cuda[:N]", parameters of dtype drawn
 * from seed (normal, std 0.02; norms 1; biases 0) identically on every device. config_json is the
 * flat object src/model/config.ts writes (docs/architecture.md §7 lists its keys, RoPE scaling
 * included); an unknown, missing or mistyped key is an error naming it. float64 models compute in
 * float64 throughout; other dtypes compute norms, softmax and logprobs in float32. */
rlx_model* rlx_model_create(const char* config_json, int dtype, const char* device, uint64_t seed);
int rlx_model_free(rlx_model* model);
/* JSON list of parameters in a fixed order: [{"name": HF name, "shape": [...]}, ...] */
const char* rlx_model_params(rlx_model* model);
/* Copies data (dtype code, shape of ndim dims) into a parameter, converting to the model's dtype;
 * a shape that differs from the parameter's is an error naming both. */
int rlx_model_set_param(rlx_model* model, const char* name, const void* data, int dtype, const int64_t* shape, int ndim);
/* Copies a parameter out, converted to dtype; nbytes must be exactly its size. */
int rlx_model_get_param(rlx_model* model, const char* name, void* out, int dtype, int64_t nbytes);
/* Copies a parameter's accumulated gradient out like get_param (zeros when it has none). */
int rlx_model_get_grad(rlx_model* model, const char* name, void* out, int dtype, int64_t nbytes);
/* Drops every accumulated gradient (and a pending non-finite-loss mark). */
int rlx_model_zero_grad(rlx_model* model);
/* Options (docs/architecture.md §7): "autocast_bf16" 0|1 (default 0), "logits_chunk" tokens per
 * LM-head chunk (0 = auto), "fused_attention" 0|1 (default 1), "cpu_linear" 0|1 (default 1),
 * "shard_prefetch" 0|1 (default 1: a model sharded "full" gathers the next unit while it computes
 * one). An unknown name or value is an error. */
int rlx_model_set_option(rlx_model* model, const char* name, double value);
/* Adds LoRA adapters (docs/lora.md; PEFT's LoRA Linear, A kaiming-uniform from seed, B zeros) to
 * the comma-separated PEFT modules `targets` of every layer, in float32 (float64 for float64
 * models). The base is then frozen: the optimizer, the gradient all-reduce and train steps cover
 * the adapters only, and the param calls also take the adapter names. Once per model. */
int rlx_model_lora_add(rlx_model* model, int rank, double alpha, double dropout, const char* targets, uint64_t seed);
/* JSON list of the adapter tensors, as rlx_model_params ("[]" without LoRA). */
const char* rlx_model_lora_params(rlx_model* model);
/* A base parameter like get_param with its adapter merged in (W + (alpha / rank) B A). */
int rlx_model_get_merged_param(rlx_model* model, const char* name, void* out, int dtype, int64_t nbytes);

/* ---- training ----------------------------------------------------------------------------- */
/* A packed row: T tokens holding samples of the given lengths. Positions restart per sample,
 * attention is causal within a sample, token t is predicted from token t-1 of its sample (a
 * sample's first token is in no loss component). The loss (docs/architecture.md §6):
 *   L = sum(l_rl)/N_rl + sum(l_ce)/N_ce + sum(l_ref_kl)/N_ref_kl + sum(l_distill)/N_distill,
 * members rl = loss_mask & rl_w != 0, ce = ce_w != 0, ref_kl = ref_kl_w != 0, distill =
 * distill_w != 0; each N is the caller's max(1, member count) over the whole step, all ranks.
 *
 * Inputs are structs whose first field is their size as the caller compiled it. The shim reads
 * the fields it knows: a longer struct (a newer caller) is accepted, a shorter one is an error
 * naming both sizes. Every field is 8 bytes (no padding). Fields are appended, never inserted. */
typedef struct rlx_batch {
  int64_t size;                  /* sizeof(rlx_batch) of the caller */
  int64_t n_tokens;              /* T */
  int64_t n_samples;
  int64_t n_envs;                /* metric blocks after the row's, for env 0..n_envs-1 */
  int64_t distill_k;             /* top-k slots per distill member */
  const int32_t* token_ids;      /* [T]; rlx_loss_eval ignores it */
  const int32_t* sample_lengths; /* [n_samples] summing to T; rlx_loss_eval: NULL = one sample */
  const int32_t* sample_parents; /* [n_samples] or NULL: shared prefixes; rlx_loss_eval ignores it */
  const uint8_t* loss_mask;      /* [T], 1 = sampled action token; the float streams are [T] too */
  const float* advantages;
  const float* inference_logprobs;
  const float* temperatures;     /* > 0, logits are divided by it; rlx_loss_eval ignores it */
  const float* ref_logprobs;     /* NULL: none */
  const float* rl_weights;       /* NULL: 1 */
  const float* ce_weights;       /* NULL: 0 */
  const float* ref_kl_weights;   /* NULL: 0 */
  const float* distill_weights;  /* NULL: no distill member */
  const float* distill_betas;    /* NULL: 0. 0 forward KL, 1 reverse KL, between: generalized JSD */
  const int32_t* distill_ids;    /* [T * distill_k] the target's top ids, -1 = empty slot */
  const float* distill_logprobs; /* [T * distill_k] their logprobs; the rest of the mass is a tail */
  const int32_t* env_index;      /* [T] or NULL: each token's env, -1 = none */
  rlx_group* shard_group;        /* the group the model was sharded over (rlx_model_shard), else NULL */
  int64_t activation_checkpointing; /* 1: keep each layer's input, recompute the layer in the
                                     * backward (always so for a model sharded "full") */
  const int32_t* sample_losses;  /* [n_samples] or NULL (all 0): each sample's rl loss, 0 = rlx_loss's
                                  * own settings, k >= 1 = rlx_loss.losses[k - 1] */
  rlx_group* context_group;      /* NULL, or the group the row is split over (context parallelism):
                                  * every rank of it passes the same whole row; rank r of C runs
                                  * chunks r and 2C-1-r of 2C (docs/scaling.md, "Long context"),
                                  * and each writes the whole row's metrics */
} rlx_batch;
/* sample_parents (docs/architecture.md §4): each sample's earlier sample whose tokens it continues,
 * or -1. A continuation attends to all of its parent and causally to itself, its positions go on
 * from the parent's length, and its loss and gradient are those of it packed after its own copy
 * of the parent. One level deep; a continuation's first token is predicted by nothing. */

typedef struct rlx_loss {
  int64_t size;          /* sizeof(rlx_loss) of the caller */
  int64_t type;          /* RLX_RL_* */
  int64_t reduction;     /* RLX_REDUCE_* */
  double n_rl, n_ce, n_ref_kl;
  double n_distill;      /* 0 when no token is a distill member */
  double n_rl_sequences; /* max(1, samples with an rl member): the sequence and constant reductions */
  double constant;       /* RLX_REDUCE_CONSTANT's divisor per sample (Dr. GRPO: max tokens) */
  double mask_low, mask_high; /* dppo_mask_low, dppo_mask_high: 0.2 */
  double adv_tau, kl_tau; /* 1.0, 1e-3 */
  double ipo_threshold;  /* RLX_RL_IPO: masked where |exp(lp) - exp(ilp)| > it; 0.1 */
  double is_low, is_high; /* RLX_RL_ICEPOP keeps ratios in [is_low, is_high]; 0.5, 5.0 */
  double is_cap;         /* TIS clips, MIS masks the (token or sequence) ratio above it; 2.0 */
  double clip_low, clip_high; /* the clip range of GSPO, CISPO, clip-higher and GMPO (below) */
  int64_t n_losses;      /* entries of `losses`: the rl losses of sample codes 1..n_losses */
  const struct rlx_rl_loss* losses; /* NULL when n_losses is 0 */
} rlx_loss;
/* One more rl loss of the step: the per-loss fields of rlx_loss, as there. Entries are
 * losses[0].size bytes apart (a newer caller's longer entries are read as far as the shim knows). */
typedef struct rlx_rl_loss {
  int64_t size;          /* sizeof(rlx_rl_loss) of the caller */
  int64_t type, reduction;
  double constant, mask_low, mask_high, adv_tau, kl_tau, ipo_threshold, is_low, is_high, is_cap;
  double clip_low, clip_high;
} rlx_rl_loss;
#define RLX_RL_DPPO_KL 0  /* prime-rl's default: probability-difference trust region + KL */
#define RLX_RL_IPO 1      /* the same with a symmetric mask |dp| > ipo_threshold */
#define RLX_RL_ICEPOP 2   /* token ratio outside [is_low, is_high] masked */
#define RLX_RL_TIS 3      /* token ratio truncated at is_cap */
#define RLX_RL_MIS 4      /* token ratio above is_cap masked */
#define RLX_RL_SEQ_TIS 5  /* the sample's ratio (product over its rl members) truncated at is_cap */
#define RLX_RL_SEQ_MIS 6  /* the whole sample masked when its ratio exceeds is_cap */
#define RLX_RL_GSPO 7     /* the sample's length-normalized ratio, PPO-clipped at [1 - clip_low, 1 + clip_high] */
#define RLX_RL_CISPO 8    /* -A sg(clip(ratio)) logprob on every member: the weight clipped, never the token */
#define RLX_RL_CLIP_HIGHER 9 /* PPO's clip with its own low and high epsilons (DAPO) */
#define RLX_RL_GMPO 10    /* the geometric mean of the sample's token ratios, clipped in log space */
#define RLX_REDUCE_TOKEN 0     /* sum / N_rl */
#define RLX_REDUCE_SEQUENCE 1  /* each sample's mean over its members, averaged over N_rl_sequences */
#define RLX_REDUCE_CONSTANT 2  /* each sample's sum / constant, averaged over N_rl_sequences */

/* Metrics: RLX_METRICS_FIELDS doubles for the row, then the same block per env. All are sums over
 * tokens, so blocks of several micro-batches add up. */
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
#define RLX_M_CLIPPED_LOW 19     /* rl members whose (token or sample) ratio is below the clip range */
#define RLX_M_CLIPPED_HIGH 20    /* ... above it (gspo, cispo, clip_higher, gmpo; 0 for the others) */
#define RLX_METRICS_FIELDS 21

/* JSON {"rlx_batch": {"size": bytes, "fields": {name: offset, ...}}, "rlx_loss": {...}}: the struct
 * layout this shim was compiled with. */
const char* rlx_abi_layout(void);
/* Forward + backward of one packed row; gradients accumulate into the parameters across calls.
 * No member token: loss 0, zero gradient. A non-finite loss skips the backward and makes the next
 * rlx_optim_step skip its update. n_metrics must be RLX_METRICS_FIELDS * (1 + n_envs). Errors: a
 * struct shorter than the shim's, a bad length, parent, id or setting (named). */
int rlx_train_step(rlx_model* model, const rlx_batch* batch, const rlx_loss* loss, double* metrics, int64_t n_metrics);
/* The same loss in float64 without a model, over given logprobs [T] (every token valid) and, for
 * distill members, the student's temperature-1 logits [T * vocab] (else NULL): metrics as above
 * (entropy 0), dL/dlogprobs into grad_out and dL/dlogits into grad_logits_out (each may be NULL).
 * Errors as rlx_train_step. */
int rlx_loss_eval(const rlx_batch* batch, const rlx_loss* loss, const double* logprobs, int64_t vocab,
                  const double* student_logits, double* metrics, int64_t n_metrics, double* grad_out,
                  double* grad_logits_out);

/* ---- optimizer ---------------------------------------------------------------------------- */
/* AdamW (torch.optim.AdamW's decoupled weight decay) over the model's parameters, or its LoRA
 * adapters when it has them (create it after rlx_model_lora_add). Bad betas or eps are errors. */
rlx_optim* rlx_optim_create(rlx_model* model, double beta1, double beta2, double eps, double weight_decay);
int rlx_optim_free(rlx_optim* optim);
int rlx_optim_zero_grad(rlx_optim* optim);
#define RLX_OPTIM_GRAD_NORM 0 /* the global norm before clipping */
#define RLX_OPTIM_SKIPPED 1
#define RLX_OPTIM_STEP 2      /* updates applied so far */
#define RLX_OPTIM_OUT_LEN 3
/* Clips the global grad norm (max_grad_norm <= 0: no clip), updates, clears the gradients. A
 * non-finite norm, or a non-finite loss since the last update, skips the update (skipped = 1). */
int rlx_optim_step(rlx_optim* optim, double lr, double max_grad_norm, double* out, int n_out);
/* The state (step count, exp_avg, exp_avg_sq) as a byte image for checkpoints: its size, saved
 * into and loaded from a buffer of exactly that size (another size is an error naming both). */
int64_t rlx_optim_state_size(rlx_optim* optim);
int rlx_optim_state_save(rlx_optim* optim, void* out, int64_t nbytes);
int rlx_optim_state_load(rlx_optim* optim, const void* data, int64_t nbytes);

/* ---- generation and scoring --------------------------------------------------------------- */
/* A generator: up to `slots` sequences of up to `capacity` tokens (prompt + generated) each, for
 * continuous batching, over a K/V cache of kv_tokens tokens (<= 0: room for every slot's whole
 * sequence, slots * capacity rounded up to blocks; at least capacity) in blocks of RLX_GEN_STATS_BLOCK_TOKENS that each sequence takes as it needs them.
 * Logprobs are log_softmax(logits / temperature) of the chosen token before top-k/top-p
 * truncation, what the trainer computes (temperature 0: greedy, the temperature-1 logprob). Each
 * sequence samples from its own generator seeded with its seed. */
rlx_gen* rlx_gen_create(rlx_model* model, int slots, int capacity, int64_t kv_tokens);
int rlx_gen_free(rlx_gen* gen);
int rlx_gen_free_slots(rlx_gen* gen);
/* Rebinds a generator to another model of the same architecture (or the same one changed in place),
 * keeping running sequences; kept prefixes and older K/V are never reused. Errors name a difference. */
int rlx_gen_set_model(rlx_gen* gen, rlx_model* model);
#define RLX_SAMPLE_TEMPERATURE 0 /* per-sequence sampling: RLX_SAMPLING_FIELDS doubles each */
#define RLX_SAMPLE_TOP_P 1       /* (0, 1]; 1 = off */
#define RLX_SAMPLE_TOP_K 2       /* 0 = off */
#define RLX_SAMPLE_MAX_NEW_TOKENS 3
#define RLX_SAMPLE_SEED 4        /* an integer below 2^53 */
#define RLX_SAMPLING_FIELDS 5
#define RLX_FINISH_NONE 0
#define RLX_FINISH_STOP 1        /* a stop token was sampled (it is the last token returned) */
#define RLX_FINISH_LENGTH 2      /* max_new_tokens reached, or prompt + generated reached capacity */
/* Adds sequences (prompts of 1 to capacity - 1 tokens concatenated with their lengths, sampling
 * [n * RLX_SAMPLING_FIELDS], stop ids concatenated with stop_counts[n]) into free slots (fewer
 * than n free is an error), prefills them and samples each one's first token: out_* [n]. Admits
 * the first k of the n whose K/V fit the budget left, each up to its prompt + max_new_tokens, and
 * returns k (0: none fits until running sequences finish; with none running, one always fits). */
int rlx_gen_add(rlx_gen* gen, int n, const int32_t* prompt_ids, const int32_t* prompt_lengths, const double* sampling,
                const int32_t* stop_ids, const int32_t* stop_counts, int32_t* out_slots, int32_t* out_tokens,
                float* out_logprobs, int32_t* out_finish);
/* One decode step of every running sequence: returns the tokens produced (0: none running), entry
 * j of out_* is (slot, token, logprob, finish); n_out >= slots. */
int rlx_gen_step(rlx_gen* gen, int32_t* out_slots, int32_t* out_tokens, float* out_logprobs, int32_t* out_finish, int n_out);
/* Cancels the sequence in a slot. */
int rlx_gen_remove(rlx_gen* gen, int slot);
/* The k most likely tokens of each distribution the last add or step sampled from (n its count):
 * out_ids, out_logprobs [n * k] most likely first; out_ranks [n] (may be NULL) the 1-based rank of
 * the chosen token. Another n is an error. */
int rlx_gen_top_logprobs(rlx_gen* gen, int n, int k, int32_t* out_ids, float* out_logprobs, int32_t* out_ranks);
/* A finished slot keeps its K/V until needed; a later prompt beginning with at least 16 of its
 * tokens takes it over and prefills only the rest. out: since creation, prompts added, their
 * tokens, and the tokens taken from kept K/V; then the K/V cache now: tokens per block, blocks,
 * blocks the running sequences hold, blocks only kept prefixes hold (given up when needed), and
 * blocks the running sequences may still take. */
#define RLX_GEN_STATS_PROMPTS 0
#define RLX_GEN_STATS_PROMPT_TOKENS 1
#define RLX_GEN_STATS_REUSED_TOKENS 2
#define RLX_GEN_STATS_BLOCK_TOKENS 3
#define RLX_GEN_STATS_BLOCKS 4
#define RLX_GEN_STATS_RUNNING_BLOCKS 5
#define RLX_GEN_STATS_KEPT_BLOCKS 6
#define RLX_GEN_STATS_RESERVED_BLOCKS 7
#define RLX_GEN_STATS_LEN 8
int rlx_gen_cache_stats(rlx_gen* gen, int64_t* out, int n_out);
/* Generator options: "keep_prefixes" 1 (default) or 0: no prompt continues a kept slot, prompts
 * take the lowest free slots (rlx train's deterministic mode). "prefill_tokens" (default 8192):
 * tokens per prefill pass; a longer prompt runs in several, each attending to the K/V before it. */
int rlx_gen_set_option(rlx_gen* gen, const char* name, double value);
/* Prefill logprobs of n sequences (concatenated, total tokens) under logits / temperatures[t]
 * (NULL = 1), each sequence's first token 0; out_entropy (may be NULL) the entropy of each
 * distribution. Rows of at most row_tokens (<= 0: one row). */
int rlx_score(rlx_model* model, int64_t total, const int32_t* token_ids, const int32_t* lengths, int n,
              const float* temperatures, int64_t row_tokens, float* out_logprobs, float* out_entropy);
/* rlx_score with each token's 1-based rank (out_ranks, may be NULL) and the k most likely tokens
 * (out_top_ids, out_top_logprobs [total * k]); a first token gets rank 0, ids -1, logprobs 0. */
int rlx_score_top(rlx_model* model, int64_t total, const int32_t* token_ids, const int32_t* lengths, int n,
                  const float* temperatures, int64_t row_tokens, int k, float* out_logprobs, int32_t* out_ranks,
                  int32_t* out_top_ids, float* out_top_logprobs);

/* ---- distributed (data-parallel trainer ranks over c10d) --------------------------------- */

/* Whether this shim has the backend ("gloo" or "nccl"): 1 yes, 0 no. */
int rlx_dist_available(const char* backend);
/* A process group of world_size ranks joined by a c10d store: "tcp" (address = host, rank 0 serves
 * on port) or "file" (a path every rank sees, fresh). timeout_ms bounds the rendezvous and every
 * collective: a rank that dies or never arrives is an error naming it, never a hang, and the group
 * then refuses further calls. A backend not compiled in is an error saying so. */
rlx_group* rlx_dist_create(const char* backend, const char* store, const char* address, int port, int rank, int world_size,
                           int64_t timeout_ms);
int rlx_dist_free(rlx_group* group);
/* A group of some of parent's ranks (ranks: n distinct parent ranks, ascending), over parent's
 * store under a key prefix of its own; the new group's rank i is ranks[i]. Only those ranks call
 * it, and every rank creates its subgroups in the same order. */
rlx_group* rlx_dist_subgroup(rlx_group* parent, const int32_t* ranks, int n);
/* Sums every parameter's gradient over the ranks in place (SUM: losses are divided by global
 * counts), in buckets of about bucket_bytes (<= 0: 25 MiB); a non-finite-loss mark spreads to all. */
int rlx_dist_allreduce_grads(rlx_group* group, rlx_model* model, int64_t bucket_bytes);
#define RLX_I64 4 /* int64: rlx_dist_allreduce only */
#define RLX_DIST_SUM 0
#define RLX_DIST_MIN 1
#define RLX_DIST_MAX 2
/* Reduces n values (RLX_F32, RLX_F64 or RLX_I64) in place over the ranks with RLX_DIST_*. */
int rlx_dist_allreduce(rlx_group* group, void* data, int dtype, int64_t n, int op);
/* Copies root's parameters to every rank (bit-exact, any dtype). */
int rlx_dist_broadcast_params(rlx_group* group, rlx_model* model, int root);
/* 0 when every rank holds bit-identical parameters, else an error naming how many differ and one. */
int rlx_dist_verify_params(rlx_group* group, rlx_model* model);
int rlx_dist_barrier(rlx_group* group);

/* Sharded training (docs/scaling.md, "Sharded training"). A unit (the embedding, one layer, the
 * final norm with an untied LM head) is flattened as stored and padded to a multiple of the world
 * size; rank r keeps elements [r * chunk, (r + 1) * chunk) of each: its slices.
 *   RLX_SHARD_OPTIMIZER: whole parameters and gradients on every rank; rlx_optim_step
 *     reduce-scatters the gradients, updates this rank's slices (AdamW state for them only) and
 *     all-gathers them into the parameters. Full fine-tuning only.
 *   RLX_SHARD_FULL: only the slices stay. rlx_train_step gathers each unit just before it
 *     computes and frees it after, recomputing every layer in the backward, and reduce-scatters
 *     the gradients into the slices'. With LoRA the frozen base is sliced, the adapters stay whole
 *     (their gradients need rlx_dist_allreduce_grads). The model can no longer generate or score;
 *     rlx_model_get_param becomes collective (every rank, the same names in the same order).
 * Shard right after loading, before rlx_optim_create (which then updates the slices); the group
 * must outlive the model, and the optimizer must be freed before the model. Every train step and
 * optimizer step is collective. */
#define RLX_SHARD_NONE 0
#define RLX_SHARD_OPTIMIZER 1
#define RLX_SHARD_FULL 2
int rlx_model_shard(rlx_model* model, rlx_group* group, int mode);
/* JSON {"mode", "rank", "world", "dtype", "units": [{"name", "numel", "chunk", "params": [{"name",
 * "offset", "shape"}]}]}: where every parameter lies in its unit's flat. */
const char* rlx_model_shard_layout(rlx_model* model);
/* This rank's slice of unit `unit` ([chunk] in the model's dtype): read into data (write 0) or
 * written from it (write 1). A checkpoint's weights, a rank's own. */
int rlx_model_shard_local(rlx_model* model, int unit, void* data, int64_t nbytes, int write);
/* RLX_SHARD_OPTIMIZER: all-gathers the slices into the whole parameters (after writing slices);
 * RLX_SHARD_FULL: nothing. Collective. */
int rlx_model_shard_gather(rlx_model* model);

/* ---- weight transfer (trainer to policy servers over c10d; docs/engines.md) -------------- */
/* A channel is a two-rank group (trainer rank 0, server rank 1); a transfer is a header, the
 * tensors in order in messages of at most bucket_bytes, a trailer of checksums (weights_wire.h):
 * the parameters as dtype, or a LoRA model's adapters alone. Sends over n channels, stamped
 * version; a model sharded "full" gathers one parameter at a time, all its ranks calling this
 * (n = 0 but on the sender). RLX_SEND_CHANGED: only tensors changed since each channel's last
 * whole transfer (not sharded "full"). Returns the failed channels' count (failed[i] = 1, named
 * in rlx_last_error; they refuse later calls) or -1; *sent_bytes (if not NULL): the bytes sent. */
#define RLX_SEND_CHANGED 1
int rlx_weights_send(rlx_model* model, rlx_group* const* channels, int n, int dtype, int64_t version,
                     int64_t bucket_bytes, int flags, int32_t* failed, int64_t* sent_bytes);
/* A server's end: joins as rank 1 on a native thread and receives there, serving going on: start,
 * poll between decode steps, take what arrived whole. */
typedef struct rlx_receiver rlx_receiver;
rlx_receiver* rlx_receiver_open(const char* backend, const char* address, int port, int64_t timeout_ms);
/* Receives `version` for the served model `like` (alive until taken): full weights into `into` (a
 * retired model of its shape, taken over: its handle becomes invalid) or a new model; a LoRA
 * model's adapters into staging tensors (into = NULL). */
int rlx_receiver_start(rlx_receiver* receiver, rlx_model* like, rlx_model* into, int64_t version);
/* 0 busy, 1 arrived whole (take it), 2 idle, -1 the join or last transfer failed (rlx_last_error). */
int rlx_receiver_poll(rlx_receiver* receiver);
/* The received model of a full-weights transfer (after poll returned 1); the caller frees it. */
rlx_model* rlx_receiver_take(rlx_receiver* receiver);
/* An adapter transfer (after poll returned 1): copies them into `served` (its `like`) in place. */
int rlx_receiver_take_adapters(rlx_receiver* receiver, rlx_model* served);
int rlx_receiver_free(rlx_receiver* receiver);
/* An engine's update group (weights_broadcast.cpp: torch 2's store keys for group_name, rank 0 serving
 * the store), rank 0's broadcast of every parameter as dtype in the model's order (failed[i] = 1). */
rlx_group* rlx_engine_group_join(const char* backend, const char* address, int port, int rank, int world_size,
                                 const char* group_name, int64_t timeout_ms);
int rlx_engine_broadcast(rlx_model* model, rlx_group* const* groups, int n, int dtype, int32_t* failed);
int rlx_group_broadcast_bytes(rlx_group* group, void* data, int64_t nbytes, int root); /* in place */
#ifdef __cplusplus
}
#endif

#endif /* RLX_H */
