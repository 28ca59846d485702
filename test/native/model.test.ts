// The model object: config validation, HF parameter names per architecture variant, parameter
// copies with dtype conversion, seeded initialization, options.
import { expect, test } from "bun:test";
import { NativeError } from "../../src/errors.ts";
import { loadNative } from "../../src/native/ffi.ts";
import { score } from "../../src/native/generate.ts";
import { cstr, NativeModel, shimConfigJson } from "../../src/native/model.ts";
import { NativeOptimizer, trainStep } from "../../src/native/train.ts";
import { f32, f64, pack, randomSample, rng, TINY, TINY_FULL, tinyModel } from "./tiny_model.ts";

const lib = await loadNative();

function createError(json: string): string {
  const handle = lib.rlx_model_create(cstr(json), 0, cstr("cpu"), 0n);
  expect(handle).toBeNull();
  return String(lib.rlx_last_error());
}

test("the flat config: unknown, missing and mistyped keys are errors that name the key", () => {
  const good = JSON.parse(shimConfigJson(TINY)) as Record<string, unknown>;
  expect(createError(JSON.stringify({ ...good, rope_scaling: 1 }))).toContain('unknown key "rope_scaling"');
  const { head_dim: _, ...missing } = good;
  expect(createError(JSON.stringify(missing))).toContain('missing key "head_dim"');
  expect(createError(JSON.stringify({ ...good, qk_norm: 1 }))).toContain('"qk_norm" must be true or false');
  expect(createError(JSON.stringify({ ...good, vocab_size: 64.5 }))).toContain(
    '"vocab_size" must be a positive integer',
  );
  expect(createError(JSON.stringify({ ...good, num_key_value_heads: 3 }))).toContain("multiple of num_key_value_heads");
  expect(createError(JSON.stringify({ ...good, vocab_size: "64" }))).toContain(
    '"vocab_size" must be a positive integer',
  );
  expect(createError(JSON.stringify({ ...good, rope_type: 1 }))).toContain('"rope_type" must be a string');
  expect(createError(JSON.stringify(good).replace("}", ',"x":nul}'))).toContain(
    "must be a number, a boolean or a string",
  );
  expect(createError("{")).toContain("model config JSON");
  expect(createError(JSON.stringify(good) + "x")).toContain("trailing characters");
});

test("parameter names follow Hugging Face, per architecture variant", async () => {
  using plain = await tinyModel();
  const names = plain.params().map((p) => p.name);
  expect(names[0]).toBe("model.embed_tokens.weight");
  expect(names.at(-2)).toBe("model.norm.weight");
  expect(names.at(-1)).toBe("lm_head.weight");
  expect(names.slice(1, 10)).toEqual([
    "model.layers.0.input_layernorm.weight",
    "model.layers.0.self_attn.q_proj.weight",
    "model.layers.0.self_attn.k_proj.weight",
    "model.layers.0.self_attn.v_proj.weight",
    "model.layers.0.self_attn.o_proj.weight",
    "model.layers.0.post_attention_layernorm.weight",
    "model.layers.0.mlp.gate_proj.weight",
    "model.layers.0.mlp.up_proj.weight",
    "model.layers.0.mlp.down_proj.weight",
  ]);
  expect(names.length).toBe(1 + 2 * 9 + 2);
  expect(plain.param("model.layers.1.self_attn.k_proj.weight").shape).toEqual([2 * 8, 32]);
  expect(plain.param("model.layers.1.mlp.down_proj.weight").shape).toEqual([32, 48]);

  using full = await tinyModel({ config: { ...TINY_FULL, tie_word_embeddings: true } });
  const fullNames = full.params().map((p) => p.name);
  expect(fullNames).not.toContain("lm_head.weight");
  expect(fullNames).toContain("model.layers.0.self_attn.q_proj.bias");
  expect(fullNames).toContain("model.layers.1.self_attn.v_proj.bias");
  expect(fullNames).not.toContain("model.layers.0.self_attn.o_proj.bias");
  expect(full.param("model.layers.0.self_attn.q_norm.weight").shape).toEqual([8]);
  expect(full.param("model.layers.0.self_attn.k_norm.weight").shape).toEqual([8]);
  expect(fullNames.length).toBe(1 + 2 * 14 + 1);
});

