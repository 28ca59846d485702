// The failed-rollout records: one JSON line per rollout that failed in step N, appended to
// `rollouts/failed_step_N.jsonl` of the run directory as each batch of the step is sampled (before
// the failure-rate check, so a run that stops on orchestrator.max_failure_rate keeps the rollouts
// that stopped it). Failed rollouts never train, so they have no audit record; this is where a
// user sees why they failed: the error, the conversation as far as it got, and, for a judged env,
// the judge's whole conversation (a judge that gave no verdict, or an unreadable one). A step
// sampled again (nothing to train) appends; `try` says which sampling it was. A resumed run
// deletes the files of the steps after its checkpoint with the rest of them (rewindRunDir).
import { existsSync, readFileSync } from "node:fs";
import { z } from "zod";
import type { Rollout } from "../data/types.ts";
import { judgeRecord, judgeRecordSchema } from "./audit.ts";
import { failedPath, writeFileAtomic } from "./paths.ts";

/** The record's schema: what a reader may rely on. */
export const failedRecordSchema = z.strictObject({
  step: z.number().int(),
  /** Which sampling of the step (0 first; a batch with nothing to train is sampled again). */
  try: z.number().int(),
  env: z.string(),
  group_id: z.string(),
  rollout_id: z.string(),
  task_id: z.string(),
  /** -1 when it failed before its first sampled turn. */
  policy_version: z.number().int(),
  error: z.string(),
  num_turns: z.number().int(),
  /** The task prompt, then the turns and observations it got to. */
  messages: z.array(z.looseObject({ role: z.string(), content: z.string() })),
  role: z.string().optional(),
  /** The judge whose error failed it (no verdict, an unreadable answer), or a judged env's reward
   * judge, with its whole conversation (src/judges/). */
  judge: judgeRecordSchema.optional(),
});
export type FailedRecord = z.infer<typeof failedRecordSchema>;

export function failedRecord(step: number, attempt: number, rollout: Rollout): FailedRecord {
  return {
    step,
    try: attempt,
    env: rollout.env,
    group_id: rollout.groupId,
    rollout_id: rollout.id,
    task_id: rollout.taskId,
    policy_version: rollout.policyVersion,
    error: rollout.error ?? "",
    num_turns: rollout.numTurns,
    messages: rollout.messages.map((m) => ({ ...m })),
    ...(rollout.role !== undefined ? { role: rollout.role } : {}),
    ...(rollout.judge ? { judge: judgeRecord(rollout.judge) } : {}),
  };
}

/** Appends the failed ones of `rollouts` to rollouts/failed_step_N.jsonl (nothing when none failed),
 * rewriting the file whole so that a full disk never leaves half a line. */
export function appendFailed(runDir: string, step: number, attempt: number, rollouts: Rollout[]): void {
  const failed = rollouts.filter((r) => r.error !== undefined);
  if (failed.length === 0) return;
  const path = failedPath(runDir, step);
  const before = existsSync(path) ? readFileSync(path, "utf8") : "";
  writeFileAtomic(path, before + failed.map((r) => `${JSON.stringify(failedRecord(step, attempt, r))}\n`).join(""));
}

/** Parses and checks a `rollouts/failed_step_N.jsonl` file's text. */
export function parseFailed(text: string): FailedRecord[] {
  return text
    .split("\n")
    .filter((line) => line.trim())
    .map((line) => failedRecordSchema.parse(JSON.parse(line)));
}
