// Chat messages as they travel between environments, the chat template, demonstration files and
// OpenAI-compatible endpoints. The shape is the OpenAI / Hugging Face wire format on purpose
// (snake_case `tool_calls`, `reasoning_content`): chat templates read exactly these keys, and a
// demonstrations JSONL written from them is read by `rlx sft` and by other tools without a
// conversion layer that could drift.

export type Role = "system" | "user" | "assistant" | "tool";

/** One tool call an assistant message makes; `arguments` is already-parsed JSON. */
export interface ToolCall {
  type: "function";
  function: { name: string; arguments: Record<string, unknown> };
}

export interface ChatMessage {
  role: Role;
  content: string;
  /** Assistant messages only. */
  tool_calls?: ToolCall[];
  /** Assistant reasoning that some templates render as <think>...</think> (and drop later). */
  reasoning_content?: string;
  /** Tool messages: the name of the tool that produced this output. */
  name?: string;
  /** Tool messages: the id of the call they answer (OpenAI's field; some templates print it). */
  tool_call_id?: string;
}

/** A tool as the chat template's `tools` variable expects it (JSON-schema parameters). */
export interface ToolSpec {
  type: "function";
  function: { name: string; description: string; parameters: Record<string, unknown> };
}

export function toolCall(name: string, args: Record<string, unknown>): ToolCall {
  return { type: "function", function: { name, arguments: args } };
}
