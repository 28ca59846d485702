// Final-answer extraction and comparison, shared by the built-in envs. A model's last message may
// end with `\boxed{42}`, `Answer: 42`, or just a final line; all three are accepted so the reward
// measures the answer, and the `formatted` metric says whether an explicit form was used.

/** The content of the last balanced `\boxed{...}` in `text`, if any. */
function lastBoxed(text: string): string | undefined {
  const start = text.lastIndexOf("\\boxed{");
  if (start === -1) return undefined;
  let depth = 0;
  for (let i = start + "\\boxed".length; i < text.length; i++) {
    if (text[i] === "{") depth++;
    else if (text[i] === "}" && --depth === 0) return text.slice(start + "\\boxed{".length, i);
  }
  return undefined;
}

export interface ExtractedAnswer {
  answer: string;
  /** True when the answer came from \boxed{} or an "Answer:" line. */
  explicit: boolean;
}

export function extractAnswer(text: string): ExtractedAnswer | undefined {
  const boxed = lastBoxed(text);
  if (boxed !== undefined) return { answer: boxed.trim(), explicit: true };
  const lines = text
    .split("\n")
    .map((line) => line.trim())
    .filter((line) => line.length > 0);
  for (let i = lines.length - 1; i >= 0; i--) {
    const match = /^(?:final\s+)?answer\s*[:=]\s*(.+)$/i.exec(lines[i]!.replace(/^[*_#\s]+/, ""));
    if (match) return { answer: match[1]!.trim(), explicit: true };
  }
  const last = lines.at(-1);
  return last === undefined ? undefined : { answer: last, explicit: false };
}

/** An integer in the answer ("1,234", "$-5.", "x = 12" all parse), or undefined. */
export function parseInteger(answer: string): number | undefined {
  const cleaned = answer.replace(/[,$\s]/g, "").replace(/\.$/, "");
  if (/^[-+]?\d+$/.test(cleaned)) return Number(cleaned);
  const numbers = cleaned.match(/[-+]?\d+(?:\.\d+)?/g);
  if (!numbers || numbers.length !== 1) return undefined;
  const value = Number(numbers[0]);
  return Number.isInteger(value) ? value : undefined;
}

/** Case, surrounding quotes/markup and trailing punctuation do not matter for text answers. */
export function normalizeText(answer: string): string {
  return answer
    .toLowerCase()
    .replace(/[*_`"'“”‘’]/g, "")
    .replace(/[.!?]+$/, "")
    .replace(/\s+/g, " ")
    .trim();
}

/** The model's final reply: the last message, if it is an assistant message without tool calls. */
export function finalReply(
  messages: ReadonlyArray<{ role: string; content: string; tool_calls?: unknown[] }>,
): string | undefined {
  const last = messages.at(-1);
  if (!last || last.role !== "assistant" || (last.tool_calls && last.tool_calls.length > 0)) return undefined;
  return last.content;
}

/** Grades a final reply against a gold answer: integers compare as numbers, text after folding. */
export function gradeReply(
  reply: string | undefined,
  gold: string,
  numeric: boolean,
): { correct: number; formatted: number; answered: number } {
  const extracted = reply === undefined ? undefined : extractAnswer(reply);
  if (!extracted) return { correct: 0, formatted: 0, answered: 0 };
  const correct = numeric
    ? parseInteger(extracted.answer) === Number(gold)
    : normalizeText(extracted.answer) === normalizeText(gold);
  return { correct: correct ? 1 : 0, formatted: extracted.explicit ? 1 : 0, answered: 1 };
}
