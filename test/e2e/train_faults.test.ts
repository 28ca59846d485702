// Faults injected into real runs: a SIGTERM (a scheduler's pre-emption) checkpoints the
// last finished step so the resumed run loses at most the step in flight; the trainer SIGKILLed
// mid-step (as the OOM killer does) stops the run naming it, and --resume continues; a step file
// damaged on disk is refused by its checksum before a token of it is trained; and the disk filling
// up while a checkpoint or the weights are written (a real ENOSPC, from a tmpfs as small as the
// run needs; root only) stops the run with a DiskError that names the write, leaves nothing
// partial to be taken as whole, and --resume continues once there is space.
import { expect, test } from "bun:test";
import { existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, statSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { loadConfig, resolvedToml } from "../../src/config/load.ts";
import { packStep } from "../../src/data/pack.ts";
import { writeStepBatch } from "../../src/rundir/step_file.ts";
import {
  processesMentioning,
  readMetrics,
  rlx,
  until,
  untilWhileRunning,
  writeConfig,
  sharedWorkspace,
} from "./train_helpers.ts";

const ws = sharedWorkspace();

const body = (steps: number, interval: number) => `max_steps = ${steps}
[orchestrator]
batch_size = 4
group_size = 2
seq_len = 96
max_tokens = 6
filter_zero_advantages = false
[ckpt]
interval = ${interval}
keep = 2
[[orchestrator.train.env]]
id = ${JSON.stringify(ws.lettersEnv)}
`;

const published = (runDir: string) =>
  existsSync(join(runDir, "weights"))
    ? readdirSync(join(runDir, "weights"))
        .filter((name) => existsSync(join(runDir, "weights", name, "published.json")))
        .map((name) => Number(name.slice("step_".length)))
    : [];
const checkpoints = (runDir: string) =>
  existsSync(join(runDir, "checkpoints")) ? readdirSync(join(runDir, "checkpoints")).sort() : [];

for (const shard of ["none", "full"] as const) {
  // "full": two ranks, each writing its slices; they agree at each step whether to go on
  const ranks = shard === "full" ? ["--set", "trainer.world_size=2", "--set", 'trainer.shard="full"'] : [];
  const trainerLog = shard === "full" ? "logs/trainer-0.log" : "logs/trainer.log";
  test(`SIGTERM checkpoints the last finished step; --resume continues from it (shard ${shard})`, async () => {
    // 40 steps: SIGTERM comes after step 3, and on an idle machine 8 steps were over before it landed
    // (the last step is always checkpointed, so the SIGTERM had nothing left to write)
    const { path, runDir } = writeConfig(ws, `sigterm-${shard}`, body(40, 0));
    const args = ["train", path, "--inference", "in-process", ...ranks];
    const run = rlx(args);
    await untilWhileRunning(run, () => published(runDir).includes(3), 120_000, "step 3 published");
    run.proc.kill("SIGTERM");
    const stopped = await run.done;
    expect(stopped.code).toBe(143);
    await until(() => processesMentioning(runDir).length === 0, 30_000, "no process of the run left", 50);
    // with ckpt.interval = 0 nothing but the SIGTERM wrote a checkpoint: it is of the last step published
    const last = Math.max(...published(runDir));
    expect(checkpoints(runDir)).toEqual([`step_${last}`]);
    expect(readFileSync(join(runDir, trainerLog), "utf8")).toContain(`SIGTERM: wrote the checkpoint of step ${last}`);

    const resumed = await rlx([...args, "--resume"]).done;
    expect(resumed.code).toBe(0);
    const loaded = shard === "full" ? " (its shards)" : "/trainer/model";
    expect(readFileSync(join(runDir, trainerLog), "utf8")).toContain(
      `checkpoints/step_${last}${loaded} loaded, training steps ${last + 1}..40`,
    );
    expect(last).toBeLessThan(40);
    expect(readMetrics(runDir).map((row) => row.step)).toEqual(Array.from({ length: 40 }, (_, i) => i + 1));
  }, 300_000);
}

test("the trainer SIGKILLed mid-step stops the run naming it; --resume continues", async () => {
  const { path, runDir } = writeConfig(ws, "oom", body(4, 2));
  const args = ["train", path, "--inference", "in-process"];
  const run = rlx(args);
  await untilWhileRunning(
    run,
    () => checkpoints(runDir).includes("step_2") && existsSync(join(runDir, "batches/step_3.bin")),
    120_000,
    "checkpoint 2 and step file 3",
    1,
  );
  for (const pid of processesMentioning(`trainer --run-dir ${runDir}`)) process.kill(pid, "SIGKILL");
  const failed = await run.done;
  expect(failed.code).toBe(1);
  expect(failed.err).toContain("the trainer process");
  expect(failed.err).toContain("was killed by SIGKILL");
  await until(() => processesMentioning(runDir).length === 0, 30_000, "no process of the run left", 50);

  const resumed = await rlx([...args, "--resume"]).done;
  expect(resumed.code).toBe(0);
  expect(readMetrics(runDir).map((row) => row.step)).toEqual([1, 2, 3, 4]);
  expect(readFileSync(join(runDir, "logs/trainer.log"), "utf8")).toContain(
    "step_2/trainer/model loaded, training steps 3..4",
  );
}, 300_000);

test("a resumed run outlives the checkpoint it resumed from (ckpt.keep = 1)", async () => {
  // found by scripts/two_nodes.sh: the trainer took config.json and the tokenizer files for every
  // publish from the checkpoint it resumed from, and failed once that checkpoint was pruned
  const { path, runDir } = writeConfig(ws, "keep1", body(2, 2).replace("keep = 2", "keep = 1"));
  const args = ["train", path, "--inference", "in-process"];
  expect((await rlx(args).done).code).toBe(0);
  const resumed = await rlx([...args, "--resume", "--set", "max_steps=5"]).done;
  expect(resumed.err).not.toContain("error:");
  expect(resumed.code).toBe(0);
  expect(readMetrics(runDir).map((row) => row.step)).toEqual([1, 2, 3, 4, 5]);
  expect(checkpoints(runDir)).toEqual(["step_5"]);
}, 300_000);

test("a step file damaged on disk is refused by the trainer, naming it, before it trains", async () => {
  const { path, runDir } = writeConfig(ws, "damaged-step", body(1, 0));
  mkdirSync(join(runDir, "batches"), { recursive: true });
  writeFileSync(join(runDir, "config.resolved.toml"), resolvedToml(loadConfig(path).config));
  const tokens = Array.from({ length: 24 }, (_, i) => 40 + (i % 20));
  const packed = packStep(
    [
      {
        tokenIds: tokens,
        lossMask: tokens.map((_, i) => (i >= 12 ? 1 : 0)),
        advantages: tokens.map((_, i) => (i >= 12 ? 0.5 : 0)),
        inferenceLogprobs: tokens.map((_, i) => (i >= 12 ? -5 : 0)),
        temperatures: tokens.map(() => 1),
        env: "letters",
        rolloutId: "g0/r0",
      },
    ],
    { seqLen: 96 },
  );
  const rows = packed.rows.map((row) => ({ ...row, samples: row.samples.map((s) => ({ ...s, policyVersion: 0 })) }));
  const file = join(runDir, "batches/step_1.bin");
  writeStepBatch(file, { step: 1, packed: { ...packed, rows }, state: { format: 1, step: 1 } });
  // one bit of the first action token's advantage (0.5 becomes 2^127): a value the trainer would
  // otherwise take as it is
  const bytes = new Uint8Array(readFileSync(file));
  const headerLength = new DataView(bytes.buffer).getUint32(8, true);
  const header = JSON.parse(new TextDecoder().decode(bytes.subarray(16, 16 + headerLength)));
  bytes[16 + headerLength + header.rows[0].arrays.advantages.offset + 12 * 4 + 3]! ^= 0x40;
  writeFileSync(file, bytes);

  const trainer = await rlx(["trainer", "--run-dir", runDir]).done;
  expect(trainer.code).toBe(1);
  expect(trainer.err).toContain(`error: ${file}: checksum mismatch`);
  expect(trainer.err).toContain("the step file was truncated or damaged after it was written");
  expect(existsSync(join(runDir, "weights/step_1"))).toBe(false); // nothing was trained or published
}, 120_000);

/** Mounts a tmpfs of `bytes` at a fresh directory; undefined where this process may not mount. */
function tmpfs(bytes: number): string | undefined {
  const dir = mkdtempSync(join(tmpdir(), "rlx-tmpfs-"));
  const mount = Bun.spawnSync(["mount", "-t", "tmpfs", "-o", `size=${bytes}`, "tmpfs", dir], { stderr: "pipe" });
  return mount.exitCode === 0 ? dir : undefined;
}
const unmount = (dir: string) => Bun.spawnSync(["umount", dir]);
const canMount = (() => {
  const dir = tmpfs(1 << 20);
  if (dir) unmount(dir);
  return dir !== undefined;
})();

for (const [what, size] of [
  ["a checkpoint", 8.5],
  ["a weight publish", 6.5],
] as const) {
  test.skipIf(!canMount)(
    `the disk fills up during ${what}: a DiskError, nothing partial, --resume continues`,
    async () => {
      // W = one f32 weights directory; a checkpoint is ~3 W. Steps 1-2 hold weights 2 W and
      // checkpoint 2 3 W; steps 3-4 add 2 W of weights (7 W), then checkpoint 4 needs 3 W more:
      // a disk of 8.5 W ends inside checkpoint 4, one of 6.5 W inside the weights of step 4.
      const W = statSync(join(ws.model, "model.safetensors")).size;
      const mount = tmpfs(Math.round(size * W + 2 ** 20))!;
      try {
        const { path } = writeConfig(ws, `enospc-${size}`, body(4, 2));
        const runDir = join(mount, "run");
        const args = ["train", path, "--inference", "in-process", "--set", `output_dir=${runDir}`];
        const full = await rlx(args).done;
        expect(full.code).toBe(1);
        expect(full.err).toMatch(
          what === "a checkpoint"
            ? /writing the checkpoint \S+checkpoints\/step_4 failed: the disk is full \(ENOSPC\); the partial files were removed/
            : /publishing \S+weights\/step_4 failed: the disk is full \(ENOSPC\); the partial files were removed/,
        );
        expect(full.err).toContain("continue with rlx train CONFIG --resume");
        await until(() => processesMentioning(runDir).length === 0, 30_000, "no process of the run left", 50);
        // nothing partial that could be taken as whole: no tmp directory, step 4 never published
        expect(checkpoints(runDir)).toEqual(["step_2"]);
        for (const dir of ["weights", "checkpoints"])
          expect(readdirSync(join(runDir, dir)).filter((name) => name.includes(".tmp-"))).toEqual([]);
        expect(published(runDir)).not.toContain(4);
        expect((await rlx(["check", runDir]).done).code).toBe(0);

        Bun.spawnSync(["mount", "-o", `remount,size=${20 * W}`, mount]); // space is freed
        const resumed = await rlx([...args, "--resume"]).done;
        expect(resumed.code).toBe(0);
        expect(readMetrics(runDir).map((row) => row.step)).toEqual([1, 2, 3, 4]);
        expect(checkpoints(runDir)).toEqual(["step_2", "step_4"]);
      } finally {
        unmount(mount);
      }
    },
    300_000,
  );
}
