// experiments/scripts/obs_loss.ts (experiment 7's held-out observation-prediction loss) on the
// micro model: the tokens it averages are exactly the tool messages' content (found here by
// searching the rendered ids for the content's own byte tokens, not by the renderer's attribution),
// the mean is the hand average of -log p at those positions, each scored in a sequence of its own,
// and the digit/other split counts the digit characters of the hand-written outputs.
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { rmSync, writeFileSync } from "node:fs";
import { dirname, join } from "node:path";
import { observationLoss } from "../../../experiments/scripts/obs_loss.ts";
import { toolCall, type ChatMessage } from "../../../src/data/chat.ts";
import { loadModel } from "../../../src/model/hf.ts";
import { ChatRenderer } from "../../../src/model/render.ts";
import { Tokenizer } from "../../../src/model/tokenizer.ts";
import { loadNative } from "../../../src/native/ffi.ts";
import { score } from "../../../src/native/generate.ts";
import { microModelDir } from "../../fixtures/serve_model.ts";

const tools = [
  {
    type: "function" as const,
    function: {
      name: "forth",
      description: "run",
      parameters: { type: "object", properties: { code: { type: "string" } } },
    },
  },
];
const OUTPUTS = ["256 \nstack: <0>", "7 \nstack: <1> 3"];
const rows = OUTPUTS.map((out, i): ChatMessage[] => [
  { role: "system", content: "Use forth." },
  { role: "user", content: `Task ${i}` },
  { role: "assistant", content: "", tool_calls: [toolCall("forth", { code: `${i} .` })] },
  { role: "tool", name: "forth", content: out },
  { role: "assistant", content: "Answer: 256" },
]);

let dir = "";
let demos = "";
beforeAll(async () => {
  await loadNative();
  dir = await microModelDir({ seed: 3, sharpen: 2 });
  demos = join(dirname(dir), "demos.jsonl");
  writeFileSync(demos, rows.map((messages) => JSON.stringify({ messages, tools, env: "forth" })).join("\n") + "\n");
});
// only once set: dirname("") is the working directory (a failed beforeAll leaves dir empty)
afterAll(() => {
  if (dir) rmSync(dirname(dir), { recursive: true, force: true });
});

function indexOfRun(haystack: number[], needle: number[]): number {
  outer: for (let i = 0; i + needle.length <= haystack.length; i++) {
    for (let j = 0; j < needle.length; j++) if (haystack[i + j] !== needle[j]) continue outer;
    return i;
  }
  return -1;
}

describe("observation loss", () => {
  test("mean -log p over the tool outputs' content tokens, digits apart", async () => {
    const tokenizer = Tokenizer.load(dir);
    const renderer = new ChatRenderer(tokenizer);
    const model = await loadModel(dir);
    const nll_all: number[] = [];
    const nll_digit: number[] = [];
    rows.forEach((messages, i) => {
      const ids = renderer.render(messages, { tools, addGenerationPrompt: false }).tokenIds;
      const content = tokenizer.encodePlain(OUTPUTS[i]!);
      const at = indexOfRun(ids, content);
      expect(at).toBeGreaterThan(0);
      const [logprobs] = score(model, [ids], { rowTokens: 0 }).logprobs;
      content.forEach((id, k) => {
        const nll = -logprobs![at + k]!;
        nll_all.push(nll);
        if (/[0-9]/.test(String.fromCharCode(id))) nll_digit.push(nll);
      });
    });
    model.free();
    const mean = (xs: number[]) => xs.reduce((a, b) => a + b, 0) / xs.length;
    const loss = await observationLoss(dir, demos);
    expect(loss.rows).toBe(2);
    expect(loss.tokens).toBe(OUTPUTS.join("").length); // one byte token per character
    expect(loss.digitTokens).toBe(7); // 2,5,6,0 and 7,1,3
    expect(loss.otherTokens).toBe(loss.tokens - 7);
    expect(loss.nll).toBeCloseTo(mean(nll_all), 4);
    expect(loss.digitNll).toBeCloseTo(mean(nll_digit), 4);
    expect(loss.nll).toBeGreaterThan(0);
  });

  test("a role with no content tokens is an error naming the role", async () => {
    await expect(observationLoss(dir, demos, "nobody")).rejects.toThrow(/role "nobody"/);
  });
});
