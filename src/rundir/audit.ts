// The audit record: one JSON line per trained sample in `rollouts/step_N.jsonl` of the run
// directory (written whole by writeAudit at each audited step; docs/algorithms.md documents the format).
// A run can be audited after the fact from these files alone: which tokens were actions, what
// credit each got, which loss component each fed and with what weight, and the reference and
// sampling logprobs the losses compared against. Keys are snake_case, like the config and the
// metrics. Streams a sample does not carry are omitted (absent = the trainer's defaults: rl 1 on
// the loss mask, ce 0, ref_kl 0); `advantage` is null for algorithms without a scalar credit.
// A judged rollout's record carries the judge's whole conversation (`judge`), and agentic credit
// assignment's its judge and each part's weight and the tokens it landed on (`credit`, offsets into
// this sample's token_ids).
import { z } from "zod";
import { type JudgeRecord, type Rollout, sampleRanges, type TrainingSample } from "../data/types.ts";
import { spawnedBy, spawnGroupId, spawnOf } from "../envs/spawn.ts";
import { auditPath, writeFileAtomic } from "./paths.ts";

const numbers = z.array(z.number());

/** A judge's conversation (src/data/types.ts JudgeRecord). */
export const judgeRecordSchema = z.looseObject({
  kind: z.string(),
  model: z.string(),
  messages: z.array(z.looseObject({ role: z.string(), content: z.string() })),
  score: z.number().optional(),
  reason: z.string().optional(),
});

/** The record's schema: what a reader may rely on. */
export const auditRecordSchema = z.looseObject({
  step: z.number().int(),
  env: z.string(),
  /** The resolved algorithm (a built-in type, or a custom class's `type`). */
  algo: z.string(),
  group_id: z.string(),
  rollout_id: z.string(),
  task_id: z.string(),
  /** Which sample of the rollout (0 unless the extension property broke). */
  sample_index: z.number().int(),
  policy_version: z.number().int(),
  reward: z.number(),
  advantage: z.number().nullable(),
  token_ids: z.array(z.number().int()),
  loss_mask: z.array(z.union([z.literal(0), z.literal(1)])),
  advantages: numbers,
  inference_logprobs: numbers,
  temperatures: numbers,
  rl_weights: numbers.optional(),
  ce_weights: numbers.optional(),
  ref_kl_weights: numbers.optional(),
  ref_logprobs: numbers.optional(),
  /** Top-k distillation (opd, opsd with k > 0): the distill weights and the teacher's k (the
   * teacher's ids and logprobs are in the step file, not repeated here). */
  distill_weights: numbers.optional(),
  distill_k: z.number().int().optional(),
  /** True when the sample's group was stored and trained again (a replay buffer; docs/task_samplers.md). */
  replayed: z.boolean().optional(),
  /** The task's statistics when the batch was cut (src/task_samplers/stats.ts). */
  task_stats: z
    .strictObject({
      attempts: z.number().int(),
      passes: z.number().int(),
      last_pass_rate: z.number(),
      last_seen_step: z.number().int(),
    })
    .optional(),
  /** A multi-agent env: the role whose tokens the sample holds, and the episode it played in. */
  role: z.string().optional(),
  episode: z.string().optional(),
  /** A trace whose reward waited in the barrier book on the group it spawned (src/envs/types.ts
   * spawn): that group's env, id and size. */
  spawned: z.strictObject({ env: z.string(), group_id: z.string(), size: z.number().int() }).optional(),
  /** A rollout of a spawned group: the trace that spawned it (its rollout_id). */
  spawned_by: z.string().optional(),
  /** The judge whose score is `reward` (a judged env), with its whole conversation. */
  judge: judgeRecordSchema.optional(),
  /** Agentic credit assignment: its judge, and per part (assistant turn) of this sample the weight,
   * the factor it became and [token_start, token_end) in token_ids. */
  credit: z
    .strictObject({
      judge: judgeRecordSchema,
      parts: z.array(
        z.strictObject({
          part: z.number().int(),
          message_index: z.number().int(),
          weight: z.number(),
          factor: z.number().optional(),
          token_start: z.number().int(),
          token_end: z.number().int(),
        }),
      ),
    })
    .optional(),
});
export type AuditRecord = z.infer<typeof auditRecordSchema>;

