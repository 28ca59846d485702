// The distill loss component (docs/architecture.md §6): per member token, a divergence
// between a target distribution given as k token ids with their logprobs (a teacher's top-k; the
// rest of its mass is one tail bucket) and the student's temperature-1 distribution over the same
// k + 1 buckets (the k ids, then everything else). train.cpp feeds it the student's bucket
// logprobs; this file holds the streams, the buckets and the divergence.
#pragma once
#include "common.h"

namespace rlx {

// The teacher's tail probability is floored here where the student's tail is not empty: float32
// teacher logprobs leave the top-k's mass about 1e-7 uncertain, so a tail under the floor is
// rounding, and a zero would make the reverse KL infinite.
constexpr double kDistillTailFloor = 1e-8;

struct DistillArgs {
  const float* weights;   // [T], NULL: no distill member
  const float* betas;     // [T] in [0, 1], NULL: all 0 (forward KL)
  int k;                  // slots per token
  const int32_t* ids;     // [T * k], -1 = empty slot
  const float* logprobs;  // [T * k], the target's logprob of each id (empty slots: ignored)
};

// One row's distill streams as tensors (undefined `w` when the row has none).
struct DistillStreams {
  int64_t k = 0;
  at::Tensor w, beta, member;  // [T]: weight (0 off members), beta, bool
  at::Tensor tail;             // [T] bool: the tail bucket is not empty (fewer than vocab ids listed)
  at::Tensor ids, slot, tlp;   // [T, k]: ids (empty slots 0), slot valid (bool), target logprobs
  bool present() const { return w.defined(); }
};

// Validates and uploads the streams: ids in [-1, vocab) and distinct per token, finite logprobs,
// betas in [0, 1]. valid: [T] bool, false where a token has no prediction (never a member).
DistillStreams make_distill(const DistillArgs& a, int64_t T, int64_t vocab, const at::Tensor& valid, at::ScalarType cd);

// The student's bucket logprobs [N, k + 1] at temperature 1 from its logits [N, V] (differentiable):
// log p(id_j) per slot, then log p(every other id). Empty slots and an empty tail give 0.
at::Tensor student_buckets(const at::Tensor& logits, const at::Tensor& ids, const at::Tensor& slot);

// The per-token divergence [T] (before the weight) between the target's buckets and the student's
// bucket logprobs s [T, k + 1]: beta 0 forward KL(teacher || student), 1 reverse KL(student ||
// teacher), between them the generalized JSD beta KL(T || M) + (1 - beta) KL(S || M), M = beta T +
// (1 - beta) S (TRL's GKD generalized_jsd_loss). 0 off members.
at::Tensor distill_divergence(const at::Tensor& s, const DistillStreams& d);

}  // namespace rlx
