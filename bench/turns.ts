// KV reuse across the turns of tool episodes (native/src/generate.cpp, kept prefixes) against a
// full re-prefill of each turn, side by side in one command. EPISODES episodes in groups of 8 (each
// group one PROMPT-token prompt, as a forth group: system prompt, tool schema and task), 3 turns of
// up to NEW sampled tokens, each next turn's prompt the last one plus its reply and a TOOL-token
// tool output. The kept side runs the episodes in one generator, so turns 2 and 3 continue from
// the K/V their slots kept; the full side prefills the same prompts in a fresh generator. The
// figure is the add() call (the prefill) of each turn, median over rounds, and the tokens each side
// computed. A greedy episode is also run both ways: its tokens must be identical and the largest
// logprob difference is printed.
//
//   bun bench/turns.ts [--preset tiny] [--episodes 16] [--prompt 1200] [--new 64] [--tool 40]
//                      [--rounds 3] [--threads N]
import { cpus } from "node:os";
import { PRESETS } from "../src/model/presets.ts";
import { loadNative } from "../src/native/ffi.ts";
import { type GenToken, NativeGenerator, type SamplingParams } from "../src/native/generate.ts";
import { NativeModel } from "../src/native/model.ts";
import { runtimeInfo } from "../src/native/runtime.ts";
import { flag, median, printTable } from "./_reference.ts";

const presetName = flag("preset", "tiny");
const preset = PRESETS[presetName];
if (!preset) throw new Error(`unknown preset ${presetName}`);
const episodes = Number(flag("episodes", "16"));
const promptLength = Number(flag("prompt", "1200"));
const newTokens = Number(flag("new", "64"));
const toolLength = Number(flag("tool", "40"));
const rounds = Number(flag("rounds", "3"));
await loadNative(Number(flag("threads", String(cpus().length))));

let state = 3;
const ids = (n: number) =>
  Array.from(
    { length: n },
    () => (state = (Math.imul(state, 1664525) + 1013904223) >>> 0) % preset.config.shim.vocab_size,
  );
using model = await NativeModel.create(preset.config.shim, { seed: 0 });
const capacity = promptLength + 3 * (newTokens + toolLength) + 8;
const create = () => NativeGenerator.create(model, { slots: episodes, capacity });

/** Adds the prompts, times the add, steps until all finish; the replies, logprobs and add time. */
function turn(gen: NativeGenerator, prompts: number[][], sampling: SamplingParams[]) {
  const replies = prompts.map(() => [] as number[]);
  const logprobs = prompts.map(() => [] as number[]);
  const bySlot = new Map<number, number>();
  const take = (out: GenToken[]) =>
    out.forEach((t) => {
      const i = bySlot.get(t.slot)!;
      (replies[i]!.push(t.token), logprobs[i]!.push(t.logprob));
      if (t.finish) bySlot.delete(t.slot);
    });
  const t0 = performance.now();
  const first = gen.add(prompts.map((prompt, i) => ({ prompt, sampling: sampling[i]! })));
  const addS = (performance.now() - t0) / 1000;
  first.forEach((t, i) => bySlot.set(t.slot, i));
  take(first);
  while (bySlot.size) take(gen.step());
  return { replies, logprobs, addS };
}

/** The episodes' three turns both ways; per turn: add seconds and tokens computed on each side. */
function round(seed: number, temperature: number, count: number) {
  const groups = Array.from({ length: Math.ceil(count / 8) }, () => ids(promptLength));
  let prompts = Array.from({ length: count }, (_, i) => groups[Math.floor(i / 8)]!);
  const tools = [0, 1].map(() => prompts.map(() => ids(toolLength)));
  using kept = create();
  const out = [];
  for (let k = 0; k < 3; k++) {
    const sampling = prompts.map((_, i) => ({ temperature, maxNewTokens: newTokens, seed: seed + 100 * k + i }));
    const before = kept.cacheStats().reusedTokens;
    const a = turn(kept, prompts, sampling);
    const reusedTokens = kept.cacheStats().reusedTokens - before;
    using fresh = create();
    const b = turn(fresh, prompts, sampling);
    out.push({ kept: a, full: b, promptTokens: prompts.reduce((n, p) => n + p.length, 0), reusedTokens });
    if (k < 2) prompts = prompts.map((p, i) => [...p, ...a.replies[i]!, ...tools[k]![i]!]);
  }
  return out;
}

const info = await runtimeInfo();
console.log(
  `libtorch ${info.torch_version}, ${info.threads} threads, ${cpus()[0]?.model ?? "cpu"}; ${presetName} f32; ${episodes} episodes (groups of 8) of a ${promptLength}-token prompt, 3 turns of up to ${newTokens} tokens, ${toolLength}-token tool outputs; ${rounds} rounds`,
);
const greedy = round(1, 0, 1);
let worst = 0;
let same = true;
for (const t of greedy) {
  same &&= t.kept.replies[0]!.join() === t.full.replies[0]!.join();
  t.kept.logprobs[0]!.forEach((lp, j) => (worst = Math.max(worst, Math.abs(lp - t.full.logprobs[0]![j]!))));
}
console.log(
  `greedy episode: tokens ${same ? "identical" : "DIFFER"}, largest logprob difference ${worst.toExponential(2)}\n`,
);

const times = [0, 1, 2].map(() => ({ kept: [] as number[], full: [] as number[], promptTokens: 0, reusedTokens: 0 }));
for (let r = 0; r < rounds; r++)
  round(1000 * (r + 1), 1, episodes).forEach((t, k) => {
    const row = times[k]!;
    row.kept.push(t.kept.addS);
    row.full.push(t.full.addS);
    row.promptTokens = t.promptTokens;
    row.reusedTokens = t.reusedTokens;
  });
printTable([
  ["turn", "prompt tokens", "from kept K/V", "full prefill ms", "kept ms", "kept/full"],
  ...times.map((t, k) => [
    String(k + 1),
    t.promptTokens,
    t.reusedTokens,
    (median(t.full) * 1000).toFixed(0),
    (median(t.kept) * 1000).toFixed(0),
    (median(t.kept) / median(t.full)).toFixed(3),
  ]),
]);
console.log(
  "\n(turn 1 on both sides prefills each group's distinct prompt once and copies it to the group's slots; turns 2 and 3 of the full side prefill every episode's whole conversation)",
);
if (!same) process.exit(1);
