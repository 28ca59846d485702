// A batch of prompts prefilled into the paged K/V cache in passes of bounded size (generator.h).
// The prompts are laid end to end and cut into rows of at most pass_tokens tokens: the distinct
// prompts of a batch of short ones share one row, and a prompt longer than a row continues in the
// next, its later part attending to the K/V its earlier part wrote (KVWrite's past). A row's
// activations, and its attention's query blocks, are then bounded by pass_tokens however long a
// prompt is.
#include "generator.h"

namespace rlx {

at::Tensor prefill(Model& m, KVCache& cache, const std::vector<Prefill>& prompts, int64_t pass_tokens) {
  std::vector<at::Tensor> last(prompts.size());
  size_t next = 0;
  int64_t done = prompts.empty() ? 0 : prompts[0].past;  // tokens of prompts[next] already written
  while (next < prompts.size()) {
    std::vector<int32_t> ids;
    std::vector<int64_t> lengths, positions, ends;  // ends: the row index of each finished prompt's last token
    std::vector<size_t> ending;                     // and which prompt it is
    KVWrite kv{&cache, {}, {}};
    while (next < prompts.size() && static_cast<int64_t>(ids.size()) < pass_tokens) {
      const auto& p = prompts[next];
      const int64_t n = std::min(p.length - done, pass_tokens - static_cast<int64_t>(ids.size()));
      ids.insert(ids.end(), p.ids + done, p.ids + done + n);
      for (int64_t t = done; t < done + n; ++t) positions.push_back(t);
      lengths.push_back(n), kv.tables.push_back(p.table), kv.past.push_back(done);
      done += n;
      if (done == p.length) {
        ends.push_back(static_cast<int64_t>(ids.size()) - 1), ending.push_back(next);
        if (++next < prompts.size()) done = prompts[next].past;
      }
    }
    auto hidden = forward_packed(m, token_tensor(m, ids.data(), static_cast<int64_t>(ids.size()), "prompt_ids"),
                                 at::tensor(positions, at::kLong).to(m.device), lengths, &kv);
    auto rows = hidden.index_select(0, at::tensor(ends, at::kLong).to(m.device));
    for (size_t e = 0; e < ending.size(); ++e) last[ending[e]] = rows[static_cast<int64_t>(e)];
  }
  return at::stack(last);
}

}  // namespace rlx
