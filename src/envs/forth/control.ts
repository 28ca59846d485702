// Compile-only words of the Forth interpreter: each one emits instructions into the definition
// being compiled and keeps a control-flow stack of open structures (IF waiting for THEN, BEGIN
// waiting for UNTIL, DO collecting LEAVEs), so branch targets are resolved at compile time and
// running a definition is a flat loop over an instruction array.
import { ForthError, Op, type Instr, type Word } from "./words.ts";

export interface Compiler {
  word: Word;
  control: Array<{ kind: string; at: number; leaves?: number[] }>;
  emit(instr: Instr): number;
}

function open(c: Compiler, kind: string, leaves?: number[]) {
  c.control.push({ kind, at: c.word.code.length, leaves });
}

function close(c: Compiler, word: string, ...kinds: string[]) {
  const top = c.control.pop();
  if (!top || !kinds.includes(top.kind))
    throw new ForthError(`${word} without a matching ${kinds.map((k) => k.toUpperCase()).join(" or ")}`);
  return top;
}

/** Points the branch emitted at `at` to the current end of the code. */
function resolveHere(c: Compiler, at: number) {
  c.word.code[at]!.arg = c.word.code.length;
}

function innermostDo(c: Compiler, word: string) {
  for (let i = c.control.length - 1; i >= 0; i--) {
    const entry = c.control[i]!;
    if (entry.kind === "do") return entry;
  }
  throw new ForthError(`${word} outside a DO loop`);
}

function endLoop(c: Compiler, word: string, op: Op.Loop | Op.PlusLoop) {
  const loop = close(c, word, "do");
  c.emit({ op, arg: loop.at });
  for (const leave of loop.leaves!) resolveHere(c, leave);
}

export const CONTROL_WORDS: Record<string, (c: Compiler) => void> = {
  IF: (c) => {
    c.control.push({ kind: "if", at: c.emit({ op: Op.Branch0, arg: -1, text: "IF" }) });
  },
  ELSE: (c) => {
    const branch = close(c, "ELSE", "if");
    const at = c.emit({ op: Op.Branch, arg: -1 });
    resolveHere(c, branch.at);
    c.control.push({ kind: "else", at });
  },
  THEN: (c) => resolveHere(c, close(c, "THEN", "if", "else").at),
  BEGIN: (c) => open(c, "begin"),
  UNTIL: (c) => {
    c.emit({ op: Op.Branch0, arg: close(c, "UNTIL", "begin").at, text: "UNTIL" });
  },
  AGAIN: (c) => {
    c.emit({ op: Op.Branch, arg: close(c, "AGAIN", "begin").at });
  },
  WHILE: (c) => {
    const begin = c.control[c.control.length - 1];
    if (!begin || begin.kind !== "begin") throw new ForthError("WHILE without a matching BEGIN");
    c.control.push({ kind: "while", at: c.emit({ op: Op.Branch0, arg: -1, text: "WHILE" }) });
  },
  REPEAT: (c) => {
    const exit = close(c, "REPEAT", "while");
    c.emit({ op: Op.Branch, arg: close(c, "REPEAT", "begin").at });
    resolveHere(c, exit.at);
  },
  DO: (c) => {
    c.emit({ op: Op.Do, arg: -1 });
    open(c, "do", []);
  },
  "?DO": (c) => {
    const at = c.emit({ op: Op.QDo, arg: -1 });
    open(c, "do", [at]);
  },
  LOOP: (c) => endLoop(c, "LOOP", Op.Loop),
  "+LOOP": (c) => endLoop(c, "+LOOP", Op.PlusLoop),
  LEAVE: (c) => {
    innermostDo(c, "LEAVE").leaves!.push(c.emit({ op: Op.Leave, arg: -1 }));
  },
  UNLOOP: (c) => {
    innermostDo(c, "UNLOOP");
    c.emit({ op: Op.Unloop, arg: 0 });
  },
  I: (c) => {
    innermostDo(c, "I");
    c.emit({ op: Op.I, arg: 0 });
  },
  J: (c) => {
    if (c.control.filter((e) => e.kind === "do").length < 2) throw new ForthError("J outside two nested DO loops");
    c.emit({ op: Op.J, arg: 1 });
  },
  EXIT: (c) => {
    c.emit({ op: Op.Exit, arg: 0 });
  },
  RECURSE: (c) => {
    c.emit({ op: Op.Call, arg: 0, word: c.word });
  },
};
