// ECHO (Shrivastava et al., "ECHO: Terminal Agents Learn World Models for Free", arXiv 2605.24517;
// prime-rl's echo): GRPO on the actions plus cross-entropy on what the environment said back.
//
//   L = L_rl(actions; A = r - mean r)  +  sum_t alpha_role(t) (-log pi(o_t | o_<t)) / N_ce
//
// over observation tokens o_t of the configured roles (tool at alpha 0.1 by default; setting any
// role replaces the table). Credit and the length penalty are GRPO's (assignGrpoAdvantages). Which
// observation tokens, per rollout:
//   - only messages after the first model turn: the task prompt is never a target;
//   - only message content when the renderer marks it (isContent), not chat-template scaffold;
//   - never a message the model sampled, and each message once: after an extension break the
//     next sample re-renders earlier messages as context, and those copies are not weighted again;
//   - an optional user filter narrows the choice: a .ts file whose default export is
//     `(rollout, kwargs) => boolean[][]`, one keep-mask per sample spanning that sample's tokens.
// CE tokens stay out of the rl mask and are normalized by their own count, so adding them does not
// change the rl term's per-token scale. The stream merges into an existing ce stream by max.
import { resolve } from "node:path";
import { z } from "zod";
import { ConfigError } from "../errors.ts";
import { sampleRanges, type Rollout } from "../data/types.ts";
import { Algorithm, type AlgorithmContext, type LossComponent } from "./base.ts";
import { assignGrpoAdvantages, grpoFields } from "./grpo.ts";

// No prefault: an absent role must stay absent (zod 4 applies an inner default under .optional()).
const roleSchema = z.strictObject({ alpha: z.number().gt(0).default(0.1) });

const schema = z.strictObject({
  type: z.literal("echo"),
  ...grpoFields,
  /** Observation roles whose content tokens get CE weight alpha. Setting any role replaces the table. */
  roles: z
    .strictObject({
      system: roleSchema.optional(),
      user: roleSchema.optional(),
      assistant: roleSchema.optional(),
      tool: roleSchema.optional(),
    })
    .refine((r) => Object.values(r).some(Boolean), "echo needs at least one role enabled")
    .default({ tool: { alpha: 0.1 } }),
  /** Optional keep-mask filter: a .ts file exporting default (rollout, kwargs) => boolean[][], one keep-mask per sample. */
  filter: z.strictObject({ path: z.string().min(1), kwargs: z.record(z.string(), z.unknown()).default({}) }).optional(),
});
type EchoConfig = z.infer<typeof schema>;
export type EchoFilter = (rollout: Rollout, kwargs: Record<string, unknown>) => boolean[][];

export class Echo extends Algorithm<EchoConfig> {
  static override type = "echo";
  static override actionLossType: LossComponent = "rl";
  static override groupRelative = true;
  static override schema = schema;

  filter?: EchoFilter;

  override async setup(ctx: AlgorithmContext): Promise<void> {
    const spec = this.config.filter;
    if (!spec) return;
    const module = await import(resolve(spec.path)).catch((err: Error) => {
      throw new ConfigError(`echo filter: cannot import ${spec.path}: ${err.message}`, {
        fix: "filter.path is relative to the directory rlx runs in",
      });
    });
    if (typeof module.default !== "function") {
      throw new ConfigError(`echo filter ${spec.path}: the default export is not a function`, {
        fix: "export default (rollout, kwargs) => keepMasks (boolean[][], one per sample)",
      });
    }
    this.filter = module.default as EchoFilter;
  }

  /** Per token of the rollout: alpha on selected observation tokens, 0 elsewhere. */
  observationWeights(rollout: Rollout): number[] {
    const actionMessages = new Set(rollout.segments.filter((s) => s.sampled).map((s) => s.messageIndex));
    const firstAction = Math.min(...actionMessages);
    const ownerSample = new Map<number, number>(); // message -> the sample whose copy is weighted
    const weights_N: number[] = [];
    for (const seg of rollout.segments) {
      const alpha = this.config.roles[seg.role]?.alpha ?? 0;
      const owner = ownerSample.get(seg.messageIndex) ?? seg.sample;
      const selected =
        !seg.sampled &&
        alpha > 0 &&
        seg.messageIndex > firstAction &&
        !actionMessages.has(seg.messageIndex) &&
        owner === seg.sample;
      if (selected) ownerSample.set(seg.messageIndex, seg.sample);
      const content = seg.isContent?.length === seg.tokenIds.length ? seg.isContent : undefined;
      for (let i = 0; i < seg.tokenIds.length; i++) weights_N.push(selected && (content?.[i] ?? true) ? alpha : 0);
    }
    if (this.filter) this.applyFilter(rollout, weights_N);
    return weights_N;
  }

  private applyFilter(rollout: Rollout, weights_N: number[]): void {
    const masks = this.filter!(rollout, this.config.filter?.kwargs ?? {});
    const ranges = sampleRanges(rollout);
    const where = `echo filter ${this.config.filter?.path}`;
    const fix = "return one boolean keep-mask per sample of the rollout, each as long as that sample's tokens";
    // A ConfigError: the filter file is part of the run's config, and a wrong shape stops the run.
    if (!Array.isArray(masks) || masks.length !== ranges.length) {
      throw new ConfigError(
        `${where} returned ${Array.isArray(masks) ? masks.length : typeof masks} masks for rollout ${rollout.id}, which has ${ranges.length} sample(s)`,
        { fix },
      );
    }
    ranges.forEach(([start, end], k) => {
      const mask = masks[k]!;
      if (!Array.isArray(mask) || mask.length !== end - start) {
        throw new ConfigError(
          `${where}: mask ${k} of rollout ${rollout.id} has ${Array.isArray(mask) ? mask.length : typeof mask} entries, the sample has ${end - start} tokens`,
          { fix },
        );
      }
      for (let i = start; i < end; i++) if (!mask[i - start]) weights_N[i] = 0;
    });
  }

  override async scoreRollout(rollout: Rollout): Promise<void> {
    const weights_N = this.observationWeights(rollout);
    if (!weights_N.some((w) => w !== 0)) return;
    const existing = rollout.ceWeights;
    rollout.ceWeights = existing ? weights_N.map((w, i) => Math.max(w, existing[i] ?? 0)) : weights_N;
  }

  override async scoreGroup(group: Rollout[]): Promise<void> {
    assignGrpoAdvantages(this.config, group);
  }
}
