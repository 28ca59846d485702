// OPSD, on-policy self-distillation (SDFT, Shenfeld et al., arXiv 2601.19897; prime-rl's opsd).
// The teacher is the live policy itself, shown a demonstration: a system message rendered from
// `template` with the task's demonstration is put in front of the sampled sequence, the policy
// prefills hint + sequence, and the hint's logprobs are sliced off:
//
//   ref_lp_t = log pi(y_t | hint, y_<t)        l_ref_kl as for opd (trainer, docs/architecture.md §6)
//
// The demonstration is `rollout.info[demo_key]`, else the task's `demo_key` field, else
// `task.info[demo_key]`; a missing one is an error naming the keys that exist. The sample's ids
// are scored verbatim (never re-rendered), so the join falls on the hint's closing special token.
// With k > 0 (top-k distillation, src/algorithms/distill.ts) the hinted policy's k most likely
// tokens per position (temperature 1) are the target of the trainer's distill component instead:
// the reverse KL by default, as k = 0; `divergence = "forward_kl"` is the SDFT paper's analytic
// form over the top-k and a tail bucket.
// Which weights teach: by default the live policy (prime-rl's choice). The SDFT paper's teacher is
// an EMA of the policy's weights, because a teacher that moves with every update of the student
// can diverge (arXiv 2601.19897, §5); on docs/results.md's row 6bk the live teacher collapsed the
// hint-reading student within 40 steps (greedy 0.705 -> 0.27). `teacher_refresh = N` keeps the
// teacher the policy itself but lagged: a copy of its weights taken over every N steps
// (src/processes/lagged_policy.ts); at N = 10 the same student rose to 0.847 (row 6bl). It is not
// the default because the copy is one more model in the orchestrator and needs weights on disk;
// the live policy works with every engine and transfer. `teacher` (a frozen endpoint, e.g. the
// starting weights under `rlx serve`) scores with another model, which is no longer
// self-distillation. Another deviation,
// kept from prime-rl: with k = 0 the reverse KL with a single-sample estimator instead of the
// analytic forward KL. Tiny models have little in-context learning, so expect little from OPSD at
// that scale.
import { z } from "zod";
import { ConfigError, EndpointError } from "../errors.ts";
import type { SamplingClient } from "../clients/types.ts";
import type { Rollout } from "../data/types.ts";
import {
  Algorithm,
  type LossComponent,
  type AlgorithmContext,
  type MessageRenderer,
  type RuleViolation,
  type RunView,
} from "./base.ts";
import { checkDistillConfig, cutAtSurprise, distillBeta, distillFields, scoreTopK } from "./distill.ts";
import { assignDistillTargets, assignRefLogprobs, sampleSequences } from "./routing.ts";
import { frozenModelSchema, samplingSchema } from "./schemas.ts";
import { checkSameTokenizer } from "./tokenizer_check.ts";

/** What a template may name: the demonstration, and the task's question (its last user turn). */
const PLACEHOLDERS = ["demonstration", "question"];

const schema = z.strictObject({
  type: z.literal("opsd"),
  sampling: samplingSchema,
  demo_key: z.string().min(1).default("demonstration"),
  /** The hint: `{demonstration}` (required) and `{question}` (the task's user turn) are filled in. */
  template: z
    .string()
    .superRefine((t, ctx) => {
      const unknown = [...t.matchAll(/\{(\w+)\}/g)].map((m) => m[1]!).find((name) => !PLACEHOLDERS.includes(name));
      if (unknown)
        ctx.addIssue({
          code: "custom",
          message: `the template names {${unknown}}, which opsd does not fill in; its placeholders are ${PLACEHOLDERS.map((p) => `{${p}}`).join(", ")}`,
        });
      else if (!t.includes("{demonstration}"))
        ctx.addIssue({ code: "custom", message: "the template must contain {demonstration}" });
    })
    .default("Here is an example of an expert response:\n<demonstration>\n{demonstration}\n</demonstration>"),
  /** A frozen server that scores the hinted sequences; absent: the policy (SDFT's self-teacher). */
  teacher: frozenModelSchema.optional(),
  /** The self-teacher is a copy of the policy that takes its weights every N steps; absent: the live policy. */
  teacher_refresh: z.number().int().min(1).optional(),
  ...distillFields,
});
type OpsdConfig = z.infer<typeof schema>;

