// Shared by the sampler tests: tasks, finished groups with given rewards and versions (the fields
// samplers and task statistics read), and one env's sampler built as `rlx train` builds it.
import type { Rollout, Task } from "../../../src/data/types.ts";
import type { SamplerContext } from "../../../src/task_samplers/base.ts";
import { parseSamplerConfig } from "../../../src/task_samplers/registry.ts";
import { createSampler } from "../../../src/task_samplers/registry.ts";
import { TaskStats } from "../../../src/task_samplers/stats.ts";

export const tasks = (n: number): Task[] =>
  Array.from({ length: n }, (_, i) => ({ id: `t${i}`, prompt: [], answer: "" }));

/** A finished group of `taskId`: one rollout per reward, sampled by `version`. */
export function group(taskId: string, rewards_G: number[], version = 0): Rollout[] {
  return rewards_G.map((reward, i) => ({
    id: `${taskId}/v${version}/r${i}`,
    env: "e",
    taskId,
    groupId: `${taskId}/v${version}`,
    task: { id: taskId, prompt: [], answer: "" },
    messages: [],
    segments: [],
    numSamples: 1,
    reward,
    metrics: {},
    stopReason: "done",
    policyVersion: version,
    numTurns: 1,
    info: {},
  }));
}

/** One env's sampler from a sampler block, over `n` tasks, with its task statistics. */
export async function samplerOf(block: Record<string, unknown>, n = 10, run = { batchSize: 8, maxOffPolicySteps: 8 }) {
  const site = { source: "run.toml", path: ["orchestrator", "sampler"] };
  const config = parseSamplerConfig(block, site);
  const stats = new TaskStats(config.pass_reward);
  const ctx: SamplerContext = { env: "e", tasks: tasks(n), seed: 0, groupSize: 4, batchSize: run.batchSize, stats };
  return { sampler: await createSampler(config, ctx, site, run), stats, ctx };
}
