// The primitive words of the Forth interpreter: stack shuffling, 32-bit arithmetic, comparison,
// logic, memory and output. Each is a small function over the machine's data stack; control flow
// and defining words live in interpreter.ts because they compile code rather than run it.
//
// Integers are 32-bit two's complement cells (wrapping like a 32-bit Forth); true is -1; `/` and
// MOD are floored, as in gforth. Memory is byte-addressed and cells are 4 bytes, so
// `CREATE a 10 CELLS ALLOT  a 3 CELLS + @` works as it does in any standard Forth.

export class ForthError extends Error {}

export interface Machine {
  stack: number[];
  pop(): number;
  push(value: number): void;
  emit(text: string): void;
  cellAddress(address: number): number;
  byteAddress(address: number): number;
  memory: Int32Array;
  bytes: Uint8Array;
  here: number;
  allot(bytes: number): void;
}

export type Primitive = (m: Machine) => void;

/** Instructions of compiled definitions (see interpreter.ts for what each does). */
export enum Op {
  Lit,
  Call,
  Prim,
  Branch,
  Branch0,
  Do,
  QDo,
  Loop,
  PlusLoop,
  Leave,
  Exit,
  Print,
  Unloop,
  I,
  J,
}

export interface Instr {
  op: Op;
  /** Literal value, branch target, or loop nesting level for I/J. */
  arg: number;
  word?: Word;
  prim?: Primitive;
  /** Print: the string; Prim: the word as written (for error messages). */
  text?: string;
}

/** A colon definition (VARIABLE, CONSTANT and CREATE words are one-literal definitions). */
export interface Word {
  name: string;
  code: Instr[];
}

const flag = (b: boolean) => (b ? -1 : 0);
const wrap = (x: number) => x | 0;

function floorDiv(a: number, b: number): [quotient: number, remainder: number] {
  if (b === 0) throw new ForthError("division by zero");
  const q = Math.floor(a / b);
  return [wrap(q), wrap(a - q * b)];
}

function need(m: Machine, n: number): void {
  if (m.stack.length < n) throw new ForthError("stack underflow");
}

const binary =
  (f: (a: number, b: number) => number): Primitive =>
  (m) => {
    need(m, 2);
    const b = m.pop();
    const a = m.pop();
    m.push(f(a, b));
  };
const unary =
  (f: (a: number) => number): Primitive =>
  (m) =>
    m.push(f(m.pop()));

