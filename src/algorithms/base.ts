// The Algorithm base class (docs/architecture.md §5). An algorithm fixes three things: which model samples the
// rollouts (`sampling.source` in its config: the live policy or a frozen endpoint), how credit is
// assigned per token (its hooks annotate rollouts), and which of the trainer's four loss
// components consumes the action tokens (`actionLossType`). The trainer never sees an algorithm:
// routing.ts stamps the action tokens into the declared component and the trainer runs streams.
//
// Hooks, in the order the orchestrator calls them (finishRollout / finishGroup below):
//   setup(ctx)          once per env before the first rollout: connect frozen endpoints, check them
//   scoreRollout(r)     as each rollout finishes: rollout-local work and model calls (OPD, OPSD, ECHO)
//   scoreGroup(rs)      once a task's whole group has finished: cohort-relative credit (GRPO, MaxRL)
//   scoreBarrier(n, rs) once a set of its own barrier `n` is complete (barriers.ts: sets across groups,
//                       steps, a batch, or a key the env emits), exactly once per set
// The first two are the built-in barriers (rollout, group); both complete inside a group's run.
// Failed rollouts (and rollouts with no sampled token) never reach a hook and never count in a
// group's statistics, as in prime-rl's iter_trainable_traces.
//
// Everything a hook needs from the outside world comes through `AlgorithmContext`, so tests give
// an algorithm plain objects and a user's custom class needs nothing from rlx's sources.
import { z, type ZodType } from "zod";
import type { ChatClient } from "../clients/chat_client.ts";
import type { SamplingClient } from "../clients/types.ts";
import type { JudgeEndpoint } from "../judges/schema.ts";
import type { ChatMessage } from "../data/chat.ts";
import type { Rollout } from "../data/types.ts";
import type { BarrierSpec } from "./barriers.ts";
import type { FrozenModel } from "./schemas.ts";

/** The trainer's four loss components; an algorithm routes its action tokens into one. */
export type LossComponent = "rl" | "ce" | "ref_kl" | "distill";
export const LOSS_COMPONENTS: readonly LossComponent[] = ["rl", "ce", "ref_kl", "distill"];

/** A config rule of one algorithm that needs the run around it (e.g. which URLs are the policy). */
export interface RunView {
  /** Whether a base URL is one of the live policy's (trailing slashes and localhost aside). */
  isPolicyUrl(url: string): boolean;
}

/** A broken rule: the key under the algo block, what is wrong, and the fix. */
export interface RuleViolation {
  key: string;
  message: string;
  fix?: string;
}

/** A connected frozen endpoint: a sampling client that can also say which tokenizer it has, so
 * an algorithm can refuse a teacher whose token ids mean something else than the student's.
 * (src/clients/client.ts's OpenAIClient is one; vLLM reports no vocabulary size, so it is optional.) */
export interface FrozenClient extends SamplingClient {
  /** The endpoint's token ids for plain text (no special tokens added; vLLM's /tokenize). */
  tokenize(text: string): Promise<number[]>;
  /** Number of ids the endpoint's tokenizer can produce, when the server says (undefined when not). */
  vocabSize?(): Promise<number | undefined>;
}

/** What the algorithms need of the policy's tokenizer (src/model/tokenizer.ts's Tokenizer). */
export interface TokenizerView {
  /** Number of ids the tokenizer can produce (not the model's padded embedding size). */
  size: number;
  /** Token ids of untrusted text: special-token spellings stay plain text. */
  encodePlain(text: string): number[];
}

/** What the algorithms need of the chat renderer (src/model/render.ts's ChatRenderer): messages
 * to token ids with the model's own chat template (OPSD's hint block). */
export interface MessageRenderer {
  render(messages: ChatMessage[], options: { addGenerationPrompt: boolean }): { tokenIds: number[] };
}

export interface AlgorithmLogger {
  info(message: string): void;
  warn(message: string): void;
}

