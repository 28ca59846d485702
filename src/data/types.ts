// The data model (docs/architecture.md §4): rollouts (what environments produce) and training samples (what
// the trainer sees). The environments write rollouts, the algorithms layer annotates them, the
// sample builder flattens them; all three meet only here, so this file changes rarely.
//
// A rollout is a list of segments. Concatenating the segments of one sample (`sample` index)
// gives, token for token, the sequence the model saw: each turn's prompt is the previous prompt
// plus the previous completion plus the new observation (the extension property). When a chat
// template breaks that property (it rewrites earlier turns, e.g. drops past reasoning), the driver
// starts a new sample whose first segments re-render the conversation so far as context
// (sampled = false) and records the break in `info.extensionBreaks`. Most rollouts have one sample.
//
// Per-token annotations (`advantages`, `refLogprobs`, the weight streams) have the length of ALL
// segments concatenated in order (every sample, one after the other), so an algorithm annotates a
// rollout as one flat array and the sample builder cuts it at sample boundaries.

import type { ChatMessage, Role } from "./chat.ts";

export type { Role } from "./chat.ts";

/** One task of an environment (src/envs/types.ts: what `load` returns). */
export interface Task {
  /** Unique within the env (both splits); stable across runs for the same args. */
  id: string;
  /** The opening messages: an optional system message (tool instructions) and the user turn. */
  prompt: ChatMessage[];
  /** The gold final answer the reward compares against. */
  answer: string;
  /** A worked solution in words (OPSD's demonstration hint). */
  solution?: string;
  /** Env-specific data the reward or tools need (e.g. the expected program output). */
  info?: Record<string, unknown>;
}

export interface Segment {
  role: Role;
  tokenIds: number[];
  /** True when the model being sampled produced these tokens (an action); false for prompts,
   * template scaffold around observations, tool outputs, and re-rendered context. */
  sampled: boolean;
  /** Sampling logprobs, one per token; present exactly when `sampled`. */
  logprobs?: number[];
  /** Per token: message body (true) or chat-template scaffold (false). */
  isContent?: boolean[];
  /** Index into `Rollout.messages` of the message these tokens render. A sampled segment's
   * message is the assistant message parsed from it. */
  messageIndex: number;
  /** Which sample of the rollout this segment belongs to (0 unless the extension property broke). */
  sample: number;
  /** Sampled segments: the weights version that produced them, and the temperature their
   * logprobs were computed at (1 for greedy sampling, whose logprobs are temperature-1). */
  policyVersion?: number;
  temperature?: number;
}

/** A judge's whole conversation about one rollout (src/judges/): kept on the rollout, written in its
 * audit record (docs/algorithms.md, "Judges"). */
export interface JudgeRecord {
  /** "rubric", "agentic" (a reward) or "credit" (agentic credit assignment). */
  kind: string;
  /** The judge model's name. */
  model: string;
  /** Every message of the conversation, the judge's replies and tool results included. */
  messages: ChatMessage[];
  /** The score the judge gave (rubric, agentic). */
  score?: number;
  /** The judge's stated reason, when it gave one. */
  reason?: string;
}

/** One part of a rollout that agentic credit assignment weighs (one assistant turn). */
export interface CreditPart {
  /** The part's number as the judge saw it (1-based). */
  part: number;
  /** Index into `Rollout.messages` of the assistant message. */
  messageIndex: number;
  /** [start, end) of the part's action tokens in the rollout's concatenated token stream. */
  start: number;
  end: number;
  /** The judge's weight in [0, 1] and the factor it became (docs/algorithms.md). */
  weight: number;
  factor?: number;
}

/** Why a rollout stopped. Anything but "done" means the episode was cut short. */
export type StopReason = "done" | "max_turns" | "length" | "context" | "error";

