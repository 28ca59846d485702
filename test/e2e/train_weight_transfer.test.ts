// inference.weight_transfer = "c10d" (docs/engines.md, "Weights in memory") in real runs:
//   - a deterministic run (the policy in-process) gives the same weights at every step and the same
//     non-timing metrics with "disk" and "c10d", and its trainer did send every step;
//   - with two spawned policy servers, each step reaches both over their channels; weights/step_N/
//     holds only the marker except every publish_every steps and at the last step;
//   - a policy server that dies stops the run with an error naming it, and under ckpt.max_restarts
//     the run resumes from its checkpoint over fresh channels and finishes;
//   - a policy that never joins its channel fails the trainer within transfer_timeout_s, naming it;
//   - /weight_channel, like every weight route, refuses a request without the server's key.
import { expect, test } from "bun:test";
import { createHash } from "node:crypto";
import { existsSync, readdirSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { readMetrics, rlx, sharedWorkspace, until, untilWhileRunning, writeConfig } from "./train_helpers.ts";

const ws = sharedWorkspace();
const digest = (path: string) => createHash("sha256").update(readFileSync(path)).digest("hex");
const timing = (key: string) => key === "time" || key.startsWith("time/") || key.startsWith("throughput/");

const body = (extra: string, orchestrator = "") => `
[trainer.optim]
lr = 3e-3
[orchestrator]
${orchestrator}
batch_size = 8
group_size = 4
seq_len = 128
max_tokens = 12
[[orchestrator.train.env]]
id = ${JSON.stringify(ws.lettersEnv)}
name = "letters"
${extra}`;

const trainerLog = (runDir: string) => readFileSync(join(runDir, "logs", "trainer.log"), "utf8");

test("a deterministic run gives the same weights and metrics with disk and c10d", async () => {
  const results = [];
  for (const transfer of ["disk", "c10d"]) {
    const { path, runDir } = writeConfig(
      ws,
      `det-${transfer}`,
      `max_steps = 3\ndeterministic = true\n${body(
        `[inference]
weight_transfer = "${transfer}"
[ckpt]
interval = 1
keep = 3`,
        "max_async_level = 0",
      )}`,
    );
    const { code, err } = await rlx(["train", path]).done;
    expect(err).not.toContain("error:");
    expect(code).toBe(0);
    const weights = [1, 2, 3].map((s) => digest(join(runDir, "weights", `step_${s}`, "model.safetensors")));
    const metrics = readMetrics(runDir).map((row) => Object.entries(row).filter(([key]) => !timing(key)));
    results.push({ weights, metrics, log: trainerLog(runDir) });
  }
  const [disk, c10d] = results;
  expect(c10d!.weights).toEqual(disk!.weights);
  expect(new Set(disk!.weights).size).toBe(3); // it trained: every step moved the weights
  expect(c10d!.metrics).toEqual(disk!.metrics);
  expect(c10d!.log).toContain("1 weight channel joined (gloo)");
  expect(c10d!.log.match(/step \d+ .* sent [\d.]+ MiB/g)).toHaveLength(3);
  expect(disk!.log).not.toContain("sent");
}, 240_000);

test("two spawned servers receive every step; directories only every publish_every steps and at the end", async () => {
  const { path, runDir } = writeConfig(
    ws,
    "two-servers",
    `max_steps = 3\n${body(`[inference]
servers = 2
port = ${20000 + (process.pid % 20000)}
weight_transfer = "c10d"
publish_every = 2`)}`,
  );
  const { code, err } = await rlx(["train", path]).done;
  expect(err).not.toContain("error:");
  expect(code).toBe(0);
  expect(trainerLog(runDir)).toContain("2 weight channels joined (gloo)");
  const files = (step: number) => readdirSync(join(runDir, "weights", `step_${step}`)).sort();
  expect(files(1)).toEqual(["published.json"]);
  expect(files(2)).toContain("model.safetensors");
  expect(files(3)).toContain("model.safetensors");
  const marker = JSON.parse(readFileSync(join(runDir, "weights", "step_1", "published.json"), "utf8"));
  expect(marker.transfer).toBe("c10d");
  // both servers served every version: each logged its receives
  for (const i of [0, 1]) {
    const log = readFileSync(join(runDir, "logs", `policy-${i}.log`), "utf8");
    expect(log).not.toContain("failed");
  }
  const rows = readMetrics(runDir);
  expect(rows.map((r) => r.step)).toEqual([1, 2, 3]);
  expect(rows.every((r) => r["time/reload"] === undefined || r["time/reload"] >= 0)).toBe(true);
}, 240_000);

test("a policy server that dies stops the run naming it; with max_restarts the run resumes and finishes", async () => {
  const { path, runDir } = writeConfig(
    ws,
    "server-dies",
    `max_steps = 4\n${body(
      `[inference]
servers = 1
port = ${21000 + (process.pid % 20000)}
weight_transfer = "c10d"
[ckpt]
interval = 1
max_restarts = 1
restart_backoff_s = 0`,
      "max_async_level = 1",
    )}`,
  );
  const run = rlx(["train", path]);
  const marker = join(runDir, "weights", "step_1", "published.json");
  await untilWhileRunning(run, () => existsSync(marker), 120_000, "step 1's marker");
  const policyPid = () => {
    const ps = Bun.spawnSync(["ps", "-eo", "pid=,args="], { stdout: "pipe" }).stdout.toString();
    const line = ps.split("\n").find((l) => l.includes(" serve ") && l.includes(runDir));
    return line ? Number(line.trim().split(/\s+/)[0]) : undefined;
  };
  await until(() => policyPid() !== undefined, 30_000, "the policy server");
  process.kill(policyPid()!, "SIGKILL");
  const { code, out, err } = await run.done;
  if (code !== 0) console.log(out, err);
  expect(code).toBe(0);
  expect(out + err).toMatch(/policy-0/); // the restart names the child that died
  expect(out + err).toMatch(/restart/i);
  expect(readMetrics(runDir).at(-1)!.step).toBe(4);
}, 300_000);

test("a policy that never joins its channel fails the trainer within the timeout, naming it", async () => {
  // an "rlx serve" stand-in: lists a model and accepts /weight_channel, but never joins; its
  // completions never answer, so the trainer's failure is the run's first
  const fake = Bun.serve({
    port: 0,
    idleTimeout: 0,
    fetch(request) {
      const path = new URL(request.url).pathname;
      if (path === "/v1/models") return Response.json({ data: [{ id: "policy" }] });
      if (path === "/weight_channel") return Response.json({ status: "joining" });
      return new Promise<Response>(() => {});
    },
  });
  try {
    const { path, runDir } = writeConfig(
      ws,
      "never-joins",
      `max_steps = 2\n${body(`[inference]
base_urls = ["http://127.0.0.1:${fake.port}/v1"]
weight_transfer = "c10d"
transfer_timeout_s = 3`)}`,
    );
    const start = performance.now();
    const { code, out, err } = await rlx(["train", path]).done;
    expect(code).not.toBe(0);
    expect(out + err).toContain("policy process 0 did not join its weight channel tcp://127.0.0.1:");
    expect(performance.now() - start).toBeLessThan(90_000);
    expect(existsSync(join(runDir, "weights", "step_1", "published.json"))).toBe(false);
  } finally {
    fake.stop(true);
  }
}, 120_000);
