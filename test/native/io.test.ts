// Model directories through the shim (src/model/hf.ts): a save then a load reproduces every
// parameter and every logprob bit for bit, single-file and sharded, tied and untied; bf16/f16 on
// disk load into f32 as the exact widening; a load leaves no file mapped; and each kind of damage is a ModelFileError naming the
// file and the tensor.
import { afterAll, describe, expect, test } from "bun:test";
import { existsSync, mkdtempSync, readdirSync, readFileSync, rmSync, truncateSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { ModelFileError } from "../../src/errors.ts";
import { CHECKSUMS_FILE } from "../../src/model/checksums.ts";
import { type ModelConfig, modelConfigFromShim } from "../../src/model/config.ts";
import { loadModel, saveModel } from "../../src/model/hf.ts";
import { INDEX_FILE, readSafetensors, SINGLE_FILE, writeSafetensors } from "../../src/model/safetensors.ts";
import { score } from "../../src/native/generate.ts";
import { NativeModel } from "../../src/native/model.ts";
import { rng, TINY } from "./tiny_model.ts";

const root = mkdtempSync(join(tmpdir(), "rlx-io-"));
afterAll(() => rmSync(root, { recursive: true, force: true }));
let counter = 0;
const fresh = () => join(root, `m${counter++}`);

const { attention_bias: _bias, qk_norm: _qkNorm, ...MICRO } = TINY;
const QWEN3: ModelConfig = modelConfigFromShim(
  "qwen3",
  { ...MICRO, attention_bias: false, qk_norm: true },
  { bos_token_id: 1 },
);
const QWEN2_TIED: ModelConfig = modelConfigFromShim("qwen2", {
  ...MICRO,
  tie_word_embeddings: true,
  attention_bias: true,
  qk_norm: false,
});

/** A model whose norms and biases are random too, so a load that skipped them would show. */
async function randomModel(config: ModelConfig, seed: number): Promise<NativeModel> {
  const model = await NativeModel.create(config.shim, { seed });
  const rand = rng(seed);
  for (const p of model.params()) {
    if (p.name.endsWith("norm.weight") || p.name.endsWith(".bias")) {
      const n = p.shape.reduce((a, b) => a * b, 1);
      model.setParam(
        p.name,
        Float32Array.from({ length: n }, () => 0.5 + rand()),
        "f32",
        p.shape,
      );
    }
  }
  return model;
}

function expectSameParams(a: NativeModel, b: NativeModel, dtype: "f32" | "bf16" = "f32"): void {
  expect(b.params()).toEqual(a.params());
  for (const { name } of a.params()) expect(b.getParam(name, dtype)).toEqual(a.getParam(name, dtype));
}

const SEQUENCES = [
  [1, 5, 9, 2, 33, 60, 7],
  [4, 4, 4, 8],
];

async function expectLoadError(dir: string, ...parts: string[]): Promise<void> {
  let caught: unknown;
  try {
    (await loadModel(dir)).free();
  } catch (err) {
    caught = err;
  }
  expect(caught).toBeInstanceOf(ModelFileError);
  for (const part of parts) expect((caught as Error).message).toContain(part);
}

describe("save and load", () => {
  for (const [label, config] of [
    ["qwen3, untied", QWEN3],
    ["qwen2 (q/k/v bias), tied", QWEN2_TIED],
  ] as const) {
    test(`f32 round trip reproduces every parameter and logprob bit for bit: ${label}`, async () => {
      using original = await randomModel(config, 7);
      const dir = fresh();
      const saved = saveModel(original, dir, { dtype: "f32", config });
      expect(saved.files).toEqual([CHECKSUMS_FILE, "config.json", SINGLE_FILE]);
      const names = [...readSafetensors(join(dir, SINGLE_FILE)).tensors.keys()];
      expect(names.includes("lm_head.weight")).toBe(!config.shim.tie_word_embeddings);
      using loaded = await loadModel(dir);
      expectSameParams(original, loaded);
      const before = score(original, SEQUENCES).logprobs;
      const after = score(loaded, SEQUENCES).logprobs;
      after.forEach((lp, i) => expect(lp).toEqual(before[i]!));
      expect(before[0]!.some((x) => x !== 0)).toBe(true);
    });
  }

  test("a sharded checkpoint writes an index and loads bit for bit", async () => {
    using original = await randomModel(QWEN3, 8);
    const dir = fresh();
    const saved = saveModel(original, dir, { dtype: "f32", config: QWEN3, shardBytes: 16 * 1024 });
    expect(saved.files).toContain(INDEX_FILE);
    // checksums.json records every weight file: the shards and the index
    const weightFiles = saved.files.filter((f) => f.endsWith(".safetensors") || f === INDEX_FILE);
    expect(Object.keys(saved.checksums).sort()).toEqual(weightFiles);
    expect(saved.files.filter((f) => /^model-\d{5}-of-\d{5}\.safetensors$/.test(f)).length).toBeGreaterThan(2);
    expect(existsSync(join(dir, SINGLE_FILE))).toBe(false);
    using loaded = await loadModel(dir);
    expectSameParams(original, loaded);
  });

  test("a load leaves no weight file mapped: file-backed RSS does not keep the file's size", async () => {
    // 32k x 512 embeddings and LM head: a 134 MB file, far above the noise of code pages.
    const big = modelConfigFromShim("qwen3", { ...QWEN3.shim, vocab_size: 32768, hidden_size: 512, head_dim: 128 });
    const dir = fresh();
    {
      using model = await NativeModel.create(big.shim, { seed: 3 });
      saveModel(model, dir, { dtype: "f32", config: big });
    }
    const rssFileMb = () => Number(/RssFile:\s+(\d+) kB/.exec(readFileSync("/proc/self/status", "utf8"))![1]) / 1024;
    const before = rssFileMb(); // libtorch's code pages, mapped by the save already
    using loaded = await loadModel(dir);
    expect(loaded.params().length).toBeGreaterThan(0);
    expect(rssFileMb() - before).toBeLessThan(30);
  });

  test("bf16 and f16 on disk load into f32 as the exact widening of the saved values", async () => {
    using original = await randomModel(QWEN3, 9);
    for (const dtype of ["bf16", "f16"] as const) {
      const dir = fresh();
      saveModel(original, dir, { dtype, config: QWEN3 });
      expect(JSON.parse(readFileSync(join(dir, "config.json"), "utf8")).torch_dtype).toBe(
        dtype === "bf16" ? "bfloat16" : "float16",
      );
      expect(readSafetensors(join(dir, SINGLE_FILE)).tensors.get("model.norm.weight")!.dtype).toBe(
        dtype === "bf16" ? "BF16" : "F16",
      );
      using loaded = await loadModel(dir, { dtype: "f32" });
      for (const { name, shape } of original.params()) {
        // Reference widening: the narrow bytes, set into a fresh f32 model by the same shim copy.
        using probe = await NativeModel.create(QWEN3.shim);
        probe.setParam(name, original.getParam(name, dtype), dtype, shape);
        expect(loaded.getParam(name, "f32")).toEqual(probe.getParam(name, "f32"));
      }
      // bf16 keeps the top 16 bits of each float32: check one value by hand.
      const wide = new Float32Array(loaded.getParam("model.norm.weight", "f32").buffer);
      const narrow = new Float32Array(original.getParam("model.norm.weight", "f32").buffer);
      if (dtype === "bf16") expect(Math.abs(wide[0]! - narrow[0]!)).toBeLessThanOrEqual(Math.abs(narrow[0]!) * 2 ** -8);
    }
  });

  test("a save replaces an existing directory atomically and carries the source's tokenizer files", async () => {
    using model = await randomModel(QWEN3, 10);
    const source = fresh();
    saveModel(model, source, {
      dtype: "f32",
      config: QWEN3,
      writeExtra: (d) => writeFileSync(join(d, "tokenizer.json"), "{}"),
    });
    const dir = fresh();
    saveModel(model, dir, { dtype: "bf16", config: QWEN3 });
    writeFileSync(join(dir, "stale.txt"), "from the previous save");
    saveModel(model, dir, { dtype: "f32", sourceDir: source });
    expect(readdirSync(dir).sort()).toEqual([CHECKSUMS_FILE, "config.json", SINGLE_FILE, "tokenizer.json"]);
    expect(readdirSync(root).filter((f) => f.includes(".tmp-") || f.includes(".old-"))).toEqual([]);
    const config = JSON.parse(readFileSync(join(dir, "config.json"), "utf8"));
    expect(config).toMatchObject({ bos_token_id: 1, torch_dtype: "float32", architectures: ["Qwen3ForCausalLM"] });
  });

  test("a save whose config disagrees with the model is refused", async () => {
    using model = await randomModel(QWEN3, 11);
    const other = modelConfigFromShim("qwen3", { ...QWEN3.shim, intermediate_size: 64 });
    expect(() => saveModel(model, fresh(), { dtype: "f32", config: other })).toThrow(
      "intermediate_size = 64, the model has 48",
    );
  });
});

describe("damaged model directories", () => {
  /** A saved model without its checksums.json, as from the Hub: the structural checks below speak. */
  async function savedDir(config: ModelConfig = QWEN3): Promise<string> {
    using model = await randomModel(config, 12);
    const dir = fresh();
    saveModel(model, dir, { dtype: "f32", config });
    rmSync(join(dir, CHECKSUMS_FILE));
    return dir;
  }

  /** Rewrites model.safetensors through `edit` of its tensor list. */
  function rewrite(
    dir: string,
    edit: (tensors: { name: string; dtype: "F32"; shape: number[]; data: Uint8Array }[]) => void,
  ): void {
    const file = join(dir, SINGLE_FILE);
    const tensors = [...readSafetensors(file).tensors.values()].map((t) => ({
      name: t.name,
      dtype: "F32" as const,
      shape: t.shape,
      data: t.data.slice(),
    }));
    edit(tensors);
    writeSafetensors(file, tensors);
  }

  test("a missing tensor", async () => {
    const dir = await savedDir();
    rewrite(dir, (ts) =>
      ts.splice(
        ts.findIndex((t) => t.name === "model.layers.1.mlp.up_proj.weight"),
        1,
      ),
    );
    await expectLoadError(dir, "tensor model.layers.1.mlp.up_proj.weight is missing");
  });

  test("an unexpected tensor", async () => {
    const dir = await savedDir();
    rewrite(dir, (ts) =>
      ts.push({ name: "model.layers.2.mlp.up_proj.weight", dtype: "F32", shape: [1], data: new Uint8Array(4) }),
    );
    await expectLoadError(dir, SINGLE_FILE, "unexpected tensor model.layers.2.mlp.up_proj.weight");
  });

  test("a shape that disagrees with config.json", async () => {
    const dir = await savedDir();
    const configPath = join(dir, "config.json");
    writeFileSync(
      configPath,
      JSON.stringify({ ...JSON.parse(readFileSync(configPath, "utf8")), intermediate_size: 40 }),
    );
    await expectLoadError(
      dir,
      SINGLE_FILE,
      "tensor model.layers.0.mlp.gate_proj.weight has shape [48, 32], config.json implies [40, 32]",
    );
  });

  test("truncated data, a header length beyond the file, bad header JSON, an unknown dtype", async () => {
    const dir = await savedDir();
    const file = join(dir, SINGLE_FILE);
    const good = readFileSync(file);
    truncateSync(file, good.byteLength - 10);
    await expectLoadError(dir, file, "truncated", "tensor model.norm.weight");

    const header = Number(good.readBigUInt64LE(0));
    const tooLong = Buffer.from(good);
    tooLong.writeBigUInt64LE(BigInt(good.byteLength), 0);
    writeFileSync(file, tooLong);
    await expectLoadError(dir, file, `header length ${good.byteLength} at byte 0 runs past the end`);

    const badJson = Buffer.from(good);
    badJson[8] = "[".charCodeAt(0);
    badJson[9] = "!".charCodeAt(0);
    writeFileSync(file, badJson);
    await expectLoadError(dir, file, `bad header JSON in bytes 8..${8 + header}`);

    const text = good
      .subarray(8, 8 + header)
      .toString("latin1")
      .replace('"dtype":"F32"', '"dtype":"Q32"');
    writeFileSync(file, Buffer.concat([good.subarray(0, 8), Buffer.from(text, "latin1"), good.subarray(8 + header)]));
    await expectLoadError(dir, file, 'unknown dtype "Q32"');
  });

  test("a tied checkpoint that also stores lm_head.weight loads (the copy is ignored)", async () => {
    const dir = await savedDir(QWEN2_TIED);
    rewrite(dir, (ts) =>
      ts.push({ ...ts.find((t) => t.name === "model.embed_tokens.weight")!, name: "lm_head.weight" }),
    );
    (await loadModel(dir)).free();
  });
});
