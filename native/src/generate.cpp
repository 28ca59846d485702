// Generation and scoring.
//
// A generator owns a K/V cache of fixed-size blocks (kv_cache.h: vLLM's paged attention) and up
// to `slots` sequences, each with its sampling state and its block table, so a server can run
// continuous batching: add sequences (a batched prefill: the distinct prompts packed into rows
// through the same forward the trainer uses, their K/V written into their blocks, and the full
// blocks shared with the sequences that repeat a prompt), step (one decode step for every running
// sequence), remove (cancel). Each sequence keeps its own position, so prompts of different
// lengths need no padding, and a decode step computes exactly the running sequences. A finished
// sequence frees its slot in the same call that reports it.
//
// Memory is a budget of blocks, not slots x capacity: a sequence takes blocks as its positions
// need them, so a few long episodes and many short ones share one budget. rlx_gen_add admits the
// longest prefix of its sequences whose worst case fits (every admitted sequence can reach its
// prompt + max_new_tokens without running out), and the caller queues the rest; nothing running
// is ever stopped for lack of blocks. Prompts are prefilled in passes of at most prefill_tokens
// (rlx_gen_set_option), a longer prompt in several, each attending to the K/V the passes before
// wrote (prefill.cpp): a long prompt's activations are bounded by a pass, not by its length.
//
// Logprobs are what the trainer computes: log_softmax(logits / temperature) of the chosen token
// over the full distribution, before top-k/top-p truncation (truncation only decides what can be
// sampled), with the temperature rounded to float32 as the trainer receives it. Greedy rows
// (temperature 0) report the temperature-1 logprob; train them with temperature 1. Sampling runs
// on the CPU from one seeded generator per sequence, so a sequence's tokens depend on its seed,
// not on which other requests share its batch.
//
// A slot keeps its K/V blocks after its sequence finishes (or is removed), with the tokens they
// belong to, until the blocks or the slot are needed: a prompt that begins with at least kMinReuse
// of those tokens takes the slot over and prefills only the rest, attending to the cached K/V
// (vLLM's automatic prefix caching, one slot per prefix). A tool episode's next turn is its
// previous turn plus the tool's reply, so it continues in its own slot; a new group of an env
// whose system prompt another slot holds prefills only its task. New prompts without a match take
// the empty slots first, then the least recently used kept ones; when blocks run short, kept
// prefixes give theirs up, least recently used first. A prompt no kept slot continues may begin
// with what a running sequence has written (a group's rollout admitted after the others, once the
// prefill budget or the order of arrival split the group): it shares those whole blocks and
// prefills the rest. Rebinding to new weights (rlx_gen_set_model, also after an adapter changed
// the bound model in place) drops every kept prefix, and a sequence running across it neither
// shares nor keeps its K/V: a new prompt is always computed by the weights of its time.
//
// The calls are here; generator.h holds the state, sampling.cpp the choice of each token, slots.cpp
// the choice of slots and blocks.
#include "generator.h"

namespace rlx {
namespace {

int64_t free_slots(const Generator& g) {
  return std::count_if(g.seqs.begin(), g.seqs.end(), [](const Sequence& s) { return !s.active; });
}

Generator& get_gen(void* handle) { return *get<Generator>(handle, Kind::Generator); }

Model& model_of(Generator& g) {
  require(is_live(g.model_handle, Kind::Model), "the generator's model has been freed");
  return get_model(g.model_handle);
}

}  // namespace
}  // namespace rlx

using namespace rlx;

RLX_API rlx_gen* rlx_gen_create(rlx_model* model, int slots, int capacity, int64_t kv_tokens) {
  RLX_TRY(nullptr, {
    auto& m = whole_model(model, "rlx_gen_create");
    require(slots >= 1 && capacity >= 2, "a generator needs slots >= 1 and capacity >= 2");
    if (kv_tokens <= 0) kv_tokens = slots * blocks_for(capacity) * kKVBlock;  // every slot's whole sequence
    require(kv_tokens >= capacity, "the K/V budget (" + std::to_string(kv_tokens) + " tokens) must hold one sequence of capacity " +
                                       std::to_string(capacity) + " tokens");
    c10::InferenceMode inference;
    auto g = std::make_unique<Generator>();
    g->model_handle = model;
    g->cache.capacity = capacity;
    kv_init(g->cache, m.layers.size(), blocks_for(kv_tokens), m.cfg.num_key_value_heads, m.cfg.head_dim, m.opts(m.dtype));
    g->seqs.resize(slots);
    register_handle(g.get(), Kind::Generator);
    return reinterpret_cast<rlx_gen*>(g.release());
  })
}

