// A generator's state, shared by generate.cpp (the rlx_gen_* calls; its header describes the
// design), sampling.cpp (each row's next token) and slots.cpp (which slot each sequence takes, and
// which K/V blocks it holds).
#pragma once
#include "model.h"

namespace rlx {

struct Sequence {
  bool active = false;
  BlockTable blocks;       // the cache blocks holding this slot's K/V (kv_cache.h)
  int64_t length = 0;      // tokens whose K/V are in the cache: the sequence so far minus next_token
  int64_t final_length = 0;  // the most tokens it can reach: prompt + max_new_tokens, within capacity
  std::vector<int32_t> tokens;  // those tokens (kept after the sequence ends: the slot's prefix)
  uint64_t used = 0;            // the generator's clock when the slot last ran
  uint64_t weights = 0;         // the generator's weights epoch when it was added
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
  uint64_t weights = 0;  // bumped by rlx_gen_set_model: K/V of an older epoch is never reused
  int64_t prompts = 0, prompt_tokens = 0, reused_tokens = 0;  // rlx_gen_cache_stats
  bool keep_prefixes = true;                                   // rlx_gen_set_option
  int64_t prefill_tokens = 8192;                               // rlx_gen_set_option: tokens per prefill pass
};

// A prompt to prefill: its tokens past..length-1 (the first past are cached) into its table.
struct Prefill {
  const int32_t* ids;
  int64_t length, past;
  const BlockTable* table;
};
// prefill.cpp: writes the prompts' K/V in packed rows of at most pass_tokens tokens (a longer
// prompt in several passes, each attending to what the passes before wrote) and returns each
// prompt's last hidden state, [prompts, hidden].
at::Tensor prefill(Model& m, KVCache& cache, const std::vector<Prefill>& prompts, int64_t pass_tokens);

// sampling.cpp: picks the next token of each row of logits [n, V] (CPU, compute dtype) for seqs[j]
// into tokens and logprobs, and keeps the rows' tempered log-distributions for rlx_gen_top_logprobs.
void sample_rows(Generator& g, const at::Tensor& logits, const std::vector<Sequence*>& seqs, int32_t* tokens,
                 float* logprobs);
// sampling.cpp: records a chosen token; returns RLX_FINISH_* (the sequence stops unless NONE).
int finish_after(Sequence& s, int32_t token, int64_t capacity);

// slots.cpp: K/V blocks. Blocks the running sequences hold, blocks only kept prefixes hold (given
// up when needed), free blocks, and blocks the running sequences may still take.
struct KVUse {
  int64_t running = 0, kept = 0, free = 0, reserved = 0;
  int64_t room() const { return free + kept - reserved; }
};
KVUse kv_use(const Generator& g);
// Blocks the new sequences may take at most: each distinct prompt's full blocks once (its repeats
// share them), and every sequence's blocks from its prompt's last partial one to its final length.
// first_of_prompt[i]: sequence i is the first with its prompt.
std::vector<int64_t> blocks_needed(const std::vector<Sequence>& added, const std::vector<bool>& first_of_prompt);
// Extends a table to cover positions 0..length-1, taking free blocks (kept prefixes give theirs up
// first, least recently used first).
void cover(Generator& g, BlockTable& table, int64_t length);
// Copies every shared block holding position `from` or later, so the table can write there.
void own_from(Generator& g, BlockTable& table, int64_t from);
// A sequence that stopped: its blocks go back at once without keep_prefixes, or when the weights
// changed while it ran (its K/V were computed by the old ones).
void retire(Generator& g, Sequence& s);
// A new prompt that begins with what a running sequence of these weights has written (a group's
// rollout admitted after the others) shares the blocks holding those tokens: whole blocks, at least
// kMinReuse tokens, never the prompt's last token. Returns the tokens shared; table receives them.
int64_t share_running(Generator& g, const int32_t* ids, int64_t length, BlockTable& table);
// slots.cpp: slots for n new prompts, past[i] the cached tokens prompt i continues.
std::vector<int64_t> choose_slots(Generator& g, int n, const std::vector<const int32_t*>& ids,
                                  const std::vector<int64_t>& lengths, const std::vector<bool>& may_reuse,
                                  std::vector<int64_t>& past);

}  // namespace rlx
