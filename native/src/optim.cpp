// AdamW with global grad-norm clipping, as torch.optim.AdamW + clip_grad_norm_ compute it, plus
// its state as a flat byte image for checkpoints.
//
// The optimizer holds its own references to the parameter tensors (at::Tensor shares storage), so
// freeing the model first leaves it valid rather than dangling. Moments are kept in float32 for
// low-precision parameters (float64 for float64 models) and bf16/f16 parameters are updated in
// float32 and rounded once, so small updates are not lost to bf16 rounding of the moments.
//
// On a sharded model (shard.h) the parameters are this rank's slices: the squared norm and the
// non-finite mark are summed over the ranks, so clipping and skipping decide alike everywhere, and
// AdamW, elementwise, updates each slice exactly as it would the whole. In "optimizer" mode the
// whole gradients are reduce-scattered into the slices first and the updated slices all-gathered
// into the whole parameters after.
#include "shard.h"

namespace rlx {
namespace {

struct Optimizer {
  std::vector<at::Tensor> params, exp_avg, exp_avg_sq;
  double beta1, beta2, eps, weight_decay;
  int64_t step = 0;
  at::ScalarType state_dtype = at::kFloat;
  std::shared_ptr<bool> nonfinite_loss;
  Model* sharded = nullptr;  // the model whose slices these are (freed after this optimizer)
};

bool optimizer_mode(const Optimizer& o) { return o.sharded && o.sharded->shards->mode == ShardMode::Optimizer; }

Optimizer& get_optim(void* handle) { return *get<Optimizer>(handle, Kind::Optimizer); }

void zero_grads(Optimizer& o) {
  for (auto& p : o.params) p.mutable_grad().reset();
  if (optimizer_mode(o))
    for (auto& [name, p] : o.sharded->params) p.mutable_grad().reset();
  *o.nonfinite_loss = false;
}

// The state image: magic, step, parameter count, state dtype code, then per parameter its element
// count followed by exp_avg and exp_avg_sq (little-endian, raw).
constexpr char kMagic[8] = {'R', 'L', 'X', 'A', 'D', 'A', 'M', '1'};
constexpr int64_t kHeaderBytes = 32;

int64_t state_bytes(const Optimizer& o) {
  int64_t bytes = kHeaderBytes;
  for (const auto& m : o.exp_avg) bytes += 8 + 2 * m.numel() * static_cast<int64_t>(m.element_size());
  return bytes;
}

}  // namespace
}  // namespace rlx

using namespace rlx;

RLX_API rlx_optim* rlx_optim_create(rlx_model* model, double beta1, double beta2, double eps, double weight_decay) {
  RLX_TRY(nullptr, {
    auto& m = get_model(model);
    require(beta1 >= 0 && beta1 < 1 && beta2 >= 0 && beta2 < 1, "AdamW betas must be in [0, 1)");
    require(eps > 0 && weight_decay >= 0, "AdamW eps must be > 0 and weight_decay >= 0");
    auto o = std::make_unique<Optimizer>();
    o->beta1 = beta1, o->beta2 = beta2, o->eps = eps, o->weight_decay = weight_decay;
    o->state_dtype = m.dtype == at::kDouble ? at::kDouble : at::kFloat;
    o->nonfinite_loss = m.nonfinite_loss;
    std::vector<at::Tensor> params;
    if (m.shards && !m.shards->frozen) {
      o->sharded = &m;
      for (auto& u : m.shards->units) params.push_back(u.local);
    } else {
      for (auto& [name, p] : m.trainable()) params.push_back(p);
    }
    for (auto& p : params) {
      o->params.push_back(p);
      o->exp_avg.push_back(at::zeros_like(p, p.options().dtype(o->state_dtype)));
      o->exp_avg_sq.push_back(at::zeros_like(p, p.options().dtype(o->state_dtype)));
    }
    register_handle(o.get(), Kind::Optimizer);
    return reinterpret_cast<rlx_optim*>(o.release());
  })
}

RLX_API int rlx_optim_free(rlx_optim* optim) {
  RLX_TRY(-1, {
    auto* o = &get_optim(optim);
    unregister_handle(o, Kind::Optimizer);
    delete o;
    return 0;
  })
}

RLX_API int rlx_optim_zero_grad(rlx_optim* optim) {
  RLX_TRY(-1, {
    zero_grads(get_optim(optim));
    return 0;
  })
}

