// `rlx train` with two data-parallel trainer ranks (Gloo over a c10d store) and two spawned policy
// servers, end to end on CPU: every step trained by both ranks with the whole step's all-reduced
// metrics, only rank 0 publishing, both servers moved to each version; a rank killed mid-run ends
// the run at once with an error naming that rank and quoting its last lines, and --resume
// restarts both ranks from the last checkpoint; a rank that stops answering fails the others
// after trainer.dist.timeout_s instead of hanging the run; two ranks of one replica split every
// row (trainer.context_parallel) and train together.
import { expect, test } from "bun:test";
import { existsSync, readdirSync, readFileSync } from "node:fs";
import { cpus } from "node:os";
import { join } from "node:path";
import {
  freePort,
  processesMentioning,
  readMetrics,
  rlx,
  until,
  untilWhileRunning,
  writeConfig,
  sharedWorkspace,
} from "./train_helpers.ts";

const ws = sharedWorkspace();

/** A configs/debug.toml-sized run over the letters env (math rewards are all 0 on a random model). */
function config(name: string, port: number, extra = "") {
  return writeConfig(
    ws,
    name,
    `${extra}
[trainer]
world_size = 2
[trainer.optim]
lr = 1e-4
[orchestrator]
batch_size = 8
group_size = 4
seq_len = 256
max_tokens = 16
[inference]
servers = 2
port = ${port}
[[orchestrator.train.env]]
id = ${JSON.stringify(ws.lettersEnv)}
name = "letters"
`,
  );
}

/** Processes of this file's runs (orchestrators, trainer ranks, servers): all name the workspace. */
const leftovers = () => processesMentioning(ws.dir);
const published = (runDir: string, step: number) => existsSync(join(runDir, `weights/step_${step}/published.json`));
const rankPids = (runDir: string, rank: number) =>
  processesMentioning(`trainer --run-dir ${runDir} `).filter((pid) =>
    readFileSync(`/proc/${pid}/cmdline`, "utf8").includes(`--rank\0${rank}\0`),
  );
const stepLines = (log: string) =>
  [...log.matchAll(/: step (\d+) loss (\S+)/g)].map((m) => [Number(m[1]), Number(m[2])]);

/** The API key of the spawned policy servers (rlx train takes $RLX_API_KEY when it is set). */
const POLICY_KEY = "ranks-test-key";

/** The policy_version each server reports, polled until `stop` resolves. */
async function watchVersions(ports: number[], stop: Promise<unknown>): Promise<number[][]> {
  const seen = ports.map(() => [] as number[]);
  let done = false;
  void stop.finally(() => (done = true));
  while (!done) {
    await Promise.all(
      ports.map(async (port, i) => {
        try {
          const list = (await (
            await fetch(`http://127.0.0.1:${port}/v1/models`, {
              signal: AbortSignal.timeout(500),
              headers: { authorization: `Bearer ${POLICY_KEY}` },
            })
          ).json()) as { data: Array<{ policy_version?: number }> };
          const version = list.data[0]?.policy_version;
          if (version !== undefined && seen[i]!.at(-1) !== version) seen[i]!.push(version);
        } catch {}
      }),
    );
    await Bun.sleep(10);
  }
  return seen;
}

