// Which slot and cache row each sequence takes: kept prefixes taken over by prompts that continue
// them, and the running sequences moved into the lowest rows before a decode step (generate.cpp's
// header).
#include "generator.h"

namespace rlx {

// The fewest cached tokens a prompt must continue to take a kept slot over.
constexpr int64_t kMinReuse = 16;

// Swaps the cache rows of a running sequence and a stopped one, each row's K/V up to its own
// cached tokens (the stopped one's kept prefix, if prefixes are kept).
static void swap_rows(Generator& g, Sequence& running, Sequence& stopped) {
  const int64_t run_len = running.length;
  const int64_t kept_len = g.keep_prefixes ? static_cast<int64_t>(stopped.tokens.size()) : 0;
  for (auto* layers : {&g.cache.k, &g.cache.v})
    for (auto& layer : *layers) {  // [rows, G, capacity, D]
      auto from = layer[running.row], to = layer[stopped.row];
      auto moving = from.narrow(1, 0, run_len).clone();
      if (kept_len > 0) from.narrow(1, 0, kept_len).copy_(to.narrow(1, 0, kept_len));
      to.narrow(1, 0, run_len).copy_(moving);
    }
  std::swap(running.row, stopped.row);
}

// Moves the running sequences into rows 0..A-1 (generate.cpp's header); returns the slot in each.
std::vector<int64_t> compact_rows(Generator& g) {
  const auto running = std::count_if(g.seqs.begin(), g.seqs.end(), [](const Sequence& s) { return s.active; });
  std::vector<Sequence*> above, below;  // running in a row >= A; stopped in a row < A
  for (auto& s : g.seqs) {
    if (s.active && s.row >= running) above.push_back(&s);
    if (!s.active && s.row < running) below.push_back(&s);
  }
  for (size_t i = 0; i < above.size(); ++i) swap_rows(g, *above[i], *below[i]);
  std::vector<int64_t> slot_of(running);
  for (size_t i = 0; i < g.seqs.size(); ++i)
    if (g.seqs[i].active) slot_of[g.seqs[i].row] = static_cast<int64_t>(i);
  return slot_of;
}

// Slots for n new prompts (prompt i: ids_i, lengths[i]): a kept slot whose tokens the prompt
// continues for at least kMinReuse tokens (the longest such match; never the whole prompt, whose
// last token must run to give the next token's logits), else an empty slot, else the least
// recently used kept one. past[i] receives how many cached tokens prompt i continues. Without
// keep_prefixes, the lowest free slots, as before slots kept anything: a deterministic run's
// decode batches (and so their rounding) then do not depend on what ran before a resume.
std::vector<int64_t> choose_slots(Generator& g, int n, const std::vector<const int32_t*>& ids,
                                  const std::vector<int64_t>& lengths, const std::vector<bool>& may_reuse,
                                  std::vector<int64_t>& past) {
  std::vector<bool> taken(g.seqs.size());
  for (size_t s = 0; s < g.seqs.size(); ++s) taken[s] = g.seqs[s].active;
  const auto free = std::count(taken.begin(), taken.end(), false);
  require(free >= n, "the generator has " + std::to_string(free) + " free slots, " + std::to_string(n) +
                         " sequences were added (wait for some to finish)");
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
      int64_t common = 0;
      while (common < limit && cached[common] == ids[i][common]) ++common;
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

}  // namespace rlx
