// `uniform`, the default: the env's tasks in a shuffled order per epoch (walk.ts), every finished
// group admitted, nothing stored. Its whole state is the cursor (how many tasks it has drawn), so
// it draws exactly what rlx drew before samplers were pluggable. The filter and replay samplers
// draw their fresh tasks the same way (they extend this class).
import { type ZodType, z } from "zod";
import { type BaseSamplerConfig, type Pick, passRewardField, Sampler, type SamplerContext } from "./base.ts";
import { ShuffledWalk } from "./walk.ts";

const schema = z.strictObject({ type: z.literal("uniform"), ...passRewardField });

export type UniformConfig = z.infer<typeof schema>;

export class Uniform<Config extends BaseSamplerConfig = UniformConfig> extends Sampler<Config> {
  static override type = "uniform";
  static override schema: ZodType = schema;

  private readonly walk: ShuffledWalk;
  /** Tasks drawn so far: the next one is at this position of the walk. */
  protected cursor = 0;

  constructor(config: Config, ctx: SamplerContext) {
    super(config, ctx);
    this.walk = new ShuffledWalk(ctx.tasks, ctx.seed, ctx.env);
  }

  override next(_step: number): Pick {
    return { task: this.walk.at(this.cursor++) };
  }

  override saveState(): unknown {
    return { cursor: this.cursor };
  }

  override loadState(state: unknown): void {
    this.cursor = (state as { cursor: number }).cursor;
  }
}
