// `rlx trainer` under a real torchrun (Debian's python3-torch: `python3 -m torch.distributed.run`,
// torch 1.x's spelling of the flags): `rlx train` runs the orchestrator and its policy server with
// trainer.dist.launcher = "external", torchrun starts the two ranks with its static rendezvous (its
// agent serves a store on MASTER_PORT, so rank 0 serves on trainer.dist.master_port:
// src/processes/launch_env.ts), and each rank places itself from RANK, WORLD_SIZE and MASTER_ADDR.
// Skipped, saying so, where python3 has no torch.
import { expect, test } from "bun:test";
import { existsSync } from "node:fs";
import { join } from "node:path";
import {
  freePort,
  processesMentioning,
  readMetrics,
  rlx,
  ROOT,
  sharedWorkspace,
  until,
  untilWhileRunning,
  writeConfig,
} from "./train_helpers.ts";

const ws = sharedWorkspace();
// Debian's python3 (python3-torch), as the other tests that run torch (RLX_BENCH_PYTHON to choose another)
const PYTHON = process.env.RLX_BENCH_PYTHON ?? "/usr/bin/python3";
const hasTorchrun = Bun.spawnSync([PYTHON, "-c", "import torch.distributed.run"]).exitCode === 0;
if (!hasTorchrun) console.warn(`train_torchrun: skipped, ${PYTHON} cannot import torch.distributed.run`);

test.skipIf(!hasTorchrun)(
  "two ranks torchrun starts train a run rlx train orchestrates",
  async () => {
    const STEPS = 3;
    const { path, runDir } = writeConfig(
      ws,
      "torchrun",
      `max_steps = ${STEPS}
[trainer]
world_size = 2
[trainer.dist]
launcher = "external"
master_port = ${freePort()}
timeout_s = 60
[orchestrator]
batch_size = 8
group_size = 2
seq_len = 128
max_tokens = 8
filter_zero_advantages = false
[inference]
port = ${freePort()}
[[orchestrator.train.env]]
id = ${JSON.stringify(ws.lettersEnv)}
name = "letters"
`,
    );
    const run = rlx(["train", path, "--inference", "spawn"]);
    await untilWhileRunning(run, () => existsSync(join(runDir, "config.resolved.toml")), 60_000, "the config", 50);
    const agentPort = String(freePort());
    const torchrun = Bun.spawn(
      [PYTHON, "-m", "torch.distributed.run", "--nproc_per_node", "2", "--master_addr", "127.0.0.1"]
        // --redirects/--tee 1 (stdout): torch 1.13's parser turns the default "0" into None on Python 3.11
        .concat(["--redirects", "1", "--tee", "1", "--log_dir", join(ws.dir, "torchrun-logs")])
        .concat(["--master_port", agentPort, "--no_python", process.execPath, join(ROOT, "src/main.ts")])
        .concat(["trainer", "--run-dir", runDir]),
      { stdout: "pipe", stderr: "pipe", env: { ...process.env, RLX_THREADS: "1" } },
    );
    const [train, ranksOut, ranksErr, ranksCode] = await Promise.all([
      run.done,
      new Response(torchrun.stdout).text(),
      new Response(torchrun.stderr).text(),
      torchrun.exited,
    ]);
    expect(train.err).not.toContain("error:");
    expect(train.code).toBe(0);
    expect(`${ranksErr}`).not.toContain("error:");
    expect(ranksCode).toBe(0);
    // both ranks, placed by torchrun's variables, met over Gloo and trained every step
    for (const rank of [0, 1])
      expect(ranksOut).toContain(
        `trainer rank ${rank}: ${ws.model} loaded, training steps 1..${STEPS} (2 ranks, gloo)`,
      );
    expect(readMetrics(runDir).map((row) => row.step)).toEqual([1, 2, 3]);
    expect(existsSync(join(runDir, "weights", `step_${STEPS}`, "published.json"))).toBe(true);
    await until(() => processesMentioning(runDir).length === 0, 30_000, "no process of the run left", 50);
  },
  300_000,
);
