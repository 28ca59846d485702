// The async bounds, read from what was actually trained (the audit records carry each sample's
// policy version; batch N is trained by a trainer holding weights N-1):
//   - max_async_level = 1: every trained sample is at most one version behind the trainer's, and
//     the overlap really happens (some step trains on samples one version old);
//   - max_off_policy_steps = 0: nothing stale is trained, every sample comes from weights N-1.
import { expect, test } from "bun:test";
import { readAudit, readMetrics, rlx, writeConfig, sharedWorkspace } from "./train_helpers.ts";

const ws = sharedWorkspace();

function config(extra: string): string {
  return `max_steps = 5
[trainer.optim]
lr = 1e-4
[orchestrator]
batch_size = 8
group_size = 4
seq_len = 128
max_tokens = 8
${extra}
[[orchestrator.train.env]]
id = ${JSON.stringify(ws.lettersEnv)}
name = "letters"
`;
}

async function trainedVersions(name: string, extra: string): Promise<{ lag: number[]; offPolicyMax: number[] }> {
  const { path, runDir } = writeConfig(ws, name, config(extra));
  const { code, err } = await rlx(["train", path, "--inference", "in-process"]).done;
  expect(err).not.toContain("error:");
  expect(code).toBe(0);
  const lag = [...readAudit(runDir).values()].flat().map((r) => r.step - 1 - r.policy_version);
  return { lag, offPolicyMax: readMetrics(runDir).map((row) => row["off_policy/max"]!) };
}

test("max_async_level = 1: samples are at most one version behind the trainer, and some are", async () => {
  const { lag, offPolicyMax } = await trainedVersions("async1", "max_async_level = 1");
  expect(lag.length).toBeGreaterThan(0);
  expect(Math.min(...lag)).toBeGreaterThanOrEqual(0);
  expect(Math.max(...lag)).toBe(1);
  expect(Math.max(...offPolicyMax)).toBe(1);
}, 120_000);

test("max_off_policy_steps = 0: every sample comes from the trainer's current weights", async () => {
  const { lag, offPolicyMax } = await trainedVersions("offpolicy0", "max_async_level = 2\nmax_off_policy_steps = 0");
  expect(lag.length).toBeGreaterThan(0);
  expect(new Set(lag)).toEqual(new Set([0]));
  expect(offPolicyMax).toEqual([0, 0, 0, 0, 0]);
}, 120_000);
