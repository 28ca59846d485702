import { expect, test } from "bun:test";
import { mkdtempSync, readFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { BandWatch } from "../../../src/sft/band.ts";

const metric = "eval/math/greedy/pass@1";
const at = (value: number) => ({ [metric]: value });

test("a band stops at the first eval inside it, fails past its top, and records every eval seen", () => {
  const watch = new BandWatch({ metric, min: 0.4, max: 0.65, min_step: 0 });
  expect(watch.check(50, at(0.1))).toBe(false);
  expect(watch.check(100, at(0.5))).toBe(true);
  const dir = mkdtempSync(join(tmpdir(), "rlx-band-"));
  const record = watch.write(dir, 100);
  expect(record).toEqual({
    metric,
    min: 0.4,
    max: 0.65,
    value: 0.5,
    step: 100,
    seen: [
      [50, 0.1],
      [100, 0.5],
    ],
  });
  expect(JSON.parse(readFileSync(join(dir, "band.json"), "utf8"))).toEqual(record);
  expect(() => new BandWatch({ metric, min: 0.4, max: 0.65, min_step: 0 }).check(50, at(0.7))).toThrow(
    /jumped past the stop band \[0\.4, 0\.65\] at step 50/,
  );
});

test("min_step: evals before it neither stop nor fail the run; from it on the band rules as usual", () => {
  const watch = new BandWatch({ metric, min: 0.55, max: 0.9, min_step: 300 });
  expect(watch.check(100, at(0.6))).toBe(false); // inside the band, too early
  expect(watch.check(200, at(0.95))).toBe(false); // past the top, too early
  expect(watch.check(300, at(0.5))).toBe(false);
  expect(watch.check(400, at(0.7))).toBe(true);
  const record = watch.write(mkdtempSync(join(tmpdir(), "rlx-band-")), 400);
  expect(record).toMatchObject({ min_step: 300, value: 0.7, step: 400 });
  expect(record.seen).toEqual([
    [100, 0.6],
    [200, 0.95],
    [300, 0.5],
    [400, 0.7],
  ]);
  const late = new BandWatch({ metric, min: 0.55, max: 0.9, min_step: 300 });
  expect(() => late.check(300, at(0.95))).toThrow(/jumped past the stop band \[0\.55, 0\.9\] at step 300/);
});
