// Step file format 5: the header's rl loss table (`losses`) and each row's optional per-sample
// `sampleLosses` round-trip; a format 4 file (no table) is still read, its losses undefined (the
// trainer's [trainer.loss]); a code past the table is refused.
import { expect, test } from "bun:test";
import { BatchFileError, decodeStepBatch, encodeStepBatch, type StepBatch } from "../../../src/rundir/step_file.ts";
import { packStep } from "../../../src/data/pack.ts";
import { rlLoss } from "../../../src/data/loss_types.ts";
import { crc32 } from "../../../src/model/checksums.ts";
import type { TrainingSample } from "../../../src/data/types.ts";

function sample(id: string, env: string, n: number): TrainingSample {
  const mask = Array.from({ length: n }, (_, i) => (i >= n / 2 ? 1 : 0));
  return {
    tokenIds: Array.from({ length: n }, (_, i) => (i * 31 + n) % 300),
    lossMask: mask,
    advantages: mask.map((m) => m * 0.25),
    inferenceLogprobs: mask.map((m, i) => -m * i * 0.1),
    temperatures: mask.map(() => 1),
    env,
    rolloutId: id,
  };
}

const LOSSES = [rlLoss({ constant: 64 }), rlLoss({ type: "gspo", constant: 64 })];

function batchOf(codes: Map<string, number>, losses = LOSSES): StepBatch {
  const all = [sample("a1", "a", 9), sample("b1", "b", 13), sample("a2", "a", 5), sample("b2", "b", 7)];
  const packed = packStep(all, { seqLen: 16, padMultiple: 4, lossCodes: codes });
  const rows = packed.rows.map((row) => ({ ...row, samples: row.samples.map((s) => ({ ...s, policyVersion: 2 })) }));
  return { step: 3, packed: { ...packed, rows, losses } };
}

/** The bytes with the version word and the CRC rewritten (what an older writer would have left). */
function asVersion(bytes: Uint8Array, version: number): Uint8Array {
  const copy = bytes.slice();
  const view = new DataView(copy.buffer);
  view.setUint32(4, version, true);
  view.setUint32(12, crc32(copy.subarray(16)), true);
  return copy;
}

test("format 5 round-trips the loss table and each row's per-sample codes", () => {
  const batch = batchOf(new Map([["b", 1]]));
  const bytes = encodeStepBatch(batch);
  expect(new DataView(bytes.buffer).getUint32(4, true)).toBe(5);
  const back = decodeStepBatch(bytes);
  expect(back.packed.losses).toEqual(LOSSES);
  expect(batch.packed.rows.some((row) => row.sampleLosses)).toBe(true);
  batch.packed.rows.forEach((row, r) => {
    const got = back.packed.rows[r]!;
    expect(got.sampleLosses && Array.from(got.sampleLosses)).toEqual(row.sampleLosses && Array.from(row.sampleLosses));
    if (got.sampleLosses) expect(got.sampleLosses.length).toBe(got.sampleLengths.length);
    expect(got.samples).toEqual(row.samples);
  });
});

test("a step whose codes are all 0 writes no sampleLosses array", () => {
  const back = decodeStepBatch(encodeStepBatch(batchOf(new Map(), [LOSSES[0]!])));
  expect(back.packed.losses).toEqual([LOSSES[0]!]);
  expect(back.packed.rows.every((row) => row.sampleLosses === undefined)).toBe(true);
});

test("a format 4 file (no loss table) is still read: losses undefined", () => {
  const { packed, step } = batchOf(new Map());
  const bytes = asVersion(encodeStepBatch({ step, packed: { ...packed, losses: undefined } }), 4);
  const back = decodeStepBatch(bytes, "v4.bin");
  expect(back.packed.losses).toBeUndefined();
  expect(back.packed.rows.length).toBe(packed.rows.length);
  expect(back.packed.rows.every((row) => row.sampleLosses === undefined)).toBe(true);
});

test("a code past the step's loss table is refused, naming the file and row", () => {
  const bytes = encodeStepBatch(batchOf(new Map([["b", 1]]), [LOSSES[0]!]));
  expect(() => decodeStepBatch(bytes, "bad.bin")).toThrow(BatchFileError);
  expect(() => decodeStepBatch(bytes, "bad.bin")).toThrow(
    /bad\.bin: row \d+ sampleLosses holds 1; the step's loss table has 1 entries/,
  );
});
