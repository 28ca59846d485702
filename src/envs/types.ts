// The environment interface (docs/architecture.md §9). An environment is a plain object, not a class to
// extend, so a custom env in a user's `.ts` file needs nothing from rlx's sources to be valid:
//
//   export default ({ z }) => ({ id: "my_env", description: "...", args: z.strictObject({...}),
//                                create(args) { return { tools: [], maxTurns: 1, load, reward }; } });
//
// (a function of the kit, which gives zod; a plain object works as well when it needs no schema).
// docs/environments.md walks through one (examples/envs/reverse.ts).
//
// `args` validates the `args = {...}` table of an `[[orchestrator.train.env]]` entry (defaults
// live in the schema). `create(args)` returns the running env: its tasks, its tools, its turn
// limit and its reward. The rollout protocol is fixed by the driver (src/rollout/driver.ts):
// model turn, parse tool calls, run each tool, append the outputs, until the model answers
// without a tool call or `maxTurns` model turns have been sampled. With no tools it is single-turn.
// Two other shapes hand the turns to the env (an env served by another process, src/envs/remote/,
// has one of them): `open` (step-driven: the env answers each model turn with the next messages, a
// reward and `done`) and `drive` (env-driven: the env runs the episode and calls the policy through
// an OpenAI-compatible endpoint rlx gives it, src/rollout/served.ts).
//
// A reward may call out (a judge: src/judges/) and return a Promise. The orchestrator runs each
// env's rewards through a gate (the env entry's `reward = { concurrency, timeout_s }`,
// src/clients/gate.ts) as each rollout finishes; a reward that throws, rejects or times out fails
// its rollout with the reason (excluded from training and from the step's means, never scored 0;
// an eval counts it as 0 and reports its error rate).

import type { ZodType } from "zod";
import type { ChatMessage, ToolSpec } from "../data/chat.ts";
import type { JudgeRecord, Rollout, Task } from "../data/types.ts";

export type { Task } from "../data/types.ts";

export type Split = "train" | "eval";

/** What a tool returns: the observation text the model will see, and whether it reports an
 * error (a Forth "stack underflow" is an observation, counted in metrics, not a failure). */
export interface ToolOutput {
  output: string;
  isError: boolean;
}

export interface Tool {
  spec: ToolSpec;
  /** Runs one call. Bad arguments should come back as an error observation; throwing fails
   * the whole rollout (recorded with its error, excluded from training). */
  run(args: Record<string, unknown>, task: Task): ToolOutput | Promise<ToolOutput>;
}

export interface RewardResult {
  reward: number;
  /** Named components, e.g. { correct: 1, formatted: 1 }. */
  metrics: Record<string, number>;
  /** A judge's conversation behind the reward: kept on the rollout and in its audit record. */
  judge?: JudgeRecord;
}

/** What a reward call gets besides the rollout. */
export interface RewardContext {
  /** Fires when the env's reward timeout passes: a reward that calls out should pass it on (fetch). */
  signal: AbortSignal;
}

/** What a multi-agent env's episode gets (src/rollout/episode.ts). */
export interface EpisodeContext {
  task: Task;
  /**
   * One turn of `role`: `messages` is the role's own view of the episode (the env builds it: a role
   * prompt, what the other roles said), the reply's text comes back. The role's model (the live
   * policy, or the frozen endpoint its config names) samples it; the tokens are the trace's, the
   * trace named `trace` (default: the role), so one role may play several traces (solver attempts).
   */
  turn(role: string, messages: ChatMessage[], options?: { trace?: string }): Promise<string>;
}

/** A multi-agent episode's outcome. */
export interface EpisodeResult {
  /** Per trace that took a turn: its reward. */
  rewards: Record<string, number>;
  /** The episode's named numbers, kept on every trace's metrics. */
  metrics?: Record<string, number>;
  /** Per trace: barrier sets it belongs to (rollout.info.barriers; src/algorithms/barriers.ts byKey). */
  barriers?: Record<string, Record<string, { key: string; size?: number }>>;
  /** Per trace: a group the orchestrator runs of another train env (its task, `size` rollouts)
   * before this trace's reward is known; a trace that spawns needs no entry in `rewards` (the env's
   * `settle` gives its reward once every spawned rollout has finished). */
  spawn?: Record<string, SpawnRequest>;
}

/** A group of train env `env` on `task`, spawned by an episode's trace (rollout.info.spawn). */
export interface SpawnRequest {
  env: string;
  task: Task;
  size: number;
}

