// glibc's heap settings (heap.h): the shim's at load, and a split row's while it trains.
#include "heap.h"

#include <cstdlib>
#include <cstring>
#if defined(__GLIBC__)
#include <malloc.h>
#endif

namespace rlx {

namespace {

// The user's GLIBC_TUNABLES for malloc win over the shim's settings.
bool tuned_by_user() {
  const char* tunables = std::getenv("GLIBC_TUNABLES");
  return tunables && std::strstr(tunables, "glibc.malloc.");
}

void set_mmap_threshold(int64_t bytes) {
#if defined(__GLIBC__)
  mallopt(M_MMAP_THRESHOLD, static_cast<int>(bytes));
#else
  (void)bytes;
#endif
}

const bool g_heap_set_at_load = [] {
  if (tuned_by_user()) return false;
  set_mmap_threshold(kHeapMmapThreshold);
#if defined(__GLIBC__)
  mallopt(M_TRIM_THRESHOLD, 512 << 20);
#endif
  return true;
}();

}  // namespace

SplitRowHeap::SplitRowHeap(bool on_cpu, int ranks) : active_(on_cpu && ranks > 1 && g_heap_set_at_load) {
  if (active_) set_mmap_threshold(kHeapMmapThreshold / ranks);
}

SplitRowHeap::~SplitRowHeap() {
  if (active_) set_mmap_threshold(kHeapMmapThreshold);
}

}  // namespace rlx
