// The tail of a rollout batch: a few long episodes still decoding after many short ones finished,
// as in an RL step that mixes math prompts with tool episodes. Times the decode (after the prefill)
// of --long long sequences added after --short short ones (their slots are the highest) against
// the same long sequences alone in a generator of their own, rounds alternating; prints the medians
// and the ratio.
// A decode step computes only the running sequences, each over its own K/V blocks
// (native/src/kv_cache.h), so the ratio is what the short ones' first steps cost.
//
//   bun bench/decode_tail.ts [--short 128] [--long 16] [--prompt 1200] [--new 150] [--rounds 2] [--threads N]
import { cpus } from "node:os";
import { PRESETS } from "../src/model/presets.ts";
import { NativeGenerator } from "../src/native/generate.ts";
import { NativeModel } from "../src/native/model.ts";
import { loadNative } from "../src/native/ffi.ts";
import { flag, median, printTable } from "./_reference.ts";

const short = Number(flag("short", "128"));
const long = Number(flag("long", "16"));
const promptLength = Number(flag("prompt", "1200"));
const newTokens = Number(flag("new", "150"));
const rounds = Number(flag("rounds", "2"));
await loadNative(Number(flag("threads", String(cpus().length))));
using model = await NativeModel.create(PRESETS.tiny!.config.shim, { seed: 0 });

const prompt = (n: number, k: number) => Int32Array.from({ length: n }, (_, i) => (k * 31 + i * 7) % 259);
const sampling = (maxNewTokens: number, seed: number) => ({ temperature: 1, maxNewTokens, seed });

/** Seconds from the long sequences' first token to their last, with `before` short ones added first. */
function decode(before: number): number {
  using gen = NativeGenerator.create(model, { slots: before + long, capacity: promptLength + newTokens + 1 });
  if (before > 0)
    gen.add(Array.from({ length: before }, (_, b) => ({ prompt: prompt(32, b), sampling: sampling(8, b) })));
  gen.add(
    Array.from({ length: long }, (_, b) => ({
      prompt: prompt(promptLength, 1000 + b),
      sampling: sampling(newTokens, b),
    })),
  );
  const t0 = performance.now();
  let produced = long;
  for (let out = gen.step(); out.length > 0; out = gen.step()) produced += out.length;
  if (produced < long * newTokens)
    throw new Error(`produced ${produced} tokens, expected at least ${long * newTokens}`);
  return (performance.now() - t0) / 1000;
}

const alone: number[] = [];
const tail: number[] = [];
for (let r = 0; r < rounds; r++) {
  alone.push(decode(0));
  tail.push(decode(short));
}
console.log(
  `${long} sequences of ${promptLength} + ${newTokens} tokens, tiny f32, ${cpus().length} cores; medians of ${rounds} rounds`,
);
printTable([
  ["case", "seconds", "ratio"],
  [`${long} long alone`, median(alone).toFixed(2), "1.00"],
  [`after ${short} short ones (8 tokens each)`, median(tail).toFixed(2), (median(tail) / median(alone)).toFixed(2)],
]);
