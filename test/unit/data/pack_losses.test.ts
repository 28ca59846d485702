// Each sample's rl loss code (docs/architecture.md §6): packStep writes a row's sampleLosses from
// PackOptions.lossCodes (env -> index into the step's loss table) only when one of the row's
// samples has a code other than 0; shared-prefix and padding segments take 0.
import { expect, test } from "bun:test";
import { packStep, type PackedRow } from "../../../src/data/pack.ts";
import { promptedSample as sample } from "../../fixtures/prompted_samples.ts";

/** Each segment's code, beside what the segment is: a sample's env, "prefix" or "pad". */
function segmentCodes(row: PackedRow): [string, number][] {
  const starts = new Map(row.samples.map((s) => [s.start, s.env]));
  const prefixes = new Set(row.samples.flatMap((s) => (s.prefix ? [s.prefix.start] : [])));
  const out: [string, number][] = [];
  let start = 0;
  for (let i = 0; i < row.sampleLengths.length; i++) {
    const what = starts.get(start) ?? (prefixes.has(start) ? "prefix" : "pad");
    out.push([what, row.sampleLosses?.[i] ?? 0]);
    start += row.sampleLengths[i]!;
  }
  return out;
}

const samples = [sample(1, "a", 3), sample(2, "b", 4), sample(3, "a", 2), sample(4, "c", 5)];

test("every code 0, or no codes: no sampleLosses, the rows of a run with one loss", () => {
  const codes = new Map([
    ["a", 0],
    ["b", 0],
  ]);
  const plain = packStep(samples, { seqLen: 256, padMultiple: 8 });
  const coded = packStep(samples, { seqLen: 256, padMultiple: 8, lossCodes: codes });
  expect(coded.rows.every((row) => row.sampleLosses === undefined)).toBe(true);
  expect(coded).toEqual(plain);
});

test("a row with a non-zero code has one per segment: each sample its env's, padding 0", () => {
  const codes = new Map([
    ["a", 0],
    ["b", 1],
    ["c", 2],
  ]);
  const step = packStep(samples, { seqLen: 256, padMultiple: 16, lossCodes: codes });
  expect(step.rows.length).toBe(1);
  const row = step.rows[0]!;
  expect(row.sampleLosses!.length).toBe(row.sampleLengths.length);
  const segs = segmentCodes(row);
  expect(segs.at(-1)).toEqual(["pad", 0]);
  for (const [what, code] of segs.slice(0, -1)) expect(code).toBe(codes.get(what)!);
  expect(segs.filter(([w]) => w !== "pad").length).toBe(samples.length);
});

test("with shared prefixes the prefix segment takes 0, each continuation its env's code", () => {
  const codes = new Map([
    ["a", 1],
    ["b", 2],
  ]);
  const step = packStep(samples, { seqLen: 256, sharePrefixes: true, lossCodes: codes });
  const row = step.rows[0]!;
  expect(row.sampleParents).toBeDefined();
  const segs = segmentCodes(row);
  expect(segs.filter(([w]) => w === "prefix").length).toBeGreaterThan(0);
  for (const [what, code] of segs) expect(code).toBe(what === "prefix" || what === "pad" ? 0 : (codes.get(what) ?? 0));
  // env c has no code: 0
  expect(segs.find(([w]) => w === "c")).toEqual(["c", 0]);
});

test("only the rows holding a non-zero code materialize it", () => {
  const codes = new Map([["b", 1]]);
  const step = packStep(samples, { seqLen: 30, lossCodes: codes });
  for (const row of step.rows) {
    const hasB = row.samples.some((s) => s.env === "b");
    expect(row.sampleLosses !== undefined).toBe(hasB);
  }
});
