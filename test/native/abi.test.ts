// The C ABI and its TypeScript mirror agree: every function declared in native/include/rlx.h is
// in src/native/symbols.ts with the same name, the same arity and the same order, the built shim
// exports exactly those rlx_* symbols (-fvisibility=hidden keeps everything else private), and the
// structs abi_layout.ts packs have the shim's offsets; a longer struct is read, a shorter refused.
import { describe, expect, test } from "bun:test";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import {
  BATCH_FIELDS,
  layoutOf,
  LOSS_FIELDS,
  packStruct,
  RL_LOSS_FIELDS,
  type StructLayout,
} from "../../src/native/abi_layout.ts";
import { loadNative } from "../../src/native/ffi.ts";
import { symbols } from "../../src/native/symbols.ts";
import { batchStruct, lossStruct, METRIC_FIELDS } from "../../src/native/train.ts";
import { TINY, tinyModel } from "./tiny_model.ts";

const ROOT = join(import.meta.dir, "../..");

function declaredFunctions(): { name: string; arity: number }[] {
  const header = readFileSync(join(ROOT, "native/include/rlx.h"), "utf8")
    .replace(/\/\*[\s\S]*?\*\//g, "")
    .replace(/\/\/.*$/gm, "")
    .replace(/^\s*#.*$/gm, "");
  const found: { name: string; arity: number }[] = [];
  for (const m of header.matchAll(/\b(rlx_\w+)\s*\(([^)]*)\)\s*;/g)) {
    const params = m[2]!.trim();
    const arity = params === "" || params === "void" ? 0 : params.split(",").length;
    found.push({ name: m[1]!, arity });
  }
  return found;
}

test("rlx.h and symbols.ts declare the same functions, in order, with the same arity", () => {
  const header = declaredFunctions();
  const table: { name: string; arity: number }[] = Object.entries(symbols).map(([name, def]) => ({
    name,
    arity: def.args.length,
  }));
  expect(header.length).toBeGreaterThan(4);
  expect(table).toEqual(header);
});

test("the shim exports exactly the functions of rlx.h", () => {
  const nm = Bun.spawnSync(["nm", "-D", "--defined-only", join(ROOT, "native/build/librlx.so")], { stdout: "pipe" });
  expect(nm.exitCode).toBe(0);
  const exported = nm.stdout
    .toString()
    .split("\n")
    .map((line) => line.trim().split(/\s+/)[2])
    .filter((name): name is string => !!name && name.startsWith("rlx_"))
    .sort();
  expect(exported).toEqual(
    declaredFunctions()
      .map((f) => f.name)
      .sort(),
  );
});

describe("the struct layout", () => {
  test("rlx_abi_layout() and abi_layout.ts agree on every field's offset and each struct's size", async () => {
    const lib = await loadNative();
    const shim = JSON.parse(String(lib.rlx_abi_layout())) as Record<string, StructLayout>;
    expect(Object.keys(shim)).toEqual(["rlx_batch", "rlx_loss", "rlx_rl_loss"]);
    for (const [name, fields] of [
      ["rlx_batch", BATCH_FIELDS],
      ["rlx_loss", LOSS_FIELDS],
      ["rlx_rl_loss", RL_LOSS_FIELDS],
    ] as const) {
      const ts = layoutOf(fields);
      expect(Object.entries(ts.fields)).toEqual(Object.entries(shim[name]!.fields));
      expect(ts.size).toBe(shim[name]!.size);
    }
  });

  const row = {
    tokenIds: Int32Array.from([1, 2, 3]),
    sampleLengths: Int32Array.from([3]),
    lossMask: Uint8Array.from([0, 1, 1]),
    advantages: Float32Array.from([0, 1, -1]),
    inferenceLogprobs: Float32Array.from([0, -1, -2]),
    temperatures: Float32Array.from([1, 1, 1]),
  };
  const loss = { nRl: 2, nCe: 1, nRefKl: 1 };
  const known = layoutOf(BATCH_FIELDS).size;

  test("a struct one field longer than the shim knows is read as far as it knows", async () => {
    const lib = await loadNative();
    const lp = Float64Array.from([0, -1.5, -0.5]);
    const run = (batch: Uint8Array) => {
      const metrics = new Float64Array(METRIC_FIELDS.length);
      const grad = new Float64Array(3);
      expect(lib.rlx_loss_eval(batch, lossStruct(loss), lp, 0, null, metrics, METRIC_FIELDS.length, grad, null)).toBe(
        0,
      );
      return [...metrics, ...grad];
    };
    const longer = batchStruct(row, 3, 0, known + 8);
    new DataView(longer.buffer).setBigInt64(known, 0x7eadbeefn, true); // a field this shim does not know
    expect(run(longer)).toEqual(run(batchStruct(row, 3, 0)));
  });

  test("a struct shorter than the shim's is refused, naming both sizes", async () => {
    const lib = await loadNative();
    const metrics = new Float64Array(METRIC_FIELDS.length);
    const lp = new Float64Array(3);
    const shorter = batchStruct(row, 3, 0, known - 8);
    expect(lib.rlx_loss_eval(shorter, lossStruct(loss), lp, 0, null, metrics, METRIC_FIELDS.length, null, null)).toBe(
      -1,
    );
    expect(String(lib.rlx_last_error())).toBe(
      `rlx_batch is ${known - 8} bytes but this shim's is ${known} bytes: the caller was built against an older rlx.h`,
    );
    const lossKnown = layoutOf(LOSS_FIELDS).size;
    const shortLoss = packStruct(LOSS_FIELDS, { n_rl: 1, n_ce: 1, n_ref_kl: 1 }, lossKnown - 8);
    using model = await tinyModel({ dtype: "f32", config: TINY, seed: 1 });
    expect(lib.rlx_train_step(model.handle, batchStruct(row, 3, 0), shortLoss, metrics, METRIC_FIELDS.length)).toBe(-1);
    expect(String(lib.rlx_last_error())).toContain(
      `rlx_loss is ${lossKnown - 8} bytes but this shim's is ${lossKnown} bytes`,
    );
  });
});
