// rlx serve's split of an assistant completion into reasoning_content, content and tool_calls
// (src/serve/chat_stream.ts): the tool calls equal what the envs' parser (parseAssistant)
// reads from the same text, and pushing the text in pieces (every two-way split, and one
// character at a time, as streaming does) gives exactly the split of the whole text.
import { describe, expect, test } from "bun:test";
import {
  type AssistantDelta,
  AssistantStream,
  splitAssistant,
  type ToolCallOut,
} from "../../../src/serve/chat_stream.ts";
import { parseAssistant } from "../../../src/model/parse.ts";

const CALL_A = '<tool_call>\n{"name": "forth", "arguments": {"code": "3 4 + ."}}\n</tool_call>';
const CALL_B = '<tool_call>\n{"name": "search", "arguments": {"query": "a <b> c", "k": 2}}\n</tool_call>';

/** Feeds `pieces` one by one and concatenates the deltas, as a streaming client does. */
function streamed(pieces: string[], tools: boolean) {
  const stream = new AssistantStream(tools);
  const deltas: AssistantDelta[] = [...pieces.map((p) => stream.push(p)), stream.finish()];
  return {
    content: deltas.map((d) => d.content ?? "").join(""),
    reasoning_content: deltas.map((d) => d.reasoning_content ?? "").join(""),
    tool_calls: deltas.flatMap((d) => d.tool_calls ?? []).map((c) => ({ index: c.index, function: c.function })),
  };
}

const CASES: Array<[string, string, boolean]> = [
  ["thinking, text, two calls", `<think>\nLet me run it.\n</think>\n\nRunning.\n${CALL_A}\n${CALL_B}`, true],
  ["a plain answer with a '<' that is no tag", "3 < 4 and <tool is not a call; </think> neither", true],
  ["tools not requested: call text stays content", `Sure. ${CALL_A}`, false],
  [
    "a malformed call stays content verbatim",
    '<tool_call>\n{"name": "forth", "arguments": [1]}\n</tool_call> ok',
    true,
  ],
  ["an unfinished think block is all reasoning", "<think>still thinking about 3 + 4", true],
  ["an unterminated call is content", `Calling ${CALL_A.slice(0, 30)}`, true],
];

describe("assistant split", () => {
  for (const [what, text, tools] of CASES) {
    test(`${what}: streamed in any pieces = whole`, () => {
      const whole = splitAssistant(text, tools);
      const strip = (c: ToolCallOut) => ({ index: c.index, function: c.function });
      const expected = { ...whole, tool_calls: whole.tool_calls.map(strip) };
      for (let cut = 0; cut <= text.length; cut++)
        expect(streamed([text.slice(0, cut), text.slice(cut)], tools)).toEqual(expected);
      expect(streamed([...text], tools)).toEqual(expected);
      // Without a valid call or a think block, the text is the content, untouched.
      if (!text.startsWith("<think>") && whole.tool_calls.length === 0) expect(whole.content).toBe(text);
    });
  }

  test("tool calls equal the envs' parser; reasoning and content are split out", () => {
    const text = `<think>\nLet me run it.\n</think>\n\nRunning.\n${CALL_A}\n${CALL_B}`;
    const whole = splitAssistant(text, true);
    const envs = parseAssistant(text).message;
    expect(
      whole.tool_calls.map((c) => ({ name: c.function.name, arguments: JSON.parse(c.function.arguments) })),
    ).toEqual(envs.tool_calls!.map((c) => c.function));
    expect(whole.tool_calls.map((c) => [c.index, c.type, c.id.startsWith("chatcmpl-tool-")])).toEqual([
      [0, "function", true],
      [1, "function", true],
    ]);
    expect(whole.reasoning_content).toBe("\nLet me run it.\n");
    expect(splitAssistant("<think>still thinking", true)).toMatchObject({
      reasoning_content: "still thinking",
      content: "",
    });
    expect(whole.content).toBe("\n\nRunning.\n\n");
    expect(splitAssistant('<tool_call>\n{"name": "forth", "arguments": [1]}\n</tool_call> ok', true)).toMatchObject({
      content: '<tool_call>\n{"name": "forth", "arguments": [1]}\n</tool_call> ok',
      tool_calls: [],
    });
  });
});
