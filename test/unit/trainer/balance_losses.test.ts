// Rank balancing keeps each sample's rl loss code (sampleLosses): a split row's halves carry their
// samples' codes (materialized only when one is not 0, as packStep does), a shared prefix 0, and a
// dummy row has none.
import { expect, test } from "bun:test";
import { packStep, type PackedRow } from "../../../src/data/pack.ts";
import { promptedSample as sample } from "../../fixtures/prompted_samples.ts";
import { balanceStep, dummyRow, sliceRow, TOKEN_COST } from "../../../src/trainer/balance.ts";

const CODES = new Map([
  ["a", 0],
  ["b", 1],
  ["c", 2],
]);

/** Each sample's code in a row, by rollout id (the segment starting where the sample starts). */
function codesOf(row: PackedRow): Record<string, number> {
  const bySegmentStart = new Map<number, number>();
  let start = 0;
  for (let i = 0; i < row.sampleLengths.length; i++) {
    bySegmentStart.set(start, row.sampleLosses?.[i] ?? 0);
    start += row.sampleLengths[i]!;
  }
  return Object.fromEntries(row.samples.map((s) => [s.rolloutId, bySegmentStart.get(s.start)!]));
}

const expected = (row: PackedRow) => Object.fromEntries(row.samples.map((s) => [s.rolloutId, CODES.get(s.env)!]));

for (const share of [false, true]) {
  test(`sliced and balanced rows keep every sample's code${share ? " (shared prefixes)" : ""}`, () => {
    const all = [sample(1, "a", 5), sample(2, "b", 3), sample(3, "c", 6), sample(4, "a", 2), sample(5, "b", 4)];
    const step = packStep(all, { seqLen: 256, sharePrefixes: share, lossCodes: CODES });
    expect(step.rows.length).toBe(1);
    const row = step.rows[0]!;
    // a slice of the "a" samples only: every code 0, so no sampleLosses
    const aOnly = row.samples.flatMap((s, k) => (s.env === "a" ? [k] : []));
    expect(sliceRow(row, aOnly).sampleLosses).toBeUndefined();
    const rest = sliceRow(row, [2, 0, 3]);
    expect(codesOf(rest)).toEqual(expected(rest));
    if (share) expect(rest.sampleLosses![0]).toBe(0); // the prefix segment
    const plan = balanceStep(step, 4, TOKEN_COST);
    const rows = plan.ranks.flat();
    expect(plan.splits).toBeGreaterThan(0);
    for (const r of rows) {
      expect(codesOf(r)).toEqual(expected(r));
      if (r.sampleLosses) expect(r.sampleLosses.length).toBe(r.sampleLengths.length);
      if (r.samples.every((s) => CODES.get(s.env) === 0)) expect(r.sampleLosses).toBeUndefined();
    }
    expect(rows.flatMap((r) => r.samples.map((s) => s.rolloutId)).sort()).toEqual(["r1", "r2", "r3", "r4", "r5"]);
  });
}

test("a dummy row has no codes (all 0)", () => {
  expect(dummyRow().sampleLosses).toBeUndefined();
});