test("two trainer ranks and two policy servers train a debug run end to end", async () => {
  const port = freePort(2);
  const { path, runDir } = config("two", port, "max_steps = 3");
  const run = rlx(["train", path], undefined, { RLX_API_KEY: POLICY_KEY }); // the spawned servers' key

  const versions = await watchVersions([port, port + 1], run.done);
  const { code, out, err } = await run.done;
  expect(err).not.toContain("error");
  expect(code).toBe(0);

  // every step once, trained by both ranks: the whole step's metrics on both, rank 0's in the line
  const metrics = readMetrics(runDir);
  expect(metrics.map((m) => m.step)).toEqual([1, 2, 3]);
  const logs = [0, 1].map((rank) => readFileSync(join(runDir, `logs/trainer-${rank}.log`), "utf8"));
  for (const log of logs) expect(log).toContain(`${ws.model} loaded, training steps 1..3 (2 ranks, gloo)`);
  const [lines0, lines1] = logs.map(stepLines);
  expect(lines0!.map(([step]) => step)).toEqual([1, 2, 3]);
  expect(lines1).toEqual(lines0!);
  for (const m of metrics) {
    expect(m.world_size).toBe(2);
    expect(m.loss).toBeCloseTo(lines0![m.step - 1]![1]!, 4);
    expect(m["count/rl"]).toBeGreaterThan(0);
    expect(m["balance/max_over_mean"]).toBeGreaterThanOrEqual(1);
    expect(m["balance/dummies"]).toBe(0);
  }
  // rank 0 alone publishes: weights, the final checkpoint, step files consumed
  expect(logs[1]).not.toContain("grad_norm");
  expect(readdirSync(join(runDir, "checkpoints"))).toEqual(["step_3"]);
  expect(readdirSync(join(runDir, "batches"))).toEqual([]);

  // both servers moved forward through the versions (the last one may land as the run stops)
  for (const seen of versions) {
    expect(seen[0]).toBe(0);
    expect(seen.at(-1)).toBeGreaterThanOrEqual(2);
    expect(seen).toEqual([...seen].sort((a, b) => a - b));
  }
  expect(out).toContain("report: rlx report");
  await until(() => leftovers().length === 0, 30_000, "every child to exit", 50);
}, 180_000);

test("a rank killed mid-step ends the run naming it; --resume restarts both ranks from the checkpoint", async () => {
  // the timeout a dead rank must not wait for, set here: 600 s
  const { path, runDir } = config(
    "kill",
    freePort(2),
    "max_steps = 4\nckpt = { interval = 2 }\n[trainer.dist]\ntimeout_s = 600",
  );
  // Rank 1 is frozen after step 2, so rank 0 goes into step 3 alone and waits at its first
  // collective; then rank 1 dies. Rank 0 fails at once too, but the run must name rank 1. Step 3's
  // file is written only once step 2 is published (max_async_level 0): one written ahead let rank 1
  // train step 3 with rank 0 before it was frozen.
  const sync = ["--set", "orchestrator.max_async_level=0"];
  const run = rlx(["train", path, ...sync]);
  await untilWhileRunning(run, () => published(runDir, 2), 60_000, "step 2 to be published", 2);
  // Rank 0 publishes; rank 1's own step-2 line may still be on its way to the log.
  const rank1Log = join(runDir, "logs/trainer-1.log");
  await untilWhileRunning(
    run,
    () => existsSync(rank1Log) && readFileSync(rank1Log, "utf8").includes("trainer rank 1: step 2 loss"),
    60_000,
    "rank 1's step-2 line",
    2,
  );
  const [rank1] = rankPids(runDir, 1);
  process.kill(rank1!, "SIGSTOP");
  await untilWhileRunning(run, () => existsSync(join(runDir, "batches/step_3.bin")), 60_000, "step 3's file", 2);
  await Bun.sleep(300);
  const killedAt = performance.now();
  process.kill(rank1!, "SIGKILL");
  const { code, err } = await run.done;
  // at once, not after trainer.dist.timeout_s: a tenth of it leaves room for any load
  expect(performance.now() - killedAt).toBeLessThan(60_000);
  expect(code).toBe(1);
  expect(err).toContain("error: the trainer-1 process (rank 1 of 2) was killed by SIGKILL; its last lines:");
  expect(err).toContain("  | trainer rank 1: step 2 loss");
  expect(err).toContain(`fix: the whole log is ${join(runDir, "logs/trainer-1.log")}`);
  await until(() => leftovers().length === 0, 30_000, "every child to exit", 50);

  // resume over a file store this time: a fresh store file per launch
  const resumed = await rlx(["train", path, ...sync, "--resume", "--set", 'trainer.dist.store="file"']).done;
  expect(resumed.err).not.toContain("error");
  expect(resumed.code).toBe(0);
  expect(existsSync(join(runDir, "c10d"))).toBe(true);
  expect(readMetrics(runDir).map((m) => m.step)).toEqual([1, 2, 3, 4]);
  for (const rank of [0, 1]) {
    const log = readFileSync(join(runDir, `logs/trainer-${rank}.log`), "utf8");
    expect(log).toContain(
      `${join(runDir, "checkpoints/step_2")}/trainer/model loaded, training steps 3..4 (2 ranks, gloo)`,
    );
    expect(log.slice(log.lastIndexOf("loaded, training steps 3..4"))).toMatch(/step 3 loss[^]*step 4 loss/);
  }
  expect(readdirSync(join(runDir, "checkpoints")).sort()).toEqual(["step_2", "step_4"]);
  await until(() => leftovers().length === 0, 30_000, "every child to exit", 50);
}, 400_000);