test("set/get param round trip, with dtype conversion both ways", async () => {
  using model = await tinyModel({ dtype: "f32" });
  const name = "model.layers.0.mlp.up_proj.weight";
  const values = Float64Array.from({ length: 48 * 32 }, (_, i) => Math.sin(i) * 0.1);
  model.setParam(name, values, "f64", [48, 32]);
  const asF32 = f32(model.getParam(name, "f32"));
  for (let i = 0; i < values.length; i++) expect(asF32[i]).toBe(Math.fround(values[i]!));
  // bf16 keeps the top 16 bits of a float32: 1.5 and -0.375 are exact, 1 + 2^-10 rounds to 1.
  const bf16 = new Uint16Array([0x3fc0, 0xbec0]);
  model.setParam(
    "model.norm.weight",
    Uint16Array.from({ length: 32 }, (_, i) => bf16[i % 2]!),
    "bf16",
    [32],
  );
  expect(Array.from(f32(model.getParam("model.norm.weight", "f32")).slice(0, 2))).toEqual([1.5, -0.375]);
  model.setParam("model.norm.weight", new Float32Array(32).fill(1 + 2 ** -10), "f32", [32]);
  expect(new Uint16Array(model.getParam("model.norm.weight", "bf16").buffer)[0]).toBe(0x3f80);
});

test("shape and size mismatches are errors that name the parameter", async () => {
  using model = await tinyModel();
  expect(() => model.setParam("model.norm.weight", new Float32Array(16), "f32", [16])).toThrow(
    /"model.norm.weight" has shape \[32\], the data has shape \[16\]/,
  );
  expect(() => model.setParam("model.norm.weight", new Float32Array(16), "f32", [32])).toThrow(NativeError);
  expect(() => model.getParam("model.nope")).toThrow(/no parameter "model.nope"/);
  const out = new Uint8Array(10);
  expect(lib.rlx_model_get_param(model.handle, cstr("model.norm.weight"), out, 0, out.byteLength)).toBe(-1);
  expect(String(lib.rlx_last_error())).toContain("needs 128 bytes");
});

test("initialization is seeded: same seed same weights on every dtype, another seed differs", async () => {
  using a = await tinyModel({ seed: 7 });
  using b = await tinyModel({ seed: 7, dtype: "f64" });
  using c = await tinyModel({ seed: 8 });
  const name = "model.layers.1.self_attn.q_proj.weight";
  const wa = f32(a.getParam(name));
  expect(Array.from(f32(b.getParam(name, "f32")))).toEqual(Array.from(wa));
  expect(Array.from(f32(c.getParam(name)))).not.toEqual(Array.from(wa));
  const std = Math.sqrt(wa.reduce((s, x) => s + x * x, 0) / wa.length);
  expect(std).toBeGreaterThan(0.015);
  expect(std).toBeLessThan(0.025);
  expect(Array.from(f32(a.getParam("model.layers.0.input_layernorm.weight")))).toEqual(new Array(32).fill(1));
});

// q/k/v (with biases) and gate/up are row blocks of one buffer per layer, which scoring and
// generation multiply by as one product (forward.cpp): what reaches a block by name or by the
// optimizer must reach that product too.
test("the joint q/k/v and gate/up buffers see every parameter write: by name and by the optimizer", async () => {
  const copyInto = (to: NativeModel, from: NativeModel) => {
    for (const p of from.params()) to.setParam(p.name, from.getParam(p.name, "f64"), "f64", p.shape);
  };
  const rand = rng(3);
  const seqs = [0, 1, 2].map(() => randomSample(rand, 9, 3).tokenIds);
  using a = await tinyModel({ dtype: "f64", config: TINY_FULL, seed: 1 });
  using b = await tinyModel({ dtype: "f64", config: TINY_FULL, seed: 2 });
  const before = score(a, seqs).logprobs;
  copyInto(a, b);
  const copied = score(a, seqs).logprobs;
  expect(copied).toEqual(score(b, seqs).logprobs);
  expect(copied).not.toEqual(before);

  using opt = NativeOptimizer.create(a);
  trainStep(a, pack([{ ...randomSample(rand, 10, 3), temperature: 1 }]), { nRl: 7, nCe: 1, nRefKl: 1 });
  expect(opt.step(0.05).skipped).toBe(false);
  using c = await tinyModel({ dtype: "f64", config: TINY_FULL, seed: 3 });
  copyInto(c, a);
  const stepped = score(a, seqs).logprobs;
  expect(stepped).toEqual(score(c, seqs).logprobs);
  expect(stepped).not.toEqual(copied);
});

test("gradients start empty (zeros) and options are validated", async () => {
  using model = await tinyModel({ dtype: "f64" });
  expect(f64(model.getGrad("lm_head.weight")).every((x) => x === 0)).toBe(true);
  model.setOption("logits_chunk", 3);
  model.setOption("autocast_bf16", true);
  model.setOption("autocast_bf16", false);
  model.setOption("logits_chunk", 0);
  expect(() => model.setOption("logits_chunk", -1)).toThrow(/integer >= 0/);
  expect(() => model.setOption("logits_chunk", 2.5)).toThrow(/integer >= 0/);
  expect(() => model.setOption("nope" as "logits_chunk", 1)).toThrow(/unknown model option "nope"/);
});

test("NativeModel.free is idempotent and a freed model's calls throw NativeError", async () => {
  const model = await NativeModel.create(TINY);
  model.free();
  model.free();
  expect(() => model.params()).toThrow(NativeError);
});
