// A generator's state, shared by generate.cpp (the rlx_gen_* calls; its header describes the
// design), sampling.cpp (each row's next token) and slots.cpp (which slot and cache row each
// sequence takes).
#pragma once
#include "model.h"

namespace rlx {

struct Sequence {
  bool active = false;
  int64_t row = 0;         // the cache row holding this slot's K/V
  int64_t length = 0;      // tokens whose K/V are in the cache: the sequence so far minus next_token
  std::vector<int32_t> tokens;  // those tokens (kept after the sequence ends: the slot's prefix)
  uint64_t used = 0;            // the generator's clock when the slot last ran
  int32_t next_token = 0;  // sampled, fed at the next step
  int64_t generated = 0;
  double temperature = 1, top_p = 1;
  int64_t top_k = 0, max_new_tokens = 0;
  std::vector<int32_t> stop_ids;
  at::Generator rng;
};

struct Generator {
  void* model_handle;  // validated on every call: freeing the model invalidates the generator
  KVCache cache;
  std::vector<Sequence> seqs;
  // The tempered log-distributions [n, V] (CPU) and chosen tokens of the n entries the last add
  // or step reported, for rlx_gen_top_logprobs; kept until the next add or step.
  at::Tensor last_logp;
  std::vector<int64_t> last_tokens;
  uint64_t clock = 0;
  int64_t prompts = 0, prompt_tokens = 0, reused_tokens = 0;  // rlx_gen_cache_stats
  bool keep_prefixes = true;                                   // rlx_gen_set_option
};

// sampling.cpp: picks the next token of each row of logits [n, V] (CPU, compute dtype) for seqs[j]
// into tokens and logprobs, and keeps the rows' tempered log-distributions for rlx_gen_top_logprobs.
void sample_rows(Generator& g, const at::Tensor& logits, const std::vector<Sequence*>& seqs, int32_t* tokens,
                 float* logprobs);
// sampling.cpp: records a chosen token; returns RLX_FINISH_* (the sequence stops unless NONE).
int finish_after(Sequence& s, int32_t token, int64_t capacity);

// slots.cpp: moves the running sequences into cache rows 0..A-1; returns the slot in each row.
std::vector<int64_t> compact_rows(Generator& g);
// slots.cpp: slots for n new prompts, past[i] the cached tokens prompt i continues.
std::vector<int64_t> choose_slots(Generator& g, int n, const std::vector<const int32_t*>& ids,
                                  const std::vector<int64_t>& lengths, const std::vector<bool>& may_reuse,
                                  std::vector<int64_t>& past);

}  // namespace rlx
