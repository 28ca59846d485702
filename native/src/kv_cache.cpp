// The paged K/V pool and the map from (table, position) to cache rows (kv_cache.h).
#include "kv_cache.h"

namespace rlx {

void kv_init(KVCache& c, size_t layers, int64_t blocks, int64_t kv_heads, int64_t head_dim, const at::TensorOptions& opts) {
  for (size_t l = 0; l < layers; ++l) {
    c.k.push_back(at::zeros({kv_heads, blocks, kKVBlock, head_dim}, opts));
    c.v.push_back(at::zeros({kv_heads, blocks, kKVBlock, head_dim}, opts));
  }
  c.refs.assign(static_cast<size_t>(blocks), 0);
  for (int64_t b = blocks - 1; b >= 0; --b) c.free.push_back(b);  // block 0 is taken first
}

int64_t kv_take(KVCache& c) {
  TORCH_CHECK(!c.free.empty(), "the K/V cache has no free block");
  const int64_t b = c.free.back();
  c.free.pop_back();
  c.refs[b] = 1;
  return b;
}

void kv_release(KVCache& c, BlockTable& table) {
  for (auto b : table)
    if (--c.refs[b] == 0) c.free.push_back(b);
  table.clear();
}

BlockTable kv_share(KVCache& c, const BlockTable& from, size_t n) {
  BlockTable shared(from.begin(), from.begin() + static_cast<ptrdiff_t>(std::min(n, from.size())));
  for (auto b : shared) ++c.refs[b];
  return shared;
}

void kv_copy_block(KVCache& c, int64_t from, int64_t to) {
  for (auto* layers : {&c.k, &c.v})
    for (auto& layer : *layers) layer.select(1, to).copy_(layer.select(1, from));
}

at::Tensor kv_rows(const KVCache& c, const std::vector<const BlockTable*>& tables, const std::vector<int64_t>& positions,
                   const at::Device& device) {
  const int64_t G = c.k[0].size(0), blocks = c.blocks();
  std::vector<int64_t> rows;
  rows.reserve(positions.size() * static_cast<size_t>(G));
  for (size_t i = 0; i < positions.size(); ++i) {
    const int64_t p = positions[i], block = (*tables[i])[static_cast<size_t>(p / kKVBlock)];
    for (int64_t g = 0; g < G; ++g) rows.push_back((g * blocks + block) * kKVBlock + p % kKVBlock);
  }
  return at::tensor(rows, at::kLong).to(device);
}

void kv_write(KVCache& c, size_t l, const at::Tensor& rows, const at::Tensor& k, const at::Tensor& v) {
  const int64_t D = c.k[l].size(3);
  for (auto [cache, x] : {std::pair{&c.k[l], &k}, std::pair{&c.v[l], &v}}) {
    auto rows_N_D = x->reshape({-1, D}).to(cache->scalar_type()).contiguous();
    if (!cache->device().is_cpu()) {
      cache->view({-1, D}).index_copy_(0, rows, rows_N_D);
      continue;
    }
    // On the CPU each row (one per token and kv head) is copied directly: a decode step's are a
    // few hundred of head_dim values.
    const auto bytes = static_cast<size_t>(D * cache->element_size());
    const int64_t* to = rows.data_ptr<int64_t>();
    auto* base = static_cast<char*>(cache->data_ptr());
    const auto* from = static_cast<const char*>(rows_N_D.data_ptr());
    for (int64_t i = 0; i < rows_N_D.size(0); ++i) std::memcpy(base + to[i] * bytes, from + i * bytes, bytes);
  }
}

at::Tensor kv_gather(const at::Tensor& layer_cache, const BlockTable& table, int64_t length) {
  const int64_t n = blocks_for(length), G = layer_cache.size(0), D = layer_cache.size(3);
  auto ids = at::tensor(BlockTable(table.begin(), table.begin() + n), at::kLong).to(layer_cache.device());
  return layer_cache.index_select(1, ids).view({G, n * kKVBlock, D}).permute({1, 0, 2}).narrow(0, 0, length);
}

at::Tensor kv_gather_rows(const at::Tensor& layer_cache, const at::Tensor& tables_B_n) {
  const int64_t B = tables_B_n.size(0), n = tables_B_n.size(1), G = layer_cache.size(0), D = layer_cache.size(3);
  return layer_cache.index_select(1, tables_B_n.reshape({-1})).view({G, B, n * kKVBlock, D}).permute({1, 0, 2, 3});
}

}  // namespace rlx
