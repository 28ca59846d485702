// How fast a trained step reaches the policy: weights on disk (the trainer writes weights/step_N/,
// every server loads it) against weights over c10d (the trainer sends, every server receives while
// it keeps serving), side by side in one command, with 1 and 2 policy servers.
//
//   bun bench/weight_transfer.ts [--preset qwen3-0.6b] [--dtype f32] [--servers 1,2] [--rounds 3] [--device cpu]
//
// The trainer is bench/_weight_sender.ts in its own process (a trainer is); the servers are
// `rlx serve --policy` processes of one thread each; this process plays the orchestrator. Time
// from the end of the optimizer step (the command to the trainer) to the first completion stamped
// with the new version on every server, split into the trainer's part (serialize + write, or
// send), the servers' (load + swap, or receive + swap) and the first completion. Then the decode
// rate of one client on server 0 while a transfer runs, against the same client with none.
// The disk rounds run first, then the c10d rounds (see bench() for why not interleaved).
import { mkdirSync, mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { runtimeInfo } from "../src/native/runtime.ts";
import { freePort } from "../test/e2e/train_helpers.ts";
import { type ServeProcess, startServe } from "../test/e2e/serve_harness.ts";
import { flag, median, printTable } from "./_reference.ts";

const preset = flag("preset", "qwen3-0.6b");
const dtype = flag("dtype", "f32");
const serverCounts = flag("servers", "1,2").split(",").map(Number);
const rounds = Number(flag("rounds", "3"));
const device = flag("device", "cpu");
const root = mkdtempSync(join(tmpdir(), "rlx-bench-transfer-"));
const modelDir = join(root, "model");
const weightsRoot = join(root, "weights");
mkdirSync(weightsRoot);
// in a child: the model it builds would stay in this process's memory
Bun.spawnSync([
  process.execPath,
  join(import.meta.dir, "../src/main.ts"),
  "init",
  "--preset",
  preset,
  "--out",
  modelDir,
]);
process.env.RLX_THREADS = "1";

const post = (url: string, path: string, body: unknown) =>
  fetch(`${url}${path}`, { method: "POST", body: JSON.stringify(body) }).then(async (r) => {
    if (!r.ok) throw new Error(`${url}${path}: ${r.status} ${await r.text()}`);
  });

/** A completion of `tokens` tokens; resolves with the version that produced it. */
async function complete(url: string, tokens: number): Promise<number> {
  const r = await fetch(`${url}/v1/completions`, {
    method: "POST",
    body: JSON.stringify({ prompt: [1, 2, 3], max_tokens: tokens, ignore_eos: true, temperature: 1 }),
  });
  const body = (await r.json()) as { policy_version?: number };
  return body.policy_version ?? -1;
}

/** The trainer process: answers one JSON line per command. */
function trainer(ports: number[]) {
  const proc = Bun.spawn(
    [process.execPath, join(import.meta.dir, "_weight_sender.ts"), modelDir, dtype, ports.join(","), device],
    { stdin: "pipe", stdout: "pipe", stderr: "inherit" },
  );
  const reader = proc.stdout.getReader();
  let buffered = "";
  const next = async (): Promise<Record<string, number>> => {
    while (!buffered.includes("\n")) {
      const { done, value } = await reader.read();
      if (done) throw new Error("the trainer process exited");
      buffered += new TextDecoder().decode(value);
    }
    const line = buffered.slice(0, buffered.indexOf("\n"));
    buffered = buffered.slice(line.length + 1);
    return JSON.parse(line);
  };
  return {
    next,
    command(text: string) {
      proc.stdin.write(`${text}\n`);
      proc.stdin.flush();
    },
    stop: () => proc.kill(),
  };
}

interface Split {
  total: number;
  trainer: number;
  servers: number;
  first: number;
}

async function bench(servers: ServeProcess[]) {
  const ports = servers.map(() => freePort());
  await Promise.all(servers.map((s, i) => post(s.url, "/weight_channel", { host: "127.0.0.1", port: ports[i] })));
  const t = trainer(ports);
  await t.next(); // loaded, channels joined
  let version = 0;
  const firstCompletions = async (v: number) => {
    await Promise.all(
      servers.map(async (s) => {
        if ((await complete(s.url, 1)) !== v) throw new Error(`${s.url} did not serve version ${v}`);
      }),
    );
  };
  const disk = async (): Promise<Split> => {
    const v = ++version;
    const dir = join(weightsRoot, `step_${v}`);
    const t0 = performance.now();
    t.command(`disk ${dir} ${v}`);
    const { write } = await t.next();
    const t1 = performance.now();
    await Promise.all(servers.map((s) => post(s.url, "/update_weights", { path: dir, version: v })));
    const t2 = performance.now();
    await firstCompletions(v);
    const t3 = performance.now();
    rmSync(dir, { recursive: true, force: true });
    return { total: (t3 - t0) / 1000, trainer: write!, servers: (t2 - t1) / 1000, first: (t3 - t2) / 1000 };
  };
  const c10d = async (): Promise<Split> => {
    const v = ++version;
    const t0 = performance.now();
    t.command(`c10d ${v}`);
    await Promise.all(servers.map((s) => post(s.url, "/update_weights", { version: v, transfer: "c10d" })));
    const t2 = performance.now();
    const { send } = await t.next();
    await firstCompletions(v);
    const t3 = performance.now();
    return { total: (t3 - t0) / 1000, trainer: send!, servers: (t2 - t0) / 1000, first: (t3 - t2) / 1000 };
  };
  // In blocks, not interleaved: a server keeps the model a transfer replaced to receive the next
  // one into only while transfers follow each other (a directory reload frees it), as in a run.
  // Each block starts with a warm-up round (first loads, first allocations).
  const results = { disk: [] as Split[], c10d: [] as Split[] };
  for (const [path, round] of [
    ["disk", disk],
    ["c10d", c10d],
  ] as const) {
    await round();
    for (let r = 0; r < rounds; r++) results[path].push(await round());
  }
  // decode of one client on server 0, while a transfer runs and while none does
  const decodeRate = async (during: Promise<unknown> | null, seconds: number): Promise<number> => {
    let tokens = 0;
    let running = true;
    const stopAt = during
      ? during.then(() => (running = false))
      : Bun.sleep(seconds * 1000).then(() => (running = false));
    const t0 = performance.now();
    while (running) {
      await complete(servers[0]!.url, 8);
      tokens += 8;
    }
    await stopAt;
    return tokens / ((performance.now() - t0) / 1000);
  };
  const v = ++version;
  t.command(`c10d ${v}`);
  const transfer = Promise.all([
    ...servers.map((s) => post(s.url, "/update_weights", { version: v, transfer: "c10d" })),
    t.next(),
  ]);
  const tStart = performance.now();
  const busy = await decodeRate(transfer, 0);
  const idle = await decodeRate(null, (performance.now() - tStart) / 1000);
  t.command("quit");
  t.stop();
  return { results, busy, idle };
}

const info = await runtimeInfo();
const cpu = (await Bun.file("/proc/cpuinfo").text()).match(/model name\s*:\s*(.*)/)?.[1] ?? "unknown CPU";
console.log(`${cpu}, libtorch ${info.torch_version}; ${preset} as ${dtype} on ${device}; ${rounds} rounds (medians)\n`);
const table: (string | number)[][] = [
  ["servers", "path", "total s", "trainer s", "servers s", "first completion s", "disk / c10d"],
];
const decode: (string | number)[][] = [["servers", "decode tok/s, no transfer", "during a transfer", "ratio"]];
try {
  for (const n of serverCounts) {
    const servers: ServeProcess[] = [];
    for (let i = 0; i < n; i++)
      servers.push(
        await startServe(
          [
            ...["--model", modelDir, "--policy", "--weights-root", weightsRoot],
            ...["--dtype", dtype, "--device", device, "--max-batch", "4", "--max-model-len", "64"],
          ],
          300_000,
        ),
      );
    try {
      const { results, busy, idle } = await bench(servers);
      const m = (rows: Split[], key: keyof Split) => median(rows.map((r) => r[key]));
      const ratio = m(results.disk, "total") / m(results.c10d, "total");
      for (const path of ["disk", "c10d"] as const)
        table.push([
          n,
          path,
          m(results[path], "total").toFixed(2),
          m(results[path], "trainer").toFixed(2),
          m(results[path], "servers").toFixed(2),
          m(results[path], "first").toFixed(2),
          path === "c10d" ? `${ratio.toFixed(2)}x` : "",
        ]);
      decode.push([n, idle.toFixed(1), busy.toFixed(1), (busy / idle).toFixed(2)]);
    } finally {
      for (const s of servers) await s.stop();
    }
  }
} finally {
  rmSync(root, { recursive: true, force: true });
}
printTable(table);
console.log("");
printTable(decode);
