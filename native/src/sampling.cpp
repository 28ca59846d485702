// Choosing each decode row's next token (generate.cpp's header: logprobs as the trainer computes
// them, one seeded generator per sequence) and recording it.
#include "generator.h"

namespace rlx {
namespace {

// Temperatures as the trainer will see them: the orchestrator ships them as float32.
double trainer_temperature(const Sequence& s) {
  return s.temperature == 0 ? 1.0 : static_cast<double>(static_cast<float>(s.temperature));
}

// A uniform double in [0, 1) from a sequence's own generator, without a tensor op.
double uniform01(at::Generator& gen) {
  std::lock_guard<std::mutex> lock(gen.mutex());
  return static_cast<double>(at::check_generator<at::CPUGeneratorImpl>(gen)->random64() >> 11) * 0x1.0p-53;
}

// Inverse-CDF draw from one row of probabilities (summing to total): one pass, no allocation.
template <typename T>
int64_t draw(const T* probs, int64_t V, double total, double u) {
  const double target = u * total;
  double mass = 0;
  int64_t last = 0;
  for (int64_t v = 0; v < V; ++v) {
    if (!(probs[v] > 0)) continue;
    mass += probs[v];
    last = v;
    if (mass > target) return v;
  }
  return last;  // rounding left the target just past the end: the last token with mass
}

}  // namespace

// Picks the next token of each row of logits [n, V] (CPU, compute dtype) for seqs[j]. One
// log_softmax and one exp cover every row; truncation (top-k/top-p) and the draw run per row.
// Keeps the rows' tempered log-distributions in the generator for rlx_gen_top_logprobs.
void sample_rows(Generator& g, const at::Tensor& logits, const std::vector<Sequence*>& seqs, int32_t* tokens,
                 float* logprobs) {
  const int64_t n = logits.size(0), V = logits.size(1);
  std::vector<double> temps;
  bool any_greedy = false, any_sampled = false;
  for (auto* s : seqs) {
    temps.push_back(trainer_temperature(*s));
    any_greedy |= s->temperature == 0;
    any_sampled |= s->temperature != 0;
  }
  auto temps_col = at::tensor(temps, at::kDouble).to(logits.scalar_type()).unsqueeze(1);
  auto logp = at::log_softmax(logits / temps_col, -1).contiguous();  // what the trainer computes
  std::vector<int64_t> chosen(n);
  if (any_greedy) {
    auto argmax = logits.argmax(1).contiguous();
    std::copy(argmax.data_ptr<int64_t>(), argmax.data_ptr<int64_t>() + n, chosen.begin());
  }
  if (any_sampled) {
    auto probs = logp.exp();
    auto totals = probs.sum(1, false, at::kDouble).contiguous();
    for (int64_t j = 0; j < n; ++j) {
      Sequence& s = *seqs[j];
      if (s.temperature == 0) continue;
      auto row = probs[j];
      double total = totals.data_ptr<double>()[j];
      if ((s.top_k > 0 && s.top_k < V) || s.top_p < 1) {
        // Truncation ranks tokens by tempered logprob, which orders them like the logits.
        auto candidates = logp[j];
        if (s.top_k > 0 && s.top_k < V) {
          auto kth = std::get<0>(at::topk(candidates, s.top_k)).min();
          candidates = candidates.masked_fill(candidates < kth, -INFINITY);
        }
        if (s.top_p < 1) {
          auto [sorted, order] = at::sort(candidates, -1, /*descending=*/true);
          auto sorted_probs = at::softmax(sorted, -1);
          auto mass_before = sorted_probs.cumsum(-1) - sorted_probs;  // smallest prefix reaching top_p
          auto drop_sorted = mass_before >= s.top_p;
          candidates = candidates.masked_fill(at::zeros_like(drop_sorted).scatter(0, order, drop_sorted), -INFINITY);
        }
        row = at::softmax(candidates, -1).contiguous();
        total = row.sum(at::kDouble).item<double>();
      }
      const double u = uniform01(s.rng);
      chosen[j] = row.scalar_type() == at::kDouble ? draw(row.data_ptr<double>(), V, total, u) : draw(row.data_ptr<float>(), V, total, u);
    }
  }
  auto picked = logp.gather(1, at::tensor(chosen, at::kLong).unsqueeze(1)).to(at::kDouble).contiguous();
  for (int64_t j = 0; j < n; ++j) {
    tokens[j] = static_cast<int32_t>(chosen[j]);
    logprobs[j] = static_cast<float>(picked.data_ptr<double>()[j]);
  }
  g.last_logp = logp;
  g.last_tokens = std::move(chosen);
}

// After a token is chosen: record it and decide whether the sequence is done.
int finish_after(Sequence& s, int32_t token, int64_t capacity) {
  s.next_token = token;
  s.generated += 1;
  int finish = RLX_FINISH_NONE;
  if (std::find(s.stop_ids.begin(), s.stop_ids.end(), token) != s.stop_ids.end()) finish = RLX_FINISH_STOP;
  else if (s.generated >= s.max_new_tokens || s.length + 1 >= capacity) finish = RLX_FINISH_LENGTH;  // prompt + generated
  if (finish != RLX_FINISH_NONE) s.active = false;
  return finish;
}

}  // namespace rlx
