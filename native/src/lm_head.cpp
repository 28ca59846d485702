// The LM head: full-vocabulary logits in the compute dtype, and logprobs (with entropies) of given
// labels chunk by chunk, so a row's [T, V] logits never exist at once (docs/architecture.md §7,
// "Chunked LM head"). The train step's own two passes over the LM head are in train.cpp.
#include "model.h"

namespace rlx {

// The LM head runs in the compute dtype (float32) even inside a bf16 autocast scope: every logprob
// the losses, the sampler and the importance ratios use comes from these logits, and bf16 keeps 8
// bits of mantissa (at logits of ~10 a step of 0.06 nats), which made bf16-autocast SFT learn
// far worse than float32 (experiments/scripts/bf16_sft.sh; docs/gpu.md). Low-precision weights
// are widened per chunk.
at::Tensor lm_logits(Model& m, const at::Tensor& hidden) {
  c10::impl::ExcludeDispatchKeyGuard no_autocast(c10::autocast_dispatch_keyset);
  const auto cd = m.compute_dtype();
  return linear(m, hidden.to(cd), m.lm_head.to(cd));
}

at::Tensor chunked_logprobs(Model& m, const at::Tensor& hidden, const at::Tensor& labels,
                            const at::Tensor& temperatures, at::Tensor* entropy_out) {
  const int64_t N = hidden.size(0);
  std::vector<at::Tensor> logprobs, entropies;
  const int64_t chunk = m.chunk_tokens();
  for (int64_t start = 0; start < N; start += chunk) {
    const int64_t n = std::min(chunk, N - start);
    auto z = lm_logits(m, hidden.narrow(0, start, n)) / temperatures.narrow(0, start, n).unsqueeze(1);
    auto logp = at::log_softmax(z, -1);
    logprobs.push_back(logp.gather(1, labels.narrow(0, start, n).unsqueeze(1)).squeeze(1));
    if (entropy_out) {
      at::NoGradGuard no_grad;
      entropies.push_back(-(logp.exp() * logp).sum(-1));
    }
  }
  if (entropy_out) *entropy_out = N ? at::cat(entropies) : at::zeros({0}, hidden.options().dtype(m.compute_dtype()));
  return N ? at::cat(logprobs) : at::zeros({0}, hidden.options().dtype(m.compute_dtype()));
}

}  // namespace rlx
