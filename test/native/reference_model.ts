// An independent float64 reference of the Llama/Qwen2/Qwen3 forward, written from the Hugging Face
// modeling code's definitions (RMSNorm, rotate-half RoPE, repeat_kv grouped-query attention,
// SwiGLU, q/k norm, attention bias, llama3 / yarn RoPE scaling), one unpacked sequence at a time with plain loops. The native
// tests compare the shim's logprobs against it. Not a test file itself.
import type { ShimModelConfig } from "../../src/native/model.ts";

type Params = Map<string, Float64Array>;

function get(params: Params, name: string): Float64Array {
  const p = params.get(name);
  if (!p) throw new Error(`reference: missing ${name}`);
  return p;
}

/** y[n] = x @ W^T (+ b): x [n_in], W [n_out, n_in]. */
function linear(x: Float64Array, w: Float64Array, nOut: number, b?: Float64Array): Float64Array {
  const nIn = x.length;
  const y = new Float64Array(nOut);
  for (let o = 0; o < nOut; o++) {
    let s = b ? b[o]! : 0;
    for (let i = 0; i < nIn; i++) s += x[i]! * w[o * nIn + i]!;
    y[o] = s;
  }
  return y;
}

function rmsNorm(x: Float64Array, w: Float64Array, eps: number): Float64Array {
  const ms = x.reduce((s, v) => s + v * v, 0) / x.length;
  const r = 1 / Math.sqrt(ms + eps);
  return x.map((v, i) => v * r * w[i]!);
}

/**
 * Frequency i of RoPE (rotations per position, in radians) with the config's scaling, written per
 * frequency from the definitions: Llama 3.1 (keep wavelengths under original/high_freq_factor,
 * divide those over original/low_freq_factor by factor, blend linearly in original/wavelength
 * between) and YaRN (blend interpolated theta_i/factor and extrapolated theta_i by a ramp over the
 * dimension index between the dimensions making beta_fast and beta_slow turns over the original
 * context). Returns the frequency and the factor on cos and sin.
 */
export function referenceRopeFrequency(cfg: ShimModelConfig, i: number): [number, number] {
  const D = cfg.head_dim;
  const base = Math.pow(cfg.rope_theta, -(2 * i) / D);
  const s = cfg.rope_scaling;
  if (!s) return [base, 1];
  if (s.rope_type === "llama3") {
    const wavelength = (2 * Math.PI) / base;
    const ctx = s.original_max_position_embeddings;
    if (wavelength < ctx / s.high_freq_factor) return [base, 1];
    if (wavelength > ctx / s.low_freq_factor) return [base / s.factor, 1];
    const t = (ctx / wavelength - s.low_freq_factor) / (s.high_freq_factor - s.low_freq_factor);
    return [t * base + (1 - t) * (base / s.factor), 1];
  }
  const turnsDim = (turns: number) =>
    (D * Math.log(s.original_max_position_embeddings / (turns * 2 * Math.PI))) / (2 * Math.log(cfg.rope_theta));
  let lo = turnsDim(s.beta_fast);
  let hi = turnsDim(s.beta_slow);
  if (s.truncate) [lo, hi] = [Math.floor(lo), Math.ceil(hi)];
  lo = Math.max(lo, 0);
  hi = Math.min(hi, D - 1);
  if (lo === hi) hi += 0.001;
  const interpolated = Math.min(1, Math.max(0, (i - lo) / (hi - lo))); // 0 = keep theta_i, 1 = theta_i / factor
  return [(1 - interpolated) * base + (interpolated * base) / s.factor, s.attention_factor];
}

/** HF rotate-half RoPE on one head vector at a position. */
function rope(x: Float64Array, pos: number, cfg: ShimModelConfig): Float64Array {
  const D = x.length;
  const half = D / 2;
  const out = new Float64Array(D);
  for (let i = 0; i < half; i++) {
    const [freq, scale] = referenceRopeFrequency(cfg, i);
    const c = Math.cos(pos * freq) * scale;
    const s = Math.sin(pos * freq) * scale;
    out[i] = x[i]! * c - x[i + half]! * s;
    out[i + half] = x[i + half]! * c + x[i]! * s;
  }
  return out;
}

