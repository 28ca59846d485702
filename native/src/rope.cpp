// RoPE inverse frequencies with the scaling schemes Hub configs use: none, Llama 3.1's
// ("llama3": low frequencies divided by `factor`, high ones kept, a smooth ramp between) and YaRN
// ("yarn": interpolation below the correction range, extrapolation above it, a linear ramp
// between, cos and sin scaled by the attention factor). The formulas are transformers'
// modeling_rope_utils (_compute_llama3_parameters, _compute_yarn_parameters), computed in the
// model's compute dtype (float32, or float64 for float64 models) as transformers does in float32.
// config.ts resolves every default, so nothing here guesses.
#include <cmath>

#include "model.h"

namespace rlx {

namespace {

at::Tensor plain_inv_freq(const ModelConfig& c, at::ScalarType cd) {
  const int64_t D = c.head_dim;
  auto exponents = at::arange(0, D, 2, at::TensorOptions().dtype(at::kLong)).to(cd) / static_cast<double>(D);
  return 1.0 / at::pow(c.rope_theta, exponents);  // [D/2]
}

at::Tensor llama3(const ModelConfig& c, const at::Tensor& inv_freq) {
  const double factor = c.rope_factor, low = c.rope_low_freq_factor, high = c.rope_high_freq_factor;
  const double old_context = c.rope_original_max_positions;
  const double low_freq_wavelen = old_context / low, high_freq_wavelen = old_context / high;
  auto wavelen = 2 * M_PI / inv_freq;
  auto scaled = at::where(wavelen > low_freq_wavelen, inv_freq / factor, inv_freq);
  auto smooth = (old_context / wavelen - low) / (high - low);
  auto smoothed = (1 - smooth) * scaled / factor + smooth * scaled;
  auto medium = at::logical_and(wavelen >= high_freq_wavelen, wavelen <= low_freq_wavelen);
  return at::where(medium, smoothed, scaled);
}

// YaRN's correction range: the dimensions whose wavelength makes `rotations` turns over the
// original context.
double correction_dim(double rotations, double dim, double base, double max_positions) {
  return dim * std::log(max_positions / (rotations * 2 * M_PI)) / (2 * std::log(base));
}

at::Tensor yarn(const ModelConfig& c, at::ScalarType cd) {
  const double dim = static_cast<double>(c.head_dim), base = c.rope_theta;
  auto pos_freqs = at::pow(base, at::arange(0, c.head_dim, 2, at::TensorOptions().dtype(at::kLong)).to(cd) / dim);
  auto extrapolation = 1.0 / pos_freqs;
  auto interpolation = 1.0 / (c.rope_factor * pos_freqs);
  double low = correction_dim(c.rope_beta_fast, dim, base, c.rope_original_max_positions);
  double high = correction_dim(c.rope_beta_slow, dim, base, c.rope_original_max_positions);
  if (c.rope_truncate) low = std::floor(low), high = std::ceil(high);
  low = std::max(low, 0.0), high = std::min(high, dim - 1);
  if (low == high) high += 0.001;  // no singularity
  auto ramp = ((at::arange(c.head_dim / 2, at::TensorOptions().dtype(cd)) - low) / (high - low)).clamp(0, 1);
  auto extrapolation_factor = 1 - ramp;
  return interpolation * (1 - extrapolation_factor) + extrapolation * extrapolation_factor;
}

}  // namespace

std::pair<at::Tensor, double> rope_inv_freq(const ModelConfig& c, at::ScalarType cd) {
  switch (c.rope) {
    case RopeScaling::Llama3: return {llama3(c, plain_inv_freq(c, cd)), 1.0};
    case RopeScaling::Yarn: return {yarn(c, cd), c.rope_attention_factor};
    case RopeScaling::None: break;
  }
  return {plain_inv_freq(c, cd), 1.0};
}

bool same_rope(const ModelConfig& a, const ModelConfig& b) {
  return a.rope_theta == b.rope_theta && a.rope == b.rope && a.rope_factor == b.rope_factor &&
         a.rope_original_max_positions == b.rope_original_max_positions && a.rope_low_freq_factor == b.rope_low_freq_factor &&
         a.rope_high_freq_factor == b.rope_high_freq_factor && a.rope_beta_fast == b.rope_beta_fast &&
         a.rope_beta_slow == b.rope_beta_slow && a.rope_attention_factor == b.rope_attention_factor &&
         a.rope_truncate == b.rope_truncate;
}

}  // namespace rlx
