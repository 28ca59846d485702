// Shared by the collect-level tests (the stale drop, the admission gate, replay): one train env
// (a custom env file) set up the way `rlx train` sets it up (config resolved from TOML, its
// algorithm, its sampler and task statistics), the real rollout driver, and scripted sampling
// clients, so sampleGroups and collectStep run for real without a model.
import { mkdtempSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { loadConfig } from "../../../src/config/load.ts";
import { createEnv, loadEnv } from "../../../src/envs/index.ts";
import type { Completion, CompletionRequest, SamplingClient } from "../../../src/clients/types.ts";
import {
  byteGenerationConfig,
  byteTokenizerConfig,
  byteTokenizerJson,
  IM_END_ID,
} from "../../../src/model/byte_tokenizer.ts";
import { ChatRenderer } from "../../../src/model/render.ts";
import { Tokenizer } from "../../../src/model/tokenizer.ts";
import { BarrierBook } from "../../../src/orchestrator/barriers.ts";
import type { CollectContext } from "../../../src/orchestrator/groups.ts";
import { taskSamplerState } from "../../../src/orchestrator/task_sampler.ts";
import { createEnvAlgorithms, createEnvSampler, rewardGate, type TrainEnv } from "../../../src/orchestrator/setup.ts";

export const tokenizer = new Tokenizer(byteTokenizerJson(), byteTokenizerConfig(), byteGenerationConfig());

/** Replies with `text(call)` and reports `version(call)` as the weights that sampled it. */
export class Scripted implements SamplingClient {
  calls = 0;
  constructor(
    private readonly text: (call: number, prompt: string) => string,
    private readonly version: (call: number) => number = () => 0,
  ) {}
  async complete(request: CompletionRequest): Promise<Completion> {
    const call = this.calls++;
    const prompt = String.fromCharCode(...request.promptIds.filter((t) => t < 256));
    const tokenIds = [...tokenizer.encodePlain(this.text(call, prompt)), IM_END_ID];
    return { tokenIds, logprobs: tokenIds.map(() => -1), finishReason: "stop", policyVersion: this.version(call) };
  }
  async score(): Promise<number[][]> {
    throw new Error("unused");
  }
}

/** The collect context and run-level sampler of one env from `envFile`, configured by `orchestrator` (TOML lines). */
export async function harness(o: {
  envFile: string;
  client: SamplingClient;
  orchestrator: string;
  envExtra?: string;
  frozen?: boolean;
  seed?: number;
}) {
  const dir = mkdtempSync(join(tmpdir(), "rlx-collect-"));
  const toml = join(dir, "run.toml");
  writeFileSync(
    toml,
    `model = { path = "unused" }\nmax_steps = 10\nseed = ${o.seed ?? 0}\n[orchestrator]\n${o.orchestrator}\n[[orchestrator.train.env]]\nid = ${JSON.stringify(o.envFile)}\nname = "letters"\n${o.envExtra ?? ""}\n`,
  );
  const { config } = loadConfig(toml);
  const { algorithms } = await createEnvAlgorithms(config, toml);
  const resolved = config.orchestrator.train.env[0]!;
  const env = await createEnv(await loadEnv(o.envFile), {});
  const tasks = await env.load("train", config.seed);
  const { sampler: envSampler, stats } = await createEnvSampler(config, toml, 0, tasks);
  const train: TrainEnv = {
    resolved,
    env,
    tasks,
    algorithm: algorithms.get("letters")!,
    algoName: "grpo",
    lossType: "rl",
    client: o.client,
    frozen: o.frozen ?? false,
    sampler: envSampler,
    stats,
    rewardGate: rewardGate(resolved),
    barriers: new BarrierBook(
      new Map([["", algorithms.get("letters")!]]),
      () => "",
      config.orchestrator.max_off_policy_steps,
    ),
  };
  const ctx: CollectContext = { config, envs: [train], renderer: new ChatRenderer(tokenizer), warn: () => {} };
  return { o: ctx, ...taskSamplerState([train], config.seed, config.max_steps), train, dir };
}
