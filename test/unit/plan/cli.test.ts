// `rlx plan` as a process: a config's model, seq_len and ranks, the --model/--seq-len form without
// a config, --json, and the errors that name the file and the fix.
import { expect, test } from "bun:test";
import { mkdtempSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { hfConfigObject } from "../../../src/model/config.ts";
import { getPreset } from "../../../src/model/presets.ts";

const ROOT = join(import.meta.dir, "../../..");

function rlx(args: string[]) {
  const proc = Bun.spawnSync([process.execPath, join(ROOT, "src/main.ts"), "plan", ...args], {
    cwd: ROOT,
    stdout: "pipe",
    stderr: "pipe",
  });
  return { code: proc.exitCode, out: proc.stdout.toString(), err: proc.stderr.toString() };
}

test("--model and --seq-len plan without a config: five rows, --json in bytes", () => {
  const { code, out } = rlx([
    "--model",
    "qwen3-0.6b",
    "--seq-len",
    "4096",
    "--ranks",
    "8",
    "--device",
    "cuda",
    "--json",
  ]);
  expect(code).toBe(0);
  const report = JSON.parse(out);
  expect(report.input).toMatchObject({ seqLen: 4096, ranks: 8, device: "cuda", attention: "sdpa" });
  expect(report.deviceMemoryBytes).toBe(80 * 2 ** 30);
  expect(report.rows.map((r: { shard: string }) => r.shard)).toEqual([
    "none",
    "none",
    "optimizer",
    "optimizer",
    "full",
  ]);
  expect(report.rows.every((r: { fits: boolean }) => r.fits)).toBe(true);
});

test("the table names every column and says whether each row fits", () => {
  const { code, out } = rlx(["--model", "qwen3-0.6b", "--ranks", "2", "--device-memory", "10"]);
  expect(code).toBe(0);
  for (const column of ["shard", "ckpt", "weights", "grads", "optimizer", "activations", "largest transient", "total"])
    expect(out).toContain(column);
  expect(out).toMatch(/full\s+always.*yes/);
  expect(out).toMatch(/none\s+off.*no/);
});

test("a config gives the model directory, seq_len and world size; --set overrides them", () => {
  const model = mkdtempSync(join(tmpdir(), "rlx-plan-"));
  writeFileSync(join(model, "config.json"), JSON.stringify(hfConfigObject(getPreset("tiny").config, "float32")));
  const config = join(ROOT, "configs/quickstart.toml");
  const { code, out, err } = rlx([config, "--set", `model.path=${model}`, "--set", "trainer.world_size=4", "--json"]);
  expect(err).toBe("");
  expect(code).toBe(0);
  const report = JSON.parse(out);
  expect(report.input).toMatchObject({ seqLen: 256, ranks: 4, device: "cpu", fileBytesPerParam: 4 });
  expect(report.model).toBe(model);
});

test("no config and no --model, or a model that is not there: the error names it and the fix", () => {
  const none = rlx([]);
  expect(none.code).toBe(1);
  expect(none.err).toContain("give a run config, or a model with --model");
  const missing = rlx(["--model", "/nonexistent/model"]);
  expect(missing.code).toBe(1);
  expect(missing.err).toContain("--model: /nonexistent/model is neither a preset nor a model directory");
  expect(missing.err).toContain("fix:");
  expect(rlx(["--model", "tiny", "--ranks", "0"]).err).toContain("--ranks 0: expected a positive number");
});
