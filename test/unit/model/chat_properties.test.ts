// The chat renderer and the completion parser as properties over random conversations
// (fast-check, bounded runs), on the byte tokenizer's ChatML template: every token is attributed,
// the content tokens of each message decode to exactly its content (special-token spellings in it
// included, which never become special tokens), the ids equal encoding the text whole when no
// content spells a special token; and an assistant turn as the template renders it parses back to
// the same content and tool calls, while any string at all parses without throwing.
import { expect, test } from "bun:test";
import fc from "fast-check";
import { byteGenerationConfig, byteTokenizerConfig, byteTokenizerJson } from "../../../src/model/byte_tokenizer.ts";
import { type ChatMessage, toolCall } from "../../../src/data/chat.ts";
import { parseAssistant } from "../../../src/model/parse.ts";
import { ChatRenderer } from "../../../src/model/render.ts";
import { Tokenizer } from "../../../src/model/tokenizer.ts";

const tokenizer = new Tokenizer(byteTokenizerJson(), byteTokenizerConfig(), byteGenerationConfig());
const renderer = new ChatRenderer(tokenizer);

/** Text with a sprinkling of the template's own markers and special-token spellings. */
const text = fc
  .array(
    fc.oneof(fc.string({ maxLength: 12 }), fc.constantFrom("<|im_end|>", "<|im_start|>", "\n", "é漢🙂", "<tool_call>")),
    {
      maxLength: 5,
    },
  )
  .map((parts) => parts.join(""));
const plain = fc.string({ unit: "grapheme", maxLength: 40 }).filter((s) => !/[<>]/.test(s) && s.trim() === s);

const argsArb = fc.dictionary(
  fc.string({ minLength: 1, maxLength: 6 }),
  fc.oneof(fc.string({ maxLength: 8 }), fc.integer(), fc.boolean()),
  {
    maxKeys: 3,
  },
);
const callArb = fc
  .tuple(fc.constantFrom("forth", "search", "calc"), argsArb)
  .map(([name, args]) => toolCall(name, args));
const conversation = fc
  .array(
    fc.oneof(
      text.map((content): ChatMessage => ({ role: "user", content })),
      text.map((content): ChatMessage => ({ role: "assistant", content })),
      text.map((content): ChatMessage => ({ role: "tool", name: "forth", content })),
    ),
    { minLength: 1, maxLength: 5 },
  )
  .map((messages) => [{ role: "system", content: "Be brief." } as ChatMessage, ...messages]);

test("every message's content tokens decode to its content; specials never are content", () => {
  fc.assert(
    fc.property(conversation, fc.boolean(), (messages, addGenerationPrompt) => {
      const rendered = renderer.render(messages, { addGenerationPrompt });
      expect(rendered.messageIndex.length).toBe(rendered.tokenIds.length);
      expect(rendered.isContent.length).toBe(rendered.tokenIds.length);
      expect(tokenizer.decode(rendered.tokenIds)).toBe(rendered.text);
      messages.forEach((message, m) => {
        const ids = rendered.tokenIds.filter((_, i) => rendered.messageIndex[i] === m && rendered.isContent[i]);
        expect(tokenizer.decode(ids)).toBe(message.content);
      });
      rendered.tokenIds.forEach((id, i) => {
        if (tokenizer.specialIds.has(id)) expect(rendered.isContent[i]).toBe(false);
      });
      if (!messages.some((m) => /<\|im_(start|end)\|>/.test(m.content)))
        expect(rendered.tokenIds).toEqual(tokenizer.encode(rendered.text));
    }),
    { numRuns: 60, seed: 25 },
  );
});

test("an assistant turn as the template writes it parses back to its content and tool calls", () => {
  fc.assert(
    fc.property(plain, fc.array(callArb, { maxLength: 3 }), (content, calls) => {
      const message: ChatMessage = { role: "assistant", content, ...(calls.length ? { tool_calls: calls } : {}) };
      const full = renderer.text([{ role: "user", content: "q" }, message], { addGenerationPrompt: false });
      const start = full.lastIndexOf("<|im_start|>assistant\n") + "<|im_start|>assistant\n".length;
      const completion = full.slice(start).replace(/\n$/, ""); // what the model samples, up to <|im_end|>
      const parsed = parseAssistant(completion, ["<|im_end|>"]);
      expect(parsed.message.content).toBe(content);
      expect(parsed.message.tool_calls ?? []).toEqual(calls);
      expect(parsed.blocks.every((b) => "call" in b)).toBe(true);
    }),
    { numRuns: 100, seed: 25 },
  );
});

test("any string parses without throwing; each <tool_call> block is a call or a named error", () => {
  const noisy = fc
    .array(
      fc.oneof(
        fc.string({ maxLength: 10 }),
        fc.constantFrom("<tool_call>", "</tool_call>", "<think>", "</think>", '{"name": "f"}', "{"),
      ),
      {
        maxLength: 8,
      },
    )
    .map((parts) => parts.join(""));
  fc.assert(
    fc.property(noisy, (completion) => {
      const parsed = parseAssistant(completion, ["<|im_end|>"]);
      // text before the first </think> is reasoning; an unterminated block swallows later ones
      const body = completion.includes("</think>") ? completion.slice(completion.indexOf("</think>")) : completion;
      const opened = body.split("<tool_call>").length - 1;
      expect(parsed.blocks.length > 0).toBe(opened > 0);
      expect(parsed.blocks.length).toBeLessThanOrEqual(opened);
      for (const block of parsed.blocks) if ("error" in block) expect(block.error.length).toBeGreaterThan(0);
      expect(parsed.message.tool_calls?.length ?? 0).toBe(parsed.blocks.filter((b) => "call" in b).length);
    }),
    { numRuns: 200, seed: 25 },
  );
});
