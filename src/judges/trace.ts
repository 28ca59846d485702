// A rollout as a judge reads it: its messages as text, each with its index in `Rollout.messages`,
// so "message 4" means the same thing to the judge, to its read_message tool and to the audit
// record. Tool calls are written as `name({json arguments})`, reasoning in <think> tags.
import type { Task } from "../data/types.ts";
import type { ChatMessage } from "../data/chat.ts";

/** One message as plain text: reasoning, content, then one line per tool call. */
export function messageText(message: ChatMessage): string {
  const lines: string[] = [];
  if (message.reasoning_content) lines.push(`<think>${message.reasoning_content}</think>`);
  if (message.content) lines.push(message.content);
  for (const call of message.tool_calls ?? [])
    lines.push(`tool call: ${call.function.name}(${JSON.stringify(call.function.arguments)})`);
  return lines.join("\n");
}

/** `[i] role: text` for messages `from` onward (the task's prompt is given apart). */
export function numberedTrace(messages: readonly ChatMessage[], from: number): string {
  return messages
    .slice(from)
    .map((m, k) => `[${from + k}] ${m.role}${m.name ? ` (${m.name})` : ""}:\n${messageText(m)}`)
    .join("\n\n");
}

/** One line per message: index, role, length and tool calls, for a judge that reads on demand. */
export function traceOverview(messages: readonly ChatMessage[]): string {
  return messages
    .map((m, i) => {
      const calls = m.tool_calls?.length ? `, calls ${m.tool_calls.map((c) => c.function.name).join(", ")}` : "";
      return `[${i}] ${m.role}${m.name ? ` (${m.name})` : ""}: ${messageText(m).length} chars${calls}`;
    })
    .join("\n");
}

/** The task as the policy was asked it (its user messages) and the reference answer. */
export function taskText(task: Task): string {
  const asked = task.prompt
    .filter((m) => m.role === "user")
    .map((m) => m.content)
    .join("\n\n");
  return `TASK:\n${asked}\n\nREFERENCE ANSWER:\n${task.answer}`;
}
