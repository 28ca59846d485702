// A credit-assigning algorithm in one file: GRPO's advantage, except that a failed rollout's blame
// goes to the one turn a judge names as the mistake. The judge (`judge = { name, base_url }`, any
// OpenAI-compatible chat server) reads the conversation with its turns labelled STEP 1..K
// (the same labels and spans as the built-in agentic_credit) and answers `MISTAKE: k` or
// `MISTAKE: none`. With A = r - mean r over the group:
//
//   A >= 0, or no mistake named:  A on every action token (GRPO)
//   A <  0, mistake at step k:    A * K on the tokens of step k, 0 on the other steps
//
// so the rollout's total advantage summed over parts is unchanged (K parts x A, or all of it on one).
// A judge answer with neither fails the rollout's scoring with the reply (never silently GRPO).
//
//   [[orchestrator.train.env]]
//   id = "forth"
//   algo = { type = "custom", path = "examples/algorithms/blame_turn.ts", judge = { name = "judge", base_url = "http://127.0.0.1:8002/v1" } }
import type { AlgorithmKit } from "../../src/algorithms/registry.ts";
import type { AlgorithmContext } from "../../src/algorithms/base.ts";
import type { CreditPart, Rollout } from "../../src/data/types.ts";
import type { ChatClient } from "../../src/clients/chat_client.ts";
import type { ChatMessage } from "../../src/data/chat.ts";

export default ({ Algorithm, z, group, assignAdvantage, credit, judges }: AlgorithmKit) =>
  class BlameTurn extends Algorithm<any> {
    static override type = "blame_turn";
    static override actionLossType = "rl" as const;
    static override groupRelative = true;
    static override schema = z.strictObject({
      judge: z.strictObject({ name: z.string(), base_url: z.string(), max_tokens: z.number().default(64) }),
    });

    client?: ChatClient;

    override async setup(ctx: AlgorithmContext) {
      this.client = await ctx.connectJudge({ ...this.config.judge, temperature: 0 });
    }

    override async scoreRollout(rollout: Rollout) {
      const parts = credit.creditParts(rollout);
      const step = new Map(parts.map((p: CreditPart) => [p.messageIndex, p.part]));
      const trace = rollout.messages
        .map((m, i) =>
          step.has(i) ? `STEP ${step.get(i)}: ${judges.messageText(m)}` : `${m.role}: ${judges.messageText(m)}`,
        )
        .join("\n");
      const content = `${judges.taskText(rollout.task)}\n\nREWARD: ${rollout.reward}\n\n${trace}\n\nWhich step was the mistake? Answer MISTAKE: k or MISTAKE: none.`;
      const messages: ChatMessage[] = [{ role: "user", content }];
      const record = { kind: "blame_turn", model: this.client!.model, messages };
      const reply = await this.client!.chat({ messages, maxTokens: this.config.judge.max_tokens, temperature: 0 });
      messages.push({ role: "assistant", content: reply.message.content });
      const answer = /MISTAKE:\s*(none|\d+)/i.exec(reply.message.content)?.[1]?.toLowerCase();
      const k = answer === "none" ? 0 : Number(answer);
      if (answer === undefined || k > parts.length)
        throw new judges.JudgeError(`the judge named no mistake step: ${reply.message.content.slice(0, 100)}`, record);
      parts.forEach((p: CreditPart) => (p.weight = p.part === k ? 1 : 0));
      rollout.credit = { judge: record, parts };
    }

    override async scoreGroup(rollouts: Rollout[]) {
      const advantages = group.centered(rollouts.map((r) => r.reward));
      rollouts.forEach((rollout, i) => {
        const A = advantages[i]!;
        const parts = rollout.credit!.parts;
        const blamed = A < 0 && parts.some((p) => p.weight === 1);
        const perAction: number[] = [];
        for (const p of parts) {
          p.factor = blamed ? (p.weight === 1 ? parts.length : 0) : 1;
          for (let t = p.start; t < p.end; t++) perAction.push(A * p.factor);
        }
        assignAdvantage(rollout, perAction);
        rollout.advantage = A;
      });
    }
  };
