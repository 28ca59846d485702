// Parses a sampled assistant completion (decoded text) into a chat message: reasoning inside
// <think>...</think>, tool calls in the Qwen/Hermes convention
//
//   <tool_call>
//   {"name": "forth", "arguments": {"code": "1 2 + ."}}
//   </tool_call>
//
// and the remaining text as content. The parsed message is used to render later turns and to
// compute rewards; the training sequence keeps the sampled token ids, never this re-encoding.
// Malformed calls are reported, not thrown: the rollout driver answers them with an error
// observation, so a model learns the format instead of crashing the run.
import type { ChatMessage, ToolCall } from "../data/chat.ts";

export interface ParsedAssistant {
  message: ChatMessage;
  /** Every <tool_call> block in order: the parsed call, or why it is malformed. The valid ones
   * are also in `message.tool_calls`. */
  blocks: Array<{ call: ToolCall } | { error: string }>;
}

const TOOL_CALL = /<tool_call>([\s\S]*?)(<\/tool_call>|$)/g;

/** One <tool_call> block's body: the call, or why it is malformed (also rlx serve's parser). */
export function parseCall(body: string, closed: boolean): ToolCall | string {
  if (!closed) return "unterminated <tool_call> (missing </tool_call>)";
  let value: unknown;
  try {
    value = JSON.parse(body);
  } catch (err) {
    return `tool call is not valid JSON (${(err as Error).message})`;
  }
  if (!value || typeof value !== "object" || Array.isArray(value))
    return 'tool call must be a JSON object with "name" and "arguments"';
  const { name, arguments: args } = value as { name?: unknown; arguments?: unknown };
  if (typeof name !== "string" || name.length === 0) return 'tool call has no "name" string';
  let parsedArgs: unknown = args ?? {};
  if (typeof parsedArgs === "string") {
    try {
      parsedArgs = JSON.parse(parsedArgs);
    } catch {
      return 'tool call "arguments" is a string that is not JSON';
    }
  }
  if (!parsedArgs || typeof parsedArgs !== "object" || Array.isArray(parsedArgs))
    return 'tool call "arguments" must be a JSON object';
  return { type: "function", function: { name, arguments: parsedArgs as Record<string, unknown> } };
}

/** `stopStrings`: spellings of stop tokens to strip from the end (e.g. "<|im_end|>"). */
export function parseAssistant(text: string, stopStrings: string[] = []): ParsedAssistant {
  let body = text;
  for (let stripped = true; stripped;) {
    stripped = false;
    for (const stop of stopStrings) {
      if (stop && body.endsWith(stop)) {
        body = body.slice(0, -stop.length);
        stripped = true;
      }
    }
  }
  let reasoning: string | undefined;
  const thinkEnd = body.indexOf("</think>");
  if (thinkEnd !== -1) {
    reasoning = body
      .slice(0, thinkEnd)
      .replace(/^\s*<think>/, "")
      .trim();
    body = body.slice(thinkEnd + "</think>".length);
  }
  const blocks: ParsedAssistant["blocks"] = [];
  const content = body.replace(TOOL_CALL, (_match, inner: string, close: string) => {
    const call = parseCall(inner.trim(), close === "</tool_call>");
    blocks.push(typeof call === "string" ? { error: call } : { call });
    return "";
  });
  const toolCalls = blocks.flatMap((block) => ("call" in block ? [block.call] : []));
  const message: ChatMessage = { role: "assistant", content: content.trim() };
  if (reasoning !== undefined) message.reasoning_content = reasoning;
  if (toolCalls.length > 0) message.tool_calls = toolCalls;
  return { message, blocks };
}
