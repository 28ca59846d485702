// The distill loss component: its streams, the student's k + 1 buckets and the divergence
// (distill.h). Why buckets and not a renormalized top-k: the teacher's top-k rarely holds all of
// its mass, and renormalizing would tell the student to put the tail's mass on the k ids; one tail
// bucket on each side keeps both distributions proper, and with k = vocabulary (the tail empty)
// the divergence is the exact one.
#include "distill.h"

#include <algorithm>

namespace rlx {

DistillStreams make_distill(const DistillArgs& a, int64_t T, int64_t vocab, const at::Tensor& valid, at::ScalarType cd) {
  DistillStreams d;
  if (!a.weights) return d;
  require(a.k >= 0, "distill_k must be >= 0, got " + std::to_string(a.k));
  const int64_t k = a.k;
  bool any_member = false;
  for (int64_t t = 0; t < T; ++t) any_member = any_member || a.weights[t] != 0;
  require(!any_member || k > 0, "distill weights are set but distill_k is 0 (a member needs the target's top-k)");
  require(k == 0 || (a.ids && a.logprobs), "distill_ids and distill_logprobs are required when distill_k > 0");
  std::vector<int32_t> sorted(static_cast<size_t>(k));
  for (int64_t t = 0; t < T; ++t) {
    if (a.betas)
      require(a.betas[t] >= 0 && a.betas[t] <= 1, "distill_betas[" + std::to_string(t) + "] = " +
                                                      std::to_string(a.betas[t]) + " must be in [0, 1]");
    for (int64_t j = 0; j < k; ++j) {
      const int32_t id = a.ids[t * k + j];
      const std::string at = "[" + std::to_string(t * k + j) + "] (token " + std::to_string(t) + ", slot " + std::to_string(j) + ")";
      require(id >= -1 && id < vocab, "distill_ids" + at + " = " + std::to_string(id) + " is outside the vocabulary (size " +
                                          std::to_string(vocab) + "; -1 marks an empty slot)");
      require(id < 0 || std::isfinite(a.logprobs[t * k + j]), "distill_logprobs" + at + " is not finite");
      sorted[static_cast<size_t>(j)] = id;
    }
    std::sort(sorted.begin(), sorted.end());
    for (int64_t j = 1; j < k; ++j)
      require(sorted[j] < 0 || sorted[j] != sorted[j - 1],
              "distill_ids of token " + std::to_string(t) + " repeat id " + std::to_string(sorted[j]) + " (a top-k lists distinct ids)");
  }
  auto to = at::TensorOptions().dtype(cd).device(valid.device());
  d.k = k;
  d.w = at::from_blob(const_cast<float*>(a.weights), {T}, at::kFloat).to(to.device(), cd) * valid.to(cd);
  d.member = d.w.ne(0);
  d.beta = a.betas ? at::from_blob(const_cast<float*>(a.betas), {T}, at::kFloat).to(to.device(), cd) : at::zeros({T}, to);
  if (k == 0) {
    d.ids = at::zeros({T, 0}, to.dtype(at::kLong)), d.slot = at::zeros({T, 0}, to.dtype(at::kBool)), d.tlp = at::zeros({T, 0}, to);
  } else {
    auto raw = at::from_blob(const_cast<int32_t*>(a.ids), {T, k}, at::kInt).to(valid.device(), at::kLong);
    d.slot = raw.ge(0);
    d.ids = at::clamp_min(raw, 0);
    d.tlp = at::from_blob(const_cast<float*>(a.logprobs), {T, k}, at::kFloat).to(to.device(), cd);
  }
  // The ids are distinct, so they cover the vocabulary exactly when vocab of them are listed.
  d.tail = d.slot.sum(1).lt(vocab);
  return d;
}

at::Tensor student_buckets(const at::Tensor& logits, const at::Tensor& ids, const at::Tensor& slot) {
  const int64_t V = logits.size(1);
  auto lse = at::logsumexp(logits, {1}, /*keepdim=*/true);
  auto picked = at::where(slot, logits.gather(1, ids) - lse, at::zeros({}, logits.options()));
  at::Tensor covered, full;
  {
    at::NoGradGuard no_grad;
    auto hits = at::zeros(logits.sizes(), logits.options().requires_grad(false)).scatter_add_(1, ids, slot.to(logits.scalar_type()));
    covered = hits.gt(0);
    full = covered.sum(1).eq(V);
  }
  // An empty tail (the ids cover the vocabulary) gets finite stand-in logits, masked below, so
  // logsumexp's backward never sees a row of -inf.
  auto rest = at::where(full.unsqueeze(1), at::zeros({}, logits.options()), logits.masked_fill(covered, -INFINITY));
  auto tail = at::where(full, at::zeros({}, logits.options()), at::logsumexp(rest, {1}) - lse.squeeze(1));
  return at::cat({picked, tail.unsqueeze(1)}, 1);
}

at::Tensor distill_divergence(const at::Tensor& s, const DistillStreams& d) {
  auto zero = at::zeros({}, s.options());
  auto bucket = at::cat({d.slot, d.tail.unsqueeze(1)}, 1);
  auto t_slots = at::where(d.slot, d.tlp, zero);
  auto t_tail = at::clamp_min(1 - at::where(d.slot, t_slots.exp(), zero).sum(1), kDistillTailFloor).log();
  auto lt = at::where(bucket, at::cat({t_slots, t_tail.unsqueeze(1)}, 1), zero);
  auto ls = at::where(bucket, s, zero);
  auto pt = at::where(bucket, lt.exp(), zero), ps = at::where(bucket, ls.exp(), zero);
  auto forward_kl = (pt * (lt - ls)).sum(1);
  auto reverse_kl = (ps * (ls - lt)).sum(1);
  auto mixed = d.beta.gt(0).logical_and(d.beta.lt(1));
  auto b = at::where(mixed, d.beta, at::full({}, 0.5, s.options())).unsqueeze(1);
  auto lm = at::logaddexp(b.log() + lt, at::log1p(-b) + ls);
  auto jsd = (b * pt * (lt - lm) + (1 - b) * ps * (ls - lm)).sum(1);
  auto out = at::where(d.beta.eq(0), forward_kl, at::where(d.beta.eq(1), reverse_kl, jsd));
  return at::where(d.member, out, zero);
}

}  // namespace rlx