RLX_API int rlx_optim_step(rlx_optim* optim, double lr, double max_grad_norm, double* out, int n_out) {
  RLX_TRY(-1, {
    auto& o = get_optim(optim);
    require(out != nullptr && n_out == RLX_OPTIM_OUT_LEN, "rlx_optim_step: out must hold RLX_OPTIM_OUT_LEN doubles");
    require(lr >= 0 && std::isfinite(lr), "learning rate must be finite and >= 0");
    at::NoGradGuard no_grad;
    if (optimizer_mode(o)) slices_from_grads(*o.sharded);
    std::vector<at::Tensor> norms;
    for (auto& p : o.params)
      if (p.grad().defined()) norms.push_back(at::linalg_vector_norm(p.grad(), 2, {}, false, at::kDouble));
    double grad_norm = norms.empty() ? 0.0 : at::stack(norms).norm().item<double>();
    if (o.sharded) {
      grad_norm = std::sqrt(all_sum(*o.sharded, grad_norm * grad_norm));
      if (all_sum(*o.sharded, *o.nonfinite_loss ? 1.0 : 0.0) > 0) *o.nonfinite_loss = true;
    }
    out[RLX_OPTIM_GRAD_NORM] = grad_norm;
    if (!std::isfinite(grad_norm) || *o.nonfinite_loss) {
      out[RLX_OPTIM_SKIPPED] = 1;
      out[RLX_OPTIM_STEP] = static_cast<double>(o.step);
      zero_grads(o);
      return 0;
    }
    // torch.nn.utils.clip_grad_norm_: scale by max_norm / (norm + 1e-6) when that is below 1.
    double clip = max_grad_norm > 0 ? std::min(1.0, max_grad_norm / (grad_norm + 1e-6)) : 1.0;
    o.step += 1;
    const double bias1 = 1 - std::pow(o.beta1, double(o.step)), bias2_sqrt = std::sqrt(1 - std::pow(o.beta2, double(o.step)));
    for (size_t i = 0; i < o.params.size(); ++i) {
      auto& p = o.params[i];
      if (!p.grad().defined()) continue;  // no gradient: torch skips the parameter entirely
      auto g = p.grad().to(o.state_dtype);
      if (clip < 1) g = g * clip;
      auto& m = o.exp_avg[i];
      auto& v = o.exp_avg_sq[i];
      m.mul_(o.beta1).add_(g, 1 - o.beta1);
      v.mul_(o.beta2).addcmul_(g, g, 1 - o.beta2);
      auto denom = (v.sqrt() / bias2_sqrt).add_(o.eps);
      const bool exact = p.scalar_type() == o.state_dtype;
      auto w = exact ? p : p.to(o.state_dtype);
      w.mul_(1 - lr * o.weight_decay).addcdiv_(m, denom, -lr / bias1);
      if (!exact) p.copy_(w);
    }
    if (optimizer_mode(o)) params_from_slices(*o.sharded);
    out[RLX_OPTIM_SKIPPED] = 0;
    out[RLX_OPTIM_STEP] = static_cast<double>(o.step);
    zero_grads(o);
    return 0;
  })
}

RLX_API int64_t rlx_optim_state_size(rlx_optim* optim) {
  RLX_TRY(-1, { return state_bytes(get_optim(optim)); })
}

RLX_API int rlx_optim_state_save(rlx_optim* optim, void* out, int64_t nbytes) {
  RLX_TRY(-1, {
    auto& o = get_optim(optim);
    require(out != nullptr && nbytes == state_bytes(o),
            "optimizer state needs exactly " + std::to_string(state_bytes(o)) + " bytes (rlx_optim_state_size), got " + std::to_string(nbytes));
    auto* dst = static_cast<char*>(out);
    int64_t header[3] = {o.step, static_cast<int64_t>(o.params.size()), o.state_dtype == at::kDouble ? RLX_F64 : RLX_F32};
    std::memcpy(dst, kMagic, 8);
    std::memcpy(dst + 8, header, sizeof(header));
    dst += kHeaderBytes;
    for (size_t i = 0; i < o.params.size(); ++i) {
      int64_t numel = o.exp_avg[i].numel();
      std::memcpy(dst, &numel, 8);
      dst += 8;
      for (auto* state : {&o.exp_avg[i], &o.exp_avg_sq[i]}) {
        auto host = state->to(at::kCPU).contiguous();
        size_t bytes = host.numel() * host.element_size();
        std::memcpy(dst, host.data_ptr(), bytes);
        dst += bytes;
      }
    }
    return 0;
  })
}

RLX_API int rlx_optim_state_load(rlx_optim* optim, const void* data, int64_t nbytes) {
  RLX_TRY(-1, {
    auto& o = get_optim(optim);
    require(data != nullptr && nbytes == state_bytes(o),
            "optimizer state image has " + std::to_string(nbytes) + " bytes; this optimizer's is " + std::to_string(state_bytes(o)) +
                " (a different model or dtype?)");
    const auto* src = static_cast<const char*>(data);
    require(std::memcmp(src, kMagic, 8) == 0, "not an rlx optimizer state image (bad magic)");
    int64_t header[3];
    std::memcpy(header, src + 8, sizeof(header));
    const int64_t want_dtype = o.state_dtype == at::kDouble ? RLX_F64 : RLX_F32;
    require(header[1] == static_cast<int64_t>(o.params.size()) && header[2] == want_dtype,
            "optimizer state image is for " + std::to_string(header[1]) + " parameters (dtype code " + std::to_string(header[2]) +
                "), this optimizer has " + std::to_string(o.params.size()));
    require(header[0] >= 0, "optimizer state image has a negative step count");
    src += kHeaderBytes;
    // Check every element count before touching any state, so a bad image changes nothing.
    const char* cursor = src;
    for (size_t i = 0; i < o.params.size(); ++i) {
      int64_t numel;
      std::memcpy(&numel, cursor, 8);
      require(numel == o.exp_avg[i].numel(), "optimizer state image: parameter " + std::to_string(i) + " has " +
                                                 std::to_string(numel) + " elements, expected " + std::to_string(o.exp_avg[i].numel()));
      cursor += 8 + 2 * numel * static_cast<int64_t>(o.exp_avg[i].element_size());
    }
    at::NoGradGuard no_grad;
    for (size_t i = 0; i < o.params.size(); ++i) {
      src += 8;
      for (auto* state : {&o.exp_avg[i], &o.exp_avg_sq[i]}) {
        state->copy_(at::from_blob(const_cast<char*>(src), state->sizes(), state->options().device(at::kCPU)));
        src += state->numel() * static_cast<int64_t>(state->element_size());
      }
    }
    o.step = header[0];
    return 0;
  })
}
