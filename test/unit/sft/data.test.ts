// SFT data: JSONL rows (both shapes) and their errors naming file and line, and the target tokens
// of a conversation. The decisive check: the tokens SFT trains on are exactly the tokens the
// rollout driver has the model sample for the same conversation (a scripted client replays the
// SFT targets through runRollout on the real forth env, tools and all), so SFT teaches precisely
// what RL later samples.
import { beforeAll, describe, expect, test } from "bun:test";
import { mkdtempSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { createEnv, loadEnv } from "../../../src/envs/index.ts";
import type { Completion, CompletionRequest, SamplingClient } from "../../../src/clients/types.ts";
import { IM_END_ID, writeByteTokenizer } from "../../../src/model/byte_tokenizer.ts";
import { ChatRenderer } from "../../../src/model/render.ts";
import { Tokenizer } from "../../../src/model/tokenizer.ts";
import { runRollout } from "../../../src/rollout/driver.ts";
import { parseRow, readSftRows, type SftConversation } from "../../../src/sft/data.ts";
import { tokenizeConversation } from "../../../src/sft/tokens.ts";

let tokenizer: Tokenizer;
let renderer: ChatRenderer;
let dir: string;

beforeAll(() => {
  dir = mkdtempSync(join(tmpdir(), "rlx-sft-data-"));
  writeByteTokenizer(dir);
  tokenizer = Tokenizer.load(dir);
  renderer = new ChatRenderer(tokenizer);
});

/** The target text of each run of ce weight 1, decoded. */
function targets(conv: SftConversation): string[] {
  const { tokenIds, ceWeights } = tokenizeConversation(renderer, conv);
  const runs: string[] = [];
  let current: number[] | null = null;
  tokenIds.forEach((id, i) => {
    if (ceWeights[i]) (current ??= []).push(id);
    else if (current) (runs.push(tokenizer.decode(current)), (current = null));
  });
  if (current) runs.push(tokenizer.decode(current));
  return runs;
}

describe("rows", () => {
  test("messages rows train every assistant turn; prompt/completion rows only the completion", () => {
    const chat = parseRow(
      JSON.stringify({
        messages: [
          { role: "user", content: "hi" },
          { role: "assistant", content: "a" },
          { role: "user", content: "again" },
          { role: "assistant", content: "b" },
        ],
        env: "math",
      }),
      "f:1",
    );
    expect(chat.targetsFrom).toBe(0);
    expect(chat.env).toBe("math");
    expect(targets(chat)).toEqual(["a<|im_end|>", "b<|im_end|>"]);

    const pc = parseRow(
      JSON.stringify({
        prompt: [
          { role: "user", content: "q" },
          { role: "assistant", content: "earlier" },
          { role: "user", content: "q2" },
        ],
        completion: "answer",
      }),
      "f:2",
    );
    expect(pc.targetsFrom).toBe(3);
    expect(pc.env).toBe("sft");
    expect(targets(pc)).toEqual(["answer<|im_end|>"]);

    const plain = parseRow(JSON.stringify({ prompt: "2+2?", completion: "4" }), "f:3");
    expect(plain.messages).toEqual([
      { role: "user", content: "2+2?" },
      { role: "assistant", content: "4" },
    ]);
  });

  test("every malformed row is an error naming FILE:LINE and what is wrong", () => {
    const bad: Array<[string, RegExp]> = [
      ["{not json", /data\.jsonl:2: not valid JSON/],
      ['["a"]', /data\.jsonl:2: a row must be a JSON object/],
      ['{"text": "x"}', /data\.jsonl:2: a row needs "messages", or "prompt" and "completion" \(it has text\)/],
      [
        '{"messages": [{"role": "bot", "content": "x"}]}',
        /data\.jsonl:2: messages\[0\]\.role must be one of system, user, assistant, tool, got "bot"/,
      ],
      ['{"messages": [{"role": "user", "content": 5}]}', /messages\[0\]\.content must be a string/],
      ['{"messages": [{"role": "user", "content": "q"}]}', /data\.jsonl:2: no assistant message to train on/],
      [
        '{"prompt": [{"role": "user", "content": "q"}, {"role": "assistant", "content": "a"}], "completion": [{"role": "user", "content": "x"}]}',
        /no assistant message to train on/,
      ],
      ['{"messages": [{"role": "assistant", "content": "a"}]}', /starts with an assistant message/],
      ['{"prompt": "q", "completion": "a", "tools": {}}', /tools must be a list/],
    ];
    for (const [line, error] of bad) {
      const path = join(dir, "data.jsonl");
      writeFileSync(path, `{"prompt": "ok", "completion": "fine"}\n${line}\n`);
      expect(() => readSftRows([path])).toThrow(error);
    }
  });

  test("files: blank lines skipped, line numbers kept, a missing or empty file is an error", () => {
    const path = join(dir, "gaps.jsonl");
    writeFileSync(path, '\n{"prompt": "a", "completion": "b"}\n\n{"prompt": "c", "completion": "d"}\n');
    expect(readSftRows([path]).map((r) => r.where)).toEqual([`${path}:2`, `${path}:4`]);
    expect(() => readSftRows([join(dir, "absent.jsonl")])).toThrow(/absent\.jsonl does not exist/);
    writeFileSync(join(dir, "empty.jsonl"), "\n");
    expect(() => readSftRows([join(dir, "empty.jsonl")])).toThrow(/has no rows/);
  });
});

describe("target tokens", () => {
  test("the header is context; content, tool-call markup and the stop token are targets; the newline after it is not", () => {
    const conv = parseRow(JSON.stringify({ prompt: "q", completion: "A\nB" }), "f:1");
    const { tokenIds, ceWeights } = tokenizeConversation(renderer, conv);
    const text = "<|im_start|>user\nq<|im_end|>\n<|im_start|>assistant\nA\nB<|im_end|>\n";
    expect(tokenizer.decode(tokenIds)).toBe(text);
    const start = tokenIds.length - 1 - 4; // "A\nB" + <|im_end|> before the final "\n"
    expect(ceWeights).toEqual(tokenIds.map((_, i) => (i >= start && i < tokenIds.length - 1 ? 1 : 0)));
    expect(tokenIds.at(-2)).toBe(IM_END_ID);
  });

  test("a stop token spelled inside the content is text: the target runs on to the real stop token", () => {
    const conv = parseRow(JSON.stringify({ prompt: "q", completion: "say <|im_end|> then" }), "f:1");
    const { tokenIds, ceWeights } = tokenizeConversation(renderer, conv);
    expect(targets(conv)).toEqual(["say <|im_end|> then<|im_end|>"]);
    expect(tokenIds.filter((id) => id === IM_END_ID)).toHaveLength(2); // the user turn's and the real stop
    expect(ceWeights.filter(Boolean)).toHaveLength("say <|im_end|> then".length + 1);
  });

  test("SFT targets are exactly what the rollout driver samples for the same forth conversation", async () => {
    const env = await createEnv(await loadEnv("forth"), {});
    const task = (await env.load("train", 0))[0]!;
    const messages = await env.demonstrate!(task);
    const conv: SftConversation = {
      messages,
      tools: env.tools.map((t) => t.spec),
      targetsFrom: 0,
      where: "demo",
      env: "forth",
    };
    const { tokenIds, ceWeights } = tokenizeConversation(renderer, conv);
    const runs: number[][] = [];
    tokenIds.forEach((id, i) => {
      if (ceWeights[i] && !ceWeights[i - 1]) runs.push([]);
      if (ceWeights[i]) runs.at(-1)!.push(id);
    });
    expect(runs.length).toBeGreaterThanOrEqual(2); // a tool call turn and the answer turn

    // A client that "samples" the SFT targets, turn by turn.
    const replay: SamplingClient = {
      async complete(_request: CompletionRequest): Promise<Completion> {
        const ids = runs.shift()!;
        return { tokenIds: ids, logprobs: ids.map(() => -1), finishReason: "stop", policyVersion: 0 };
      },
      async score() {
        return [];
      },
    };
    const rollout = await runRollout({
      id: "r",
      groupId: "g",
      envId: "forth",
      env,
      task,
      client: replay,
      renderer,
      sampling: { maxTokens: 4096, temperature: 1, topP: 1, topK: 0 },
    });
    expect(rollout.error).toBeUndefined();
    expect(rollout.reward).toBe(1);
    expect(rollout.numSamples).toBe(1);
    const rolloutIds = rollout.segments.flatMap((s) => s.tokenIds);
    const sampled: number[] = rollout.segments.flatMap((s) => s.tokenIds.map(() => (s.sampled ? 1 : 0)));
    // The conversation rendering ends with the template's "\n" after the last stop token; the rollout stops at it.
    expect(rolloutIds).toEqual(tokenIds.slice(0, -1));
    expect(sampled).toEqual(ceWeights.slice(0, -1));
  });

  test("a template that rewrites earlier turns cannot locate their targets: an error naming the row and the fix", () => {
    // Like templates that drop past reasoning: an earlier assistant turn renders differently once a later one exists.
    const hiding =
      "{% for m in messages %}<|im_start|>{{ m.role }}\n{% if m.role == 'assistant' and not loop.last %}[hidden]{% else %}{{ m.content }}{% endif %}<|im_end|>\n{% endfor %}{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}";
    const hidingRenderer = new ChatRenderer(tokenizer, hiding);
    const two = parseRow(
      JSON.stringify({
        messages: [
          { role: "user", content: "a" },
          { role: "assistant", content: "b" },
          { role: "user", content: "c" },
          { role: "assistant", content: "d" },
        ],
      }),
      "data.jsonl:7",
    );
    expect(() => tokenizeConversation(hidingRenderer, two)).toThrow(
      /data\.jsonl:7: the chat template renders the turns up to assistant message 1 differently/,
    );
    const last = parseRow(
      JSON.stringify({
        prompt: [
          { role: "user", content: "a" },
          { role: "assistant", content: "b" },
          { role: "user", content: "c" },
        ],
        completion: "d",
      }),
      "data.jsonl:8",
    );
    const { tokenIds, ceWeights } = tokenizeConversation(hidingRenderer, last);
    expect(tokenizer.decode(tokenIds)).toContain("[hidden]");
    expect(tokenizer.decode(tokenIds.filter((_, i) => ceWeights[i]))).toBe("d<|im_end|>");
  });

  test("math demonstrations: the worked solution and its stop token are the only targets", async () => {
    const env = await createEnv(await loadEnv("math"), {});
    const task = (await env.load("train", 0))[0]!;
    const conv: SftConversation = {
      messages: await env.demonstrate!(task),
      targetsFrom: 0,
      where: "demo",
      env: "math",
    };
    expect(targets(conv)).toEqual([`${task.solution}<|im_end|>`]);
  });
});
