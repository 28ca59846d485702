// experiments/scripts/policy_kl.ts (how far training moved a policy: docs/results.md §6's row 6bl)
// on two micro models: a model's KL to itself is 0, and the KL to another model is the one built
// here from each position's whole next-token distribution, every vocabulary token scored in a
// sequence of its own by the plain scoring call, in float64.
import { afterAll, beforeAll, expect, test } from "bun:test";
import { rmSync, writeFileSync } from "node:fs";
import { dirname, join } from "node:path";
import { policyKl } from "../../../experiments/scripts/policy_kl.ts";
import { observationTokens } from "../../../experiments/scripts/obs_loss.ts";
import { loadModel } from "../../../src/model/hf.ts";
import { ChatRenderer } from "../../../src/model/render.ts";
import { Tokenizer } from "../../../src/model/tokenizer.ts";
import { loadNative } from "../../../src/native/ffi.ts";
import { score } from "../../../src/native/generate.ts";
import type { NativeModel } from "../../../src/native/model.ts";
import { readSftRows } from "../../../src/sft/data.ts";
import { microModelDir } from "../../fixtures/serve_model.ts";

let dirA = "";
let dirB = "";
let demos = "";
beforeAll(async () => {
  await loadNative();
  dirA = await microModelDir({ seed: 3, sharpen: 2 });
  dirB = await microModelDir({ seed: 4, sharpen: 2 });
  demos = join(dirname(dirA), "demos.jsonl");
  const rows = [
    [
      { role: "user", content: "1+2=" },
      { role: "assistant", content: "3" },
    ],
    [
      { role: "user", content: "20+22=" },
      { role: "assistant", content: "42" },
    ],
  ];
  writeFileSync(demos, rows.map((messages) => JSON.stringify({ messages })).join("\n") + "\n");
});
afterAll(() => {
  // only once set: dirname("") is the working directory (a failed beforeAll leaves them empty)
  for (const dir of [dirA, dirB]) if (dir) rmSync(dirname(dir), { recursive: true, force: true });
});

/** log p(v | ids[0..t)) for every v, each scored as the last token of its own sequence. */
function distribution(model: NativeModel, prefix: number[], vocab: number): number[] {
  const seqs = Array.from({ length: vocab }, (_, v) => [...prefix, v]);
  return score(model, seqs).logprobs.map((lp) => lp[prefix.length]!);
}

test("KL to itself is 0; to another model, the mean over reply positions of the whole-vocabulary sum", async () => {
  expect((await policyKl(dirA, dirA, demos)).kl).toBe(0);

  const renderer = new ChatRenderer(Tokenizer.load(dirA));
  const seqs = readSftRows([demos]).map((conv) => observationTokens(renderer, conv, "assistant"));
  const [a, b] = [await loadModel(dirA), await loadModel(dirB)];
  let sum = 0;
  let n = 0;
  for (const { tokenIds, selected } of seqs) {
    for (const t of selected) {
      const [p, q] = [distribution(a, tokenIds.slice(0, t), 320), distribution(b, tokenIds.slice(0, t), 320)];
      sum += p.reduce((acc, lp, v) => acc + Math.exp(lp) * (lp - q[v]!), 0);
      n++;
    }
  }
  a.free();
  b.free();
  const result = await policyKl(dirA, dirB, demos);
  expect(result.tokens).toBe(n);
  expect(n).toBeGreaterThanOrEqual(3); // `3`, `42` and the end tokens
  expect(result.kl).toBeGreaterThan(0.01);
  expect(result.kl).toBeCloseTo(sum / n, 4);
});