test("a rank that stops answering fails the run after trainer.dist.timeout_s, without a hang", async () => {
  // 10 s: the ranks must also join within it, both starting beside two policy servers on a loaded machine
  const { path, runDir } = config("stuck", freePort(2), "max_steps = 50\n[trainer.dist]\ntimeout_s = 10");
  const run = rlx(["train", path]);
  await untilWhileRunning(run, () => published(runDir, 1), 60_000, "step 1 to be published", 10);
  // four compute children share the cores: each trainer rank and policy server gets cores / 4 threads, at least 1
  const threads = String(Math.max(1, Math.floor(cpus().length / 4)));
  const children = leftovers().filter((pid) =>
    /\0(trainer|serve)\0/.test(readFileSync(`/proc/${pid}/cmdline`, "utf8")),
  );
  expect(children.length).toBe(4);
  for (const pid of children)
    expect(readFileSync(`/proc/${pid}/environ`, "utf8").split("\0")).toContain(`RLX_THREADS=${threads}`);
  const stoppedAt = performance.now();
  for (const pid of rankPids(runDir, 1)) process.kill(pid, "SIGSTOP");
  const { code, err } = await run.done;
  const seconds = (performance.now() - stoppedAt) / 1000;
  // Rank 0 may have been waiting at its collective before the stop, by as much as rank 1 lagged
  // behind it; after the timeout, the run's stop takes its grace periods (SIGTERM, then SIGKILL for
  // the stopped rank). A hang would never end.
  expect(seconds).toBeGreaterThan(5);
  expect(seconds).toBeLessThan(60);
  expect(code).toBe(1);
  expect(err).toContain("error: the trainer-0 process (rank 0 of 2) exited with code 1; its last lines:");
  expect(err).toContain("did not reach the same call within timeout_ms = 10000");
  // the stopped rank ignores SIGTERM; the grace period's SIGKILL ends it
  await until(() => leftovers().length === 0, 30_000, "every child to exit", 50);
}, 180_000);

