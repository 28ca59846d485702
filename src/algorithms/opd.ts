// OPD, on-policy distillation (Thinking Machines, "On-Policy Distillation", Oct 2025; prime-rl's
// opd). The student samples; a frozen `teacher` endpoint prefills the sampled sequence, in the
// student's own context, and its logprobs become the reference:
//
//   ref_lp_t = log p_teacher(y_t | y_<t)         (prompt logprobs of the exact sampled token ids)
//   l_ref_kl = -(1 - masked) sg(ref_lp - lp) ratio + 1e-3 log(ratio)^2     (trainer, docs/architecture.md §6)
//
// so each action token's advantage is the per-token reverse KL, with discount 0. No scalar credit
// (advantage = null); group_size only fans out sampling. With k > 0 (top-k distillation,
// src/algorithms/distill.ts) the teacher instead returns its k most likely tokens per position and
// the action tokens go to the trainer's distill component: a divergence between the teacher's
// top-k (plus a tail bucket) and the student's distribution over the same buckets, which can raise
// tokens the student never sampled. Deliberate choices:
//   - teacher and student meet at temperature 1 (docs/algorithms.md, the temperature rule): the
//     teacher's prefill logprobs are of temperature 1, as prime-rl's, and the env samples at 1 (or
//     0, greedy), which config resolution enforces (distill.ts, distillTemperatureRule);
//   - setup refuses a teacher with another tokenizer (vocab size and a probe string): token ids
//     would be scored as different text and the KL would be garbage, silently;
//   - each sample of a rollout (after an extension break) is scored on its own, like a branch.
import { z } from "zod";
import { EndpointError } from "../errors.ts";
import type { Rollout } from "../data/types.ts";
import {
  Algorithm,
  type AlgorithmContext,
  type FrozenClient,
  type LossComponent,
  type RuleViolation,
  type RunView,
} from "./base.ts";
import { checkDistillConfig, cutAtSurprise, distillBeta, distillFields, scoreTopK } from "./distill.ts";
import { assignDistillTargets, assignRefLogprobs, sampleSequences } from "./routing.ts";
import { frozenModelSchema, samplingSchema } from "./schemas.ts";
import { checkSameTokenizer } from "./tokenizer_check.ts";

const schema = z.strictObject({
  type: z.literal("opd"),
  sampling: samplingSchema,
  teacher: frozenModelSchema,
  ...distillFields,
});
type OpdConfig = z.infer<typeof schema>;

export { checkSameTokenizer, TOKENIZER_PROBE } from "./tokenizer_check.ts";

export class Opd extends Algorithm<OpdConfig> {
  static override type = "opd";
  static override actionLossType: LossComponent = "ref_kl";
  static override schema = schema;

  /** A teacher that is the live policy would make the KL identically zero. */
  static override checkConfig(config: OpdConfig, run: RunView): RuleViolation | undefined {
    const distill = checkDistillConfig(config);
    if (distill) return distill;
    if (!run.isPolicyUrl(config.teacher.base_url)) return undefined;
    return {
      key: "teacher.base_url",
      message: `the teacher ${config.teacher.base_url} is the live policy server; the distillation KL would be identically zero`,
      fix: "point the teacher at a separate frozen server (rlx serve --model TEACHER_DIR --port 8001)",
    };
  }

  teacher?: FrozenClient;

  override get actionLoss(): LossComponent {
    return this.config.k > 0 ? "distill" : "ref_kl";
  }

  override async setup(ctx: AlgorithmContext): Promise<void> {
    const { name, base_url } = this.config.teacher;
    this.teacher = await ctx.connect(this.config.teacher);
    await checkSameTokenizer(ctx, this.teacher, `the opd teacher "${name}" (${base_url})`);
  }

  override async scoreRollout(rollout: Rollout): Promise<void> {
    if (!this.teacher) throw new Error("opd: scoreRollout before setup");
    const sequences = sampleSequences(rollout);
    const { k, teacher } = this.config;
    if (k > 0) {
      const who = `the opd teacher "${teacher.name}" (${teacher.base_url})`;
      const scored = await scoreTopK(this.teacher, sequences, k, who);
      assignDistillTargets(
        rollout,
        scored.flatMap((s) => s.top),
        k,
        distillBeta(this.config),
      );
      if (this.config.min_teacher_prob !== undefined)
        cutAtSurprise(
          rollout,
          scored.flatMap((s) => s.logprobs),
          this.config.min_teacher_prob,
        );
      rollout.advantage = null;
      return;
    }
    const scores = await this.teacher.score(sequences);
    sequences.forEach((seq, i) => {
      if (scores[i]?.length !== seq.length) {
        throw new EndpointError(
          `the opd teacher "${this.config.teacher.name}" returned ${scores[i]?.length ?? 0} prompt logprobs for ${seq.length} tokens`,
          {
            fix: "the teacher must return one prompt logprob per token (vLLM prompt_logprobs)",
          },
        );
      }
    });
    assignRefLogprobs(rollout, scores.flat());
    rollout.advantage = null;
  }
}
