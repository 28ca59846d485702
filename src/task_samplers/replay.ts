// `replay`: tasks in the uniform walk, and a replay buffer (buffer.ts) of admitted groups with
// signal (rewards that differ) mixed back into later batches. When the env is drawn, the sampler
// serves a stored group instead of a fresh task with probability `share` (if one is replayable),
// so about `share` of the env's groups are replays once the buffer fills. Replayed rollouts carry
// their original policy version (the staleness metrics and the importance ratio see how old they
// are); `max_age` bounds it and may not exceed orchestrator.max_off_policy_steps, the step loop's
// own bound. The RNG and the buffer are the sampler's state, saved in checkpoints.
import { type ZodType, z } from "zod";
import type { Rollout } from "../data/types.ts";
import { hashString } from "../envs/random.ts";
import { hasSpread, type Pick, passRewardField, type SamplerContext, type SamplerRunView } from "./base.ts";
import { type BufferedGroup, ReplayBuffer } from "./buffer.ts";
import { Uniform } from "./uniform.ts";
import { nextRandom } from "./walk.ts";

const schema = z.strictObject({
  type: z.literal("replay"),
  ...passRewardField,
  /** Groups kept at most. */
  buffer_size: z.number().int().positive().default(64),
  /** A stored group is replayable while sampled by weights at most this many versions behind. */
  max_age: z.number().int().min(0).default(2),
  /** Probability that a draw of this env is served from the buffer. */
  share: z.number().min(0).max(1).default(0.25),
  /** Times a stored group is trained again before it leaves. */
  max_replays: z.number().int().positive().default(1),
});
export type ReplayConfig = z.infer<typeof schema>;

export class Replay extends Uniform<ReplayConfig> {
  static override type = "replay";
  static override schema: ZodType = schema;
  static override checkConfig(config: ReplayConfig, run: SamplerRunView) {
    if (config.max_age <= run.maxOffPolicySteps) return undefined;
    return {
      key: "max_age",
      message: `${config.max_age} is above orchestrator.max_off_policy_steps ${run.maxOffPolicySteps}; the step loop would drop such replays as stale`,
      fix: "lower max_age, or raise orchestrator.max_off_policy_steps",
    };
  }

  private readonly buffer: ReplayBuffer;
  private rng: number;

  constructor(config: ReplayConfig, ctx: SamplerContext) {
    super(config, ctx);
    this.buffer = new ReplayBuffer(config.buffer_size, config.max_age, config.max_replays);
    this.rng = hashString(`replay:${ctx.seed}:${ctx.env}`);
  }

  override next(step: number): Pick {
    const r = nextRandom(this.rng);
    this.rng = r.state;
    const replay = r.value < this.config.share ? this.buffer.take(step) : undefined;
    return replay ? { replay } : super.next(step);
  }

  override observe(group: readonly Rollout[], admitted: boolean): void {
    if (admitted && hasSpread(group)) this.buffer.push(group);
  }

  override metrics(step: number): Record<string, number> {
    this.buffer.evict(step + 1); // what the next step could still replay
    return { buffer_size: this.buffer.length, buffer_age: this.buffer.meanAge(step + 1) };
  }

  override saveState(): unknown {
    return { cursor: this.cursor, rng: this.rng, buffer: this.buffer.saveState() };
  }

  override loadState(state: unknown): void {
    const s = state as { cursor: number; rng?: number; buffer?: BufferedGroup[] };
    this.cursor = s.cursor;
    this.rng = s.rng ?? this.rng; // a uniform sampler's state (a format-1 checkpoint) has only a cursor
    this.buffer.loadState(s.buffer ?? []);
  }
}