RLX_API int rlx_gen_free(rlx_gen* gen) {
  RLX_TRY(-1, {
    auto* g = &get_gen(gen);
    unregister_handle(g, Kind::Generator);
    delete g;
    return 0;
  })
}

// Rebinding keeps the cache and every sequence: only what the cache layout and the meaning of
// its contents depend on must match (RoPE is applied before K is cached, so rope_theta and its scaling too).
RLX_API int rlx_gen_set_model(rlx_gen* gen, rlx_model* model) {
  RLX_TRY(-1, {
    auto& g = get_gen(gen);
    auto& next = whole_model(model, "rlx_gen_set_model");
    auto& now = model_of(g);
    const auto same = [&](const char* field, int64_t a, int64_t b) {
      require(a == b, std::string("rlx_gen_set_model: the new model has ") + field + " = " + std::to_string(b) +
                          ", the generator's model has " + std::to_string(a) + " (rebind only to weights of the same architecture)");
    };
    same("num_hidden_layers", now.cfg.num_hidden_layers, next.cfg.num_hidden_layers);
    same("num_key_value_heads", now.cfg.num_key_value_heads, next.cfg.num_key_value_heads);
    same("num_attention_heads", now.cfg.num_attention_heads, next.cfg.num_attention_heads);
    same("head_dim", now.cfg.head_dim, next.cfg.head_dim);
    same("hidden_size", now.cfg.hidden_size, next.cfg.hidden_size);
    same("vocab_size", now.cfg.vocab_size, next.cfg.vocab_size);
    require(same_rope(now.cfg, next.cfg), "rlx_gen_set_model: the new model has rope_theta = " + std::to_string(next.cfg.rope_theta) +
                                              ", the generator's model has " + std::to_string(now.cfg.rope_theta) +
                                              ", or their RoPE scaling differs (the cached keys are rotated with it)");
    require(next.dtype == now.dtype, std::string("rlx_gen_set_model: the new model's dtype is ") + c10::toString(next.dtype) +
                                         ", the generator's cache is " + c10::toString(now.dtype));
    require(next.device == now.device, "rlx_gen_set_model: the new model is on " + next.device.str() + ", the generator's cache is on " + now.device.str());
    g.model_handle = model;
    g.weights += 1;  // running sequences' K/V stay theirs, never shared or kept (slots.cpp retire)
    for (auto& s : g.seqs)
      if (!s.active) kv_release(g.cache, s.blocks), s.tokens.clear();  // kept prefixes were computed by the old weights
    return 0;
  })
}

RLX_API int rlx_gen_free_slots(rlx_gen* gen) {
  RLX_TRY(-1, {
    auto& g = get_gen(gen);
    return static_cast<int>(free_slots(g));
  })
}

