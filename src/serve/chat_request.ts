// The chat-specific parts of a request body, shared by /v1/chat/completions and /tokenize:
// `messages` (OpenAI's shape: text parts, assistant `tool_calls` with JSON-string arguments,
// `reasoning_content`, tool results), `tools`, `tool_choice` and the template switches. Read into
// the chat message type the renderer and the envs use (src/data/chat.ts), as vLLM hands them to
// the template: tool-call arguments parsed from their JSON string into an object.
import type { ChatMessage, Role, ToolCall, ToolSpec } from "../data/chat.ts";
import { InvalidRequestError } from "../engine/errors.ts";
import type { Fields } from "./fields.ts";

/** The chat template's inputs for one request. */
export interface ChatInputs {
  messages: ChatMessage[];
  /** Rendered into the prompt (absent with tool_choice "none", as vLLM does). */
  tools: ToolSpec[] | undefined;
  /** Whether tool calls are parsed out of the completion (tools given, tool_choice "auto"). */
  parseToolCalls: boolean;
  addGenerationPrompt: boolean;
  templateArgs: Record<string, unknown>;
}

const ROLES = new Set<string>(["system", "user", "assistant", "tool", "developer"]);

/** Reads messages, tools, tool_choice, add_generation_prompt and chat_template_kwargs. */
export function readChatInputs(f: Fields): ChatInputs {
  const tools = readTools(f.raw("tools"));
  const choice = f.raw("tool_choice") ?? "auto";
  if (choice !== "auto" && choice !== "none")
    throw new InvalidRequestError(
      `tool_choice ${JSON.stringify(choice).slice(0, 60)}: rlx serve supports "auto" and "none" (forcing a call needs guided decoding, which it does not do)`,
      "tool_choice",
    );
  const useTools = tools.length > 0 && choice === "auto";
  return {
    messages: readMessages(f.raw("messages")),
    tools: useTools ? tools : undefined,
    parseToolCalls: useTools,
    addGenerationPrompt: f.bool("add_generation_prompt", true),
    templateArgs: f.object("chat_template_kwargs") ?? {},
  };
}

function readTools(value: unknown): ToolSpec[] {
  if (value === undefined || value === null) return [];
  if (!Array.isArray(value)) throw new InvalidRequestError("tools must be a list of function tools", "tools");
  return value.map((tool, i) => {
    const t = tool as { type?: unknown; function?: { name?: unknown; description?: unknown; parameters?: unknown } };
    if (t?.type !== "function" || typeof t.function?.name !== "string" || t.function.name === "")
      throw new InvalidRequestError(
        `tools[${i}] must be {"type": "function", "function": {"name": ..., "parameters": {...}}}`,
        "tools",
      );
    return tool as ToolSpec;
  });
}

export function readMessages(value: unknown): ChatMessage[] {
  if (!Array.isArray(value) || value.length === 0)
    throw new InvalidRequestError("messages must be a non-empty list of {role, content}", "messages");
  return value.map((m, i) => {
    const where = `messages[${i}]`;
    if (typeof m !== "object" || m === null || Array.isArray(m))
      throw new InvalidRequestError(`${where} must be an object with role and content`, "messages");
    const { role, content, name, tool_calls, reasoning_content, tool_call_id } = m as Record<string, unknown>;
    if (typeof role !== "string" || !ROLES.has(role))
      throw new InvalidRequestError(
        `${where}.role must be one of ${[...ROLES].join(", ")}, got ${JSON.stringify(role)}`,
        "messages",
      );
    const message: ChatMessage = {
      role: (role === "developer" ? "system" : role) as Role,
      content: readContent(content, where),
    };
    if (typeof name === "string") message.name = name;
    if (typeof reasoning_content === "string") message.reasoning_content = reasoning_content;
    if (typeof tool_call_id === "string") message.tool_call_id = tool_call_id;
    if (tool_calls !== undefined && tool_calls !== null) message.tool_calls = readToolCalls(tool_calls, where);
    return message;
  });
}

function readToolCalls(value: unknown, where: string): ToolCall[] {
  if (!Array.isArray(value)) throw new InvalidRequestError(`${where}.tool_calls must be a list`, "messages");
  return value.map((call, j) => {
    const fn = (call as { function?: { name?: unknown; arguments?: unknown } })?.function;
    const at = `${where}.tool_calls[${j}]`;
    if (typeof fn?.name !== "string")
      throw new InvalidRequestError(
        `${at} must be {"type": "function", "function": {"name", "arguments"}}`,
        "messages",
      );
    let args: unknown = fn.arguments ?? {};
    if (typeof args === "string") {
      try {
        args = JSON.parse(args || "{}");
      } catch {
        throw new InvalidRequestError(`${at}.function.arguments is not a JSON string`, "messages");
      }
    }
    if (typeof args !== "object" || args === null || Array.isArray(args))
      throw new InvalidRequestError(`${at}.function.arguments must be a JSON object`, "messages");
    return { type: "function", function: { name: fn.name, arguments: args as Record<string, unknown> } };
  });
}

function readContent(content: unknown, where: string): string {
  if (content === null || content === undefined) return "";
  if (typeof content === "string") return content;
  if (Array.isArray(content)) {
    return content
      .map((part, j) => {
        const p = part as { type?: unknown; text?: unknown } | null;
        if (p?.type !== "text" || typeof p.text !== "string")
          throw new InvalidRequestError(
            `${where}.content[${j}]: only {"type": "text", "text": ...} parts are supported (rlx serves text models)`,
            "messages",
          );
        return p.text;
      })
      .join("");
  }
  throw new InvalidRequestError(`${where}.content must be a string or a list of text parts`, "messages");
}
