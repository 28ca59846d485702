// The stale drop of the step loop (sampleGroups): a group sampled by weights older than
// max_off_policy_steps is dropped, counted and replaced by a fresh group; rollouts from a frozen
// source never go stale; a policy stuck on old weights aborts the run instead of looping forever.
// The real rollout driver, env and algorithm run against a scripted client that reports versions.
import { expect, test } from "bun:test";
import { mkdtempSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { loadConfig } from "../../../src/config/load.ts";
import { createEnv, loadEnv } from "../../../src/envs/index.ts";
import type { Completion, CompletionRequest, SamplingClient } from "../../../src/inference/types.ts";
import {
  byteGenerationConfig,
  byteTokenizerConfig,
  byteTokenizerJson,
  IM_END_ID,
} from "../../../src/model/byte_tokenizer.ts";
import { ChatRenderer } from "../../../src/model/render.ts";
import { Tokenizer } from "../../../src/model/tokenizer.ts";
import { type CollectContext, MAX_EMPTY_BATCHES, sampleGroups } from "../../../src/orchestrator/collect.ts";
import { createEnvAlgorithms } from "../../../src/orchestrator/setup.ts";
import { Progress } from "../../../src/orchestrator/metrics.ts";
import { TaskSampler } from "../../../src/orchestrator/sampler.ts";
import { LETTERS_ENV } from "../../e2e/train_helpers.ts";

const tokenizer = new Tokenizer(byteTokenizerJson(), byteTokenizerConfig(), byteGenerationConfig());

/** Replies "ab" then "xyz" alternately (rewards differ), reporting version(callIndex). */
class Versioned implements SamplingClient {
  calls = 0;
  constructor(private readonly version: (call: number) => number) {}
  async complete(_: CompletionRequest): Promise<Completion> {
    const call = this.calls++;
    const tokenIds = [...tokenizer.encodePlain(call % 2 ? "ab1" : "xyz"), IM_END_ID];
    return { tokenIds, logprobs: tokenIds.map(() => -1), finishReason: "stop", policyVersion: this.version(call) };
  }
  async score(): Promise<number[][]> {
    throw new Error("unused");
  }
}

async function setup(client: SamplingClient, frozen = false) {
  const dir = mkdtempSync(join(tmpdir(), "rlx-stale-"));
  const envPath = join(dir, "letters.ts");
  writeFileSync(envPath, LETTERS_ENV);
  const toml = join(dir, "run.toml");
  writeFileSync(
    toml,
    `model = { path = "unused" }\nmax_steps = 10\n[orchestrator]\nbatch_size = 4\ngroup_size = 2\nmax_off_policy_steps = 2\n[[orchestrator.train.env]]\nid = ${JSON.stringify(envPath)}\nname = "letters"\n`,
  );
  const { config } = loadConfig(toml);
  const { algorithms } = await createEnvAlgorithms(config, toml);
  const resolved = config.orchestrator.train.env[0]!;
  const env = await createEnv(await loadEnv(envPath), {});
  const tasks = await env.load("train", 0);
  const o = {
    config,
    envs: [
      {
        resolved,
        env,
        tasks,
        algorithm: algorithms.get("letters")!,
        algoName: "grpo",
        lossType: "rl" as const,
        client,
        frozen,
      },
    ],
    renderer: new ChatRenderer(tokenizer),
    warn: () => {},
  } as CollectContext;
  const sampler = new TaskSampler([{ name: "letters", ratio: 1, groupSize: 2, tasks }], 0);
  return { o, sampler };
}

test("groups older than max_off_policy_steps are dropped, counted and replaced", async () => {
  // step 5, max_off_policy_steps 2: versions >= 2 are fresh; the first two groups come back at version 1
  const client = new Versioned((call) => (call < 4 ? 1 : 3));
  const { o, sampler } = await setup(client);
  const { groups, dropped } = await sampleGroups(5, o, sampler, new Progress());
  expect(dropped).toBe(4);
  expect(groups.map((g) => g.map((r) => r.policyVersion))).toEqual([
    [3, 3],
    [3, 3],
  ]);
  expect(groups.map((g) => g[0]!.groupId)).toEqual(["letters/g2", "letters/g3"]); // dropped groups used up their tasks
  expect(groups.flat().every((r) => typeof r.advantage === "number")).toBe(true);
  expect(sampler.snapshot().groups).toBe(4);
});

test("a version exactly max_off_policy_steps behind is still fresh", async () => {
  const { o, sampler } = await setup(new Versioned(() => 2));
  expect((await sampleGroups(5, o, sampler, new Progress())).dropped).toBe(0);
});

test("rollouts from a frozen sampling source never go stale", async () => {
  const { o, sampler } = await setup(new Versioned(() => 0), true);
  const { groups, dropped } = await sampleGroups(9, o, sampler, new Progress());
  expect(dropped).toBe(0);
  expect(groups.length).toBe(2);
});

test("a policy stuck on old weights aborts the run with the reason", async () => {
  const client = new Versioned(() => 0);
  const { o, sampler } = await setup(client);
  await expect(sampleGroups(5, o, sampler, new Progress())).rejects.toThrow(
    `step 5: ${MAX_EMPTY_BATCHES * 4} rollouts in a row were sampled by weights older than version 2 (max_off_policy_steps 2); the last by version 0`,
  );
});