RLX_API int rlx_gen_add(rlx_gen* gen, int n, const int32_t* prompt_ids, const int32_t* prompt_lengths, const double* sampling,
                        const int32_t* stop_ids, const int32_t* stop_counts, int32_t* out_slots, int32_t* out_tokens,
                        float* out_logprobs, int32_t* out_finish) {
  RLX_TRY(-1, {
    auto& g = get_gen(gen);
    auto& m = model_of(g);
    require(n >= 1, "rlx_gen_add: n must be >= 1");
    require(prompt_ids && prompt_lengths && sampling && stop_counts && out_slots && out_tokens && out_logprobs && out_finish,
            "rlx_gen_add: a required array is null");
    const auto free = free_slots(g);
    require(free >= n, "the generator has " + std::to_string(free) + " free slots, " + std::to_string(n) +
                           " sequences were added (wait for some to finish)");
    std::vector<int64_t> lengths(prompt_lengths, prompt_lengths + n);
    int64_t total_stops = 0;
    std::vector<Sequence> added(n);
    for (int i = 0; i < n; ++i) {
      const std::string who = "sequence " + std::to_string(i) + ": ";
      require(lengths[i] >= 1 && lengths[i] < g.cache.capacity,
              who + "prompt length " + std::to_string(lengths[i]) + " must be in 1.." + std::to_string(g.cache.capacity - 1) +
                  " (below the generator's capacity, to leave room for a generated token)");
      const double* p = sampling + static_cast<ptrdiff_t>(i) * RLX_SAMPLING_FIELDS;
      Sequence& s = added[i];
      s.temperature = p[RLX_SAMPLE_TEMPERATURE], s.top_p = p[RLX_SAMPLE_TOP_P];
      s.top_k = static_cast<int64_t>(p[RLX_SAMPLE_TOP_K]), s.max_new_tokens = static_cast<int64_t>(p[RLX_SAMPLE_MAX_NEW_TOKENS]);
      require(s.temperature >= 0 && std::isfinite(s.temperature), who + "temperature must be >= 0");
      require(s.top_p > 0 && s.top_p <= 1, who + "top_p must be in (0, 1]");
      require(s.top_k >= 0, who + "top_k must be >= 0 (0 = off)");
      require(s.max_new_tokens >= 1, who + "max_new_tokens must be >= 1");
      const double seed = p[RLX_SAMPLE_SEED];
      require(seed >= 0 && seed == std::floor(seed) && seed < 9007199254740992.0, who + "seed must be an integer in [0, 2^53)");
      s.rng = at::make_generator<at::CPUGeneratorImpl>(static_cast<uint64_t>(seed));
      require(stop_counts[i] >= 0, who + "stop count must be >= 0");
      require(stop_ids || stop_counts[i] == 0, who + "stop_ids is null");
      s.stop_ids.assign(stop_ids + total_stops, stop_ids + total_stops + stop_counts[i]);
      total_stops += stop_counts[i];
      s.length = lengths[i];
      s.final_length = std::min<int64_t>(lengths[i] + s.max_new_tokens, g.cache.capacity);
      s.weights = g.weights;
      s.active = true;
    }
    // The rollouts of a group arrive together with one prompt: each distinct prompt is prefilled
    // once and its full blocks shared with the sequences that repeat it (vLLM's prefix caching,
    // for the case RL makes common). prompt_of[i] is the index among the distinct prompts; only
    // distinct prompts take kept slots over.
    std::vector<int64_t> offsets(n), distinct, prompt_of(n);
    for (int64_t i = 0, offset = 0; i < n; offset += lengths[i++]) offsets[i] = offset;
    std::vector<const int32_t*> ids_of(n);
    std::vector<bool> is_distinct(n);
    for (int i = 0; i < n; ++i) {
      const int32_t* ids_i = ids_of[i] = prompt_ids + offsets[i];
      auto same = std::find_if(distinct.begin(), distinct.end(), [&](int64_t j) {
        return lengths[j] == lengths[i] && std::equal(ids_i, ids_i + lengths[i], prompt_ids + offsets[j]);
      });
      prompt_of[i] = same - distinct.begin();
      if (same == distinct.end()) distinct.push_back(i), is_distinct[i] = true;
    }
    // Admit the longest prefix whose worst case fits the blocks left; the caller queues the rest.
    const auto need = blocks_needed(added, is_distinct);
    int64_t room = kv_use(g).room(), admitted = 0;
    while (admitted < n && need[admitted] <= room) room -= need[admitted++];
    if (admitted == 0) return 0;
    n = static_cast<int>(admitted);
    added.resize(n), lengths.resize(n), ids_of.resize(n), is_distinct.resize(n), prompt_of.resize(n);
    distinct.erase(std::remove_if(distinct.begin(), distinct.end(), [&](int64_t j) { return j >= n; }), distinct.end());

    c10::InferenceMode inference;
    std::vector<int64_t> past;
    auto slots = choose_slots(g, n, ids_of, lengths, is_distinct, past);
    // A continued slot hands its blocks over, another gives its up, all before any block is taken
    // (taking one may give up a kept prefix: never one of these).
    for (int i = 0; i < n; ++i) {
      auto& kept = g.seqs[slots[i]];
      if (past[i] > 0) added[i].blocks = std::exchange(kept.blocks, {});
      kv_release(g.cache, kept.blocks), kept.tokens.clear();
    }
    for (int i = 0; i < n; ++i) {  // the blocks past what a continuation keeps, and its partial one
      if (past[i] == 0) continue;
      BlockTable beyond(added[i].blocks.begin() + blocks_for(past[i]), added[i].blocks.end());
      added[i].blocks.resize(blocks_for(past[i]));
      kv_release(g.cache, beyond);
      own_from(g, added[i].blocks, past[i]);
    }
    std::vector<Prefill> prompts;
    for (auto j : distinct) {
      if (past[j] == 0 && g.keep_prefixes) past[j] = share_running(g, ids_of[j], lengths[j], added[j].blocks);
      cover(g, added[j].blocks, lengths[j]);
      prompts.push_back({ids_of[j], lengths[j], past[j], &added[j].blocks});
      g.reused_tokens += past[j];
    }
    g.prompts += n;
    for (int i = 0; i < n; ++i) g.prompt_tokens += lengths[i];

    AutocastScope autocast(m);
    auto hidden = prefill(m, g.cache, prompts, g.prefill_tokens);  // [distinct, hidden]
    for (int i = 0; i < n; ++i) {  // a repeat shares the full blocks, copies the partial one
      if (is_distinct[i]) continue;
      const auto& from = added[distinct[prompt_of[i]]].blocks;
      added[i].blocks = kv_share(g.cache, from, static_cast<size_t>(lengths[i] / kKVBlock));
      if (lengths[i] % kKVBlock) {
        cover(g, added[i].blocks, lengths[i]);
        kv_copy_block(g.cache, from[lengths[i] / kKVBlock], added[i].blocks.back());
      }
    }
    auto logits = lm_logits(m, hidden.index_select(0, at::tensor(prompt_of, at::kLong).to(m.device))).to(at::kCPU);
    std::vector<Sequence*> seqs;
    g.clock += 1;
    for (int i = 0; i < n; ++i) {
      added[i].tokens.assign(ids_of[i], ids_of[i] + lengths[i]);
      added[i].used = g.clock;
      g.seqs[slots[i]] = std::move(added[i]), seqs.push_back(&g.seqs[slots[i]]);
    }
    sample_rows(g, logits, seqs, out_tokens, out_logprobs);
    for (int i = 0; i < n; ++i) {
      out_slots[i] = static_cast<int32_t>(slots[i]);
      out_finish[i] = finish_after(*seqs[i], out_tokens[i], g.cache.capacity);
      if (out_finish[i] != RLX_FINISH_NONE) retire(g, *seqs[i]);
    }
    return n;
  })
}

