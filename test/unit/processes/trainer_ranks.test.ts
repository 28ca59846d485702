// How rlx train starts its trainer ranks (src/processes/trainer_ranks.ts): the world-size-1 launch is
// the one rlx train always made, N ranks get the same store and their own --rank, the threads are
// split over every compute child on the machine, stores survive the command line, and partial
// launches (several nodes) need a fixed TCP rendezvous.
import { afterAll, expect, test } from "bun:test";
import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { loadConfig } from "../../../src/config/load.ts";
import {
  configuredStore,
  launchLine,
  localRanks,
  parseStore,
  planLaunch,
  storeArg,
  sharesCores,
  threadShare,
} from "../../../src/processes/trainer_ranks.ts";
import { CORE_SHARE_ENV } from "../../../src/native/core_share.ts";
import { assertPortFree, policyLimits } from "../../../src/processes/policy_start.ts";
import { readModelConfig } from "../../../src/model/config.ts";
import { microModelDir } from "../../fixtures/serve_model.ts";
import { ConfigError } from "../../../src/errors.ts";

const dir = mkdtempSync(join(tmpdir(), "rlx-launch-"));
afterAll(() => rmSync(dir, { recursive: true, force: true }));
const toml = join(dir, "run.toml");
writeFileSync(toml, 'model = { path = "unused" }\n[[orchestrator.train.env]]\nid = "math"\n');
const config = (...overrides: string[]) => loadConfig(toml, overrides).config;
const runDir = join(dir, "run");

test("world size 1: one child named trainer, the same arguments and threads as before ranks existed", () => {
  const plain = planLaunch(config("trainer.share_cores=false"), { runDir, policyProcesses: 1, cores: 8 });
  expect(plain.trainers).toEqual([
    {
      name: "trainer",
      args: ["trainer", "--run-dir", runDir, "--parent-pid", String(process.pid)],
      env: {},
      mayExit: true,
    },
  ]);
  expect(plain.serverThreads).toBeUndefined();
  expect(plain.store).toBeUndefined();
  expect(plain.coreShare).toBeUndefined();
  const threaded = planLaunch(config("trainer.threads=3"), {
    runDir,
    resumeFrom: "/ck/step_2",
    policyProcesses: 1,
    cores: 8,
  });
  expect(threaded.trainers[0]!.env).toEqual({ RLX_THREADS: "3" });
  expect(threaded.trainers[0]!.args.slice(-2)).toEqual(["--resume-from", "/ck/step_2"]);
});

test("one trainer and one policy on the CPU hand the cores over through a file both children get", () => {
  mkdirSync(runDir, { recursive: true });
  const launch = planLaunch(config(), { runDir, policyProcesses: 1, cores: 8 });
  const path = join(runDir, "core_share");
  expect(launch.coreShare).toBe(path);
  expect(launch.trainers[0]!.env).toEqual({ [CORE_SHARE_ENV]: path });
  expect([...readFileSync(path)]).toEqual([0, 0]); // neither busy
  expect(launch.serverThreads).toBeUndefined();
  const on = (overrides: string[], policyProcesses = 1, cores = 8) =>
    sharesCores(config(...overrides), policyProcesses, cores);
  expect(on([])).toBe(true);
  expect(on(["inference.device=cpu"])).toBe(true);
  // anyone who fixed the threads, or nothing to hand over, or not on this CPU: no sharing
  expect(on(["trainer.share_cores=false"])).toBe(false);
  expect(on(["trainer.threads=2"])).toBe(false);
  expect(on(["deterministic=true", "orchestrator.max_async_level=0"])).toBe(false);
  expect(on(["trainer.world_size=2"])).toBe(false);
  expect(on(["trainer.device=cuda"])).toBe(false);
  expect(on(["inference.device=cuda"])).toBe(false);
  expect(on([], 0)).toBe(false); // external servers
  expect(on([], 2)).toBe(false); // two policy servers: the static split
  expect(on([], 1, 1)).toBe(false);
});

test("N ranks: same store, own rank, named for errors", () => {
  const launch = planLaunch(config("trainer.world_size=3"), { runDir, policyProcesses: 2, cores: 10 });
  expect(launch.trainers.map((t) => t.name)).toEqual(["trainer-0", "trainer-1", "trainer-2"]);
  expect(launch.trainers.map((t) => t.describe)).toEqual(["rank 0 of 3", "rank 1 of 3", "rank 2 of 3"]);
  expect(launch.store?.type).toBe("tcp");
  const stores = launch.trainers.map((t) => t.args[t.args.indexOf("--store") + 1]);
  expect(new Set(stores).size).toBe(1);
  expect(stores[0]).toMatch(/^tcp:\/\/127\.0\.0\.1:[1-9]\d*$/);
  expect(launch.trainers.map((t) => t.args[t.args.indexOf("--rank") + 1])).toEqual(["0", "1", "2"]);
  // 10 cores over 3 ranks + 2 servers
  expect(launch.trainers.map((t) => t.env?.RLX_THREADS)).toEqual(["2", "2", "2"]);
  expect(launch.serverThreads).toBe(2);
});

