// An RL group's rollouts at long context (docs/scaling.md, "Long context"): --group rollouts of one
// --prompt-token prompt, submitted together to the batching engine, against as many distinct
// prompts of that length, side by side in one command. The engine admits a group as one batch and
// the generator prefills its prompt once, sharing the K/V blocks (src/engine/admission.ts); distinct
// prompts are each prefilled, which is what every rollout of a group cost while a prompt longer
// than the engine's prefill budget (8,192 tokens) was admitted alone. Between them, a group whose
// first rollout arrives alone (as a group's HTTP requests can): the others, submitted once it
// runs, share the whole blocks it wrote (native/src/slots.cpp share_running). The sides alternate
// in rounds, each on a fresh engine; each figure is a median. Model: `tiny-long` in float32,
// random weights.
//
//   RLX_SHIM=native/build/torch-2.13.0-cpu/librlx.so bun bench/group_prefill.ts
//       [--group 4] [--prompt 16384] [--new 4] [--rounds 2] [--device cpu|cuda]
import { mkdtempSync, rmSync } from "node:fs";
import { cpus, tmpdir } from "node:os";
import { join } from "node:path";
import { Engine } from "../src/engine/engine.ts";
import { loadModel } from "../src/model/hf.ts";
import { initModel } from "../src/model/presets.ts";
import { runtimeInfo } from "../src/native/runtime.ts";
import { flag, median, printTable } from "./_reference.ts";

const group = Number(flag("group", "4"));
const promptTokens = Number(flag("prompt", "16384"));
const newTokens = Number(flag("new", "4"));
const rounds = Number(flag("rounds", "2"));
const device = flag("device", "cpu");

const dir = mkdtempSync(join(tmpdir(), "rlx-group-prefill-"));
await initModel({ preset: "tiny-long", out: dir, seed: 0, dtype: "f32" });
const model = await loadModel(dir, { dtype: "f32", device });
const tokens = (seed: number) => Array.from({ length: promptTokens }, (_, t) => 3 + ((seed * 7919 + t * 131) % 250));

/** Seconds for a fresh engine to finish every prompt, submitted at once, or with `split` the first
 * alone and the rest once it has its first token (as a group's HTTP requests may arrive). */
async function serve(prompts: number[][], split = false): Promise<number> {
  const engine = new Engine(model, {
    maxBatch: prompts.length,
    maxModelLen: promptTokens + newTokens,
    ownsModel: false,
  });
  const submit = (prompt: number[], i: number, onToken?: () => void) =>
    engine.submit({
      prompt,
      sampling: { temperature: 1, maxNewTokens: newTokens, seed: i },
      ...(onToken && { onToken }),
    });
  const start = performance.now();
  if (!split) await Promise.all(prompts.map((prompt, i) => submit(prompt, i)));
  else {
    let rest: Promise<unknown> | undefined;
    const startRest = () => void (rest ??= Promise.all(prompts.slice(1).map((p, i) => submit(p, i + 1))));
    await submit(prompts[0]!, 0, startRest);
    await rest;
  }
  const seconds = (performance.now() - start) / 1000;
  await engine.close();
  return seconds;
}

const groupSeconds: number[] = [];
const splitSeconds: number[] = [];
const distinctSeconds: number[] = [];
for (let round = 0; round < rounds; round++) {
  groupSeconds.push(await serve(Array.from({ length: group }, () => tokens(round))));
  splitSeconds.push(
    await serve(
      Array.from({ length: group }, () => tokens(round + 50)),
      true,
    ),
  );
  distinctSeconds.push(await serve(Array.from({ length: group }, (_, i) => tokens(round * group + i + 100))));
}
model.free();
rmSync(dir, { recursive: true, force: true });

const info = await runtimeInfo();
console.log(
  `${group} rollouts of ${promptTokens} prompt tokens, ${newTokens} new each; tiny-long float32 on ${device}, torch ${info.torch_version}, ${cpus()[0]?.model}`,
);
const row = (label: string, seconds: number[]) => {
  const s = median(seconds);
  return [label, s.toFixed(2), ((group * promptTokens) / s).toFixed(0), seconds.map((x) => x.toFixed(2)).join(" ")];
};
printTable([
  ["prompts", "s (median)", "prompt tokens/s", "rounds"],
  row("one prompt, a group", groupSeconds),
  row("a group, the first alone", splitSeconds),
  row("distinct prompts", distinctSeconds),
]);
const d = median(distinctSeconds);
console.log(
  `group / distinct: ${(median(groupSeconds) / d).toFixed(2)}x the time; the first alone: ${(median(splitSeconds) / d).toFixed(2)}x`,
);
