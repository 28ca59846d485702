// Run-directory files that must survive a kill: the step file (binary layout round trip, refusal of
// truncated or foreign files), checkpoint discovery (partial and damaged checkpoints are skipped
// with a warning), and rewinding a run directory to a checkpoint. The native half (weights and
// optimizer state written and restored) runs in test/e2e/train_resume.test.ts.
import { expect, test } from "bun:test";
import { existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import {
  BatchFileError,
  decodeStepBatch,
  encodeStepBatch,
  readStepBatch,
  writeStepBatch,
} from "../../../src/rundir/step_file.ts";
import { checkpointDir } from "../../../src/rundir/paths.ts";
import { isCheckpointStep, latestCheckpoint, readCheckpoint, rewindRunDir } from "../../../src/rundir/checkpoint.ts";
import { packStep } from "../../../src/data/pack.ts";
import { crc32 } from "../../../src/model/checksums.ts";
import type { TrainingSample } from "../../../src/data/types.ts";

const tmp = () => mkdtempSync(join(tmpdir(), "rlx-ckpt-"));

function sample(id: string, n: number, extra: Partial<TrainingSample> = {}): TrainingSample {
  return {
    tokenIds: Array.from({ length: n }, (_, i) => (i * 31 + n) % 300),
    lossMask: Array.from({ length: n }, (_, i) => (i >= n / 2 ? 1 : 0)),
    advantages: Array.from({ length: n }, (_, i) => (i >= n / 2 ? 0.25 : 0)),
    inferenceLogprobs: Array.from({ length: n }, (_, i) => (i >= n / 2 ? -i / 10 : 0)),
    temperatures: Array(n).fill(0.7),
    env: id.startsWith("m") ? "math" : "forth",
    rolloutId: id,
    ...extra,
  };
}

function stepBatch() {
  const packed = packStep([sample("m1", 9), sample("f1", 13, { ceWeights: Array(13).fill(0.1) }), sample("m2", 5)], {
    seqLen: 16,
  });
  const rows = packed.rows.map((row) => ({
    ...row,
    samples: row.samples.map((s, i) => ({ ...s, policyVersion: 3 + i })),
  }));
  return {
    step: 4,
    packed: { ...packed, rows },
    state: { format: 1, step: 4, sampler: { cursors: { math: 2 }, rng: 7, groups: 3 } },
    metrics: { reward: 0.5 },
  };
}

test("a step file round-trips every array, the sample table, the state and the metrics", () => {
  const batch = stepBatch();
  const bytes = encodeStepBatch(batch);
  expect(new TextDecoder().decode(bytes.subarray(0, 4))).toBe("RLXB");
  const back = decodeStepBatch(bytes);
  expect(back.step).toBe(4);
  expect(back.state).toEqual(batch.state);
  expect(back.metrics).toEqual(batch.metrics);
  expect(back.packed.counts).toEqual(batch.packed.counts);
  expect(back.packed.envs).toEqual(batch.packed.envs);
  expect(back.packed.rows.length).toBe(batch.packed.rows.length);
  batch.packed.rows.forEach((row, r) => {
    const got = back.packed.rows[r]!;
    for (const key of [
      "tokenIds",
      "sampleLengths",
      "lossMask",
      "advantages",
      "inferenceLogprobs",
      "temperatures",
      "envIndex",
      "ceWeights",
      "rlWeights",
      "refKlWeights",
      "refLogprobs",
    ] as const) {
      expect(got[key] === undefined ? undefined : Array.from(got[key]!)).toEqual(
        row[key] === undefined ? undefined : Array.from(row[key]!),
      );
    }
    expect(got.samples).toEqual(row.samples);
  });
  // the forth sample carries ce weights, so its row has the stream; the other row does not
  expect(back.packed.rows.some((row) => row.ceWeights) && back.packed.rows.some((row) => !row.ceWeights)).toBe(true);
});

test("top-k distillation rows round-trip their distill arrays and k; a format 2 file is still read", () => {
  const k = 3;
  const distilled = sample("m3", 8, {
    distillWeights: Array.from({ length: 8 }, (_, i) => (i >= 4 ? 1 : 0)),
    distillBetas: Array(8).fill(0.5),
    distillTargets: {
      k,
      ids: Array.from({ length: 8 * k }, (_, j) => (j >= 4 * k ? j : -1)),
      logprobs: Array.from({ length: 8 * k }, (_, j) => (j >= 4 * k ? -j / 10 : 0)),
    },
  });
  const packed = packStep([distilled, sample("m1", 6)], { seqLen: 16 });
  const rows = packed.rows.map((row) => ({ ...row, samples: row.samples.map((s) => ({ ...s, policyVersion: 1 })) }));
  const bytes = encodeStepBatch({ step: 1, packed: { ...packed, rows } });
  const back = decodeStepBatch(bytes);
  expect(back.packed.counts.distill).toBe(4);
  const [row, got] = [rows[0]!, back.packed.rows[0]!];
  expect(got.distillK).toBe(k);
  for (const key of ["distillWeights", "distillBetas", "distillIds", "distillLogprobs"] as const)
    expect(Array.from(got[key]!)).toEqual(Array.from(row[key]!));
  expect(got.distillIds!.length).toBe(14 * k);
  // A version 2 file (written before the distill arrays existed) reads as before.
  const plain = encodeStepBatch(stepBatch());
  const view = new DataView(plain.buffer, plain.byteOffset);
  view.setUint32(4, 2, true);
  view.setUint32(12, crc32(plain.subarray(16)), true);
  expect(decodeStepBatch(plain).packed.rows.length).toBe(stepBatch().packed.rows.length);
  view.setUint32(4, 6, true);
  view.setUint32(12, crc32(plain.subarray(16)), true);
  expect(() => decodeStepBatch(plain, "v6.bin")).toThrow("v6.bin: step file format 6, this rlx reads 5");
});

test("a shared-prefix row round-trips its sampleParents and each sample's prefix", () => {
  const prompt = Array.from({ length: 20 }, (_, i) => 200 + i);
  const member = (id: string, n: number) => {
    const s = sample(id, n);
    return {
      ...s,
      tokenIds: [...prompt, ...s.tokenIds.slice(20)],
      lossMask: s.lossMask.map((m, i) => (i <= 20 ? 0 : m)),
    };
  };
  const packed = packStep([member("m1", 30), member("m2", 26), sample("f1", 9)], { seqLen: 64, sharePrefixes: true });
  const rows = packed.rows.map((row) => ({ ...row, samples: row.samples.map((s) => ({ ...s, policyVersion: 1 })) }));
  const back = decodeStepBatch(encodeStepBatch({ step: 1, packed: { ...packed, rows } })).packed.rows[0]!;
  expect(Array.from(back.sampleParents!)).toEqual([-1, 0, 0, -1]);
  expect(Array.from(back.sampleLengths)).toEqual([20, 10, 6, 9]);
  expect(back.samples.map((s) => s.prefix)).toEqual([{ start: 0, length: 20 }, { start: 0, length: 20 }, undefined]);
  expect(back.samples).toEqual(rows[0]!.samples);
});

test("a truncated or foreign step file is refused with the file's name", () => {
  const bytes = encodeStepBatch(stepBatch());
  expect(() => decodeStepBatch(bytes.subarray(0, bytes.length - 8), "b.bin")).toThrow(
    /^b\.bin: checksum mismatch \(crc32 [0-9a-f]{8}, written as [0-9a-f]{8}\): the step file was truncated or damaged/,
  );
  expect(() => decodeStepBatch(bytes.subarray(0, 40), "b.bin")).toThrow("b.bin: header runs past the end");
  expect(() => decodeStepBatch(new TextEncoder().encode("PK\u0003\u0004 not a batch at all"), "z.bin")).toThrow(
    BatchFileError,
  );
});

test("writeStepBatch leaves only the final file", () => {
  const dir = tmp();
  writeStepBatch(join(dir, "step_4.bin"), stepBatch());
  expect(readdirSync(dir)).toEqual(["step_4.bin"]);
  expect(readStepBatch(join(dir, "step_4.bin")).step).toBe(4);
});

test("checkpoint steps: every interval, and always the last", () => {
  const steps = (interval: number) =>
    [1, 2, 3, 4, 5, 6, 7].filter((s) => isCheckpointStep(s, { max_steps: 7, ckpt: { interval } }));
  expect(steps(0)).toEqual([7]);
  expect(steps(3)).toEqual([3, 6, 7]);
});

/** A checkpoint directory as writeCheckpoint lays it out, without the native model. */
function fakeCheckpoint(runDir: string, step: number): string {
  const dir = checkpointDir(runDir, step);
  mkdirSync(join(dir, "trainer/model"), { recursive: true });
  const files: Record<string, string> = {
    "orchestrator.json": JSON.stringify({ format: 1, step }),
    "trainer/optimizer.bin": "x".repeat(step * 10),
    "trainer/model/config.json": "{}",
  };
  for (const [file, text] of Object.entries(files)) writeFileSync(join(dir, file), text);
  const sizes = Object.fromEntries(Object.entries(files).map(([file, text]) => [file, text.length]));
  writeFileSync(join(dir, "manifest.json"), JSON.stringify({ format: 1, step, created: "now", files: sizes }));
  return dir;
}

test("the newest whole checkpoint wins; a partial one is ignored with a warning and deleted", () => {
  const run = tmp();
  fakeCheckpoint(run, 2);
  fakeCheckpoint(run, 4);
  mkdirSync(join(run, "checkpoints/step_6.tmp-4242/trainer"), { recursive: true });
  const warnings: string[] = [];
  expect(latestCheckpoint(run, (w) => warnings.push(w))).toEqual({ step: 4, dir: checkpointDir(run, 4) });
  expect(warnings).toHaveLength(1);
  expect(warnings[0]).toContain("partial checkpoint");
  expect(existsSync(join(run, "checkpoints/step_6.tmp-4242"))).toBe(false);
  const loaded = readCheckpoint(checkpointDir(run, 4));
  expect(loaded.step).toBe(4);
  expect(loaded.orchestratorState).toEqual({ format: 1, step: 4 });
  expect(loaded.optimizerState().length).toBe(40);
});

test("a damaged checkpoint (a file cut short, or no manifest) is skipped for the one before it", () => {
  const run = tmp();
  fakeCheckpoint(run, 2);
  writeFileSync(join(fakeCheckpoint(run, 4), "trainer/optimizer.bin"), "short");
  mkdirSync(checkpointDir(run, 6), { recursive: true });
  const warnings: string[] = [];
  expect(latestCheckpoint(run, (w) => warnings.push(w))?.step).toBe(2);
  expect(warnings.join("\n")).toContain("trainer/optimizer.bin has 5 bytes, the manifest says 40");
  expect(warnings.join("\n")).toContain("no manifest.json");
  expect(() => readCheckpoint(checkpointDir(run, 4))).toThrow("is not a usable checkpoint");
  expect(latestCheckpoint(tmp(), () => {})).toBeUndefined();
});

test("rewinding a run directory drops everything after the checkpoint step", () => {
  const run = tmp();
  fakeCheckpoint(run, 2);
  fakeCheckpoint(run, 4);
  fakeCheckpoint(run, 6);
  for (const dir of ["batches", "weights/step_4", "weights/step_6", "weights/step_5.tmp-1", "rollouts"])
    mkdirSync(join(run, dir), { recursive: true });
  for (const file of [
    "batches/step_5.bin",
    "batches/step_6.bin.tmp-9",
    "rollouts/step_4.jsonl",
    "rollouts/step_5.jsonl",
    "rollouts/failed_step_4.jsonl",
    "rollouts/failed_step_5.jsonl",
  ])
    writeFileSync(join(run, file), "x");
  const lines = [1, 2, 3, 4, 5, 6].map((step) => JSON.stringify({ step, reward: step / 10 }));
  writeFileSync(join(run, "metrics.jsonl"), `${lines.join("\n")}\n{"step": 7, "rew`);
  rewindRunDir(run, 4);
  expect(readdirSync(join(run, "batches"))).toEqual([]);
  expect(readdirSync(join(run, "weights"))).toEqual(["step_4"]);
  expect(readdirSync(join(run, "rollouts")).sort()).toEqual(["failed_step_4.jsonl", "step_4.jsonl"]);
  expect(readdirSync(join(run, "checkpoints")).sort()).toEqual(["step_2", "step_4"]);
  expect(readFileSync(join(run, "metrics.jsonl"), "utf8")).toBe(`${lines.slice(0, 4).join("\n")}\n`);
});
