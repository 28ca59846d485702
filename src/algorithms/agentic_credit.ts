// Agentic credit assignment: GRPO's outcome advantage, redistributed over the parts of a rollout by
// a judge that reads the trace (roadmap: "a model that reads the trace and assigns different
// weights to different parts of the same rollout").
//
// Parts are the rollout's assistant turns k = 1..K (its sampled segments; a turn holds its tool
// calls). As each rollout finishes, a frozen chat endpoint (`judge`) gets the task, the reference
// answer, the reward and the conversation with its turns labelled STEP 1..K, and answers one line
// per part, `STEP k: w_k`, w_k in [0, 1] (1 = a useful, correct step; 0 = a mistake or wasted).
// Once the group has finished, with A = GRPO's advantage of the rollout (r - mean r, or
// std-normalized):
//
//   A >= 0:  c_k = K w_k / sum_j w_j                  credit goes to the useful steps
//   A <  0:  c_k = K (1 - w_k) / sum_j (1 - w_j)      blame goes to the mistakes
//            (a zero sum: c_k = 1 for every k)
//   A_t = A ((1 - mix) + mix c_k)                     on every action token t of part k
//
// mean_k c_k = 1, so the factor's mean over parts is 1: the judge moves credit between the turns
// of a rollout but keeps its sign and its mean per part (mix = 0 is GRPO exactly). `advantage`
// stays A. A judge error, timeout or an answer missing a step fails the rollout with the reason.
// The judge's conversation and each part's weight, factor and token span are in the audit record.
import { z } from "zod";
import type { CreditPart, JudgeRecord, Rollout } from "../data/types.ts";
import { hashString } from "../envs/random.ts";
import type { ChatClient } from "../clients/chat_client.ts";
import { CallGate, CallTimeout } from "../clients/gate.ts";
import { JudgeError, validScore } from "../judges/judge.ts";
import { judgeEndpointFields } from "../judges/schema.ts";
import { messageText, taskText } from "../judges/trace.ts";
import type { ChatMessage } from "../data/chat.ts";
import { Algorithm, type AlgorithmContext, type LossComponent } from "./base.ts";
import { assignGrpoAdvantages, grpoFields } from "./grpo.ts";
import { assignAdvantage, creditParts } from "./routing.ts";

const schema = z.strictObject({
  type: z.literal("agentic_credit"),
  ...grpoFields,
  /** The credit judge: a frozen chat endpoint, and limits on its calls. */
  judge: z.strictObject({
    ...judgeEndpointFields,
    concurrency: z.number().int().positive().default(16),
    timeout_s: z.number().positive().default(300),
  }),
  /** How much of the advantage the judge redistributes: 0 = GRPO, 1 = all of it. */
  mix: z.number().min(0).max(1).default(0.5),
});
type CreditConfig = z.infer<typeof schema>;

export const CREDIT_SYSTEM_PROMPT = `You assign credit within an AI assistant's attempt at a task. Its turns are labelled STEP 1 to STEP K. Given the task, the reference answer, the reward the attempt earned and the conversation, weigh each step: 1 for a useful, correct step, 0 for a mistake or a wasted step, values in between for partly useful ones. Answer with one line per step, exactly of the form
STEP k: w`;

/** Weights w_1..w_K from `STEP k: w` lines (the last line per step counts), or the problem. */
export function parseStepWeights(text: string, parts: number): number[] | string {
  const weights: (number | undefined)[] = new Array(parts).fill(undefined);
  for (const [, k, w] of text.matchAll(/^\s*STEP\s+(\d+)\s*:\s*(\S+)\s*$/gim)) {
    const step = Number(k);
    if (step >= 1 && step <= parts) weights[step - 1] = validScore(w);
  }
  const missing = weights.flatMap((w, i) => (w === undefined ? [i + 1] : []));
  return missing.length
    ? `no "STEP k: w" line with w in [0, 1] for step(s) ${missing.join(", ")} of ${parts}`
    : (weights as number[]);
}