export interface AuditInput {
  step: number;
  algo: string;
  rollout: Rollout;
  sample: TrainingSample;
  sampleIndex: number;
  replayed?: boolean;
  taskStats?: { attempts: number; passes: number; lastPassRate: number; lastSeenStep: number };
}

export function auditRecord({
  step,
  algo,
  rollout,
  sample,
  sampleIndex,
  replayed,
  taskStats,
}: AuditInput): AuditRecord {
  const record: AuditRecord = {
    step,
    env: rollout.env,
    algo,
    group_id: rollout.groupId,
    rollout_id: rollout.id,
    task_id: rollout.taskId,
    sample_index: sampleIndex,
    policy_version: rollout.policyVersion,
    reward: rollout.reward,
    advantage: rollout.advantage ?? null,
    token_ids: sample.tokenIds,
    loss_mask: sample.lossMask as (0 | 1)[],
    advantages: sample.advantages,
    inference_logprobs: sample.inferenceLogprobs,
    temperatures: sample.temperatures,
  };
  if (sample.rlWeights) record.rl_weights = sample.rlWeights;
  if (sample.ceWeights) record.ce_weights = sample.ceWeights;
  if (sample.refKlWeights) record.ref_kl_weights = sample.refKlWeights;
  if (sample.refLogprobs) record.ref_logprobs = sample.refLogprobs;
  if (sample.distillWeights) record.distill_weights = sample.distillWeights;
  if (sample.distillTargets) record.distill_k = sample.distillTargets.k;
  if (replayed !== undefined) record.replayed = replayed;
  if (taskStats)
    record.task_stats = {
      attempts: taskStats.attempts,
      passes: taskStats.passes,
      last_pass_rate: taskStats.lastPassRate,
      last_seen_step: taskStats.lastSeenStep,
    };
  if (rollout.role !== undefined) {
    record.role = rollout.role;
    if (typeof rollout.info.episode === "string") record.episode = rollout.info.episode;
  }
  const spawn = spawnOf(rollout);
  if (spawn) record.spawned = { env: spawn.env, group_id: spawnGroupId(rollout.id), size: spawn.size };
  const by = spawnedBy([rollout]);
  if (by) record.spawned_by = by.rollout;
  if (rollout.judge) record.judge = judgeRecord(rollout.judge);
  if (rollout.credit) {
    const [start, end] = sampleRanges(rollout)[sampleIndex]!;
    record.credit = {
      judge: judgeRecord(rollout.credit.judge),
      parts: rollout.credit.parts
        .filter((p) => p.start >= start && p.end <= end)
        .map((p) => ({
          part: p.part,
          message_index: p.messageIndex,
          weight: p.weight,
          ...(p.factor !== undefined ? { factor: p.factor } : {}),
          token_start: p.start - start,
          token_end: p.end - start,
        })),
    };
  }
  return record;
}

export const judgeRecord = (judge: JudgeRecord): AuditRecord["judge"] & object => ({
  ...judge,
  messages: judge.messages.map((m) => ({ ...m })),
});

/** The record as one line of JSONL (newline included). */
export function auditLine(input: AuditInput): string {
  return `${JSON.stringify(auditRecord(input))}\n`;
}

/** Parses and checks a `rollouts/step_N.jsonl` file's text. */
export function parseAudit(text: string): AuditRecord[] {
  return text
    .split("\n")
    .filter((line) => line.trim())
    .map((line) => auditRecordSchema.parse(JSON.parse(line)));
}

/** Writes rollouts/step_N.jsonl: the audit record of every trained sample of step N. */
export function writeAudit(runDir: string, step: number, samples: ReadonlyArray<Omit<AuditInput, "step">>): void {
  writeFileAtomic(auditPath(runDir, step), samples.map((sample) => auditLine({ step, ...sample })).join(""));
}
