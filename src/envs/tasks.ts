// Task sources shared by the built-in envs: a seeded generator cut into splits by task key, and a
// JSONL file of {question, answer} rows. Both guarantee that train and eval never share a task:
// a task's split is a function of its key (or an explicit `split` column), never of draw order.
import { existsSync, readFileSync } from "node:fs";
import { EnvError } from "../errors.ts";
import type { ChatMessage } from "../data/chat.ts";
import { hashString, Rng, splitOf } from "./random.ts";
import type { Split, Task } from "./types.ts";

/** Draws tasks from `make` until `size` distinct tasks of `split` are found. */
export function generateSplit(
  envId: string,
  split: Split,
  seed: number,
  size: number,
  evalFraction: number,
  make: (rng: Rng) => Task,
): Task[] {
  const rng = new Rng(hashString(`${envId}:${split}:${seed}`));
  const seen = new Set<string>();
  const tasks: Task[] = [];
  const maxDraws = 50 * size + 1000;
  for (let draws = 0; tasks.length < size && draws < maxDraws; draws++) {
    const task = make(rng);
    if (seen.has(task.id) || splitOf(task.id, evalFraction) !== split) continue;
    seen.add(task.id);
    tasks.push(task);
  }
  if (tasks.length < size) {
    throw new EnvError(`env ${envId}: found only ${tasks.length} distinct ${split} tasks, ${size} requested`, {
      fix: `lower ${split}_size in the env's args, or widen the generator (more digits, steps or kinds)`,
    });
  }
  return tasks;
}

export interface JsonlRow {
  id?: string;
  question: string;
  answer: string;
  solution?: string;
  split?: Split;
}

/** Reads a JSONL task file and keeps the rows of `split` (a `split` column wins over hashing). */
export function loadJsonlSplit(path: string, split: Split, evalFraction: number): JsonlRow[] {
  if (!existsSync(path))
    throw new EnvError(`task file ${path} does not exist`, {
      fix: "check `data_file` in the env's args (paths are relative to the working directory)",
    });
  const rows: JsonlRow[] = [];
  const lines = readFileSync(path, "utf8").split("\n");
  lines.forEach((line, index) => {
    if (line.trim().length === 0) return;
    const where = `${path}:${index + 1}`;
    let value: Record<string, unknown>;
    try {
      value = JSON.parse(line) as Record<string, unknown>;
    } catch (err) {
      throw new EnvError(`${where}: not valid JSON (${(err as Error).message})`, {
        fix: "each line must be one JSON object",
      });
    }
    if (typeof value.question !== "string" || (typeof value.answer !== "string" && typeof value.answer !== "number")) {
      throw new EnvError(`${where}: a task row needs "question" (string) and "answer" (string or number)`, {
        fix: 'write rows like {"question": "...", "answer": "42"}',
      });
    }
    if (value.split !== undefined && value.split !== "train" && value.split !== "eval") {
      throw new EnvError(`${where}: "split" must be "train" or "eval", got ${JSON.stringify(value.split)}`, {
        fix: "drop the column to split by hash",
      });
    }
    const id = typeof value.id === "string" ? value.id : `row-${hashString(value.question).toString(16)}`;
    const rowSplit = (value.split as Split | undefined) ?? splitOf(id, evalFraction);
    if (rowSplit !== split) return;
    rows.push({
      id,
      question: value.question,
      answer: String(value.answer),
      solution: typeof value.solution === "string" ? value.solution : undefined,
      split: rowSplit,
    });
  });
  return rows;
}

/** Seeded order, then the first `size` (all when size <= 0). */
export function sampleTasks<T>(items: T[], seed: number, size: number): T[] {
  const order = new Rng(seed).shuffle([...items]);
  return size > 0 ? order.slice(0, size) : order;
}

/** The opening messages of a task: an optional system message, then the user's question. */
export function promptMessages(system: string | undefined, question: string): ChatMessage[] {
  return system
    ? [
        { role: "system", content: system },
        { role: "user", content: question },
      ]
    : [{ role: "user", content: question }];
}
