// Conformance of the forth env's interpreter: each row is a program and the exact observation the
// model sees (printed output, then the final stack or the error). Expected outputs follow
// standard Forth semantics (gforth's floored division, -1 for true, `.` printing a trailing space)
// and were worked out by hand. Limits (steps, recursion depth, memory, output) must stop a
// program with an error, never hang or crash the process.
import { describe, expect, test } from "bun:test";
import { DEFAULT_LIMITS, runForth } from "../../../src/envs/forth/interpreter.ts";
import { formatForthResult } from "../../../src/envs/forth/tool.ts";

const run = (source: string) => formatForthResult(runForth(source));

const TABLE: Array<[program: string, observation: string]> = [
  // arithmetic and printing
  ["1 2 + .", "3 \nstack: <0>"],
  ["10 3 - .", "7 \nstack: <0>"],
  ["6 7 * .", "42 \nstack: <0>"],
  ["7 2 / . 7 2 MOD .", "3 1 \nstack: <0>"],
  ["-7 2 / . -7 2 MOD .", "-4 1 \nstack: <0>"],
  ["7 -2 / . 7 -2 MOD .", "-4 -1 \nstack: <0>"],
  ["17 5 /MOD . .", "3 2 \nstack: <0>"],
  ["5 NEGATE . -5 ABS .", "-5 5 \nstack: <0>"],
  ["3 9 MIN . 3 9 MAX .", "3 9 \nstack: <0>"],
  ["5 1+ . 5 1- . 5 2* . 5 2/ .", "6 4 10 2 \nstack: <0>"],
  ["100000 100000 100 */ .", "100000000 \nstack: <0>"],
  ["2147483647 1 + .", "-2147483648 \nstack: <0>"],
  ["65536 65536 * .", "0 \nstack: <0>"],
  // stack words
  ["1 2 3", "stack: <3> 1 2 3"],
  ["1 2 SWAP", "stack: <2> 2 1"],
  ["1 2 OVER", "stack: <3> 1 2 1"],
  ["1 2 3 ROT", "stack: <3> 2 3 1"],
  ["1 2 3 -ROT", "stack: <3> 3 1 2"],
  ["1 2 NIP 3 4 TUCK", "stack: <4> 2 4 3 4"],
  ["1 2 2DUP 2DROP DUP DROP", "stack: <2> 1 2"],
  ["1 2 3 4 2SWAP 2OVER", "stack: <6> 3 4 1 2 3 4"],
  ["0 ?DUP 5 ?DUP", "stack: <3> 0 5 5"],
  ["10 20 30 2 PICK 3 ROLL", "stack: <4> 20 30 10 10"],
  ["7 8 DEPTH", "stack: <3> 7 8 2"],
  ["1 2 3 .S", "<3> 1 2 3 \nstack: <3> 1 2 3"],
  // comparison and logic
  ["1 2 < . 2 1 < . 3 3 = . 3 4 <> .", "-1 0 -1 -1 \nstack: <0>"],
  ["0 0= . 5 0= . -3 0< . 4 0> .", "-1 0 -1 -1 \nstack: <0>"],
  ["12 10 AND . 12 10 OR . 12 10 XOR . 0 INVERT .", "8 14 6 -1 \nstack: <0>"],
  ["1 4 LSHIFT . 256 2 RSHIFT .", "16 64 \nstack: <0>"],
  // definitions and control flow
  [": SQUARE DUP * ; 7 SQUARE .", "49 \nstack: <0>"],
  [": SIGN DUP 0< IF DROP -1 ELSE 0> IF 1 ELSE 0 THEN THEN ; -5 SIGN . 0 SIGN . 9 SIGN .", "-1 0 1 \nstack: <0>"],
  [": FACT DUP 2 < IF DROP 1 ELSE DUP 1- RECURSE * THEN ; 10 FACT .", "3628800 \nstack: <0>"],
  [": COUNT 5 0 DO I . LOOP ; COUNT", "0 1 2 3 4 \nstack: <0>"],
  [": EVENS 10 0 DO I . 2 +LOOP ; EVENS", "0 2 4 6 8 \nstack: <0>"],
  [": DOWN 0 10 DO I . -3 +LOOP ; DOWN", "10 7 4 1 \nstack: <0>"],
  [": GRID 2 0 DO 3 0 DO J 10 * I + . LOOP LOOP ; GRID", "0 1 2 10 11 12 \nstack: <0>"],
  [": FIRST-BIG 100 0 DO I I * 50 > IF I . LEAVE THEN LOOP ; FIRST-BIG", "8 \nstack: <0>"],
  [": NONE 0 0 ?DO I . LOOP ; NONE 1 .", "1 \nstack: <0>"],
  [": HALVE BEGIN DUP . 2 / DUP 0= UNTIL DROP ; 40 HALVE", "40 20 10 5 2 1 \nstack: <0>"],
  [": GCD BEGIN DUP WHILE TUCK MOD REPEAT DROP ; 84 36 GCD .", "12 \nstack: <0>"],
  [": FIND 10 0 DO I 4 = IF I UNLOOP EXIT THEN LOOP -1 ; FIND .", "4 \nstack: <0>"],
  [": FIB 0 1 ROT 0 ?DO TUCK + LOOP DROP ; 30 FIB .", "832040 \nstack: <0>"],
  [": A 1 ; : B A 2 + ; : A 100 ; B . A .", "3 100 \nstack: <0>"],
  // output words, strings, comments
  [': HI ." Hello, world!" CR ; HI', "Hello, world!\nstack: <0>"],
  ['." top level" 72 EMIT 105 EMIT', "top levelHi\nstack: <0>"],
  ["1 SPACE 2 . 3 SPACES 4 . CR", " 2    4 \nstack: <1> 1"],
  ["CHAR A . : Z [CHAR] z ; Z .", "65 122 \nstack: <0>"],
  ["1 ( a comment ) 2 \\ a line comment 3\n4", "stack: <3> 1 2 4"],
  ["dup", "error: line 1, word dup: stack underflow"],
  [": sq dup * ; 3 SQ .", "9 \nstack: <0>"],
  // variables and memory
  ["VARIABLE X 42 X ! X @ .", "42 \nstack: <0>"],
  ["VARIABLE N 5 N ! 3 N +! N ?", "8 \nstack: <0>"],
  ["10 CONSTANT TEN TEN TEN * .", "100 \nstack: <0>"],
  ["CREATE ARR 5 CELLS ALLOT 7 ARR 2 CELLS + ! ARR 2 CELLS + @ .", "7 \nstack: <0>"],
  ["CREATE T 1 , 2 , 3 , T CELL+ @ .", "2 \nstack: <0>"],
  // errors (the machine resets its stack, as Forth does)
  ["1 2 + . .", "3 \nerror: line 1, word .: stack underflow"],
  ["1 2\nfrobnicate", "error: line 2, word frobnicate: undefined word"],
  ["5 0 /", "error: line 1, word /: division by zero"],
  ["5 0 MOD", "error: line 1, word MOD: division by zero"],
  ["1 IF 2 THEN", "error: line 1, word IF: interpreting a compile-only word"],
  [": BROKEN 1 IF 2 ;", "error: line 1, word ;: unmatched IF in BROKEN"],
  [": LOOSE THEN ;", "error: line 1, word THEN: THEN without a matching IF or ELSE"],
  [": NOEND 1 2 +", "error: line 1: unterminated definition of NOEND (missing ;)"],
  [": USES-UNKNOWN FOO ;", "error: line 1, word FOO: undefined word"],
  ["12345 @", "error: line 1, word @: invalid memory address 12345"],
  ['." no end', 'error: line 1, word .": unterminated string (missing "\\"")'],
  ["99999999999 .", "error: line 1, word 99999999999: number out of range (32-bit cells): 99999999999"],
  [": SELF SELF ;", "error: line 1, word SELF: undefined word"],
];