RLX_API int rlx_gen_step(rlx_gen* gen, int32_t* out_slots, int32_t* out_tokens, float* out_logprobs, int32_t* out_finish, int n_out) {
  RLX_TRY(-1, {
    auto& g = get_gen(gen);
    auto& m = model_of(g);
    require(out_slots && out_tokens && out_logprobs && out_finish, "rlx_gen_step: an output array is null");
    require(n_out >= static_cast<int>(g.seqs.size()), "rlx_gen_step: outputs must hold one entry per slot (" + std::to_string(g.seqs.size()) + ")");
    g.last_logp = at::Tensor(), g.last_tokens.clear();
    c10::InferenceMode inference;
    std::vector<int64_t> active, ids, positions;
    std::vector<const BlockTable*> tables;
    for (size_t i = 0; i < g.seqs.size(); ++i) {
      auto& s = g.seqs[i];
      if (!s.active) continue;
      cover(g, s.blocks, s.length + 1);  // the block of the position written now
      active.push_back(static_cast<int64_t>(i)), ids.push_back(s.next_token), positions.push_back(s.length);
      tables.push_back(&s.blocks);
    }
    if (active.empty()) return 0;

    AutocastScope autocast(m);
    auto hidden = forward_decode(m, g.cache, at::tensor(ids, at::kLong).to(m.device), positions, tables);
    auto logits = lm_logits(m, hidden).to(at::kCPU);
    std::vector<Sequence*> seqs;
    g.clock += 1;
    for (auto i : active) {
      auto& s = g.seqs[i];
      s.length += 1, s.tokens.push_back(s.next_token), s.used = g.clock;
      seqs.push_back(&s);
    }
    sample_rows(g, logits, seqs, out_tokens, out_logprobs);
    for (size_t j = 0; j < active.size(); ++j) {
      out_slots[j] = static_cast<int32_t>(active[j]);
      out_finish[j] = finish_after(*seqs[j], out_tokens[j], g.cache.capacity);
      if (out_finish[j] != RLX_FINISH_NONE) retire(g, *seqs[j]);
    }
    return static_cast<int>(active.size());
  })
}

