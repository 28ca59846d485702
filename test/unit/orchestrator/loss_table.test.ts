// The step's rl loss table (src/orchestrator/loss_table.ts): the envs' distinct resolved losses in
// the order of the first env with each; each env's code; a run with one loss has one entry and
// every code 0; envs without an rl loss get 0; a run with none still has the run's loss.
import { expect, test } from "bun:test";
import { mkdtempSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { loadConfig } from "../../../src/config/load.ts";
import { rlLoss } from "../../../src/data/loss_types.ts";
import { lossTable } from "../../../src/orchestrator/loss_table.ts";

const dir = mkdtempSync(join(tmpdir(), "rlx-loss-table-"));
let counter = 0;
const BASE = `[model]\npath = "models/tiny"\n[orchestrator]\nbatch_size = 8\ngroup_size = 4\nmax_tokens = 32\n`;
const TEACHER = `sampling = { source = { name = "t", base_url = "http://10.0.0.1:8001/v1" } }`;
const env = (name: string, algo = "") =>
  `[[orchestrator.train.env]]\nid = "math"\nname = "${name}"\n${algo ? `algo = ${algo}\n` : ""}`;

function tableOf(toml: string) {
  const path = join(dir, `c${counter++}.toml`);
  writeFileSync(path, BASE + toml);
  return lossTable(loadConfig(path).config);
}

test("one loss for every env: one entry, every code 0", () => {
  const { losses, codes } = tableOf(env("x") + env("y", `{ type = "max_rl" }`));
  expect(losses).toEqual([rlLoss({ constant: 32 })]);
  expect([...codes]).toEqual([
    ["x", 0],
    ["y", 0],
  ]);
});

test("distinct losses in first-env order; equal blocks share an entry whatever their spelling", () => {
  const gspo = `{ type = "grpo", loss = { type = "gspo" } }`;
  const gspoSpelled = `{ type = "grpo", loss = { clip_high = 4e-4, type = "gspo", reduction = "sequence" } }`;
  const { losses, codes } = tableOf(
    env("x", gspo) + env("y") + env("z", gspoSpelled) + env("s", `{ type = "sft", ${TEACHER} }`) + env("w"),
  );
  expect(losses).toEqual([rlLoss({ type: "gspo", constant: 32 }), rlLoss({ constant: 32 })]);
  expect(Object.fromEntries(codes)).toEqual({ x: 0, y: 1, z: 0, s: 0, w: 1 });
});

test("no env with an rl loss: the table holds the run's", () => {
  const { losses, codes } = tableOf(`[trainer.loss]\ntype = "ipo"\n` + env("s", `{ type = "sft", ${TEACHER} }`));
  expect(losses).toEqual([rlLoss({ type: "ipo", constant: 32 })]);
  expect(Object.fromEntries(codes)).toEqual({ s: 0 });
});
