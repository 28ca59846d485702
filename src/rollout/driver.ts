// The rollout driver: one task, one sampling client, one episode. It renders the task prompt,
// asks the client for a completion as token ids with logprobs, parses the completion into an
// assistant message, runs its tool calls, appends the observations, and repeats until the model
// answers without a tool call or the env's turn limit is reached. The result is a Rollout
// (src/data/types.ts) with one segment per run of tokens (sequence.ts keeps them: tokens in, tokens
// out). A step-driven env (`open`) answers each turn itself instead of the tools, with a reward per
// step; an env-driven one (`drive`) runs the whole episode against an endpoint (served.ts).
//
// Failure is data: a tool or an env's step that throws, a malformed completion record, the context
// limit, the time limit, or a reward that throws or runs past its gate's timeout (a judge:
// src/judges/) give a rollout with `error` set and the reason (excluded from training; its reward 0
// is a placeholder).
// The reward is computed here, as the episode ends, so judging one rollout overlaps the generation
// of the others. Only a bug in this file could throw out of runRollout.
import type { ChatMessage } from "../data/chat.ts";
import type { ChatRenderer, RenderOptions } from "../model/render.ts";
import { malformedCallObservation, runToolCall } from "../envs/tools.ts";
import type { Env, EnvReward, RewardResult, StepResult, Task } from "../envs/types.ts";
import { CallTimeout, type CallGate } from "../clients/gate.ts";
import type { SamplingClient } from "../clients/types.ts";
import type { Rollout } from "../data/types.ts";
import {
  type ContextLimitPolicy,
  endsAtContext,
  RolloutLimit,
  RolloutTokens,
  raceDeadline,
  type SamplingParams,
} from "./sequence.ts";
import { driveServed } from "./served.ts";

export type { SamplingParams } from "./sequence.ts";

export interface RolloutRequest {
  id: string;
  groupId: string;
  envId: string;
  env: Env;
  task: Task;
  client: SamplingClient;
  renderer: ChatRenderer;
  sampling: SamplingParams;
  /** Longest token sequence of one sample (prompt + completions), e.g. the trainer's seq_len. */
  maxContextTokens?: number;
  /** A later turn's prompt past maxContextTokens: fail the rollout ("error", default) or end it there. */
  contextLimit?: ContextLimitPolicy;
  /** Wall-clock limit for the whole episode. */
  timeoutMs?: number;
  /** Extra chat-template variables, e.g. `{ enable_thinking: false }` for Qwen3. */
  templateArgs?: Record<string, unknown>;
  /** The env's reward gate (concurrency limit and timeout); absent = the reward is called directly. */
  rewardGate?: CallGate;
}

async function drive(
  req: RolloutRequest,
  rollout: Rollout,
  counters: Record<string, number>,
  deadline: number,
): Promise<void> {
  const { env, renderer, task } = req;
  const maxContext = req.maxContextTokens ?? Number.POSITIVE_INFINITY;
  const options: RenderOptions = {
    tools: env.tools.map((tool) => tool.spec),
    addGenerationPrompt: true,
    templateArgs: req.templateArgs,
  };
  const abort = new AbortController(); // a step still running when the rollout ends is cut off
  const opening = env.open?.(task);
  // A session that opens after the deadline is closed then: it holds one of the env's slots.
  const session = opening
    ? await raceDeadline(opening, deadline).catch((err) => {
        void opening.then((late) => late.close()).catch(() => {});
        throw err;
      })
    : undefined;
  try {
    if (session?.prompt) rollout.messages = [...session.prompt];
    const tokens = new RolloutTokens(rollout, renderer);
    tokens.render(options);

    for (let turn = 0; ; turn++) {
      let completion;
      try {
        completion = await raceDeadline(tokens.next(req.client, req.sampling, maxContext), deadline);
      } catch (err) {
        if (endsAtContext(err, req.contextLimit, rollout.numTurns)) return void (rollout.stopReason = "context");
        throw err;
      }
      const parsed = tokens.sampled(completion, req.sampling.temperature, session !== undefined);
      const truncated = completion.finishReason === "length";

      if (session) {
        counters.malformed_tool_calls! += parsed.blocks.filter((block) => "error" in block).length;
        const step = await raceDeadline(session.step(parsed.message, abort.signal), deadline);
        addStep(rollout, step);
        if (truncated) return void (rollout.stopReason = "length");
        if (step.done) return void (rollout.stopReason = "done");
        if (step.messages.length === 0)
          throw new Error(`env ${req.envId} answered a turn with no messages and done = false`);
        rollout.messages.push(...step.messages);
      } else {
        if (truncated) return void (rollout.stopReason = "length");
        if (env.tools.length === 0 || parsed.blocks.length === 0) return void (rollout.stopReason = "done");
        for (const block of parsed.blocks) {
          if ("error" in block) {
            rollout.messages.push(malformedCallObservation(block.error));
            counters.malformed_tool_calls!++;
            counters.tool_errors!++;
            continue;
          }
          const observation = await raceDeadline(runToolCall(env.tools, block.call, task), deadline);
          rollout.messages.push(observation.message);
          counters.tool_calls!++;
          if (observation.isError) counters.tool_errors!++;
        }
      }

      const lastTurn = turn + 1 >= env.maxTurns;
      tokens.extend(completion, { ...options, addGenerationPrompt: !lastTurn });
      if (lastTurn) return void (rollout.stopReason = "max_turns");
    }
  } finally {
    abort.abort();
    void session?.close().catch(() => {}); // not awaited: the rollout is over, the server may be slow
  }
}

