// Long rollouts on the inference side (docs/scaling.md, "Long context"): the batching engine
// serving --long sequences of --long-tokens prompt tokens beside --short short ones, all submitted
// at once, within a K/V budget of what they need together (the paged cache, native/src/kv_cache.h),
// within a budget that holds only half the long ones at once (the others wait for blocks, then
// run), and with the budget slots x capacity (what a cache of one full-length row per slot takes),
// in the same command. Reports each run's K/V budget and bytes, the most of it
// running sequences held or could still take, the resident-set peak, the requests that had to
// wait for K/V, and the time to finish all; then the long sequences' second turns (each its first
// turn's prompt and completion plus --tool tokens, as a tool episode's next turn), which continue
// the K/V their slots kept: the tokens reused and the time. Then the ratios. Model: `tiny-long` in
// float32, random weights (what is measured is memory and time, not text).
//
//   RLX_SHIM=native/build/torch-2.13.0-cpu/librlx.so bun bench/long_serve.ts
//       [--long 4] [--long-tokens 16384] [--short 64] [--short-tokens 256] [--new 32] [--tool 64]
//       [--kv-tokens N] [--device cpu|cuda] [--out FILE.json]
//
// --kv-tokens sets the first run's budget (default: what all need together). `--device
// cuda` (the GPU check) reports the CUDA allocator's peak instead of the resident set.
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { cpus, tmpdir, totalmem } from "node:os";
import { join } from "node:path";
import { Engine } from "../src/engine/engine.ts";
import { loadModel } from "../src/model/hf.ts";
import { initModel } from "../src/model/presets.ts";
import { deviceMemory, runtimeInfo } from "../src/native/runtime.ts";
import { flag, printTable } from "./_reference.ts";

const GIB = 2 ** 30;
const BLOCK = 16; // tokens per K/V block (native/src/kv_cache.h)
const long = Number(flag("long", "4"));
const longTokens = Number(flag("long-tokens", "16384"));
const short = Number(flag("short", "64"));
const shortTokens = Number(flag("short-tokens", "256"));
const newTokens = Number(flag("new", "32"));
const toolTokens = Number(flag("tool", "64"));
const out = flag("out", "");
const device = flag("device", "cpu");

const wholeBlocks = (tokens: number) => Math.ceil(tokens / BLOCK) * BLOCK;
const slots = long + short;
const capacity = longTokens + 2 * newTokens + toolTokens; // a long sequence's second turn
const needed = long * wholeBlocks(capacity) + short * wholeBlocks(shortTokens + newTokens);
const budget = Number(flag("kv-tokens", String(needed)));
const hwm = () => Number(/VmHWM:\s+(\d+) kB/.exec(readFileSync("/proc/self/status", "utf8"))![1]) * 1024;
const cuda = device === "cuda";
const resetPeak = async () =>
  cuda ? void (await deviceMemory("cuda", true)) : writeFileSync("/proc/self/clear_refs", "5");
const peakGib = async () => (cuda ? (await deviceMemory("cuda")).peak : hwm() / GIB);

const dir = mkdtempSync(join(tmpdir(), "rlx-long-serve-"));
await initModel({ preset: "tiny-long", out: dir, seed: 0, dtype: "f32" });
const model = await loadModel(dir, { dtype: "f32", device });
const kvBytesPerToken = (() => {
  const c = model.config;
  return c.num_hidden_layers * 2 * c.num_key_value_heads * c.head_dim * 4;
})();
const tokens = (n: number, seed: number) => Array.from({ length: n }, (_, t) => 3 + ((seed * 7919 + t * 131) % 250));
const requests = [
  ...Array.from({ length: long }, (_, i) => tokens(longTokens, i)),
  ...Array.from({ length: short }, (_, i) => tokens(shortTokens, long + i)),
];

/** One configuration's figures, as --out writes them (experiments/scripts/long_context_table.ts reads them). */
export interface Run {
  label: string;
  kvTokens: number;
  kvGib: number;
  peakHeldTokens: number;
  rssPeakGib: number;
  waited: number;
  seconds: number;
  generated: number;
  turn2PromptTokens: number;
  turn2ReusedTokens: number;
  turn2Seconds: number;
}