test("a file store is a fresh path in the run directory per launch", async () => {
  const c = config("trainer.world_size=2", 'trainer.dist.store="file"');
  const first = planLaunch(c, { runDir, policyProcesses: 1 }).store;
  await Bun.sleep(2);
  const second = planLaunch(c, { runDir, policyProcesses: 1 }).store;
  expect(first?.type).toBe("file");
  expect(second?.type).toBe("file");
  if (first?.type !== "file" || second?.type !== "file") return;
  expect(first.path).not.toBe(second.path);
  expect(first.path.startsWith(join(runDir, "c10d/store-"))).toBe(true);
  expect(existsSync(join(runDir, "c10d"))).toBe(true);
});

test("threads: cores over every compute child, at least one; trainer.threads wins for the ranks", () => {
  expect(threadShare(config(), 1, 1, 2)).toEqual({ trainer: undefined, server: undefined });
  expect(threadShare(config(), 1, 0, 2)).toEqual({ trainer: undefined, server: undefined });
  expect(threadShare(config(), 1, 2, 2)).toEqual({ trainer: 1, server: 1 });
  expect(threadShare(config("trainer.world_size=2"), 2, 2, 2)).toEqual({ trainer: 1, server: 1 });
  expect(threadShare(config("trainer.world_size=2"), 2, 1, 16)).toEqual({ trainer: 5, server: 5 });
  expect(threadShare(config("trainer.world_size=2", "trainer.threads=4"), 2, 0, 16)).toEqual({ trainer: 4, server: 8 });
});

test("stores round-trip through the command line; bad ones are named", () => {
  for (const store of [
    { type: "tcp", host: "10.0.0.5", port: 29500 },
    { type: "file", path: "/shared/run/c10d/store-1" },
  ] as const) {
    expect(parseStore(storeArg(store))).toEqual(store);
  }
  expect(() => parseStore("10.0.0.5:29500")).toThrow(
    "--store 10.0.0.5:29500: expected tcp://HOST:PORT or file:///PATH",
  );
  expect(configuredStore(config("trainer.dist.master_addr=10.0.0.5", "trainer.dist.master_port=29500"))).toEqual({
    type: "tcp",
    host: "10.0.0.5",
    port: 29500,
  });
  expect(() => configuredStore(config())).toThrow("no fixed rendezvous");
});

test("local_ranks: a subset starts here, with a fixed TCP rendezvous only", () => {
  const c = config(
    "trainer.world_size=4",
    "trainer.dist.local_ranks=[0, 1]",
    "trainer.dist.master_addr=10.0.0.5",
    "trainer.dist.master_port=29500",
  );
  const launch = planLaunch(c, { runDir, policyProcesses: 1, cores: 6 });
  expect(launch.trainers.map((t) => t.name)).toEqual(["trainer-0", "trainer-1"]);
  expect(launch.trainers[0]!.args).toContain("tcp://10.0.0.5:29500");
  expect(launch.trainers[0]!.env?.RLX_THREADS).toBe("2"); // 6 cores over the 2 local ranks + 1 policy
  expect(() =>
    planLaunch(config("trainer.world_size=4", "trainer.dist.local_ranks=[0]"), { runDir, policyProcesses: 1 }),
  ).toThrow("need a fixed rendezvous");
  expect(() => localRanks(config("trainer.world_size=2", "trainer.dist.local_ranks=[0, 2]"))).toThrow(
    "rank 2 is not below world_size 2",
  );
  expect(() => localRanks(config("trainer.world_size=2", "trainer.dist.local_ranks=[1, 1]"))).toThrow(
    "lists a rank twice",
  );
});

test('trainer.dist.launcher = "external": rlx train starts no rank and picks no store', () => {
  for (const world of [1, 4]) {
    const c = config(`trainer.world_size=${world}`, "trainer.dist.launcher=external");
    const launch = planLaunch(c, { runDir, policyProcesses: 1, cores: 6 });
    expect(launch.trainers).toEqual([]);
    expect(launch.store).toBeUndefined();
    expect(launch.coreShare).toBeUndefined();
    expect(launchLine(c, launch)).toContain(`all ${world} ranks are started by a launcher`);
  }
});

test("a spawned policy server's port already in use is a ConfigError naming inference.port, not another run's server", () => {
  const other = Bun.serve({ hostname: "127.0.0.1", port: 0, fetch: () => new Response("ok") });
  const port = other.port!;
  try {
    expect(() => assertPortFree("127.0.0.1", port)).toThrow(
      new ConfigError(`inference.port: 127.0.0.1:${port} is in use (another rlx train or server?)`),
    );
  } finally {
    other.stop(true);
  }
  expect(() => assertPortFree("127.0.0.1", port)).not.toThrow();
});

test("inference.kv_tokens: the policy's K/V budget, refused naming the key when it cannot hold one sequence", async () => {
  const model = await microModelDir({ dir: join(dir, "micro") });
  const maxModelLen = Math.min(64 + 512, readModelConfig(model).shim.max_position_embeddings);
  expect(policyLimits(config("orchestrator.seq_len=64"), model)).toEqual({ maxModelLen });
  expect(policyLimits(config("orchestrator.seq_len=64", "inference.kv_tokens=5000"), model)).toEqual({
    maxModelLen,
    kvTokens: 5000,
  });
  expect(() =>
    policyLimits(config("orchestrator.seq_len=64", `inference.kv_tokens=${maxModelLen - 1}`), model),
  ).toThrow(`inference.kv_tokens = ${maxModelLen - 1} cannot hold one sequence`);
});
