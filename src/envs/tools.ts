// Runs one parsed tool call against an env's tools and turns the result into the tool message the
// model sees next. The rollout driver, `rlx env tool` and `rlx env demos` all go through here, so
// the observation a user debugs is byte for byte the one the model is trained on.
import type { ChatMessage, ToolCall } from "../data/chat.ts";
import type { Task, Tool } from "./types.ts";

export interface ToolObservation {
  message: ChatMessage;
  isError: boolean;
}

/** Throws only when the tool itself throws (which fails the rollout); a bad call is an observation. */
export async function runToolCall(tools: Tool[], call: ToolCall, task: Task): Promise<ToolObservation> {
  const name = call.function.name;
  const tool = tools.find((t) => t.spec.function.name === name);
  if (!tool) {
    const available = tools.map((t) => t.spec.function.name).join(", ") || "none";
    return {
      message: { role: "tool", name, content: `error: unknown tool "${name}" (available: ${available})` },
      isError: true,
    };
  }
  const result = await tool.run(call.function.arguments, task);
  return { message: { role: "tool", name, content: result.output }, isError: result.isError };
}

/** The observation for a <tool_call> block that could not be parsed. */
export function malformedCallObservation(problem: string): ChatMessage {
  return { role: "tool", content: `error: ${problem}` };
}

/** Reads a required string argument, or returns the error observation text. */
export function stringArg(args: Record<string, unknown>, key: string): string | { error: string } {
  const value = args[key];
  return typeof value === "string" ? value : { error: `error: missing string argument "${key}"` };
}