async function serve(label: string, kvTokens: number): Promise<Run> {
  await resetPeak();
  const engine = new Engine(model, { maxBatch: slots, maxModelLen: capacity, kvTokens, ownsModel: false });
  let peakHeld = 0;
  let someFinished = false;
  let waited = 0; // requests whose first token came after another request had finished
  const watch = (first: { seen: boolean }) => (_token: number, _logprob: number, finish: unknown) => {
    const kv = engine.cacheStats.kv;
    peakHeld = Math.max(peakHeld, kv.runningTokens + kv.reservedTokens);
    if (!first.seen && someFinished) waited++;
    first.seen = true;
    if (finish !== null) someFinished = true;
  };
  const start = performance.now();
  const results = await Promise.all(
    requests.map((prompt, i) =>
      engine.submit({
        prompt,
        sampling: { temperature: 1, maxNewTokens: newTokens, seed: i },
        onToken: watch({ seen: false }),
      }),
    ),
  );
  const seconds = (performance.now() - start) / 1000;
  const generated = results.reduce((n, r) => n + r.tokens.length, 0);
  if (results.some((r) => r.tokens.length !== newTokens)) throw new Error(`${label}: a request ended early`);
  const turn2 = results.slice(0, long).map((r, i) => [...requests[i]!, ...r.tokens, ...tokens(toolTokens, 1000 + i)]);
  const reusedBefore = engine.cacheStats.reusedTokens;
  const turn2Start = performance.now();
  await Promise.all(
    turn2.map((prompt, i) => engine.submit({ prompt, sampling: { temperature: 1, maxNewTokens: newTokens, seed: i } })),
  );
  const turn2Seconds = (performance.now() - turn2Start) / 1000;
  const turn2ReusedTokens = engine.cacheStats.reusedTokens - reusedBefore;
  await engine.close();
  return {
    label,
    kvTokens: engine.kvTokens,
    kvGib: (engine.kvTokens * kvBytesPerToken) / GIB,
    peakHeldTokens: peakHeld,
    rssPeakGib: await peakGib(),
    waited,
    seconds,
    generated,
    turn2PromptTokens: turn2.reduce((n, p) => n + p.length, 0),
    turn2ReusedTokens,
    turn2Seconds,
  };
}

const warm = new Engine(model, { maxBatch: 2, maxModelLen: 64, ownsModel: false }); // first-use costs
await warm.submit({ prompt: tokens(32, 0), sampling: { maxNewTokens: 4 } });
await warm.close();
const paged = await serve("paged budget", budget);
const tight = await serve("half the long ones at once", needed - Math.floor(long / 2) * wholeBlocks(capacity));
const full = await serve("slots x capacity", slots * capacity);
model.free();
rmSync(dir, { recursive: true, force: true });

const info = await runtimeInfo();
console.log(
  `${long} x ${longTokens} + ${short} x ${shortTokens} prompt tokens, ${newTokens} new each; ${slots} slots, capacity ${capacity}; tiny-long float32 on ${device}, torch ${info.torch_version}, ${cpus()[0]?.model}`,
);
printTable([
  [
    "K/V budget",
    "tokens",
    "GiB",
    "most held+reserved",
    cuda ? "CUDA peak GiB" : "RSS peak GiB",
    "waited",
    "s",
    "gen tok/s",
    "turn 2 reused/prompt",
    "turn 2 s",
  ],
  ...[paged, tight, full].map((r) => [
    r.label,
    r.kvTokens,
    r.kvGib.toFixed(3),
    r.peakHeldTokens,
    r.rssPeakGib.toFixed(2),
    r.waited,
    r.seconds.toFixed(1),
    (r.generated / r.seconds).toFixed(1),
    `${r.turn2ReusedTokens}/${r.turn2PromptTokens}`,
    r.turn2Seconds.toFixed(1),
  ]),
]);
console.log(
  `paged / slots x capacity: K/V ${(paged.kvTokens / full.kvTokens).toFixed(3)}x, memory peak ${(paged.rssPeakGib / full.rssPeakGib).toFixed(2)}x, time ${(paged.seconds / full.seconds).toFixed(2)}x`,
);
if (out) {
  const machine = { cpu: cpus()[0]?.model, cores: cpus().length, memTotalGib: totalmem() / GIB };
  const setup = { long, longTokens, short, shortTokens, newTokens, toolTokens, slots, capacity, kvBytesPerToken };
  writeFileSync(
    out,
    `${JSON.stringify({ machine, torch: info.torch_version, setup, runs: [paged, tight, full] }, null, 2)}\n`,
  );
}
