// Context parallelism (docs/scaling.md, "Long context"): one packed row split along the sequence
// over the C ranks of a c10d group, so each rank holds the activations of T / C tokens.
//
// The split is "zigzag": the row is cut into 2C chunks of ceil(T / 2C) tokens (the last ones
// short) and rank r holds chunks r and 2C - 1 - r, so under causal attention every rank has about
// the same work (an early chunk sees few keys, a late one many). Every layer but attention is per
// token and runs on the rank's own tokens.
//
// Attention all-gathers the keys and values of the whole row (Llama 3's context parallelism) and
// runs each local query against the keys it may see: its own sample's up to itself and its
// parent's (a shared prefix). Why not ring attention: with grouped-query attention K and V are a
// fraction of the activations (2 kv heads beside 4 query heads in `tiny`), an all-gather moves
// the same bytes a ring does, and the full K/V make packed samples and shared prefixes plain key
// ranges instead of a mask per passed block. Why not all-to-all over heads (Ulysses): C could not exceed
// the kv-head count. The attention itself is blockwise with a saved log-sum-exp (a custom
// autograd function, as flash attention's backward): only q, this rank's K/V, the output and the
// log-sum-exp are kept, never a [queries, keys] matrix, so its memory is O(T) on libtorch 1.13 as
// on 2.x; the backward gathers the row's K/V again. A ring would replace the all-gather with K/V
// blocks passed around the group and merge each block's partial result by its log-sum-exp, which
// this kernel already computes.
//
// The backward all-reduces the gradient of the gathered K/V over the group (each rank's queries
// add to every rank's keys) and keeps its own tokens' rows.
#pragma once
#include <ATen/core/ivalue.h>

#include "common.h"

namespace rlx {

struct Model;

// This rank's share of one packed row, and the query blocks its attention runs.
struct ContextRow : torch::CustomClassHolder {
  void* group = nullptr;  // the rlx_group handle the row is split over
  int rank = 0, world = 1;
  int64_t T = 0, chunk = 1;  // the row's tokens; tokens in each of its 2C chunks (the last short)
  at::Tensor local;          // [n] int64: the row positions of this rank's tokens, ascending
  // A block of consecutive local queries of one sample, and the keys they see: the parent's
  // [parent_start, +parent_len) whole, and the sample's own [own_start, +own_len), query i of the
  // block seeing own keys 0..own_len - n + i.
  struct Block {
    int64_t at, n, parent_start, parent_len, own_start, own_len;
  };
  std::vector<Block> blocks;
};
using ContextRowPtr = c10::intrusive_ptr<ContextRow>;

// Splits a row of the given samples (parents as forward_packed's) over the group's ranks.
ContextRowPtr split_row(const Model& m, void* group, const std::vector<int64_t>& lengths,
                        const std::vector<int64_t>& parents);

// Attention of this rank's tokens: q [n, H, D], k/v [n, G, D] (after the rotary embedding) ->
// [n, H * D]. Collective over the row's group, in the forward and in the backward.
at::Tensor context_attention(const Model& m, const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                             const ContextRowPtr& row);

// Sums a tensor over the row's group in place (the train step's logprobs of the whole row).
void context_sum(const ContextRow& row, at::Tensor& t, const std::string& what);

}  // namespace rlx
