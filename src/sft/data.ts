// Reading an SFT dataset: JSONL files whose rows are conversations to imitate. Two row shapes,
// the ones TRL and most hubs use, so `rlx env demos` output and downloaded datasets both load:
//
//   {"messages": [{"role": "user", "content": "..."}, {"role": "assistant", "content": "..."}], "tools": [...]}
//       every assistant message is a target
//   {"prompt": "..." | [messages], "completion": "..." | [messages], "tools": [...]}
//       only the completion's assistant messages are targets; a string is one user / assistant message
//
// Every problem is an EnvError naming the file and line, found before any training starts: a
// typo on line 4,812 should not surface an hour into a run.
import { existsSync, readFileSync } from "node:fs";
import { EnvError } from "../errors.ts";
import type { ChatMessage, Role, ToolSpec } from "../data/chat.ts";

/** One dataset row as a conversation: messages at index >= `targetsFrom` with role assistant are trained. */
export interface SftConversation {
  messages: ChatMessage[];
  tools?: ToolSpec[];
  targetsFrom: number;
  /** `FILE:LINE`, for errors and for the sample's id. */
  where: string;
  /** The row's `env` field (rows from `rlx env demos` carry one), else "sft": per-env metrics. */
  env: string;
}

const ROLES: readonly Role[] = ["system", "user", "assistant", "tool"];
const FIX =
  'rows look like {"messages": [{"role": "user", "content": "..."}, {"role": "assistant", "content": "..."}]} or {"prompt": "...", "completion": "..."}';

function fail(where: string, problem: string): never {
  throw new EnvError(`${where}: ${problem}`, { fix: FIX });
}

function message(value: unknown, where: string, field: string): ChatMessage {
  if (!value || typeof value !== "object" || Array.isArray(value)) fail(where, `${field} is not a message object`);
  const m = value as Record<string, unknown>;
  if (!ROLES.includes(m.role as Role))
    fail(where, `${field}.role must be one of ${ROLES.join(", ")}, got ${JSON.stringify(m.role)}`);
  const hasCalls = Array.isArray(m.tool_calls) && m.tool_calls.length > 0;
  if (typeof m.content !== "string" && !(m.content == null && hasCalls))
    fail(where, `${field}.content must be a string`);
  if (m.tool_calls !== undefined && (m.role !== "assistant" || !Array.isArray(m.tool_calls)))
    fail(where, `${field}.tool_calls must be a list on an assistant message`);
  return { ...(m as unknown as ChatMessage), content: (m.content as string | null) ?? "" };
}

function messages(value: unknown, where: string, field: string, single: Role): ChatMessage[] {
  if (typeof value === "string") return [{ role: single, content: value }];
  if (!Array.isArray(value)) fail(where, `${field} must be a string or a list of messages`);
  return value.map((m, i) => message(m, where, `${field}[${i}]`));
}

/** Parses one JSONL line into a conversation (exported for tests). */
export function parseRow(line: string, where: string): SftConversation {
  let row: Record<string, unknown>;
  try {
    row = JSON.parse(line) as Record<string, unknown>;
  } catch (err) {
    fail(where, `not valid JSON (${(err as Error).message})`);
  }
  if (!row || typeof row !== "object" || Array.isArray(row)) fail(where, "a row must be a JSON object");
  if (row.tools !== undefined && !Array.isArray(row.tools)) fail(where, "tools must be a list of tool specs");
  const tools = row.tools as ToolSpec[] | undefined;
  const env = typeof row.env === "string" && row.env ? row.env : "sft";
  let conversation: SftConversation;
  if (row.messages !== undefined) {
    conversation = { messages: messages(row.messages, where, "messages", "user"), tools, targetsFrom: 0, where, env };
  } else if (row.prompt !== undefined && row.completion !== undefined) {
    const prompt = messages(row.prompt, where, "prompt", "user");
    const completion = messages(row.completion, where, "completion", "assistant");
    conversation = { messages: [...prompt, ...completion], tools, targetsFrom: prompt.length, where, env };
  } else {
    fail(
      where,
      `a row needs "messages", or "prompt" and "completion" (it has ${Object.keys(row).join(", ") || "no keys"})`,
    );
  }
  const targets = conversation.messages.slice(conversation.targetsFrom).filter((m) => m.role === "assistant").length;
  if (targets === 0) fail(where, "no assistant message to train on");
  if (conversation.messages[0]?.role === "assistant" && conversation.targetsFrom === 0)
    fail(where, "the conversation starts with an assistant message; nothing prompts it");
  return conversation;
}

/** Reads every row of the JSONL files, in file order. Blank lines are skipped. */
export function readSftRows(paths: readonly string[]): SftConversation[] {
  const rows: SftConversation[] = [];
  for (const path of paths) {
    if (!existsSync(path))
      throw new EnvError(`dataset file ${path} does not exist`, {
        fix: "check data.path (relative to the directory rlx runs in); `rlx env demos ID --out FILE` writes one",
      });
    const lines = readFileSync(path, "utf8").split("\n");
    lines.forEach((line, i) => {
      if (line.trim()) rows.push(parseRow(line, `${path}:${i + 1}`));
    });
  }
  if (rows.length === 0) throw new EnvError(`dataset ${paths.join(", ")} has no rows`, { fix: FIX });
  return rows;
}
