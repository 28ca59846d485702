// Attention against the paged K/V cache on the CPU (kv_cache.h): each row's query heads against
// its block table's K/V, written as plain loops. A row is one decode step's query, or one token
// of a short prefill once its K/V are written. libtorch 1.13 runs the batched product of the
// general path (forward.cpp) as one small BLAS call per (row, kv head) after a select per
// operand; at batch 64 with 2 kv heads that was 256 calls a layer, 3.6 of a `tiny` decode step's
// 9.4 ms (experiments/bench_history.md, "Decode on the CPU"). Here a task is one (row, kv head):
// its R = H / G query heads score the row's visible keys, take a softmax in the compute dtype, and
// sum the values, so the work is the arithmetic itself. Keys are scored four at a time and the
// values summed into eight vectors of sums held in registers: independent chains the CPU
// overlaps, each element's sum in the same order as one running loop
// (experiments/bench_history.md, "Cache attention in independent chains"), block after block of
// the table: the blocks change where the keys are read, not the order they are summed in. Tasks
// run in at::parallel_for, in parallel only when there is enough of it.
//
// The loops are compiled twice on x86-64, plain and for AVX2, and the AVX2 copy runs where the CPU
// has it. -ffp-contract=off (ISO C++) keeps multiply and add apart in both, so both compute the
// same numbers; they differ from the BLAS product's summation order by rounding only.
#include "cpu_dot.h"
#include "kv_cache.h"