export const PRIMITIVES: Record<string, Primitive> = {
  // stack
  DUP: (m) => {
    const a = m.pop();
    m.push(a);
    m.push(a);
  },
  DROP: (m) => void m.pop(),
  SWAP: (m) => {
    need(m, 2);
    const b = m.pop(),
      a = m.pop();
    m.push(b);
    m.push(a);
  },
  OVER: (m) => {
    need(m, 2);
    const b = m.pop(),
      a = m.pop();
    m.push(a);
    m.push(b);
    m.push(a);
  },
  ROT: (m) => {
    need(m, 3);
    const c = m.pop(),
      b = m.pop(),
      a = m.pop();
    m.push(b);
    m.push(c);
    m.push(a);
  },
  "-ROT": (m) => {
    need(m, 3);
    const c = m.pop(),
      b = m.pop(),
      a = m.pop();
    m.push(c);
    m.push(a);
    m.push(b);
  },
  NIP: (m) => {
    need(m, 2);
    const b = m.pop();
    m.pop();
    m.push(b);
  },
  TUCK: (m) => {
    need(m, 2);
    const b = m.pop(),
      a = m.pop();
    m.push(b);
    m.push(a);
    m.push(b);
  },
  "2DUP": (m) => {
    need(m, 2);
    const b = m.pop(),
      a = m.pop();
    m.push(a);
    m.push(b);
    m.push(a);
    m.push(b);
  },
  "2DROP": (m) => {
    need(m, 2);
    m.pop();
    m.pop();
  },
  "2SWAP": (m) => {
    need(m, 4);
    const d = m.pop(),
      c = m.pop(),
      b = m.pop(),
      a = m.pop();
    m.push(c);
    m.push(d);
    m.push(a);
    m.push(b);
  },
  "2OVER": (m) => {
    need(m, 4);
    const [a, b] = m.stack.slice(-4, -2) as [number, number];
    m.push(a);
    m.push(b);
  },
  "?DUP": (m) => {
    const a = m.pop();
    m.push(a);
    if (a !== 0) m.push(a);
  },
  PICK: (m) => {
    const n = m.pop();
    if (n < 0 || n >= m.stack.length) throw new ForthError("stack underflow");
    m.push(m.stack[m.stack.length - 1 - n]!);
  },
  ROLL: (m) => {
    const n = m.pop();
    if (n < 0 || n >= m.stack.length) throw new ForthError("stack underflow");
    m.push(m.stack.splice(m.stack.length - 1 - n, 1)[0]!);
  },
  DEPTH: (m) => m.push(m.stack.length),
  // arithmetic
  "+": binary((a, b) => wrap(a + b)),
  "-": binary((a, b) => wrap(a - b)),
  "*": binary((a, b) => Math.imul(a, b)),
  "/": binary((a, b) => floorDiv(a, b)[0]),
  MOD: binary((a, b) => floorDiv(a, b)[1]),
  "/MOD": (m) => {
    need(m, 2);
    const b = m.pop(),
      a = m.pop();
    const [q, r] = floorDiv(a, b);
    m.push(r);
    m.push(q);
  },
  "*/": (m) => {
    need(m, 3);
    const c = m.pop(),
      b = m.pop(),
      a = m.pop();
    if (c === 0) throw new ForthError("division by zero");
    m.push(
      wrap(
        Number((BigInt(a) * BigInt(b) - ((((BigInt(a) * BigInt(b)) % BigInt(c)) + BigInt(c)) % BigInt(c))) / BigInt(c)),
      ),
    );
  },
  NEGATE: unary((a) => wrap(-a)),
  ABS: unary((a) => wrap(Math.abs(a))),
  MIN: binary((a, b) => Math.min(a, b)),
  MAX: binary((a, b) => Math.max(a, b)),
  "1+": unary((a) => wrap(a + 1)),
  "1-": unary((a) => wrap(a - 1)),
  "2*": unary((a) => a << 1),
  "2/": unary((a) => a >> 1),
  // comparison and logic
  "=": binary((a, b) => flag(a === b)),
  "<>": binary((a, b) => flag(a !== b)),
  "<": binary((a, b) => flag(a < b)),
  ">": binary((a, b) => flag(a > b)),
  "<=": binary((a, b) => flag(a <= b)),
  ">=": binary((a, b) => flag(a >= b)),
  "0=": unary((a) => flag(a === 0)),
  "0<>": unary((a) => flag(a !== 0)),
  "0<": unary((a) => flag(a < 0)),
  "0>": unary((a) => flag(a > 0)),
  AND: binary((a, b) => a & b),
  OR: binary((a, b) => a | b),
  XOR: binary((a, b) => a ^ b),
  INVERT: unary((a) => ~a),
  LSHIFT: binary((a, b) => (b >= 32 || b < 0 ? 0 : a << b)),
  RSHIFT: binary((a, b) => (b >= 32 || b < 0 ? 0 : wrap(a >>> b))),
  TRUE: (m) => m.push(-1),
  FALSE: (m) => m.push(0),
  // memory
  "@": (m) => m.push(m.memory[m.cellAddress(m.pop())]!),
  "!": (m) => {
    need(m, 2);
    const address = m.cellAddress(m.pop());
    m.memory[address] = m.pop();
  },
  "+!": (m) => {
    need(m, 2);
    const address = m.cellAddress(m.pop());
    m.memory[address] = wrap(m.memory[address]! + m.pop());
  },
  "C@": (m) => m.push(m.bytes[m.byteAddress(m.pop())]!),
  "C!": (m) => {
    need(m, 2);
    const address = m.byteAddress(m.pop());
    m.bytes[address] = m.pop() & 0xff;
  },
  CELLS: unary((a) => wrap(a * 4)),
  "CELL+": unary((a) => wrap(a + 4)),
  HERE: (m) => m.push(m.here),
  ALLOT: (m) => m.allot(m.pop()),
  ",": (m) => {
    const value = m.pop();
    const at = m.here;
    m.allot(4);
    m.memory[m.cellAddress(at)] = value;
  },
  // output
  ".": (m) => m.emit(`${m.pop()} `),
  "?": (m) => m.emit(`${m.memory[m.cellAddress(m.pop())]!} `),
  ".S": (m) => m.emit(`<${m.stack.length}> ${m.stack.map((v) => `${v} `).join("")}`),
  EMIT: (m) => {
    const code = m.pop();
    if (code < 0 || code > 0x10ffff) throw new ForthError(`invalid character code ${code}`);
    m.emit(String.fromCodePoint(code));
  },
  CR: (m) => m.emit("\n"),
  SPACE: (m) => m.emit(" "),
  SPACES: (m) => {
    const n = m.pop();
    if (n > 0) m.emit(" ".repeat(Math.min(n, 1 << 16)));
  },
};