/** The demonstration text for a rollout, looked up under `key`. */
export function findDemonstration(rollout: Rollout, key: string): string {
  const task = rollout.task as unknown as Record<string, unknown>;
  const found = [rollout.info[key], task[key], rollout.task.info?.[key]].find((v) => v !== undefined && v !== null);
  if (typeof found === "string" && found.length) return found;
  const keys = [
    ...new Set([...Object.keys(rollout.info), ...Object.keys(task), ...Object.keys(rollout.task.info ?? {})]),
  ];
  throw new ConfigError(
    found === undefined
      ? `opsd: task ${rollout.taskId} of env ${rollout.env} has no demonstration under "${key}" (looked in rollout.info, the task, task.info)`
      : `opsd: the demonstration "${key}" of task ${rollout.taskId} (env ${rollout.env}) is not a non-empty string`,
    {
      fix: `set demo_key in the env's algo to a field holding the demonstration text; keys present: ${keys.join(", ")}`,
    },
  );
}

export class Opsd extends Algorithm<OpsdConfig> {
  static override type = "opsd";
  static override actionLossType: LossComponent = "ref_kl";
  static override schema = schema;

  static override checkConfig(config: OpsdConfig, run: RunView): RuleViolation | undefined {
    const distill = checkDistillConfig(config);
    if (distill) return distill;
    if (config.teacher && config.teacher_refresh !== undefined)
      return {
        key: "teacher_refresh",
        message:
          "teacher_refresh lags the policy's own weights, and teacher names another model: they exclude each other",
        fix: "keep teacher_refresh for a lagged self-teacher, or teacher for a frozen one",
      };
    if (!config.teacher || !run.isPolicyUrl(config.teacher.base_url)) return undefined;
    return {
      key: "teacher.base_url",
      message: `the teacher ${config.teacher.base_url} is the live policy server, which opsd uses when teacher is absent`,
      fix: "remove teacher for the live policy, or point it at a frozen server (rlx serve --model START_DIR --port 8001)",
    };
  }

  override get actionLoss(): LossComponent {
    return this.config.k > 0 ? "distill" : "ref_kl";
  }

  /** Who scores the hinted sequences: the teacher when configured, else the live policy. */
  scorer?: SamplingClient;
  who = "opsd: the policy";
  renderer?: MessageRenderer;

  override async setup(ctx: AlgorithmContext): Promise<void> {
    this.renderer = ctx.renderer;
    const { teacher, teacher_refresh: every } = this.config;
    if (every !== undefined) {
      if (!ctx.laggedPolicy)
        throw new ConfigError("opsd: teacher_refresh needs a lagged copy of the policy, which this run cannot make", {
          fix: "run it under rlx train, or remove teacher_refresh",
        });
      this.scorer = await ctx.laggedPolicy(every);
      this.who = `opsd: the policy's copy taken every ${every} steps`;
      return;
    }
    if (!teacher) {
      this.scorer = ctx.policy;
      return;
    }
    this.who = `the opsd teacher "${teacher.name}" (${teacher.base_url})`;
    const client = await ctx.connect(teacher);
    await checkSameTokenizer(ctx, client, this.who);
    this.scorer = client;
  }

  /** The hint block's token ids: a system message holding the filled-in template. */
  hintIds(rollout: Rollout): number[] {
    if (!this.renderer) throw new Error("opsd: used before setup");
    const values: Record<string, string> = {
      demonstration: findDemonstration(rollout, this.config.demo_key),
      question: rollout.task.prompt.findLast((m) => m.role === "user")?.content ?? "",
    };
    // One pass, so a demonstration that contains "{question}" stays as written.
    const hint = this.config.template.replace(/\{(demonstration|question)\}/g, (_, name: string) => values[name]!);
    return this.renderer.render([{ role: "system", content: hint }], { addGenerationPrompt: false }).tokenIds;
  }

  override async scoreRollout(rollout: Rollout): Promise<void> {
    if (!this.scorer) throw new Error("opsd: scoreRollout before setup");
    const hint = this.hintIds(rollout);
    const sequences = sampleSequences(rollout);
    const { k } = this.config;
    if (k > 0) {
      const scored = await scoreTopK(
        this.scorer,
        sequences.map((seq) => [...hint, ...seq]),
        k,
        this.who,
      );
      const top = scored.flatMap((s) => s.top.slice(hint.length));
      assignDistillTargets(rollout, top, k, distillBeta(this.config));
      if (this.config.min_teacher_prob !== undefined)
        cutAtSurprise(
          rollout,
          scored.flatMap((s) => s.logprobs.slice(hint.length)),
          this.config.min_teacher_prob,
        );
      rollout.advantage = null;
      return;
    }
    const scores = await this.scorer.score(sequences.map((seq) => [...hint, ...seq]));
    const sliced = sequences.map((seq, i) => {
      const score = scores[i];
      if (score?.length !== hint.length + seq.length) {
        throw new EndpointError(
          `${this.who} returned ${score?.length ?? 0} prompt logprobs for ${hint.length + seq.length} tokens`,
        );
      }
      return score.slice(hint.length);
    });
    assignRefLogprobs(rollout, sliced.flat());
    rollout.advantage = null;
  }
}
