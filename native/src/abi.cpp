// The struct ABI (rlx.h, rlx_batch, rlx_loss and its rlx_rl_loss table): reading a caller's struct by its size field, and
// rlx_abi_layout, the offsets this shim was compiled with, which test/native/abi.test.ts compares
// with src/native/abi_layout.ts field by field.
#include "abi.h"

#include <cstddef>

namespace rlx {
namespace {

template <typename S>
S read_struct(const S* in, const char* name) {
  require(in != nullptr, c10::str(name, " is null"));
  const int64_t known = static_cast<int64_t>(sizeof(S));
  require(in->size >= known, c10::str(name, " is ", in->size, " bytes but this shim's is ", known,
                                      " bytes: the caller was built against an older rlx.h"));
  S out;
  std::memcpy(&out, in, sizeof(S));
  return out;
}

}  // namespace

rlx_batch batch_of(const rlx_batch* in) { return read_struct(in, "rlx_batch"); }
rlx_loss loss_of(const rlx_loss* in) { return read_struct(in, "rlx_loss"); }

std::vector<rlx_rl_loss> rl_losses_of(const rlx_loss& loss) {
  require(loss.n_losses >= 0 && loss.n_losses < (1 << 20), c10::str("rlx_loss.n_losses = ", loss.n_losses, " must be in 0..2^20"));
  if (loss.n_losses == 0) return {};
  require(loss.losses != nullptr, c10::str("rlx_loss.losses is null but n_losses is ", loss.n_losses));
  const auto stride = loss.losses->size;
  const auto* bytes = reinterpret_cast<const char*>(loss.losses);
  std::vector<rlx_rl_loss> out;
  for (int64_t i = 0; i < loss.n_losses; ++i) {
    const auto* entry = reinterpret_cast<const rlx_rl_loss*>(bytes + i * stride);
    require(entry->size == stride, c10::str("rlx_loss.losses[", i, "] is ", entry->size, " bytes but losses[0] is ", stride));
    out.push_back(read_struct(entry, "rlx_rl_loss"));
  }
  return out;
}

}  // namespace rlx

#define RLX_FIELD(S, f) "\"" #f "\":" + std::to_string(offsetof(S, f))

RLX_API const char* rlx_abi_layout(void) {
  RLX_TRY(nullptr, {
    static const std::string json =
        std::string("{\"rlx_batch\":{\"size\":") + std::to_string(sizeof(rlx_batch)) + ",\"fields\":{" +
        RLX_FIELD(rlx_batch, size) + "," + RLX_FIELD(rlx_batch, n_tokens) + "," + RLX_FIELD(rlx_batch, n_samples) + "," +
        RLX_FIELD(rlx_batch, n_envs) + "," + RLX_FIELD(rlx_batch, distill_k) + "," + RLX_FIELD(rlx_batch, token_ids) + "," +
        RLX_FIELD(rlx_batch, sample_lengths) + "," + RLX_FIELD(rlx_batch, sample_parents) + "," +
        RLX_FIELD(rlx_batch, loss_mask) + "," + RLX_FIELD(rlx_batch, advantages) + "," +
        RLX_FIELD(rlx_batch, inference_logprobs) + "," + RLX_FIELD(rlx_batch, temperatures) + "," +
        RLX_FIELD(rlx_batch, ref_logprobs) + "," + RLX_FIELD(rlx_batch, rl_weights) + "," +
        RLX_FIELD(rlx_batch, ce_weights) + "," + RLX_FIELD(rlx_batch, ref_kl_weights) + "," +
        RLX_FIELD(rlx_batch, distill_weights) + "," + RLX_FIELD(rlx_batch, distill_betas) + "," +
        RLX_FIELD(rlx_batch, distill_ids) + "," + RLX_FIELD(rlx_batch, distill_logprobs) + "," +
        RLX_FIELD(rlx_batch, env_index) + "," + RLX_FIELD(rlx_batch, shard_group) + "," +
        RLX_FIELD(rlx_batch, activation_checkpointing) + "," + RLX_FIELD(rlx_batch, sample_losses) + "," +
        RLX_FIELD(rlx_batch, context_group) + "}},\"rlx_loss\":{\"size\":" + std::to_string(sizeof(rlx_loss)) +
        ",\"fields\":{" + RLX_FIELD(rlx_loss, size) + "," + RLX_FIELD(rlx_loss, type) + "," +
        RLX_FIELD(rlx_loss, reduction) + "," + RLX_FIELD(rlx_loss, n_rl) + "," + RLX_FIELD(rlx_loss, n_ce) + "," +
        RLX_FIELD(rlx_loss, n_ref_kl) + "," + RLX_FIELD(rlx_loss, n_distill) + "," +
        RLX_FIELD(rlx_loss, n_rl_sequences) + "," + RLX_FIELD(rlx_loss, constant) + "," +
        RLX_FIELD(rlx_loss, mask_low) + "," + RLX_FIELD(rlx_loss, mask_high) + "," + RLX_FIELD(rlx_loss, adv_tau) + "," +
        RLX_FIELD(rlx_loss, kl_tau) + "," + RLX_FIELD(rlx_loss, ipo_threshold) + "," + RLX_FIELD(rlx_loss, is_low) +
        "," + RLX_FIELD(rlx_loss, is_high) + "," + RLX_FIELD(rlx_loss, is_cap) + "," + RLX_FIELD(rlx_loss, clip_low) +
        "," + RLX_FIELD(rlx_loss, clip_high) + "," + RLX_FIELD(rlx_loss, n_losses) + "," + RLX_FIELD(rlx_loss, losses) +
        "}},\"rlx_rl_loss\":{\"size\":" + std::to_string(sizeof(rlx_rl_loss)) + ",\"fields\":{" +
        RLX_FIELD(rlx_rl_loss, size) + "," + RLX_FIELD(rlx_rl_loss, type) + "," + RLX_FIELD(rlx_rl_loss, reduction) + "," +
        RLX_FIELD(rlx_rl_loss, constant) + "," + RLX_FIELD(rlx_rl_loss, mask_low) + "," +
        RLX_FIELD(rlx_rl_loss, mask_high) + "," + RLX_FIELD(rlx_rl_loss, adv_tau) + "," + RLX_FIELD(rlx_rl_loss, kl_tau) +
        "," + RLX_FIELD(rlx_rl_loss, ipo_threshold) + "," + RLX_FIELD(rlx_rl_loss, is_low) + "," +
        RLX_FIELD(rlx_rl_loss, is_high) + "," + RLX_FIELD(rlx_rl_loss, is_cap) + "," + RLX_FIELD(rlx_rl_loss, clip_low) +
        "," + RLX_FIELD(rlx_rl_loss, clip_high) + "}}}";
    return json.c_str();
  })
}
