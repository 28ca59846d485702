// A small Forth for the `forth` environment: the tool a model calls to run code. It must be
// deterministic (ECHO learns to predict its output), bounded (a model's program may loop forever
// or recurse without end) and sealed (no host access: no files, no clock, no environment).
//
//   : SQUARE ( n -- n*n ) DUP * ;
//   : COUNTDOWN ( n -- ) BEGIN DUP . 1- DUP 0= UNTIL DROP ;
//   5 SQUARE .  3 COUNTDOWN CR        \ prints "25 3 2 1 " and a newline
//
// Colon definitions compile to flat instruction arrays run by an inner interpreter with an
// explicit return stack, so recursion depth is a counted limit rather than the JS call stack, and
// every executed instruction is charged against a step budget. Control words (IF, DO, BEGIN, ...)
// are compile-only, as in standard Forth. Each run starts from a fresh machine.
import { ForthError, Op, PRIMITIVES, type Instr, type Machine, type Word } from "./words.ts";
import { CONTROL_WORDS, type Compiler } from "./control.ts";

export interface ForthLimits {
  /** Instructions executed before the run is stopped. */
  maxSteps: number;
  /** Data stack depth. */
  maxStack: number;
  /** Nested calls (recursion depth). */
  maxCallDepth: number;
  /** Bytes of data space (VARIABLE, CREATE, ALLOT). */
  memoryBytes: number;
  /** Characters of output. */
  maxOutput: number;
  /** Characters of source. */
  maxSource: number;
}

export const DEFAULT_LIMITS: ForthLimits = {
  maxSteps: 200_000,
  maxStack: 1024,
  maxCallDepth: 256,
  memoryBytes: 65_536,
  maxOutput: 4096,
  maxSource: 16_384,
};

export interface ForthResult {
  output: string;
  /** The data stack at the end (empty after an error, which resets the machine as Forth does). */
  stack: number[];
  error?: string;
  steps: number;
}

interface Frame {
  /** The definition this frame runs (named in budget errors). */
  name: string;
  code: Instr[];
  pc: number;
  loops: Array<{ index: number; limit: number }>;
}

export class Forth implements Machine {
  stack: number[] = [];
  memory: Int32Array;
  bytes: Uint8Array;
  here = 0;
  private output = "";
  private steps = 0;
  private readonly dictionary = new Map<string, Word>();
  private source = "";
  private cursor = 0;
  private currentWord = "";

  constructor(readonly limits: ForthLimits = DEFAULT_LIMITS) {
    const buffer = new ArrayBuffer(Math.ceil(limits.memoryBytes / 4) * 4);
    this.memory = new Int32Array(buffer);
    this.bytes = new Uint8Array(buffer);
  }

  // ---- Machine (used by primitives) ----
  pop(): number {
    const value = this.stack.pop();
    if (value === undefined) throw new ForthError("stack underflow");
    return value;
  }
  push(value: number): void {
    if (this.stack.length >= this.limits.maxStack)
      throw new ForthError(`stack overflow (${this.limits.maxStack} cells)`);
    this.stack.push(value);
  }
  emit(text: string): void {
    if (this.output.length + text.length > this.limits.maxOutput) {
      this.output += text.slice(0, this.limits.maxOutput - this.output.length);
      throw new ForthError(`output limit exceeded (${this.limits.maxOutput} characters)`);
    }
    this.output += text;
  }
  cellAddress(address: number): number {
    if (address < 0 || address + 4 > this.here || address % 4 !== 0)
      throw new ForthError(`invalid memory address ${address}`);
    return address / 4;
  }
  byteAddress(address: number): number {
    if (address < 0 || address >= this.here) throw new ForthError(`invalid memory address ${address}`);
    return address;
  }
  allot(bytes: number): void {
    if (bytes < 0) throw new ForthError("negative ALLOT");
    if (this.here + bytes > this.memory.length * 4)
      throw new ForthError(`memory limit exceeded (${this.limits.memoryBytes} bytes)`);
    this.here += bytes;
  }

  /** Runs `source` to completion, an error, or a limit. Never throws. */
  run(source: string): ForthResult {
    try {
      if (source.length > this.limits.maxSource)
        throw new ForthError(`program too long (${source.length} characters, limit ${this.limits.maxSource})`);
      this.source = source;
      this.cursor = 0;
      for (let token = this.nextToken(); token !== null; token = this.nextToken()) this.interpret(token);
      return { output: this.output, stack: [...this.stack], steps: this.steps };
    } catch (err) {
      if (!(err instanceof ForthError)) throw err;
      const line = this.source.slice(0, this.cursor).split("\n").length;
      const where = this.currentWord ? `, word ${this.currentWord}` : "";
      this.stack = [];
      return { output: this.output, stack: [], error: `line ${line}${where}: ${err.message}`, steps: this.steps };
    }
  }