/** What a spawned rollout gives back to the trace that spawned it. */
export interface SpawnedOutcome {
  rolloutId: string;
  reward: number;
  metrics: Record<string, number>;
  /** It failed: no reward (counted, never trained). */
  failed: boolean;
}

/** What `settle` gives a trace: its reward and named numbers (metrics merged over the episode's). */
export interface SettledReward {
  reward: number;
  metrics?: Record<string, number>;
}

/** One turn's answer from an env that answers the model itself (a step-driven env: `open`). */
export interface StepResult {
  /** What the model sees next (tool results, a user turn); may be empty once `done`. */
  messages: ChatMessage[];
  /** This step's reward: a rollout's reward is the sum over its steps. */
  reward: number;
  done: boolean;
  /** Named numbers; a later step's value of a name replaces an earlier one's. */
  metrics?: Record<string, number>;
}

/** One episode of a step-driven env: opened per rollout, stepped with each model turn, closed. */
export interface EnvSession {
  /** The episode's opening messages, when the env gives them (else the task's prompt). */
  prompt?: ChatMessage[];
  /** `signal` fires when the rollout has ended without waiting for this step (its deadline). */
  step(reply: ChatMessage, signal?: AbortSignal): Promise<StepResult>;
  /** Called once, however the rollout ended; its errors are ignored. */
  close(): Promise<void>;
}

/** An OpenAI-compatible endpoint serving the policy to one episode of an env-driven env (`drive`):
 * every completion requested with `apiKey` is a turn of that episode's rollout. */
export interface PolicyEndpoint {
  /** Ends in /v1: `${baseUrl}/chat/completions`. */
  baseUrl: string;
  apiKey: string;
  model: string;
}

/** What an env-driven episode returns: the conversation as the env ended it, and its reward. */
export interface DrivenEpisode {
  /** OpenAI-shaped messages; rlx keeps the tokens it served, so none are needed back. */
  messages?: unknown[];
  reward: number;
  metrics?: Record<string, number>;
}

/** The reward an env's own episode gave (`open`'s summed steps, `drive`'s result): a rollout of such
 * an env carries it in `rollout.info.envReward`, where its `reward` reads it. */
export interface EnvReward {
  reward: number;
  metrics: Record<string, number>;
}

export interface Env {
  /** Empty for single-turn envs. */
  tools: Tool[];
  /** Maximum number of model turns in one rollout (1 for single-turn). */
  maxTurns: number;
  /** Tasks of a split. `train` and `eval` never share a task; `seed` only shuffles/samples. */
  load(split: Split, seed: number): Promise<Task[]>;
  /** The reward of a finished rollout (it reads `rollout.messages`): pure, or a Promise when it
   * calls out (a judge); `ctx` is absent when a caller needs no limit (rlx env, tests). */
  reward(task: Task, rollout: Rollout, ctx?: RewardContext): RewardResult | Promise<RewardResult>;
  /** Multi-agent: the roles the env plays, each a policy (docs/algorithms.md, "Roles"). */
  roles?: readonly string[];
  /** Multi-agent: runs one episode, the env choosing turn order; the orchestrator makes one trace
   * (a rollout tagged with its role) per trace that took a turn. `reward` still scores eval. */
  episode?(ctx: EpisodeContext): Promise<EpisodeResult>;
  /** Multi-agent with `spawn`: the rewards of one group's spawning traces, once every group they
   * spawned has finished (the group barrier, src/orchestrator/barriers.ts). `group` is every
   * trainable trace of the group's algorithm, each with what it spawned ([] if nothing); one entry
   * per trace, undefined where the reward stands. */
  settle?(group: ReadonlyArray<{ rollout: Rollout; spawned: SpawnedOutcome[] }>): Array<SettledReward | undefined>;
  /** Step-driven: the env answers each model turn itself (instead of `tools` running in rlx). */
  open?(task: Task): Promise<EnvSession>;
  /** Env-driven: the env runs the whole episode, calling the policy through `ctx.policy`. */
  drive?(ctx: { task: Task; policy: PolicyEndpoint; signal: AbortSignal }): Promise<DrivenEpisode>;
  /** A gold conversation for the task, tool calls and real tool outputs included. */
  demonstrate?(task: Task): Promise<ChatMessage[]>;
}

export interface EnvDefinition<Args = any> {
  id: string;
  /** One line for `rlx env list`. */
  description: string;
  /** Strict zod object with defaults: the env's `args` table. Built-ins always have one; a custom
   * env file may omit it (it then gets the args table as written). */
  args?: ZodType<Args>;
  create(args: Args): Env | Promise<Env>;
}