/** Adds a step-driven env's step to the reward its episode gives (rollout.info.envReward). */
function addStep(rollout: Rollout, step: StepResult): void {
  if (!Number.isFinite(step.reward)) throw new Error(`the env gave a step a non-finite reward (${step.reward})`);
  const total = (rollout.info.envReward as EnvReward | undefined) ?? { reward: 0, metrics: {} };
  rollout.info.envReward = { reward: total.reward + step.reward, metrics: { ...total.metrics, ...step.metrics } };
}

/** A reward that threw, rejected or timed out (the message says which). */
class RewardFailure extends Error {}

/** The env's reward of a finished episode, through the env's gate when there is one. */
async function scoreReward(req: RolloutRequest, rollout: Rollout): Promise<RewardResult> {
  try {
    const gate = req.rewardGate;
    return gate
      ? await gate.run((signal) => req.env.reward(req.task, rollout, { signal }))
      : await req.env.reward(req.task, rollout);
  } catch (err) {
    const judge = (err as { judge?: Rollout["judge"] } | undefined)?.judge;
    if (judge) rollout.judge = judge;
    if (err instanceof CallTimeout)
      throw new RewardFailure(`reward ${err.message} (the env's reward.timeout_s; env ${req.envId})`);
    throw new RewardFailure(`reward failed: ${err instanceof Error ? err.message : String(err)}`);
  }
}

/** Runs one episode. Never throws for env, tool, client or limit failures: see `Rollout.error`. */
export async function runRollout(req: RolloutRequest): Promise<Rollout> {
  const rollout: Rollout = {
    id: req.id,
    env: req.envId,
    taskId: req.task.id,
    groupId: req.groupId,
    task: req.task,
    messages: [...req.task.prompt] as ChatMessage[],
    segments: [],
    numSamples: 1,
    reward: 0,
    metrics: {},
    stopReason: "done",
    policyVersion: -1,
    numTurns: 0,
    info: {},
  };
  // Counts of the tool calls rlx runs; an env that answers turns itself reports its own, and rlx
  // counts the calls that did not parse (sent to the env as their text).
  const runsTools = !req.env.open && !req.env.drive;
  const counters: Record<string, number> = runsTools
    ? { tool_calls: 0, tool_errors: 0, malformed_tool_calls: 0 }
    : { malformed_tool_calls: 0 };
  const deadline = req.timeoutMs === undefined ? Number.POSITIVE_INFINITY : performance.now() + req.timeoutMs;
  const started = performance.now();
  try {
    await (req.env.drive ? driveServed(req, rollout, counters, deadline) : drive(req, rollout, counters, deadline));
    rollout.numSamples = 1 + (rollout.info.extensionBreaks as unknown[]).length;
    const { reward, metrics, judge } = await scoreReward(req, rollout);
    if (judge) rollout.judge = judge;
    if (!Number.isFinite(reward)) throw new Error(`env ${req.envId} returned a non-finite reward (${reward})`);
    rollout.reward = reward;
    rollout.metrics = {
      ...counters,
      num_turns: rollout.numTurns,
      truncated: rollout.stopReason === "done" ? 0 : 1,
      ...metrics,
    };
  } catch (err) {
    const message = err instanceof Error ? err.message : String(err);
    rollout.error =
      err instanceof RolloutLimit && req.timeoutMs !== undefined && message.includes("timed out")
        ? `${message} (timeout ${req.timeoutMs} ms)`
        : message;
    rollout.stopReason = "error";
    rollout.reward = 0;
    rollout.numSamples = 1 + ((rollout.info.extensionBreaks as unknown[] | undefined)?.length ?? 0);
    rollout.metrics = { ...counters, num_turns: rollout.numTurns, error: 1 };
  }
  rollout.info.durationMs = Math.round(performance.now() - started);
  return rollout;
}