namespace rlx {
namespace {

template <typename T>
struct Task {
  const T *q, *k, *v;                // q [B, H, D]; k, v [G, blocks, kKVBlock, D]
  const BlockTable* const* tables;  // each row's blocks
  const int64_t* seen;               // keys each row sees: its position + 1
  T* out;                            // [B, H, D]
  int64_t G, R, D, capacity, blocks;
  T scale;
};

// out_D = (sum over s < n of weights[s] v(s)) * inv, v(s) the value of key s (offset s % kKVBlock
// of block v_blocks[s / kKVBlock]), summed over s in order for each element as a loop of
// out[d] += w v[d] would, with 8 vectors of sums held in registers across the keys.
template <typename T>
[[gnu::always_inline]] inline void weighted_values(const T* weights, const T* const* v_blocks, int64_t n, int64_t D, T inv,
                                                   T* out_D) {
  typedef T Vec __attribute__((vector_size(32)));
  constexpr int64_t kLanes = 32 / sizeof(T), kWidth = 8 * kLanes;
  int64_t d0 = 0;
  for (; d0 + kWidth <= D; d0 += kWidth) {
    Vec acc[8] = {};
    for (int64_t s0 = 0; s0 < n; s0 += kKVBlock) {
      const T* v_S_D = v_blocks[s0 / kKVBlock];
      for (int64_t s = 0, end = std::min(kKVBlock, n - s0); s < end; ++s) {
        const Vec w = Vec{} + weights[s0 + s];
#pragma GCC unroll 8
        for (int u = 0; u < 8; ++u) {
          Vec v;
          __builtin_memcpy(&v, v_S_D + s * D + d0 + u * kLanes, sizeof(Vec));
          acc[u] += w * v;
        }
      }
    }
#pragma GCC unroll 8
    for (int u = 0; u < 8; ++u) {
      const Vec scaled = acc[u] * inv;
      __builtin_memcpy(out_D + d0 + u * kLanes, &scaled, sizeof(Vec));
    }
  }
  for (int64_t d = d0; d < D; ++d) {
    T sum = 0;
    for (int64_t s = 0; s < n; ++s) sum += weights[s] * v_blocks[s / kKVBlock][(s % kKVBlock) * D + d];
    out_D[d] = sum * inv;
  }
}

template <typename T>
[[gnu::always_inline]] inline void attend_tasks(const Task<T>& t, int64_t begin, int64_t end) {
  thread_local std::vector<T> weights;
  thread_local std::vector<const T*> k_blocks, v_blocks;
  weights.resize(static_cast<size_t>(t.capacity));
  T* w = weights.data();
  const int64_t D = t.D, H = t.G * t.R;
  for (int64_t task = begin; task < end; ++task) {
    const int64_t b = task / t.G, g = task % t.G, n = t.seen[b];
    k_blocks.clear(), v_blocks.clear();
    for (int64_t j = 0; j < blocks_for(n); ++j) {
      const int64_t at = (g * t.blocks + (*t.tables[b])[static_cast<size_t>(j)]) * kKVBlock * D;
      k_blocks.push_back(t.k + at), v_blocks.push_back(t.v + at);
    }
    for (int64_t r = 0; r < t.R; ++r) {
      const int64_t h = g * t.R + r;
      const T* q_D = t.q + (b * H + h) * D;
      for (int64_t s0 = 0; s0 < n; s0 += kKVBlock) {  // four keys' chains at once within a block
        const T* k_S_D = k_blocks[static_cast<size_t>(s0 / kKVBlock)];
        const int64_t keys = std::min(kKVBlock, n - s0);
        int64_t s = 0;
        for (; s + 4 <= keys; s += 4) dots<4>(q_D, k_S_D + s * D, D, D, w + s0 + s);
        for (; s < keys; ++s) w[s0 + s] = dot(q_D, k_S_D + s * D, D);
      }
      T top = -std::numeric_limits<T>::infinity();
      for (int64_t s = 0; s < n; ++s) top = std::max(top, w[s] *= t.scale);
      T total = 0;
      for (int64_t s = 0; s < n; ++s) total += w[s] = std::exp(w[s] - top);
      weighted_values(w, v_blocks.data(), n, D, T(1) / total, t.out + (b * H + h) * D);
    }
  }
}

template <typename T>
void attend_plain(const Task<T>& t, int64_t begin, int64_t end) {
  attend_tasks(t, begin, end);
}

#if defined(__x86_64__)
template <typename T>
__attribute__((target("avx2"))) void attend_avx2(const Task<T>& t, int64_t begin, int64_t end) {
  attend_tasks(t, begin, end);
}
#endif

template <typename T>
void attend(const Task<T>& t, int64_t tasks, int64_t work_per_task) {
  auto* run = &attend_plain<T>;
#if defined(__x86_64__)
  static const bool avx2 = __builtin_cpu_supports("avx2");
  if (avx2) run = &attend_avx2<T>;
#endif
  // A parallel region costs tens of microseconds to wake its threads: give each chunk ~256k
  // multiply-adds at least.
  const int64_t grain = std::max<int64_t>(1, (int64_t(1) << 18) / std::max<int64_t>(1, work_per_task));
  at::parallel_for(0, tasks, grain, [&](int64_t begin, int64_t end) { run(t, begin, end); });
}

}  // namespace

bool cache_attention_cpu_applies(const at::Tensor& q, const at::Tensor& k_cache) {
  const auto dt = q.scalar_type();
  return q.device().is_cpu() && (dt == at::kFloat || dt == at::kDouble) && k_cache.scalar_type() == dt &&
         q.is_contiguous() && k_cache.is_contiguous();
}

at::Tensor cache_attention_cpu(const at::Tensor& q, const at::Tensor& k_cache, const at::Tensor& v_cache,
                               const std::vector<int64_t>& positions, const std::vector<const BlockTable*>& tables,
                               int64_t capacity) {
  const int64_t B = q.size(0), H = q.size(1), D = q.size(2), G = k_cache.size(0);
  TORCH_CHECK(v_cache.is_contiguous() && v_cache.sizes() == k_cache.sizes(), "cache_attention_cpu: bad V cache");
  TORCH_CHECK(static_cast<int64_t>(positions.size()) == B && static_cast<int64_t>(tables.size()) == B,
              "cache_attention_cpu: one position and block table per row");
  std::vector<int64_t> seen(positions.size());
  int64_t longest = 0;
  for (size_t b = 0; b < positions.size(); ++b) {
    TORCH_CHECK(positions[b] >= 0 && positions[b] < capacity &&
                    blocks_for(positions[b] + 1) <= static_cast<int64_t>(tables[b]->size()),
                "cache_attention_cpu: row ", b, " outside its blocks");
    longest = std::max(longest, seen[b] = positions[b] + 1);
  }
  auto out = at::empty({B, H, D}, q.options());
  const int64_t work_per_task = 2 * (H / G) * longest * D;
  AT_DISPATCH_FLOATING_TYPES(q.scalar_type(), "cache_attention_cpu", [&] {
    Task<scalar_t> t{q.data_ptr<scalar_t>(), k_cache.data_ptr<scalar_t>(), v_cache.data_ptr<scalar_t>(), tables.data(),
                     seen.data(), out.data_ptr<scalar_t>(), G, H / G, D, capacity, k_cache.size(1),
                     static_cast<scalar_t>(1.0 / std::sqrt(double(D)))};
    attend(t, B * G, work_per_task);
  });
  return out.view({B, H * D});
}

}  // namespace rlx