  // ---- the outer interpreter ----
  nextToken(): string | null {
    const match = /\S+/y;
    while (this.cursor < this.source.length && /\s/.test(this.source[this.cursor]!)) this.cursor++;
    if (this.cursor >= this.source.length) return null;
    match.lastIndex = this.cursor;
    const token = match.exec(this.source)![0];
    this.cursor += token.length;
    return token;
  }

  /** Reads raw source up to `delimiter` (for comments and strings); the delimiter is consumed. */
  readUntil(delimiter: string, what: string): string {
    const start =
      this.cursor < this.source.length && /\s/.test(this.source[this.cursor]!) ? this.cursor + 1 : this.cursor;
    const end = this.source.indexOf(delimiter, start);
    if (end === -1) throw new ForthError(`unterminated ${what} (missing ${JSON.stringify(delimiter)})`);
    this.cursor = end + delimiter.length;
    return this.source.slice(start, end);
  }

  private interpret(token: string): void {
    const name = token.toUpperCase();
    this.currentWord = token;
    this.charge();
    if (name === ":") return this.compileDefinition();
    if (this.parseWords(name, null)) return;
    if (CONTROL_WORDS[name] || name === ";" || name === "[CHAR]") {
      throw new ForthError("interpreting a compile-only word");
    }
    const word = this.dictionary.get(name);
    if (word) return this.execute(word);
    const prim = PRIMITIVES[name];
    if (prim) return prim(this);
    const value = this.parseNumber(token);
    if (value === undefined) throw new ForthError("undefined word");
    this.push(value);
  }

  /** Words that read source text: comments, strings, CHAR and the defining words. With a compiler
   * they compile; without one they act now. Returns false when `name` is not one of them. */
  private parseWords(name: string, compiler: Compiler | null): boolean {
    switch (name) {
      case "(":
        this.readUntil(")", "comment");
        return true;
      case "\\": {
        const end = this.source.indexOf("\n", this.cursor);
        this.cursor = end === -1 ? this.source.length : end;
        return true;
      }
      case '."': {
        const text = this.readUntil('"', "string");
        if (compiler) compiler.emit({ op: Op.Print, arg: 0, text });
        else this.emit(text);
        return true;
      }
      case ".(": {
        const text = this.readUntil(")", ".( string");
        this.emit(text);
        return true;
      }
      case "CHAR":
      case "[CHAR]": {
        if ((name === "CHAR") !== (compiler === null)) return false;
        const token = this.nextToken();
        if (token === null) throw new ForthError(`${name} needs a character after it`);
        const code = token.codePointAt(0)!;
        if (compiler) compiler.emit({ op: Op.Lit, arg: code });
        else this.push(code);
        return true;
      }
      case "VARIABLE":
      case "CONSTANT":
      case "CREATE": {
        if (compiler) throw new ForthError(`${name} inside a definition is not supported`);
        const label = this.nextToken();
        if (label === null) throw new ForthError(`${name} needs a name after it`);
        const value = name === "CONSTANT" ? this.pop() : this.alignedHere(name === "VARIABLE" ? 4 : 0);
        this.define({ name: label.toUpperCase(), code: [{ op: Op.Lit, arg: value }] });
        return true;
      }
      default:
        return false;
    }
  }

  private alignedHere(bytes: number): number {
    this.allot((4 - (this.here % 4)) % 4);
    const address = this.here;
    this.allot(bytes);
    if (bytes > 0) this.memory[address / 4] = 0;
    return address;
  }

  private define(word: Word): void {
    if (this.dictionary.size >= 4096) throw new ForthError("dictionary full (4096 words)");
    this.dictionary.set(word.name, word);
  }

  private parseNumber(token: string): number | undefined {
    if (/^-?\d+$/.test(token)) {
      const value = Number(token);
      if (value < -(2 ** 31) || value >= 2 ** 31) throw new ForthError(`number out of range (32-bit cells): ${token}`);
      return value;
    }
    if (/^'.'$/u.test(token)) return token.codePointAt(1);
    return undefined;
  }

  private charge(): void {
    if (++this.steps > this.limits.maxSteps)
      throw new ForthError(`step budget exhausted (${this.limits.maxSteps} steps)`);
  }

