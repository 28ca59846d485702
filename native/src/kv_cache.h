// A generator's K/V cache as a pool of fixed-size blocks (vLLM's paged attention, Kwon et al.
// 2023): each sequence holds a block table, position p of it living at offset p % kKVBlock of
// block table[p / kKVBlock]. Memory is the pool's, shared by every sequence as far as each needs,
// so a few long episodes and many short ones fit one budget that slots x capacity would exceed.
// Full blocks of a prompt are shared by its repeats and by a later prompt that continues it
// (a reference count per block); a block is copied before a sequence writes into a shared one.
// The generator (generate.cpp, slots.cpp) decides who holds what; this file keeps the pool and
// maps positions to the cache's rows.
#pragma once
#include "common.h"

namespace rlx {

// Tokens per block: vLLM's default. Small enough that a sequence wastes at most 15 tokens' K/V,
// large enough that the CPU kernel's inner loops run over contiguous keys.
constexpr int64_t kKVBlock = 16;

using BlockTable = std::vector<int64_t>;

inline int64_t blocks_for(int64_t tokens) { return (tokens + kKVBlock - 1) / kKVBlock; }

// Per layer [kv_heads, blocks, kKVBlock, head_dim]: a kv head's keys of consecutive blocks are
// adjacent, so a prompt's blocks, taken in order, are read as one stream (with the kv heads inside
// each block, the CPU's prefetcher restarted every block: decode attention ran 1.3x longer).
struct KVCache {
  std::vector<at::Tensor> k, v;
  int64_t capacity = 0;          // tokens per sequence at most
  std::vector<int32_t> refs;     // block tables holding each block (running or kept sequences)
  std::vector<int64_t> free;     // blocks no table holds, the next one taken last
  int64_t blocks() const { return static_cast<int64_t>(refs.size()); }
};

// A pool of `blocks` blocks for `layers` layers of K/V [kv_heads, kKVBlock, head_dim].
void kv_init(KVCache& c, size_t layers, int64_t blocks, int64_t kv_heads, int64_t head_dim, const at::TensorOptions& opts);
// Takes a free block (one must be free: the generator evicts kept prefixes first).
int64_t kv_take(KVCache& c);
// Drops the table's blocks (each freed when no other table holds it) and empties it.
void kv_release(KVCache& c, BlockTable& table);
// The first n blocks of `from`, shared: each block's count goes up.
BlockTable kv_share(KVCache& c, const BlockTable& from, size_t n);
// Copies block `from` into block `to` in every layer and kv head.
void kv_copy_block(KVCache& c, int64_t from, int64_t to);

// Where a packed forward writes K/V: sample s goes to the blocks of tables[s], positions
// past[s]..past[s]+len-1. past (empty: all 0) is how many cached tokens the sample continues: it
// attends to those cached K/V and causally to its own, its positions going on from there (a tool
// episode's next turn over the turns before it, or a long prompt's next prefill pass;
// generate.cpp). The tables cover every position written.
struct KVWrite {
  KVCache* cache = nullptr;
  std::vector<const BlockTable*> tables;
  std::vector<int64_t> past;
  int64_t past_of(size_t s) const { return past.empty() ? 0 : past[s]; }
};

// Rows of a layer's cache viewed as [kv_heads * blocks * kKVBlock, head_dim] holding token i's K
// (or V) of every kv head, token i at positions[i] of *tables[i]: [N * kv_heads] int64 on device.
at::Tensor kv_rows(const KVCache& c, const std::vector<const BlockTable*>& tables, const std::vector<int64_t>& positions,
                   const at::Device& device);
// Writes k, v [N, kv_heads, head_dim] of layer l at rows from kv_rows.
void kv_write(KVCache& c, size_t l, const at::Tensor& rows, const at::Tensor& k, const at::Tensor& v);
// The first `length` cached K (or V) of one table in a layer's cache: [length, kv_heads, head_dim].
at::Tensor kv_gather(const at::Tensor& layer_cache, const BlockTable& table, int64_t length);
// Every key of B tables in a layer's cache: tables_B_n [B, n] block ids (int64, on the cache's
// device) -> [B, kv_heads, n * kKVBlock, head_dim]; positions past a table's length are leftovers.
at::Tensor kv_gather_rows(const at::Tensor& layer_cache, const at::Tensor& tables_B_n);

// Attention against the paged cache on the CPU (attention_cpu.cpp): q [B, H, D], caches as
// KVCache keeps them; row b reads table tables[b] and sees its keys 0..positions[b] -> [B, H * D].
// A decode step's rows, or a short prefill's tokens once their K/V are written. Applies to
// contiguous float32 / float64 tensors of one dtype on the CPU.
bool cache_attention_cpu_applies(const at::Tensor& q, const at::Tensor& k_cache);
at::Tensor cache_attention_cpu(const at::Tensor& q, const at::Tensor& k_cache, const at::Tensor& v_cache,
                               const std::vector<int64_t>& positions, const std::vector<const BlockTable*>& tables,
                               int64_t capacity);

}  // namespace rlx