export interface Rollout {
  /** Unique per rollout within a run. */
  id: string;
  env: string;
  taskId: string;
  /** Rollouts of the same task sampled together share a groupId (GRPO groups). */
  groupId: string;
  task: Task;
  /** The conversation: task prompt, then assistant turns (parsed from sampled tokens) and
   * observations (tool outputs, user feedback). */
  messages: ChatMessage[];
  segments: Segment[];
  /** 1 + number of extension-property breaks. */
  numSamples: number;
  reward: number;
  /** Named reward components and counters (e.g. correct, tool_calls, tool_errors). */
  metrics: Record<string, number>;
  /** Set when the rollout failed (threw, timed out, hit a limit it cannot recover from). A
   * failed rollout has reward 0 and is excluded from training, never a crash. */
  error?: string;
  stopReason: StopReason;
  /** Weights version of the first sampled turn (per-turn versions are on the segments); -1 when
   * the rollout failed before any turn was sampled. */
  policyVersion: number;
  /** Number of model turns (sampled segments). */
  numTurns: number;
  /** Free-form metadata: extension breaks, finish reasons, timings. */
  info: Record<string, unknown>;
  /** The judge behind the reward, when the env is judged (src/judges/); on a failed rollout, the
   * judge whose error failed it (rollouts/failed_step_N.jsonl, src/rundir/failed.ts). */
  judge?: JudgeRecord;
  /** A multi-agent env's role that produced this trace (src/rollout/episode.ts); absent: single-agent. */
  role?: string;
  /** False for a trace that never trains: a frozen role's, or one whose config says `train = false`. */
  trains?: boolean;

  // ---- annotations written by the algorithms layer (absent = not assigned) ----
  /** Scalar credit before spreading over action tokens (GRPO-style); null = no signal. */
  advantage?: number | null;
  /** Per token of all segments concatenated; 0 off the action tokens. */
  advantages?: number[];
  /** Per token of all segments concatenated: reference / teacher logprobs. */
  refLogprobs?: number[];
  /** Per token of all segments concatenated: the rl, ce and ref_kl weight streams (distill: below). */
  rlWeights?: number[];
  ceWeights?: number[];
  refKlWeights?: number[];
  /** Top-k distillation (the distill loss component, docs/architecture.md §6): the teacher's k
   * most likely tokens at every position and the divergence's beta; the distill weight stream. */
  distillTargets?: DistillTargets;
  distillWeights?: number[];
  /** Agentic credit assignment: the judge's conversation and its per-part weights. */
  credit?: { judge: JudgeRecord; parts: CreditPart[] };
}

/** A teacher's top-k for every token: slot j of token i is `ids[i * k + j]` (-1: empty, as off the
 * action tokens) with the teacher's logprob `logprobs[i * k + j]`, both N * k long (N the
 * rollout's or the sample's tokens); the rest of the teacher's mass is the loss's tail bucket.
 * beta picks the divergence: 0 forward KL, 1 reverse KL, between them generalized JSD. */
export interface DistillTargets {
  k: number;
  beta: number;
  ids: number[];
  logprobs: number[];
}

/** The flat form the trainer consumes (docs/architecture.md §4). Every array has the sequence's length. */
export interface TrainingSample {
  tokenIds: number[];
  /** 1 on sampled (action) tokens. */
  lossMask: number[];
  advantages: number[];
  /** The sampler's logprobs on action tokens, 0 elsewhere. */
  inferenceLogprobs: number[];
  /** Sampling temperature per token (1 off the action tokens). */
  temperatures: number[];
  refLogprobs?: number[];
  rlWeights?: number[];
  ceWeights?: number[];
  refKlWeights?: number[];
  /** The distill component's weights (0 off members) and betas, and the teacher's top-k. */
  distillWeights?: number[];
  distillBetas?: number[];
  distillTargets?: Omit<DistillTargets, "beta">;
  env: string;
  rolloutId: string;
}

/** Total number of tokens over all segments (the length of every per-token annotation). */
export function rolloutLength(rollout: Rollout): number {
  let n = 0;
  for (const segment of rollout.segments) n += segment.tokenIds.length;
  return n;
}

/** Per token of all segments concatenated: the value of `pick(segment, i)`. Handy for building
 * masks (`sampled`), role streams and content marks in annotation code. */
export function perToken<T>(rollout: Rollout, pick: (segment: Segment, i: number) => T): T[] {
  const out: T[] = [];
  for (const segment of rollout.segments) {
    for (let i = 0; i < segment.tokenIds.length; i++) out.push(pick(segment, i));
  }
  return out;
}

/** [start, end) offsets of each sample within the concatenated token stream. */
export function sampleRanges(rollout: Rollout): Array<[number, number]> {
  const ranges: Array<[number, number]> = [];
  let offset = 0;
  for (const segment of rollout.segments) {
    const last = ranges[segment.sample];
    if (last) last[1] = offset + segment.tokenIds.length;
    else ranges[segment.sample] = [offset, offset + segment.tokenIds.length];
    offset += segment.tokenIds.length;
  }
  return ranges;
}
