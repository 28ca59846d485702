// The rollout driver: one task, one sampling client, one episode. It renders the task prompt,
// asks the client for a completion as token ids with logprobs, parses the completion into an
// assistant message, runs its tool calls, appends the observations, and repeats until the model
// answers without a tool call or the env's turn limit is reached. The result is a Rollout
// (src/data/types.ts) with one segment per run of tokens.
//
// Tokens in, tokens out: the sampled ids are appended to the sequence as they came back and never
// re-tokenized; each new turn's prompt is the previous sequence plus the template's tokens for the
// new messages (ChatRenderer.bridge). When the template does not extend its previous rendering,
// the driver starts a new sample from a fresh rendering and records the break in
// `info.extensionBreaks`.
//
// Failure is data: a tool that throws, a malformed completion record, the context limit, the time
// limit, or a reward that throws or runs past its gate's timeout (a judge: src/judges/) give a
// rollout with `error` set and the reason (excluded from training; its reward 0 is a placeholder).
// The reward is computed here, as the episode ends, so judging one rollout overlaps the generation
// of the others. Only a bug in this file could throw out of runRollout.
import type { ChatMessage } from "../data/chat.ts";
import { parseAssistant } from "../model/parse.ts";
import type { AttributedTokens, ChatRenderer, RenderOptions } from "../model/render.ts";
import { malformedCallObservation, runToolCall } from "../envs/tools.ts";
import type { Env, RewardResult, Task } from "../envs/types.ts";
import { CallTimeout, type CallGate } from "../clients/gate.ts";
import type { Completion, SamplingClient } from "../clients/types.ts";
import type { Rollout, Segment } from "../data/types.ts";

export interface SamplingParams {
  maxTokens: number;
  temperature: number;
  topP: number;
  topK: number;
  /** Turn t is sampled with seed + t. */
  seed?: number;
}

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
  /** Wall-clock limit for the whole episode. */
  timeoutMs?: number;
  /** Extra chat-template variables, e.g. `{ enable_thinking: false }` for Qwen3. */
  templateArgs?: Record<string, unknown>;
  /** The env's reward gate (concurrency limit and timeout); absent = the reward is called directly. */
  rewardGate?: CallGate;
}

/** A limit the episode ran into; the rollout records it as its error. */
class RolloutLimit extends Error {}

/** Awaits `work`, or rejects with a RolloutLimit when the episode's deadline passes first. */
function raceDeadline<T>(work: Promise<T> | T, deadline: number): Promise<T> {
  const left = deadline - performance.now();
  if (!Number.isFinite(left)) return Promise.resolve(work);
  if (left <= 0) return Promise.reject(new RolloutLimit("rollout timed out"));
  let timer: ReturnType<typeof setTimeout> | undefined;
  const timeout = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new RolloutLimit("rollout timed out")), left);
  });
  return Promise.race([Promise.resolve(work), timeout]).finally(() => clearTimeout(timer));
}

/** Splits attributed tokens into segments, one per run of tokens of the same message. */
function appendRendered(rollout: Rollout, tokens: AttributedTokens, sample: number): void {
  for (let i = 0; i < tokens.tokenIds.length;) {
    const messageIndex = tokens.messageIndex[i]!;
    let end = i;
    while (end < tokens.tokenIds.length && tokens.messageIndex[end] === messageIndex) end++;
    rollout.segments.push({
      role: rollout.messages[messageIndex]?.role ?? "assistant", // past the end: the generation prompt
      tokenIds: tokens.tokenIds.slice(i, end),
      sampled: false,
      isContent: tokens.isContent.slice(i, end),
      messageIndex,
      sample,
    });
    i = end;
  }
}

function checkCompletion(completion: Completion): void {
  if (completion.logprobs.length !== completion.tokenIds.length) {
    throw new Error(
      `sampling client returned ${completion.tokenIds.length} tokens but ${completion.logprobs.length} logprobs`,
    );
  }
  if (completion.logprobs.some((lp) => !Number.isFinite(lp) || lp > 1e-6))
    throw new Error("sampling client returned a logprob that is not finite and <= 0");
}