test('trainer.shard = "full": two ranks train, publish and checkpoint; a rank killed ends the run naming it; --resume continues on one rank', async () => {
  const { path, runDir } = config("full", freePort(2), "max_steps = 4\nckpt = { interval = 2 }");
  const sets = ["--set", "orchestrator.max_async_level=0", "--set", 'trainer.shard="full"'];
  const run = rlx(["train", path, ...sets]);
  await untilWhileRunning(run, () => published(runDir, 2), 60_000, "step 2 to be published", 2);
  await untilWhileRunning(run, () => existsSync(join(runDir, "batches/step_3.bin")), 60_000, "step 3's file", 2);
  const [rank1] = rankPids(runDir, 1);
  process.kill(rank1!, "SIGKILL");
  const { code, err } = await run.done;
  expect(code).toBe(1);
  expect(err).toContain("error: the trainer-1 process (rank 1 of 2) was killed by SIGKILL");
  await until(() => leftovers().length === 0, 30_000, "every child to exit", 50);
  for (const rank of [0, 1])
    expect(readFileSync(join(runDir, `logs/trainer-${rank}.log`), "utf8")).toContain(
      `${ws.model} loaded, training steps 1..4 (2 ranks, gloo, shard full)`,
    );
  // every rank wrote its slices into checkpoint 2; the published weights are whole
  const shards = readdirSync(join(runDir, "checkpoints/step_2/trainer/shards")).sort();
  expect(shards).toEqual(["rank_0.optimizer.bin", "rank_0.weights.bin", "rank_1.optimizer.bin", "rank_1.weights.bin"]);
  expect(readdirSync(join(runDir, "weights/step_2"))).toContain("model.safetensors");
  // and holds them, linked: what a resumed run's policy starts from
  expect(readdirSync(join(runDir, "checkpoints/step_2/trainer/model"))).toContain("model.safetensors");

  // one rank now: the two ranks' slices reshard into one
  const resumed = await rlx(["train", path, ...sets, "--resume", "--set", "trainer.world_size=1"]).done;
  expect(resumed.err).not.toContain("error");
  expect(resumed.code).toBe(0);
  expect(readMetrics(runDir).map((m) => m.step)).toEqual([1, 2, 3, 4]);
  const log = readFileSync(join(runDir, "logs/trainer.log"), "utf8");
  expect(log).toContain(
    `${join(runDir, "checkpoints/step_2")} (its shards) loaded, training steps 3..4 (1 rank, gloo, shard full)`,
  );
  expect(log.slice(log.lastIndexOf("training steps 3..4"))).toMatch(/step 3 loss[^]*step 4 loss/);
  expect(readdirSync(join(runDir, "checkpoints/step_4/trainer/shards")).sort()).toEqual([
    "rank_0.optimizer.bin",
    "rank_0.weights.bin",
  ]);
  await until(() => leftovers().length === 0, 30_000, "every child to exit", 50);
}, 400_000);

test("trainer.context_parallel = 2: two ranks split every row, train and checkpoint; --resume goes on with one rank", async () => {
  const { path, runDir } = config("context", freePort(2), "max_steps = 3\nckpt = { interval = 2 }");
  const sets = ["--set", "orchestrator.max_async_level=0", "--set", "trainer.context_parallel=2"];
  const { code, err } = await rlx(["train", path, ...sets, "--set", "max_steps=2"]).done;
  expect(err).not.toContain("error");
  expect(code).toBe(0);
  const logs = [0, 1].map((rank) => readFileSync(join(runDir, `logs/trainer-${rank}.log`), "utf8"));
  for (const log of logs)
    expect(log).toContain(`${ws.model} loaded, training steps 1..2 (2 ranks, gloo, context parallel 2)`);
  // both ranks of the one replica computed the same whole-row loss; each step's counts were the
  // step's own (ranks.ts refuses a step whose ranks' counts differ from it)
  const [lines0, lines1] = logs.map(stepLines);
  expect(lines0!.map(([step]) => step)).toEqual([1, 2]);
  expect(lines1).toEqual(lines0!);
  for (const m of readMetrics(runDir)) {
    expect(m.context_parallel).toBe(2);
    expect(m["count/rl"]).toBeGreaterThan(0);
  }
  const resumed = await rlx([
    "train",
    path,
    ...sets,
    "--resume",
    "--set",
    "trainer.world_size=1",
    "--set",
    "trainer.context_parallel=1",
  ]).done;
  expect(resumed.err).not.toContain("error");
  expect(resumed.code).toBe(0);
  expect(readMetrics(runDir).map((m) => m.step)).toEqual([1, 2, 3]);
  await until(() => leftovers().length === 0, 30_000, "every child to exit", 50);
}, 300_000);
