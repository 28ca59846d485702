// rlx serve throughput: C concurrent clients against the single-client rate, and the server's
// end-to-end rate against the raw native generator on the same work (the server's overhead:
// HTTP, JSON, scheduling, detokenization), side by side in one command.
//
//   bun bench/serve.ts [--model DIR | --preset tiny] [--clients 1,16,64] [--prompt 32] [--new 64] [--rounds 3]
//
// Server side: `rlx serve` as a child process (--max-batch = the largest C); a wave of C
// concurrent /v1/completions requests (token-id prompts of --prompt tokens, --new tokens each,
// ignore_eos, logprobs on, as the orchestrator asks) timed from the first send to the last
// answer. Native side: in this process, NativeGenerator with C slots on the same prompts: one
// prefill plus --new - 1 decode steps. Rate = C x new / seconds, so both include prefill. Rounds
// alternate the two sides (this machine's speed drifts); each figure is the median over rounds.
import { mkdtempSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { loadModel } from "../src/model/hf.ts";
import { initModel } from "../src/model/presets.ts";
import { NativeGenerator } from "../src/native/generate.ts";
import type { NativeModel } from "../src/native/model.ts";
import { runtimeInfo } from "../src/native/runtime.ts";
import { startServe } from "../test/e2e/serve_harness.ts";
import { flag, median, printTable } from "./_reference.ts";

const clients = flag("clients", "1,16,64").split(",").map(Number);
const promptLength = Number(flag("prompt", "32"));
const newTokens = Number(flag("new", "64"));
const rounds = Number(flag("rounds", "3"));
const maxBatch = Math.max(...clients);
let dir = flag("model", "");
if (dir === "") {
  dir = join(mkdtempSync(join(tmpdir(), "rlx-bench-serve-")), "model");
  await initModel({ preset: flag("preset", "tiny"), out: dir, seed: 0, dtype: "f32" });
}

const prompt = (c: number) => Array.from({ length: promptLength }, (_, i) => (c * 31 + i * 7) % 256);

function nativeSeconds(model: NativeModel, batch: number, seed: number): number {
  using gen = NativeGenerator.create(model, { slots: batch, capacity: promptLength + newTokens });
  const t0 = performance.now();
  let produced = gen.add(
    Array.from({ length: batch }, (_, b) => ({
      prompt: prompt(b),
      sampling: { temperature: 1, maxNewTokens: newTokens, seed: seed + b },
    })),
  ).length;
  while (produced < batch * newTokens) produced += gen.step().length;
  return (performance.now() - t0) / 1000;
}

async function serverSeconds(url: string, concurrent: number, seed: number): Promise<number> {
  const one = async (c: number) => {
    const response = await fetch(`${url}/v1/completions`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({
        prompt: prompt(c),
        max_tokens: newTokens,
        temperature: 1,
        seed: seed + c,
        ignore_eos: true,
        logprobs: 0,
        return_tokens_as_token_ids: true,
      }),
    });
    const body = (await response.json()) as { usage?: { completion_tokens: number } };
    if (body.usage?.completion_tokens !== newTokens)
      throw new Error(`server answered ${response.status}: ${JSON.stringify(body).slice(0, 300)}`);
  };
  const t0 = performance.now();
  await Promise.all(Array.from({ length: concurrent }, (_, c) => one(c)));
  return (performance.now() - t0) / 1000;
}

const info = await runtimeInfo();
console.log(
  `libtorch ${info.torch_version}, BLAS ${info.blas}, ${info.threads} threads; model ${dir}; prompt ${promptLength}, ${newTokens} new tokens, ${rounds} rounds\n`,
);
const serve = await startServe([
  "--model",
  dir,
  "--max-batch",
  String(maxBatch),
  "--max-model-len",
  String(promptLength + newTokens),
]);
using model = await loadModel(dir);
try {
  nativeSeconds(model, 1, 0);
  await serverSeconds(serve.url, 1, 0); // warm-up
  const rows: { c: number; server: number; native: number }[] = [];
  for (const c of clients) {
    const server: number[] = [];
    const native: number[] = [];
    for (let r = 0; r < rounds; r++) {
      server.push(await serverSeconds(serve.url, c, 1000 * r));
      native.push(nativeSeconds(model, c, 1000 * r));
    }
    rows.push({ c, server: (c * newTokens) / median(server), native: (c * newTokens) / median(native) });
  }
  const single = rows.find((r) => r.c === 1)?.server ?? rows[0]!.server;
  const table: (string | number)[][] = [["clients", "server tok/s", "vs 1 client", "native tok/s", "server/native"]];
  for (const r of rows)
    table.push([
      r.c,
      r.server.toFixed(0),
      `${(r.server / single).toFixed(1)}x`,
      r.native.toFixed(0),
      r.server / r.native > 0 ? (r.server / r.native).toFixed(2) : "-",
    ]);
  printTable(table);
} finally {
  await serve.stop();
}
