// Arithmetic problems for the math env, with a worked solution for each (OPSD's demonstration and
// the SFT target of `rlx env demos`). Difficulty has three dials: digits per operand, which
// operations, and how many steps are chained. One-step problems can be phrased as word problems.
//
//   steps = 1, word:  Mia has 38 marbles. She gets 17 more. How many marbles does Mia have now?
//   steps = 3:        Compute ((38 + 17) * 4) - 29.
//   solution:         38 + 17 = 55.  55 * 4 = 220.  220 - 29 = 191.  Answer: \boxed{191}
import type { Rng } from "../random.ts";

export type Operation = "+" | "-" | "*" | "/";
export const OPERATIONS: [Operation, ...Operation[]] = ["+", "-", "*", "/"];

export interface MathSettings {
  digits: number;
  operations: Operation[];
  steps: number;
  wordProblems: boolean;
}

export interface MathProblem {
  /** The expression, e.g. "((38 + 17) * 4) - 29": the task's key (wordings of it share a split). */
  expression: string;
  question: string;
  answer: number;
  solution: string;
}

const NAMES = ["Mia", "Noah", "Ava", "Liam", "Zoe", "Omar", "Ines", "Kai", "Lena", "Ravi"];
const ITEMS = ["marbles", "apples", "stickers", "coins", "books", "shells", "cards", "pencils"];

function operand(rng: Rng, digits: number): number {
  return digits === 1 ? rng.int(1, 9) : rng.int(10 ** (digits - 1), 10 ** digits - 1);
}

function apply(a: number, op: Operation, b: number): number {
  switch (op) {
    case "+":
      return a + b;
    case "-":
      return a - b;
    case "*":
      return a * b;
    case "/":
      return a / b;
  }
}

/** A divisor of `value` in [2, limit], or undefined (then the step uses another operation). */
function divisorOf(rng: Rng, value: number, limit: number): number | undefined {
  const candidates: number[] = [];
  for (let d = 2; d <= Math.min(limit, Math.abs(value)); d++) if (value % d === 0) candidates.push(d);
  return candidates.length > 0 ? rng.pick(candidates) : undefined;
}

function wordProblem(rng: Rng, a: number, op: Operation, b: number): string {
  const name = rng.pick(NAMES);
  const items = rng.pick(ITEMS);
  switch (op) {
    case "+":
      return `${name} has ${a} ${items}. ${name} gets ${b} more. How many ${items} does ${name} have now?`;
    case "-":
      return `${name} has ${a} ${items} and gives away ${b} of them. How many ${items} does ${name} have left?`;
    case "*":
      return `${name} buys ${a} boxes with ${b} ${items} in each box. How many ${items} does ${name} buy in total?`;
    case "/":
      return `${name} shares ${a} ${items} equally among ${b} friends. How many ${items} does each friend get?`;
  }
}

export function generateProblem(rng: Rng, settings: MathSettings): MathProblem {
  let value = operand(rng, settings.digits);
  let expression = "";
  const lines: string[] = [];
  let last: [number, Operation, number] = [value, "+", 0];
  for (let step = 0; step < settings.steps; step++) {
    let op = rng.pick(settings.operations);
    let b = operand(rng, settings.digits);
    if (op === "/") {
      const divisor = divisorOf(rng, value, Math.max(9, 10 ** settings.digits - 1));
      if (divisor === undefined) op = settings.operations.find((o) => o !== "/") ?? "+";
      else b = divisor;
    }
    // A one-step subtraction keeps a non-negative answer (it may be a word problem).
    if (op === "-" && settings.steps === 1 && b > value) [value, b] = [b, value];
    const result = apply(value, op, b);
    lines.push(`${value} ${op} ${b} = ${result}.`);
    expression = step === 0 ? `${value} ${op} ${b}` : `(${expression}) ${op} ${b}`;
    last = [value, op, b];
    value = result;
  }
  const question = settings.wordProblems && settings.steps === 1 ? wordProblem(rng, ...last) : `Compute ${expression}.`;
  return { expression, question, answer: value, solution: `${lines.join("\n")}\nAnswer: \\boxed{${value}}` };
}