export interface AlgorithmContext {
  /** The env this instance serves (one instance per train env). */
  env: string;
  /** The live policy (tracks the newest weights). */
  policy: SamplingClient;
  /** A copy of the live policy that takes its weights only every `every` steps (OPSD's lagged
   * self-teacher); absent where the run cannot make one. */
  laggedPolicy?(every: number): Promise<SamplingClient>;
  /** The env's cap on new tokens per model turn (its max_tokens, else orchestrator.max_tokens). */
  maxTokens: number;
  /** Connects a frozen endpoint; waits until it is ready. */
  connect(model: FrozenModel): Promise<FrozenClient>;
  /** Connects a judge (a frozen chat endpoint, any tokenizer); waits until it is ready. */
  connectJudge(judge: JudgeEndpoint): Promise<ChatClient>;
  tokenizer: TokenizerView;
  renderer: MessageRenderer;
  logger: AlgorithmLogger;
}

/** Every algorithm's config has at least these (built-ins: each algorithm's `schema`). */
export interface BaseAlgoConfig {
  type: string;
  sampling: { source: "policy" | FrozenModel };
}

export abstract class Algorithm<Config extends BaseAlgoConfig = BaseAlgoConfig> {
  /** The config `type` ("grpo", ...); custom classes name themselves here (logs, audit records). */
  static type = "";
  /** The loss component that consumes the action tokens. */
  static actionLossType: LossComponent = "rl";
  /** Credit relative to the group: group_size 1 gives all-zero advantages (a warning at load). */
  static groupRelative = false;
  /** The algorithm's own config fields, defaults being the vetted setting. Built-ins validate the
   * whole block; a custom class validates the block without `type`, `path` and `sampling`. */
  static schema: ZodType = z.strictObject({});
  /** A rule of this algorithm's config that its schema alone cannot check; undefined = it holds. */
  static checkConfig(_config: any, _run: RunView): RuleViolation | undefined {
    return undefined;
  }

  constructor(readonly config: Config) {}

  /** The class's static description, readable from an instance. */
  get kind(): AlgorithmClass {
    return this.constructor as AlgorithmClass;
  }

  /** The loss component this instance's action tokens go to: the class's `actionLossType`, unless
   * its config chooses (opd and opsd with k > 0: distill). */
  get actionLoss(): LossComponent {
    return this.kind.actionLossType;
  }

  async setup(_ctx: AlgorithmContext): Promise<void> {}
  async scoreRollout(_rollout: Rollout): Promise<void> {}
  async scoreGroup(_group: Rollout[]): Promise<void> {}
  /** The sets beyond rollout and group this algorithm's credit waits on (barriers.ts); none by default. */
  barriers(): BarrierSpec[] {
    return [];
  }
  /** Once per complete (or timed-out, `onTimeout: "score"`) set of barrier `name`: its trainable members. */
  async scoreBarrier(_name: string, _members: Rollout[]): Promise<void> {}

  /** What the algorithm keeps across steps (JSON, saved in the orchestrator's checkpoint and handed
   * back to loadState on --resume; src/orchestrator/carried.ts); undefined = nothing. */
  saveState(): unknown {
    return undefined;
  }

  loadState(_state: unknown): void {}
}

export type AlgorithmClass = (new (config: any) => Algorithm<any>) & {
  type: string;
  actionLossType: LossComponent;
  groupRelative: boolean;
  schema: ZodType;
  checkConfig(config: any, run: RunView): RuleViolation | undefined;
};

/** A rollout the algorithm may see: no error, at least one sampled token, and not a trace of a
 * role that does not train (a frozen role's tokens never reach an algorithm or a step file). */
export function isTrainable(rollout: Rollout): boolean {
  if (rollout.error || rollout.trains === false) return false;
  return rollout.segments.some((s) => s.sampled && s.tokenIds.length > 0);
}

/** Runs scoreRollout on a finished rollout if it is trainable. */
export async function finishRollout(algorithm: Algorithm<any>, rollout: Rollout): Promise<void> {
  if (isTrainable(rollout)) await algorithm.scoreRollout(rollout);
}

/** Runs scoreGroup on the trainable rollouts of a finished group (none: nothing to score). */
export async function finishGroup(algorithm: Algorithm<any>, group: Rollout[]): Promise<void> {
  const trainable = group.filter(isTrainable);
  if (trainable.length) await algorithm.scoreGroup(trainable);
}
