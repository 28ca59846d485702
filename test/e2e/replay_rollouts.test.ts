// `rlx replay --rollouts` on an asynchronous run (max_async_level = 2, two spawned policy servers,
// in-flight weight swaps, prefix caching on, cores shared with the trainer): every step's rollouts
// regenerate bit for bit from the servers' schedule records, tokens sampled by several weights
// versions among them; one element perturbed in a published weight is found at the first step,
// rollout and token that version sampled, with exit code 1. The element is the final norm's first
// weight: it moves every logit of every token that version samples (one element of lm_head would
// move only one vocabulary entry's logit, which may not change a sampled token's float32 logprob),
// and no K/V a later version reads. The same run killed with SIGKILL mid-way
// and resumed replays bit for bit, each step from the record of the server that sampled it.
//
// Every other episode opens PAUSE_MS late, longer than a trainer step of this size takes: so the
// trainer publishes a version between a step's two waves of episodes whichever side is faster on
// the machine (without the pause tiny samples a step faster than it trains one, and every step's
// rollouts come from the one version loaded when it began). A swap in the middle of a sequence is
// replayed in test/unit/replay/schedule_replay.test.ts.
import { expect, test } from "bun:test";
import { existsSync, readdirSync, readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import type { RolloutReplay } from "../../src/replay/rollouts.ts";
import { type Checksums, checksumFile, CHECKSUMS_FILE, checksumsFileText } from "../../src/model/checksums.ts";
import {
  perturbFirstElement,
  processesMentioning,
  rlx,
  sharedWorkspace,
  until,
  untilWhileRunning,
  writeConfig,
} from "./train_helpers.ts";

const ws = sharedWorkspace();
const STEPS = 8;
const PAUSE_MS = 1000;

/** Letters, with every other episode's session opened after PAUSE_MS. */
const TWO_WAVES_ENV = `
export default {
  id: "letters_waves",
  description: "reward = share of lowercase letters in the reply; every other episode starts late",
  create() {
    let opened = 0;
    return {
      tools: [],
      maxTurns: 1,
      async load(split) {
        return Array.from({ length: 30 }, (_, i) => ({ id: split + "-" + i, prompt: [{ role: "user", content: "Write some letters, " + i + "." }], answer: "" }));
      },
      async open() {
        if (opened++ % 2 === 1) await Bun.sleep(${PAUSE_MS});
        return {
          async step(reply) {
            const text = reply.content;
            const letters = [...text].filter((c) => c >= "a" && c <= "z").length;
            return { messages: [], reward: text.length ? letters / text.length : 0, done: true };
          },
          async close() {},
        };
      },
      reward(_task, rollout) {
        return rollout.info.envReward;
      },
    };
  },
};
`;

const config = (port: number, extra = "") => `max_steps = ${STEPS}
[trainer.optim]
lr = 3e-3
[orchestrator]
batch_size = 8
group_size = 4
seq_len = 256
max_tokens = 12
max_async_level = 2
[inference]
servers = 2
max_batch = 6
port = ${port}
[ckpt]
keep_steps = true
${extra}
[log]
rollouts_interval = 1
[[orchestrator.train.env]]
id = ${JSON.stringify(envFile())}
`;

function envFile(): string {
  const file = join(ws.dir, "letters_waves.ts");
  if (!existsSync(file)) writeFileSync(file, TWO_WAVES_ENV);
  return file;
}

async function replay(runDir: string, step: number): Promise<{ code: number; result?: RolloutReplay; err: string }> {
  const done = await rlx(["replay", runDir, "--step", String(step), "--rollouts", "--json"]).done;
  return { code: done.code, err: done.err, ...(done.out.trim() ? { result: JSON.parse(done.out) } : {}) };
}

/** Replays every step's rollouts, each bit for bit: its 8 samples' requests all found and equal. */
async function replayEveryStep(runDir: string): Promise<RolloutReplay[]> {
  const results: RolloutReplay[] = [];
  for (let step = 1; step <= STEPS; step++) {
    const { code, result, err } = await replay(runDir, step);
    expect(err).not.toContain("error");
    expect(code).toBe(0);
    expect(result!.first).toBeUndefined();
    expect(result!.unmatched).toEqual([]);
    expect([result!.samples, result!.requests]).toEqual([8, 8]);
    expect(result!.tokens).toBeGreaterThan(8);
    results.push(result!);
  }
  return results;
}

/** Adds 5e-2 to the first element of a float32 tensor of a model directory's safetensors file, in
 * place, and writes its checksum anew: weights that differ from those the policy sampled with, yet
 * load (as a faulty transfer would have given the policy other bytes than the trainer kept). */
function perturb(dir: string, name: string): void {
  const file = join(dir, "model.safetensors");
  perturbFirstElement(file, name, 5e-2);
  const checksums = JSON.parse(readFileSync(join(dir, CHECKSUMS_FILE), "utf8")) as { files: Checksums };
  checksums.files["model.safetensors"] = checksumFile(file);
  writeFileSync(join(dir, CHECKSUMS_FILE), checksumsFileText(checksums.files));
}

test("an asynchronous run's rollouts replay bit for bit; a perturbed weight is found where it sampled", async () => {
  const { path, runDir } = writeConfig(ws, "replay_rollouts", config(18731));
  expect((await rlx(["train", path, "--inference", "spawn"]).done).code).toBe(0);
  expect(readdirSync(join(runDir, "schedule")).sort()).toEqual([
    expect.stringMatching(/^policy-0-\d+\.jsonl$/),
    expect.stringMatching(/^policy-1-\d+\.jsonl$/),
  ]);

  const clean = await replayEveryStep(runDir);
  // the run sampled with stale weights, and some rollouts with more than one version
  const versions = new Set(clean.flatMap((r) => r.versions));
  expect(versions.size).toBeGreaterThan(3);
  expect(clean.some((r) => r.versions.length > 1)).toBe(true);

  const damaged = 3;
  const firstUse = clean.findIndex((r) => r.versions.includes(damaged)) + 1;
  expect(firstUse).toBeGreaterThan(0);
  perturb(join(runDir, `weights/step_${damaged}`), "model.norm.weight");
  for (let step = 1; step < firstUse; step++) expect((await replay(runDir, step)).code).toBe(0);
  const found = await replay(runDir, firstUse);
  expect(found.code).toBe(1);
  const { rollout_id, sample_index, position, version } = found.result!.first!;
  expect(version).toBe(damaged);
  // at a token where the damaged version began sampling in the clean replay
  expect(clean[firstUse - 1]!.versionStarts).toContainEqual({ rollout_id, sample_index, position, version });
});

test("a run killed with SIGKILL and resumed replays every step bit for bit", async () => {
  const { path, runDir } = writeConfig(ws, "replay_resumed", config(18751, "interval = 3"));
  const args = ["train", path, "--inference", "spawn"];
  const run = rlx(args);
  await untilWhileRunning(run, () => existsSync(join(runDir, "rollouts/step_5.jsonl")), 120_000, "step 5");
  run.proc.kill("SIGKILL");
  await run.done;
  await until(() => processesMentioning(runDir).length === 0, 30_000, "no process of the run left", 50);
  expect((await rlx([...args, "--resume"]).done).code).toBe(0);
  expect(readdirSync(join(runDir, "schedule")).length).toBe(4); // two servers, started twice

  const replayed = await replayEveryStep(runDir);
  expect(new Set(replayed.flatMap((r) => r.records.map((record) => record.path))).size).toBe(4); // both starts'
});