/** log p(token t | tokens < t) under logits / temperatures[t] for t >= 1; element 0 is 0. */
export function referenceLogprobs(
  cfg: ShimModelConfig,
  params: Params,
  tokens: number[],
  temperatures?: number[],
): number[] {
  const { hidden_size: d, num_attention_heads: H, num_key_value_heads: G, head_dim: D, vocab_size: V } = cfg;
  const eps = cfg.rms_norm_eps;
  const T = tokens.length;
  const embed = get(params, "model.embed_tokens.weight");
  let xs = tokens.map((t) => embed.slice(t * d, (t + 1) * d));
  for (let l = 0; l < cfg.num_hidden_layers; l++) {
    const p = (n: string) => get(params, `model.layers.${l}.${n}`);
    const bias = (n: string) => (cfg.attention_bias ? p(n) : undefined);
    const qs: Float64Array[][] = [];
    const ks: Float64Array[][] = [];
    const vs: Float64Array[][] = [];
    xs.forEach((x, pos) => {
      const h = rmsNorm(x, p("input_layernorm.weight"), eps);
      const q = linear(h, p("self_attn.q_proj.weight"), H * D, bias("self_attn.q_proj.bias"));
      const k = linear(h, p("self_attn.k_proj.weight"), G * D, bias("self_attn.k_proj.bias"));
      const v = linear(h, p("self_attn.v_proj.weight"), G * D, bias("self_attn.v_proj.bias"));
      const heads = (a: Float64Array, n: number, norm?: Float64Array) =>
        Array.from({ length: n }, (_, j) => {
          const head = a.slice(j * D, (j + 1) * D);
          return norm ? rmsNorm(head, norm, eps) : head;
        });
      qs.push(heads(q, H, cfg.qk_norm ? p("self_attn.q_norm.weight") : undefined).map((hv) => rope(hv, pos, cfg)));
      ks.push(heads(k, G, cfg.qk_norm ? p("self_attn.k_norm.weight") : undefined).map((hv) => rope(hv, pos, cfg)));
      vs.push(heads(v, G));
    });
    xs = xs.map((x, t) => {
      const attn = new Float64Array(H * D);
      for (let h = 0; h < H; h++) {
        const g = Math.floor(h / (H / G)); // repeat_kv: query head h reads kv head h / (H/G)
        const scores = Array.from(
          { length: t + 1 },
          (_, s) => qs[t]![h]!.reduce((acc, qv, i) => acc + qv * ks[s]![g]![i]!, 0) / Math.sqrt(D),
        );
        const m = Math.max(...scores);
        const e = scores.map((sc) => Math.exp(sc - m));
        const z = e.reduce((a, b) => a + b, 0);
        for (let s = 0; s <= t; s++) for (let i = 0; i < D; i++) attn[h * D + i]! += (e[s]! / z) * vs[s]![g]![i]!;
      }
      const o = linear(attn, p("self_attn.o_proj.weight"), d);
      const afterAttn = x.map((v, i) => v + o[i]!);
      const h2 = rmsNorm(afterAttn, p("post_attention_layernorm.weight"), eps);
      const gate = linear(h2, p("mlp.gate_proj.weight"), cfg.intermediate_size);
      const up = linear(h2, p("mlp.up_proj.weight"), cfg.intermediate_size);
      const act = gate.map((g, i) => (g / (1 + Math.exp(-g))) * up[i]!);
      const down = linear(act, p("mlp.down_proj.weight"), d);
      return afterAttn.map((v, i) => v + down[i]!);
    });
  }
  const head = get(params, cfg.tie_word_embeddings ? "model.embed_tokens.weight" : "lm_head.weight");
  const out = [0];
  for (let t = 1; t < T; t++) {
    const temp = temperatures?.[t] ?? 1;
    const logits = linear(rmsNorm(xs[t - 1]!, get(params, "model.norm.weight"), eps), head, V).map((z) => z / temp);
    const m = Math.max(...logits);
    const lse = m + Math.log(logits.reduce((s, z) => s + Math.exp(z - m), 0));
    out.push(logits[tokens[t]!]! - lse);
  }
  return out;
}