/** c_1..c_K of the header's formula for an advantage's sign. */
export function creditFactors(weights: readonly number[], advantage: number): number[] {
  const share = weights.map((w) => (advantage >= 0 ? w : 1 - w));
  const sum = share.reduce((a, b) => a + b, 0);
  return sum > 0 ? share.map((s) => (weights.length * s) / sum) : weights.map(() => 1);
}

/** A scored rollout's advantage A (kept as `advantage`) spread over its parts by the header's
 * rule: each part's factor (1 - mix) + mix c_k, and A times it on every action token of the part. */
export function spreadCredit(rollout: Rollout, mix: number): void {
  const outcome = rollout.advantage ?? 0;
  const parts = rollout.credit?.parts;
  if (!parts) throw new Error(`agentic credit: rollout ${rollout.id} reached scoreGroup without its weights`);
  const factors = creditFactors(
    parts.map((p) => p.weight),
    outcome,
  );
  const perAction: number[] = [];
  parts.forEach((p, k) => {
    p.factor = 1 - mix + mix * factors[k]!;
    for (let t = p.start; t < p.end; t++) perAction.push(outcome * p.factor);
  });
  assignAdvantage(rollout, perAction);
  rollout.advantage = outcome;
}

export class AgenticCredit extends Algorithm<CreditConfig> {
  static override type = "agentic_credit";
  static override actionLossType: LossComponent = "rl";
  static override groupRelative = true;
  static override schema = schema;

  judge?: ChatClient;
  private gate?: CallGate;

  override async setup(ctx: AlgorithmContext): Promise<void> {
    this.judge = await ctx.connectJudge(this.config.judge);
    this.gate = new CallGate({
      concurrency: this.config.judge.concurrency,
      timeoutMs: this.config.judge.timeout_s * 1000,
    });
  }

  /** The judge's conversation: task, reward, and the trace with the parts labelled. */
  prompt(rollout: Rollout, parts: readonly CreditPart[]): ChatMessage[] {
    const step = new Map(parts.map((p) => [p.messageIndex, p.part]));
    const from = rollout.task.prompt.length;
    const trace = rollout.messages.slice(from).map((m, i) => {
      const label = step.has(from + i) ? `STEP ${step.get(from + i)} ` : "";
      return `${label}[${from + i}] ${m.role}:\n${messageText(m)}`;
    });
    const content = `${taskText(rollout.task)}\n\nREWARD: ${rollout.reward}\n\nCONVERSATION (${parts.length} steps):\n${trace.join("\n\n")}`;
    return [
      { role: "system", content: CREDIT_SYSTEM_PROMPT },
      { role: "user", content },
    ];
  }

  override async scoreRollout(rollout: Rollout): Promise<void> {
    if (!this.judge || !this.gate) throw new Error("agentic_credit: scoreRollout before setup");
    const parts = creditParts(rollout);
    const messages = this.prompt(rollout, parts);
    const record: JudgeRecord = { kind: "credit", model: this.judge.model, messages };
    const { max_tokens, temperature } = this.config.judge;
    const reply = await this.gate
      .run((signal) =>
        this.judge!.chat({
          messages,
          maxTokens: max_tokens,
          temperature,
          seed: hashString(`credit:${rollout.id}`),
          signal,
        }),
      )
      .catch((err: Error) => {
        throw new JudgeError(
          `the credit judge ${err instanceof CallTimeout ? `${err.message} (judge.timeout_s)` : `failed: ${err.message}`}`,
          record,
        );
      });
    messages.push(reply.message);
    const weights = parseStepWeights(reply.message.content, parts.length);
    if (typeof weights === "string") throw new JudgeError(`the credit judge's answer has ${weights}`, record);
    parts.forEach((p, k) => (p.weight = weights[k]!));
    rollout.credit = { judge: record, parts };
  }

  override async scoreGroup(group: Rollout[]): Promise<void> {
    assignGrpoAdvantages(this.config, group);
    for (const rollout of group) spreadCredit(rollout, this.config.mix);
  }
}
