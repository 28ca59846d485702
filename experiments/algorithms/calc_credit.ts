// Agentic credit on the calc env with the lean calc judge (experiments/judges/calc_check.ts): the
// built-in agentic_credit's rule (the kit's credit.spreadCredit), with the judge's `no K` as its
// per-turn weights. The judge's conversation is the one it has as a reward judge; its verdict sets
// the weights of the policy's turns (the parts, as agentic_credit labels them):
//
//   yes       w_k = 1 for every turn
//   no K      w_K = 0, w_k = 1 for the other turns (turn K decided the failure)
//   no        w_k = 0 for every turn (no turn named: blame spread evenly)
//
// and, with A = r - mean r over the group (GRPO's, from the exact reward) and agentic_credit's
// factors c_k (A >= 0: K w_k / sum w; A < 0: K (1 - w_k) / sum (1 - w); 1 each when the sum is 0):
//
//   A_t = A ((1 - mix) + mix c_k)    on every action token t of turn k
//
// so a failed rollout's blame lands on the turn that failed (the call, when it added the wrong
// numbers), where GRPO spreads it over both. A judge without a verdict fails the rollout's scoring
// with the conversation.
//
//   algo = { type = "custom", path = "experiments/algorithms/calc_credit.ts", judge = { name = "judge", base_url = "..." } }
import type { AlgorithmKit } from "../../src/algorithms/registry.ts";
import type { AlgorithmContext } from "../../src/algorithms/base.ts";
import type { ChatClient } from "../../src/clients/chat_client.ts";
import type { CreditPart, Rollout } from "../../src/data/types.ts";
import { converse } from "../judges/calc_check.ts";

export default ({ Algorithm, z, group, credit, judges }: AlgorithmKit) =>
  class CalcCredit extends Algorithm<any> {
    static override type = "calc_credit";
    static override actionLossType = "rl" as const;
    static override groupRelative = true;
    static override schema = z.strictObject({
      judge: z.strictObject({
        name: z.string(),
        base_url: z.string(),
        max_tokens: z.number().int().positive().default(16),
        max_turns: z.number().int().positive().default(4),
      }),
      mix: z.number().min(0).max(1).default(0.5),
    });

    client?: ChatClient;

    override async setup(ctx: AlgorithmContext) {
      this.client = await ctx.connectJudge({ ...this.config.judge, temperature: 0 });
    }

    override async scoreRollout(rollout: Rollout) {
      const { max_tokens, max_turns } = this.config.judge;
      const talk = await converse(this.client!, rollout, {
        maxTokens: max_tokens,
        temperature: 0,
        maxTurns: max_turns,
      });
      const record = { kind: "calc_credit", model: this.client!.model, messages: talk.messages };
      if (!talk.verdict)
        throw new judges.JudgeError(`the calc judge gave no verdict in ${max_turns} replies (judge.max_turns)`, record);
      const parts = credit.creditParts(rollout);
      const { score, turn } = talk.verdict;
      parts.forEach((p: CreditPart) => (p.weight = score === 1 || (turn !== undefined && p.part !== turn) ? 1 : 0));
      rollout.credit = { judge: record, parts };
    }

    override async scoreGroup(rollouts: Rollout[]) {
      const advantages = group.centered(rollouts.map((r) => r.reward));
      rollouts.forEach((rollout, i) => {
        rollout.advantage = advantages[i]!;
        credit.spreadCredit(rollout, this.config.mix);
      });
    }
  };
