// Which slot each sequence takes (kept prefixes taken over by prompts that continue them) and
// which K/V blocks it holds: blocks taken as positions need them, kept prefixes given up least
// recently used first, and the budget a batch of new sequences must fit (generate.cpp's header).
#include "generator.h"

namespace rlx {

// The fewest cached tokens a prompt must continue to take a kept slot over.
constexpr int64_t kMinReuse = 16;

// How many of the first `limit` tokens of a cached sequence and a prompt agree.
static int64_t common_prefix(const std::vector<int32_t>& cached, const int32_t* ids, int64_t limit) {
  int64_t common = 0;
  while (common < limit && cached[common] == ids[common]) ++common;
  return common;
}

// Slots for n new prompts (prompt i: ids_i, lengths[i]; rlx_gen_add checked that n are free): a
// kept slot whose tokens the prompt continues for at least kMinReuse tokens (the longest such
// match; never the whole prompt, whose last token must run to give the next token's logits), else
// an empty slot, else the least recently used kept one. past[i] receives how many cached tokens
// prompt i continues. Without keep_prefixes, the lowest free slots, as before slots kept anything:
// a deterministic run's decode batches (and so their rounding) then do not depend on what ran
// before a resume.
std::vector<int64_t> choose_slots(Generator& g, int n, const std::vector<const int32_t*>& ids,
                                  const std::vector<int64_t>& lengths, const std::vector<bool>& may_reuse,
                                  std::vector<int64_t>& past) {
  std::vector<bool> taken(g.seqs.size());
  for (size_t s = 0; s < g.seqs.size(); ++s) taken[s] = g.seqs[s].active;
  std::vector<int64_t> slots(n, -1);
  past.assign(n, 0);
  for (int i = 0; i < n; ++i) {
    if (!may_reuse[i] || !g.keep_prefixes) continue;
    int64_t best = -1, best_len = kMinReuse - 1;
    for (size_t s = 0; s < g.seqs.size(); ++s) {
      if (taken[s]) continue;
      const auto& cached = g.seqs[s].tokens;
      const int64_t limit = std::min<int64_t>(static_cast<int64_t>(cached.size()), lengths[i] - 1);
      if (limit <= best_len) continue;
      const int64_t common = common_prefix(cached, ids[i], limit);
      if (common > best_len) best = static_cast<int64_t>(s), best_len = common;
    }
    if (best >= 0) slots[i] = best, past[i] = best_len, taken[best] = true;
  }
  for (int i = 0; i < n; ++i) {
    if (slots[i] >= 0) continue;
    int64_t pick = -1;
    for (size_t s = 0; s < g.seqs.size(); ++s) {
      if (taken[s]) continue;
      if (!g.keep_prefixes) {  // the lowest free slot: the layout depends on nothing but the running set
        pick = static_cast<int64_t>(s);
        break;
      }
      const bool empty = g.seqs[s].tokens.empty();
      if (pick < 0 || (empty && !g.seqs[pick].tokens.empty()) ||
          (empty == g.seqs[pick].tokens.empty() && g.seqs[s].used < g.seqs[pick].used))
        pick = static_cast<int64_t>(s);
    }
    slots[i] = pick, taken[pick] = true;  // one exists: at least n slots were free
  }
  return slots;
}

KVUse kv_use(const Generator& g) {
  std::vector<int32_t> running_refs(g.cache.refs.size());
  KVUse use;
  for (const auto& s : g.seqs) {
    if (!s.active) continue;
    for (auto b : s.blocks) running_refs[b]++;
    use.reserved += std::max<int64_t>(0, blocks_for(s.final_length) - static_cast<int64_t>(s.blocks.size()));
  }
  for (size_t b = 0; b < g.cache.refs.size(); ++b)
    if (running_refs[b] > 0) use.running++;
    else if (g.cache.refs[b] > 0) use.kept++;
  use.free = static_cast<int64_t>(g.cache.free.size());
  return use;
}

std::vector<int64_t> blocks_needed(const std::vector<Sequence>& added, const std::vector<bool>& first_of_prompt) {
  std::vector<int64_t> need(added.size());
  for (size_t i = 0; i < added.size(); ++i) {
    const int64_t full = added[i].length / kKVBlock;  // the prompt's full blocks
    need[i] = (first_of_prompt[i] ? full : 0) + blocks_for(added[i].final_length) - full;
  }
  return need;
}

static int64_t take_block(Generator& g) {
  while (g.cache.free.empty()) {
    Sequence* oldest = nullptr;
    for (auto& s : g.seqs)
      if (!s.active && !s.blocks.empty() && (!oldest || s.used < oldest->used)) oldest = &s;
    TORCH_CHECK(oldest, "the K/V cache is out of blocks (the generator admits only what its budget holds)");
    kv_release(g.cache, oldest->blocks);
    oldest->tokens.clear();
  }
  return kv_take(g.cache);
}

void cover(Generator& g, BlockTable& table, int64_t length) {
  while (static_cast<int64_t>(table.size()) < blocks_for(length)) table.push_back(take_block(g));
}

void own_from(Generator& g, BlockTable& table, int64_t from) {
  for (size_t j = static_cast<size_t>(from / kKVBlock); j < table.size(); ++j) {
    if (g.cache.refs[table[j]] == 1) continue;
    const int64_t copy = take_block(g);  // may give up a kept prefix that shares block table[j]
    kv_copy_block(g.cache, table[j], copy);
    BlockTable shared{table[j]};
    kv_release(g.cache, shared);
    table[j] = copy;
  }
}

void retire(Generator& g, Sequence& s) {
  if (!g.keep_prefixes || s.weights != g.weights) kv_release(g.cache, s.blocks), s.tokens.clear();
}

int64_t share_running(Generator& g, const int32_t* ids, int64_t length, BlockTable& table) {
  const Sequence* best = nullptr;
  int64_t best_len = kMinReuse - 1;
  for (const auto& s : g.seqs) {
    if (!s.active || s.weights != g.weights) continue;
    const int64_t limit = std::min<int64_t>(s.length, length - 1);  // s.tokens[0..length) are in the cache
    int64_t common = common_prefix(s.tokens, ids, limit);
    common -= common % kKVBlock;  // its partial block is still being written
    if (common > best_len) best = &s, best_len = common;
  }
  if (!best) return 0;
  table = kv_share(g.cache, best->blocks, static_cast<size_t>(best_len / kKVBlock));
  return best_len;
}

}  // namespace rlx
