// A custom judge in one file: asks the judge model one yes/no question, "is the final answer the
// reference answer?", and scores 1 for a reply starting with YES, 0 for NO; anything else is
// garbage and fails the rollout with the reply (never a score of 0). `args.question` rewords the
// question. Everything it needs comes from the kit (docs/algorithms.md, "Writing a judge"):
// `this.client` (the judge endpoint's chat client), `this.config` (its block), `this.env`.
//
//   [[orchestrator.train.env]]
//   id = "math"
//   judge = { type = "custom", path = "examples/judges/yes_no.ts", name = "judge", base_url = "http://127.0.0.1:8002/v1" }
import type { JudgeKit } from "../../src/judges/index.ts";
import type { Rollout, Task } from "../../src/data/types.ts";
import type { ChatMessage } from "../../src/data/chat.ts";

export default ({ Judge, JudgeError, taskText, messageText }: JudgeKit) =>
  class YesNo extends Judge {
    override async judge(task: Task, rollout: Rollout, signal?: AbortSignal) {
      const question = String(this.config.args.question ?? "Is the assistant's final answer the reference answer?");
      const final = messageText(rollout.messages.at(-1)!);
      const messages: ChatMessage[] = [
        {
          role: "user",
          content: `${taskText(task)}\n\nFINAL ANSWER:\n${final}\n\n${question} Reply YES or NO.`,
        },
      ];
      const record = { kind: "yes_no", model: this.client.model, messages };
      const reply = await this.client.chat({ messages, maxTokens: this.config.max_tokens, temperature: 0, signal });
      messages.push({ role: "assistant", content: reply.message.content });
      const word = /^\s*(YES|NO)\b/i.exec(reply.message.content)?.[1]?.toUpperCase();
      if (!word) throw new JudgeError(`the yes/no judge said neither: ${reply.message.content.slice(0, 100)}`, record);
      const score = word === "YES" ? 1 : 0;
      return { score, record: { ...record, score }, metrics: {} };
    }
  };
