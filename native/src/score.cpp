// Scoring: prefill logprobs of packed sequences under logits / temperature (OPD teachers, OPSD,
// rlx serve's prompt_logprobs), and with rlx_score_top the k most likely tokens of each
// position's tempered distribution and the rank of the actual token. The top-k is taken chunk by
// chunk on the device, so the host never receives a vocabulary-sized row: k values per token.
#include "model.h"

namespace rlx {
namespace {

struct ScoreOutputs {
  float* logprobs;
  float* entropy;  // may be null
  int k;           // 0: no top-k
  int32_t* ranks;  // may be null
  int32_t* top_ids;
  float* top_logprobs;
};

// One row's T-1 predictions (token t predicted from hidden state t-1), on the device.
struct RowScores {
  at::Tensor lp, entropy, rank, top_lp, top_ids;
};

RowScores score_row(Model& m, const at::Tensor& hidden, const at::Tensor& labels, const at::Tensor& temps,
                    const ScoreOutputs& o) {
  RowScores r;
  if (o.k == 0 && !o.ranks) {
    r.lp = chunked_logprobs(m, hidden, labels, temps, o.entropy ? &r.entropy : nullptr);
    return r;
  }
  // The chunks and ops of chunked_logprobs, so the logprobs are bit-identical to rlx_score's.
  std::vector<at::Tensor> lps, ents, ranks, top_lps, top_ids;
  const int64_t N = hidden.size(0), chunk = m.chunk_tokens();
  for (int64_t start = 0; start < N; start += chunk) {
    const int64_t n = std::min(chunk, N - start);
    auto z = lm_logits(m, hidden.narrow(0, start, n)) / temps.narrow(0, start, n).unsqueeze(1);
    auto logp = at::log_softmax(z, -1);
    auto lp = logp.gather(1, labels.narrow(0, start, n).unsqueeze(1));
    lps.push_back(lp.squeeze(1));
    if (o.entropy) ents.push_back(-(logp.exp() * logp).sum(-1));
    if (o.ranks) ranks.push_back(logp.ge(lp).sum(-1));  // 1-based; ties count against the token
    if (o.k > 0) {
      auto top = logp.topk(o.k, -1);
      top_lps.push_back(std::get<0>(top));
      top_ids.push_back(std::get<1>(top));
    }
  }
  auto cat = [&](std::vector<at::Tensor>& parts) { return parts.empty() ? at::Tensor() : at::cat(parts); };
  r.lp = cat(lps), r.entropy = cat(ents), r.rank = cat(ranks), r.top_lp = cat(top_lps), r.top_ids = cat(top_ids);
  return r;
}

// Copies one row's results to the caller's arrays at offset row_start; the first token of each
// sample has no prediction: logprob, entropy and rank 0, top ids -1, top logprobs 0.
void write_row(const RowScores& r, const std::vector<int64_t>& row, int64_t row_start, const ScoreOutputs& o) {
  int64_t T = 0;
  for (auto len : row) T += len;
  auto host = [](const at::Tensor& t, at::ScalarType type) {
    return t.defined() ? t.to(at::kCPU, type).contiguous() : at::Tensor();
  };
  auto lp = host(r.lp, at::kFloat), ent = host(r.entropy, at::kFloat), rank = host(r.rank, at::kInt);
  auto top_lp = host(r.top_lp, at::kFloat), top_ids = host(r.top_ids, at::kInt);
  const int64_t k = o.k;
  for (int64_t t = 0, sample_start = 0, s = 0; t < T; ++t) {
    const bool first = t == sample_start;
    if (first) sample_start += row[s++];
    const int64_t pos = row_start + t;
    o.logprobs[pos] = first ? 0.0f : lp.data_ptr<float>()[t - 1];
    if (o.entropy) o.entropy[pos] = first ? 0.0f : ent.data_ptr<float>()[t - 1];
    if (o.ranks) o.ranks[pos] = first ? 0 : rank.data_ptr<int32_t>()[t - 1];
    for (int64_t j = 0; j < k; ++j) {
      o.top_ids[pos * k + j] = first ? -1 : top_ids.data_ptr<int32_t>()[(t - 1) * k + j];
      o.top_logprobs[pos * k + j] = first ? 0.0f : top_lp.data_ptr<float>()[(t - 1) * k + j];
    }
  }
}

int score_packed(void* model, int64_t total, const int32_t* token_ids, const int32_t* lengths, int n,
                 const float* temperatures, int64_t row_tokens, const ScoreOutputs& o) {
  auto& m = whole_model(model, "rlx_score");
  require(n >= 1 && lengths && o.logprobs, "rlx_score: n must be >= 1 and lengths, out_logprobs non-null");
  require(o.k >= 0 && o.k <= m.cfg.vocab_size,
          "rlx_score_top: k = " + std::to_string(o.k) + " must be in 0..vocab_size (" + std::to_string(m.cfg.vocab_size) + ")");
  require(o.k == 0 || (o.top_ids && o.top_logprobs), "rlx_score_top: k > 0 needs out_top_ids and out_top_logprobs");
  int64_t sum = 0;
  for (int i = 0; i < n; ++i) {
    require(lengths[i] >= 1, "rlx_score: lengths[" + std::to_string(i) + "] must be >= 1");
    sum += lengths[i];
  }
  require(sum == total, "rlx_score: lengths sum to " + std::to_string(sum) + ", total is " + std::to_string(total));
  if (temperatures)
    for (int64_t t = 0; t < total; ++t)
      require(temperatures[t] > 0 && std::isfinite(temperatures[t]), "rlx_score: temperatures[" + std::to_string(t) + "] must be > 0");
  auto ids_all = token_tensor(m, token_ids, total, "token_ids");

  c10::InferenceMode inference;
  AutocastScope autocast(m);
  auto cd = m.compute_dtype();
  auto temps_all = temperatures ? at::from_blob(const_cast<float*>(temperatures), {total}, at::kFloat).to(m.device, cd)
                                : at::ones({total}, m.opts(cd));
  // Consecutive sequences share a packed row of at most row_tokens (a longer one gets its own).
  int64_t row_start = 0;
  for (int begin = 0; begin < n;) {
    int end = begin;
    int64_t T = 0;
    while (end < n && (end == begin || row_tokens <= 0 || T + lengths[end] <= row_tokens)) T += lengths[end++];
    std::vector<int64_t> row(lengths + begin, lengths + end);
    auto ids = ids_all.narrow(0, row_start, T);
    auto hidden = forward_packed(m, ids, packed_positions(m, row), row);
    auto scores = score_row(m, hidden.narrow(0, 0, T - 1), ids.narrow(0, 1, T - 1),
                            temps_all.narrow(0, row_start + 1, T - 1), o);
    write_row(scores, row, row_start, o);
    row_start += T;
    begin = end;
  }
  return 0;
}

}  // namespace
}  // namespace rlx

using namespace rlx;

RLX_API int rlx_score(rlx_model* model, int64_t total, const int32_t* token_ids, const int32_t* lengths, int n,
                      const float* temperatures, int64_t row_tokens, float* out_logprobs, float* out_entropy) {
  RLX_TRY(-1, {
    return score_packed(model, total, token_ids, lengths, n, temperatures, row_tokens,
                        {out_logprobs, out_entropy, 0, nullptr, nullptr, nullptr});
  })
}

RLX_API int rlx_score_top(rlx_model* model, int64_t total, const int32_t* token_ids, const int32_t* lengths, int n,
                          const float* temperatures, int64_t row_tokens, int k, float* out_logprobs, int32_t* out_ranks,
                          int32_t* out_top_ids, float* out_top_logprobs) {
  RLX_TRY(-1, {
    return score_packed(model, total, token_ids, lengths, n, temperatures, row_tokens,
                        {out_logprobs, nullptr, k, out_ranks, out_top_ids, out_top_logprobs});
  })
}
