// glibc's heap settings for the shim's CPU tensors, in one home (src/plan/memory.ts models the
// same thresholds for `rlx plan`).
//
// When the shim loads, unless GLIBC_TUNABLES sets malloc's own: blocks under 32 MiB come from the
// heap, and up to 512 MiB of free heap stays mapped. With glibc's defaults the heap top went back
// to the OS after nearly every op and the next op's tensors page-faulted fresh pages in: a
// prefill of 16 prompts of 32 tokens spent 3/4 of its time in page faults and zeroing
// (experiments/bench_history.md, "Page faults").
//
// The heap keeps its fragments, which a split row fills: over C context-parallel ranks a row's
// [tokens, hidden] tensors shrink C-fold and fall under the threshold that mapped them whole, and
// the heap's peak then kept about twice what was live (docs/scaling.md, "Memory and speed").
// While a split row trains, SplitRowHeap maps the blocks the whole row would have had mapped:
// those of 32 MiB / C and more.
#pragma once
#include <cstdint>

namespace rlx {

constexpr int64_t kHeapMmapThreshold = int64_t{32} << 20;

class SplitRowHeap {
 public:
  SplitRowHeap(bool on_cpu, int ranks);
  ~SplitRowHeap();
  SplitRowHeap(const SplitRowHeap&) = delete;
  SplitRowHeap& operator=(const SplitRowHeap&) = delete;

 private:
  bool active_ = false;
};

}  // namespace rlx