async function drive(
  req: RolloutRequest,
  rollout: Rollout,
  counters: Record<string, number>,
  deadline: number,
): Promise<void> {
  const { env, renderer, task } = req;
  const tokenizer = renderer.tokenizer;
  const maxContext = req.maxContextTokens ?? Number.POSITIVE_INFINITY;
  const options: RenderOptions = {
    tools: env.tools.map((tool) => tool.spec),
    addGenerationPrompt: true,
    templateArgs: req.templateArgs,
  };
  const messages = rollout.messages;
  const stopStrings = tokenizer.stopIds.map((id) => tokenizer.tokenString(id) ?? "").filter((s) => s);
  const finishReasons: string[] = [];
  const breaks: Array<{ turn: number; sample: number }> = [];
  rollout.info.finishReasons = finishReasons;
  rollout.info.extensionBreaks = breaks;

  const first = renderer.render(messages, options);
  appendRendered(rollout, first, 0);
  let sequence = first.tokenIds;
  let templateText = first.text;
  let sample = 0;

  for (let turn = 0; ; turn++) {
    const room = maxContext - sequence.length;
    if (room <= 0)
      throw new RolloutLimit(
        `context limit: the prompt has ${sequence.length} tokens, max_context_tokens is ${maxContext}`,
      );
    const { seed } = req.sampling;
    const completion = await raceDeadline(
      req.client.complete({
        promptIds: sequence,
        maxTokens: Math.min(req.sampling.maxTokens, room),
        temperature: req.sampling.temperature,
        topP: req.sampling.topP,
        topK: req.sampling.topK,
        stop: tokenizer.stopIds,
        seed: seed === undefined ? undefined : seed + turn,
        session: rollout.id,
      }),
      deadline,
    );
    checkCompletion(completion);
    finishReasons.push(completion.finishReason);
    if (rollout.numTurns === 0) rollout.policyVersion = completion.policyVersion;
    rollout.numTurns++;

    const assistantIndex = messages.length;
    const segment: Segment = {
      role: "assistant",
      tokenIds: completion.tokenIds,
      sampled: true,
      logprobs: completion.logprobs,
      isContent: completion.tokenIds.map((id) => !tokenizer.specialIds.has(id)),
      messageIndex: assistantIndex,
      sample,
      policyVersion: completion.policyVersion,
      // The temperature the logprobs are taken at: greedy (0) reports temperature-1 logprobs.
      temperature: req.sampling.temperature > 0 ? req.sampling.temperature : 1,
    };
    rollout.segments.push(segment);
    sequence = [...sequence, ...completion.tokenIds];
    const parsed = parseAssistant(tokenizer.decode(completion.tokenIds), stopStrings);
    messages.push(parsed.message);

    if (completion.finishReason === "length") return void (rollout.stopReason = "length");
    if (env.tools.length === 0 || parsed.blocks.length === 0) return void (rollout.stopReason = "done");

    for (const block of parsed.blocks) {
      if ("error" in block) {
        messages.push(malformedCallObservation(block.error));
        counters.malformed_tool_calls!++;
        counters.tool_errors!++;
        continue;
      }
      const observation = await raceDeadline(runToolCall(env.tools, block.call, task), deadline);
      messages.push(observation.message);
      counters.tool_calls!++;
      if (observation.isError) counters.tool_errors!++;
    }

    const lastTurn = turn + 1 >= env.maxTurns;
    const nextOptions = { ...options, addGenerationPrompt: !lastTurn };
    const stopId = completion.tokenIds.at(-1);
    const stopText = stopId === undefined ? undefined : tokenizer.tokenString(stopId);
    const bridged =
      stopText && tokenizer.stopIds.includes(stopId!)
        ? renderer.bridge(
            templateText,
            messages,
            assistantIndex,
            stopText,
            nextOptions,
            tokenizer.decode(completion.tokenIds),
          )
        : null;
    if (bridged) {
      appendRendered(rollout, bridged.tokens, sample);
      sequence = [...sequence, ...bridged.tokens.tokenIds];
      templateText = bridged.text;
    } else {
      sample++;
      breaks.push({ turn: turn + 1, sample });
      const fresh = renderer.render(messages, nextOptions);
      appendRendered(rollout, fresh, sample);
      sequence = fresh.tokenIds;
      templateText = fresh.text;
    }
    if (lastTurn) return void (rollout.stopReason = "max_turns");
  }
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
  const counters: Record<string, number> = { tool_calls: 0, tool_errors: 0, malformed_tool_calls: 0 };
  const deadline = req.timeoutMs === undefined ? Number.POSITIVE_INFINITY : performance.now() + req.timeoutMs;
  const started = performance.now();
  try {
    await drive(req, rollout, counters, deadline);
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