  // ---- the compiler ----
  private compileDefinition(): void {
    const label = this.nextToken();
    if (label === null) throw new ForthError(": needs a name after it");
    const word: Word = { name: label.toUpperCase(), code: [] };
    const control: Array<{ kind: string; at: number; leaves?: number[] }> = [];
    const compiler: Compiler = {
      word,
      control,
      emit: (instr) => {
        word.code.push(instr);
        return word.code.length - 1;
      },
    };
    for (;;) {
      const token = this.nextToken();
      if (token === null) {
        this.currentWord = "";
        throw new ForthError(`unterminated definition of ${label} (missing ;)`);
      }
      const name = token.toUpperCase();
      this.currentWord = token;
      if (name === ";") break;
      if (name === ":") throw new ForthError("nested : definitions are not allowed");
      if (this.parseWords(name, compiler)) continue;
      const control_word = CONTROL_WORDS[name];
      if (control_word) {
        control_word(compiler);
        continue;
      }
      const known = this.dictionary.get(name);
      if (known) {
        compiler.emit({ op: Op.Call, arg: 0, word: known });
        continue;
      }
      const prim = PRIMITIVES[name];
      if (prim) {
        compiler.emit({ op: Op.Prim, arg: 0, prim, text: token });
        continue;
      }
      const value = this.parseNumber(token);
      if (value === undefined) throw new ForthError("undefined word");
      compiler.emit({ op: Op.Lit, arg: value });
    }
    if (control.length > 0) throw new ForthError(`unmatched ${control.at(-1)!.kind.toUpperCase()} in ${label}`);
    this.define(word);
  }

  // ---- the inner interpreter ----
  private execute(word: Word): void {
    const frames: Frame[] = [{ name: word.name, code: word.code, pc: 0, loops: [] }];
    const outer = this.currentWord;
    while (frames.length > 0) {
      const frame = frames[frames.length - 1]!;
      if (frame.pc >= frame.code.length) {
        frames.pop();
        continue;
      }
      if (this.steps + 1 > this.limits.maxSteps) this.currentWord = frame.name;
      this.charge();
      const instr = frame.code[frame.pc++]!;
      switch (instr.op) {
        case Op.Lit:
          this.push(instr.arg);
          break;
        case Op.Prim:
          this.currentWord = instr.text!;
          instr.prim!(this);
          break;
        case Op.Call:
          if (frames.length >= this.limits.maxCallDepth) {
            this.currentWord = instr.word!.name;
            throw new ForthError(`return stack overflow (call depth ${this.limits.maxCallDepth})`);
          }
          frames.push({ name: instr.word!.name, code: instr.word!.code, pc: 0, loops: [] });
          break;
        case Op.Branch:
          frame.pc = instr.arg;
          break;
        case Op.Branch0:
          this.currentWord = instr.text!;
          if (this.pop() === 0) frame.pc = instr.arg;
          break;
        case Op.Do:
        case Op.QDo: {
          this.currentWord = instr.op === Op.Do ? "DO" : "?DO";
          if (this.stack.length < 2) throw new ForthError("stack underflow");
          const index = this.pop();
          const limit = this.pop();
          if (instr.op === Op.QDo && index === limit) frame.pc = instr.arg;
          else frame.loops.push({ index, limit });
          break;
        }
        case Op.Loop:
        case Op.PlusLoop: {
          const loop = frame.loops[frame.loops.length - 1]!;
          if (instr.op === Op.PlusLoop) this.currentWord = "+LOOP";
          const step = instr.op === Op.Loop ? 1 : this.pop();
          const before = loop.index - loop.limit;
          loop.index = (loop.index + step) | 0;
          const after = before + step;
          // Standard +LOOP: stop when the index crosses the boundary between limit-1 and limit.
          const done = instr.op === Op.Loop ? after === 0 : before < 0 !== after < 0;
          if (done) frame.loops.pop();
          else frame.pc = instr.arg;
          break;
        }
        case Op.Leave:
          frame.loops.pop();
          frame.pc = instr.arg;
          break;
        case Op.Unloop:
          frame.loops.pop();
          break;
        case Op.I:
        case Op.J: {
          const loop = frame.loops[frame.loops.length - 1 - instr.arg];
          if (!loop) throw new ForthError(`${instr.op === Op.I ? "I" : "J"} used outside a DO loop`);
          this.push(loop.index);
          break;
        }
        case Op.Exit:
          frames.pop();
          break;
        case Op.Print:
          this.emit(instr.text!);
          break;
      }
    }
    this.currentWord = outer;
  }
}

/** Runs a program on a fresh machine. */
export function runForth(source: string, limits: ForthLimits = DEFAULT_LIMITS): ForthResult {
  return new Forth(limits).run(source);
}