RLX_API int rlx_gen_remove(rlx_gen* gen, int slot) {
  RLX_TRY(-1, {
    auto& g = get_gen(gen);
    require(slot >= 0 && slot < static_cast<int>(g.seqs.size()) && g.seqs[slot].active,
            "slot " + std::to_string(slot) + " holds no running sequence");
    g.seqs[slot].active = false;
    retire(g, g.seqs[slot]);
    return 0;
  })
}

RLX_API int rlx_gen_top_logprobs(rlx_gen* gen, int n, int k, int32_t* out_ids, float* out_logprobs, int32_t* out_ranks) {
  RLX_TRY(-1, {
    auto& g = get_gen(gen);
    const int64_t reported = g.last_logp.defined() ? g.last_logp.size(0) : 0;
    require(n == reported, "rlx_gen_top_logprobs: n = " + std::to_string(n) + ", but the last rlx_gen_add or rlx_gen_step reported " +
                               std::to_string(reported) + " tokens");
    const int64_t V = reported ? g.last_logp.size(1) : 0;
    require(k >= 0 && k <= V, "rlx_gen_top_logprobs: k = " + std::to_string(k) + " must be in 0..vocab_size (" + std::to_string(V) + ")");
    require(k == 0 || (out_ids && out_logprobs), "rlx_gen_top_logprobs: k > 0 needs out_ids and out_logprobs");
    if (n == 0) return 0;
    c10::InferenceMode inference;
    if (k > 0) {
      auto top = g.last_logp.topk(k, -1);
      auto values = std::get<0>(top).to(at::kFloat).contiguous();
      auto ids = std::get<1>(top).to(at::kInt).contiguous();
      std::memcpy(out_logprobs, values.data_ptr<float>(), sizeof(float) * static_cast<size_t>(n * k));
      std::memcpy(out_ids, ids.data_ptr<int32_t>(), sizeof(int32_t) * static_cast<size_t>(n * k));
    }
    if (out_ranks) {
      auto chosen = g.last_logp.gather(1, at::tensor(g.last_tokens, at::kLong).unsqueeze(1));
      auto ranks = g.last_logp.ge(chosen).sum(-1).to(at::kInt).contiguous();  // 1-based; ties count against
      std::memcpy(out_ranks, ranks.data_ptr<int32_t>(), sizeof(int32_t) * static_cast<size_t>(n));
    }
    return 0;
  })
}

RLX_API int rlx_gen_set_option(rlx_gen* gen, const char* name, double value) {
  RLX_TRY(-1, {
    auto& g = get_gen(gen);
    require(name != nullptr, "rlx_gen_set_option: name is null");
    const std::string key(name);
    if (key == "keep_prefixes") {
      require(value == 0 || value == 1, "rlx_gen_set_option: keep_prefixes must be 0 or 1");
      g.keep_prefixes = value == 1;
    } else if (key == "prefill_tokens") {
      require(value >= 1 && value == std::floor(value), "rlx_gen_set_option: prefill_tokens must be an integer >= 1");
      g.prefill_tokens = static_cast<int64_t>(value);
    } else {
      throw ArgError("unknown generator option \"" + key + "\" (keep_prefixes, prefill_tokens)");
    }
    return 0;
  })
}

RLX_API int rlx_gen_cache_stats(rlx_gen* gen, int64_t* out, int n_out) {
  RLX_TRY(-1, {
    auto& g = get_gen(gen);
    require(out && n_out == RLX_GEN_STATS_LEN, "rlx_gen_cache_stats: out must hold RLX_GEN_STATS_LEN (" +
                                                   std::to_string(RLX_GEN_STATS_LEN) + ") values");
    const auto use = kv_use(g);
    out[RLX_GEN_STATS_PROMPTS] = g.prompts;
    out[RLX_GEN_STATS_PROMPT_TOKENS] = g.prompt_tokens;
    out[RLX_GEN_STATS_REUSED_TOKENS] = g.reused_tokens;
    out[RLX_GEN_STATS_BLOCK_TOKENS] = kKVBlock;
    out[RLX_GEN_STATS_BLOCKS] = g.cache.blocks();
    out[RLX_GEN_STATS_RUNNING_BLOCKS] = use.running;
    out[RLX_GEN_STATS_KEPT_BLOCKS] = use.kept;
    out[RLX_GEN_STATS_RESERVED_BLOCKS] = use.reserved;
    return 0;
  })
}
