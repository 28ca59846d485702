// A client for an OpenAI-compatible /v1/chat/completions endpoint (rlx serve, vLLM): messages and
// tools in, one assistant message out. Judges use it (src/judges/): a judge is a frozen model that
// reads text, so it may have any tokenizer, and it talks in chat messages and tool calls rather
// than in the policy's token ids. Tool-call arguments arrive as a JSON string (OpenAI's wire
// format) and are parsed into an object; a string that is not a JSON object is kept whole under
// `__unparsed`, so the caller can answer the model with an error observation instead of failing.
import { EndpointError } from "../errors.ts";
import type { ChatMessage, ToolCall, ToolSpec } from "../data/chat.ts";
import { DEFAULT_HTTP, type HttpOptions, JsonEndpoint } from "./http.ts";

export interface ChatRequest {
  messages: ChatMessage[];
  tools?: ToolSpec[];
  maxTokens: number;
  temperature: number;
  seed?: number;
  /** Cancels the request (the caller's timeout). */
  signal?: AbortSignal;
}

export interface ChatReply {
  message: ChatMessage;
  finishReason: string;
}

/** What a chat endpoint offers; the judges need nothing else (tests may give a plain object). */
export interface ChatClient {
  /** The model name, for records. */
  readonly model: string;
  chat(request: ChatRequest): Promise<ChatReply>;
}

interface WireToolCall {
  id?: string;
  function?: { name?: unknown; arguments?: unknown };
}
interface WireResponse {
  choices?: Array<{
    finish_reason?: string | null;
    message?: { content?: string | null; reasoning_content?: string | null; tool_calls?: WireToolCall[] | null };
  }>;
}

/** Tool-call arguments as an object: parsed JSON, or `{ __unparsed: text }`. */
export function parseArguments(raw: unknown): Record<string, unknown> {
  if (raw && typeof raw === "object" && !Array.isArray(raw)) return raw as Record<string, unknown>;
  if (typeof raw !== "string") return { __unparsed: String(raw) };
  try {
    const value = JSON.parse(raw);
    return value && typeof value === "object" && !Array.isArray(value) ? value : { __unparsed: raw };
  } catch {
    return { __unparsed: raw };
  }
}

/** The OpenAI wire form of a message (tool-call arguments as JSON strings). */
function wireMessage(m: ChatMessage): Record<string, unknown> {
  const out: Record<string, unknown> = { role: m.role, content: m.content };
  if (m.tool_calls?.length)
    out.tool_calls = m.tool_calls.map((c, i) => ({
      id: `call_${i}`,
      type: "function",
      function: { name: c.function.name, arguments: JSON.stringify(c.function.arguments) },
    }));
  if (m.name !== undefined) out.name = m.name;
  if (m.tool_call_id !== undefined) out.tool_call_id = m.tool_call_id;
  return out;
}

export class OpenAIChatClient implements ChatClient {
  private readonly endpoint: JsonEndpoint;

  constructor(
    readonly model: string,
    baseUrl: string,
    options: Partial<HttpOptions> & { apiKey?: string } = {},
  ) {
    const { apiKey, ...http } = options;
    this.endpoint = new JsonEndpoint(baseUrl.replace(/\/+$/, ""), {
      ...DEFAULT_HTTP,
      ...http,
      headers: apiKey ? { authorization: `Bearer ${apiKey}` } : {},
    });
  }

  async chat(request: ChatRequest): Promise<ChatReply> {
    const body = {
      model: this.model,
      messages: request.messages.map(wireMessage),
      ...(request.tools?.length ? { tools: request.tools, tool_choice: "auto" } : {}),
      max_tokens: request.maxTokens,
      temperature: request.temperature,
      ...(request.seed !== undefined ? { seed: request.seed } : {}),
    };
    const response = await this.endpoint.request<WireResponse>("/chat/completions", body, request.signal);
    const choice = response.choices?.[0];
    if (!choice?.message)
      throw new EndpointError(`${this.endpoint.url}/chat/completions: the response has no choices[0].message`, {
        fix: "the judge must be an OpenAI-compatible chat completions server (rlx serve, vLLM)",
      });
    const wire = choice.message;
    const toolCalls: ToolCall[] = (wire.tool_calls ?? []).map((c) => ({
      type: "function",
      function: { name: String(c.function?.name ?? ""), arguments: parseArguments(c.function?.arguments) },
    }));
    const message: ChatMessage = { role: "assistant", content: wire.content ?? "" };
    if (wire.reasoning_content) message.reasoning_content = wire.reasoning_content;
    if (toolCalls.length) message.tool_calls = toolCalls;
    return { message, finishReason: choice.finish_reason ?? "stop" };
  }
}
