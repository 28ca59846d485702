// Weights compared tensor by tensor (src/replay/compare.ts): identical bytes count as identical;
// a changed F32 or BF16 element is found with its tensor, the number of elements that differ and
// the largest difference, read as the dtype; tensors are reported in file order; two directories
// that hold different tensors are an error naming what is missing.
import { expect, test } from "bun:test";
import { mkdirSync, mkdtempSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { compareWeights } from "../../../src/replay/compare.ts";
import { writeSafetensors } from "../../../src/model/safetensors.ts";

const f32 = (xs: number[]) => new Uint8Array(Float32Array.from(xs).buffer);
/** bf16 of float32 values that bf16 holds exactly (their low 16 bits are 0). */
const bf16 = (xs: number[]) => {
  const words = new Uint32Array(Float32Array.from(xs).buffer);
  return new Uint8Array(Uint16Array.from(words, (w) => w >>> 16).buffer);
};

function modelDir(tensors: Array<{ name: string; dtype: "F32" | "BF16"; data: Uint8Array; shape: number[] }>): string {
  const dir = mkdtempSync(join(tmpdir(), "rlx-compare-"));
  mkdirSync(dir, { recursive: true });
  writeSafetensors(join(dir, "model.safetensors"), tensors);
  return dir;
}

const base = () => [
  { name: "a.weight", dtype: "F32" as const, data: f32([1, 2, 3, 4]), shape: [2, 2] },
  { name: "b.weight", dtype: "BF16" as const, data: bf16([0.5, -1, 2]), shape: [3] },
  { name: "c.weight", dtype: "F32" as const, data: f32([0, 0]), shape: [2] },
];

test("identical weights: every tensor identical, max difference 0", () => {
  const c = compareWeights(modelDir(base()), modelDir(base()));
  expect(c).toEqual({ tensors: 3, identical: 3, differing: [], maxAbsDiff: 0 });
});

test("a changed F32 and a changed BF16 element are found, in file order, with their differences", () => {
  const changed = base();
  changed[0]!.data = f32([1, 2, 3.25, 4]);
  changed[1]!.data = bf16([0.5, -1.5, 2]);
  const c = compareWeights(modelDir(base()), modelDir(changed));
  expect(c.identical).toBe(1);
  expect(c.differing).toEqual([
    { name: "a.weight", maxAbsDiff: 0.25, differing: 1, elements: 4 },
    { name: "b.weight", maxAbsDiff: 0.5, differing: 1, elements: 3 },
  ]);
  expect(c.maxAbsDiff).toBe(0.5);
});

test("weights of different models are an error naming a missing tensor", () => {
  expect(() => compareWeights(modelDir(base()), modelDir(base().slice(0, 2)))).toThrow(/missing c\.weight/);
});
