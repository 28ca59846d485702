// The assistant message of a chat completion, split as vLLM's reasoning and tool parsers split
// it: text inside a leading <think>...</think> is `reasoning_content`, each
// <tool_call>{"name", "arguments"}</tool_call> block (Qwen / Hermes, parsed by the envs' own
// parseCall) is a `tool_calls` entry with its arguments as a JSON string, and the rest is
// `content`. Incremental, so streaming and non-streaming responses are the same split: text is
// pushed as it is detokenized, and a possible tag prefix ("<tool_", "</thi") is held back until it
// is decided. A block that is not a valid call stays in the content verbatim, as vLLM does.
import { randomBytes } from "node:crypto";
import { parseCall } from "../model/parse.ts";

/** A tool call as the OpenAI chat API returns it. */
export interface ToolCallOut {
  index: number;
  id: string;
  type: "function";
  function: { name: string; arguments: string };
}

/** New pieces of the message since the last push. */
export interface AssistantDelta {
  content?: string;
  reasoning_content?: string;
  tool_calls?: ToolCallOut[];
}

const THINK_OPEN = "<think>";
const THINK_CLOSE = "</think>";
const CALL_OPEN = "<tool_call>";
const CALL_CLOSE = "</tool_call>";

/** Length of the longest suffix of `text` that is a proper prefix of `tag`. */
function partialTagLength(text: string, tag: string): number {
  for (let n = Math.min(tag.length - 1, text.length); n > 0; n--) if (tag.startsWith(text.slice(-n))) return n;
  return 0;
}

export class AssistantStream {
  private mode: "start" | "reasoning" | "content" | "call" = "start";
  private buffer = "";
  private calls = 0;

  /** `parseToolCalls`: split tool-call blocks out (tools were given with tool_choice "auto"). */
  constructor(private readonly parseToolCalls: boolean) {}

  /** Feeds detokenized text; returns what is now decided (empty object: nothing yet). */
  push(text: string): AssistantDelta {
    this.buffer += text;
    const out: AssistantDelta = {};
    for (let progressed = true; progressed;) progressed = this.step(out, false);
    return out;
  }

  /** The completion ended: everything still held back is decided. */
  finish(): AssistantDelta {
    const out: AssistantDelta = {};
    for (let progressed = true; progressed;) progressed = this.step(out, true);
    if (this.buffer) {
      const field = this.mode === "reasoning" ? "reasoning_content" : "content";
      append(out, field, this.mode === "call" ? CALL_OPEN + this.buffer : this.buffer);
      this.buffer = "";
    }
    return out;
  }

  /** One decision; true when it consumed something. */
  private step(out: AssistantDelta, final: boolean): boolean {
    const b = this.buffer;
    if (this.mode === "start") {
      const lead = b.trimStart();
      if (lead.startsWith(THINK_OPEN)) return this.consume(b.length - lead.length + THINK_OPEN.length, "reasoning");
      if (!final && (lead === "" || THINK_OPEN.startsWith(lead))) return false;
      this.mode = "content";
      return true;
    }
    if (this.mode === "reasoning") return this.until(out, THINK_CLOSE, "reasoning_content", "content", final);
    if (this.mode === "content") {
      if (!this.parseToolCalls) {
        append(out, "content", b);
        this.buffer = "";
        return false;
      }
      return this.until(out, CALL_OPEN, "content", "call", final);
    }
    const end = b.indexOf(CALL_CLOSE);
    if (end === -1) return false;
    const call = parseCall(b.slice(0, end).trim(), true);
    if (typeof call === "string") append(out, "content", CALL_OPEN + b.slice(0, end + CALL_CLOSE.length));
    else {
      (out.tool_calls ??= []).push({
        index: this.calls++,
        id: `chatcmpl-tool-${randomBytes(8).toString("hex")}`,
        type: "function",
        function: { name: call.function.name, arguments: JSON.stringify(call.function.arguments) },
      });
    }
    return this.consume(end + CALL_CLOSE.length, "content");
  }

  /** Emits text up to `tag` into `field`, then switches to `next`; holds back a partial tag. */
  private until(
    out: AssistantDelta,
    tag: string,
    field: "content" | "reasoning_content",
    next: "content" | "call",
    final: boolean,
  ): boolean {
    const at = this.buffer.indexOf(tag);
    if (at !== -1) {
      append(out, field, this.buffer.slice(0, at));
      return this.consume(at + tag.length, next);
    }
    const keep = final ? 0 : partialTagLength(this.buffer, tag);
    append(out, field, this.buffer.slice(0, this.buffer.length - keep));
    this.buffer = this.buffer.slice(this.buffer.length - keep);
    return false;
  }

  private consume(n: number, mode: AssistantStream["mode"]): boolean {
    this.buffer = this.buffer.slice(n);
    this.mode = mode;
    return true;
  }
}

function append(out: AssistantDelta, field: "content" | "reasoning_content", text: string): void {
  if (text) out[field] = (out[field] ?? "") + text;
}

/** The whole message of a finished completion (non-streaming responses). */
export function splitAssistant(text: string, parseToolCalls: boolean): Required<AssistantDelta> {
  const stream = new AssistantStream(parseToolCalls);
  const parts = [stream.push(text), stream.finish()];
  return {
    content: parts.map((p) => p.content ?? "").join(""),
    reasoning_content: parts.map((p) => p.reasoning_content ?? "").join(""),
    tool_calls: parts.flatMap((p) => p.tool_calls ?? []),
  };
}