describe("forth conformance table", () => {
  test("has at least 40 programs", () => expect(TABLE.length).toBeGreaterThanOrEqual(40));
  for (const [program, observation] of TABLE) {
    test(JSON.stringify(program), () => expect(run(program)).toBe(observation));
  }
});

describe("forth limits", () => {
  // CPU time, not wall-clock: what the interpreter costs, however loaded the machine
  const cpuMs = (since: NodeJS.CpuUsage) => {
    const used = process.cpuUsage(since);
    return (used.user + used.system) / 1000;
  };
  const timed = (source: string) => {
    const start = process.cpuUsage();
    const result = runForth(source);
    return { result, ms: cpuMs(start) };
  };

  test("an infinite loop exhausts the step budget quickly", () => {
    const { result, ms } = timed(": SPIN BEGIN 0 UNTIL ; SPIN");
    expect(result.error).toBe(`line 1, word SPIN: step budget exhausted (${DEFAULT_LIMITS.maxSteps} steps)`);
    expect(result.steps).toBe(DEFAULT_LIMITS.maxSteps + 1);
    expect(ms).toBeLessThan(1000);
  });

  test("BEGIN AGAIN and a huge DO loop are bounded too", () => {
    expect(runForth(": FOREVER BEGIN AGAIN ; FOREVER").error).toContain("step budget exhausted");
    expect(runForth(": BIG 2000000000 0 DO LOOP ; BIG").error).toContain("step budget exhausted");
  });

  test("unbounded recursion is a return stack overflow, not a JS stack overflow", () => {
    expect(runForth(": DEEP RECURSE ; DEEP").error).toBe(
      `line 1, word DEEP: return stack overflow (call depth ${DEFAULT_LIMITS.maxCallDepth})`,
    );
    // Bounded recursion just under the limit works.
    expect(runForth(`: DOWN DUP IF 1- RECURSE THEN ; ${DEFAULT_LIMITS.maxCallDepth - 2} DOWN .`).output).toBe("0 ");
  });

  test("stack, memory and output limits", () => {
    expect(runForth(": FILL BEGIN 1 0 UNTIL ; FILL").error).toContain(
      `stack overflow (${DEFAULT_LIMITS.maxStack} cells)`,
    );
    expect(runForth("CREATE HUGE 1000000 ALLOT").error).toContain(
      `memory limit exceeded (${DEFAULT_LIMITS.memoryBytes} bytes)`,
    );
    const flood = runForth(": FLOOD BEGIN 65 EMIT AGAIN ; FLOOD");
    expect(flood.error).toContain(`output limit exceeded (${DEFAULT_LIMITS.maxOutput} characters)`);
    expect(flood.output.length).toBe(DEFAULT_LIMITS.maxOutput);
    expect(runForth("1 ".repeat(DEFAULT_LIMITS.maxSource)).error).toContain("program too long");
  });

  test("custom limits apply", () => {
    const limits = { ...DEFAULT_LIMITS, maxSteps: 50 };
    expect(runForth(": C 100 0 DO LOOP ; C", limits).error).toBe("line 1, word C: step budget exhausted (50 steps)");
    expect(runForth(": C 10 0 DO LOOP ; C", limits).error).toBeUndefined();
  });

  test("each run is a fresh machine", () => {
    expect(runForth(": KEEP 1 ; VARIABLE V").error).toBeUndefined();
    expect(runForth("KEEP V").error).toContain("undefined word");
  });

  test("a thousand random token soups all terminate with a result", () => {
    const words = [
      "DUP",
      "DROP",
      "SWAP",
      "+",
      "-",
      "*",
      "/",
      ".",
      ":",
      ";",
      "IF",
      "THEN",
      "ELSE",
      "DO",
      "LOOP",
      "BEGIN",
      "UNTIL",
      "AGAIN",
      "RECURSE",
      "I",
      "@",
      "!",
      "VARIABLE",
      "1",
      "0",
      "-1",
      "7",
      "X",
      "EMIT",
      "CR",
      "(",
      ")",
      '."',
      '"',
      "LEAVE",
      "EXIT",
      "+LOOP",
      "2DUP",
      "ROT",
    ];
    let state = 12345;
    const next = () => (state = (Math.imul(state, 1103515245) + 12345) >>> 0) % words.length;
    const start = process.cpuUsage();
    for (let i = 0; i < 1000; i++) {
      const program = Array.from({ length: 1 + (i % 30) }, () => words[next()]).join(" ");
      const result = runForth(program);
      expect(typeof result.output).toBe("string");
      expect(result.steps).toBeLessThanOrEqual(DEFAULT_LIMITS.maxSteps + 1);
    }
    expect(cpuMs(start)).toBeLessThan(20_000);
  });
});
