// Task kinds of the forth env. Each task carries a gold program; its answer is what that program
// prints when run by the same interpreter the model uses, so answers and demonstrations can never
// disagree with the tool. Example (kind "gcd"):
//
//   question: Use Forth to compute the greatest common divisor of 84 and 36.
//   gold:     : GCD ( a b -- g ) BEGIN DUP WHILE TUCK MOD REPEAT DROP ;
//             84 36 GCD .
//   answer:   12
import type { Rng } from "../random.ts";
import { runForth } from "./interpreter.ts";

export interface ForthTaskSpec {
  key: string;
  question: string;
  program: string;
  /** The answer is a number (compared as an integer) or text (compared after whitespace folding). */
  numeric: boolean;
}

type Maker = (rng: Rng) => ForthTaskSpec;

const numeric = (key: string, question: string, program: string): ForthTaskSpec => ({
  key,
  question,
  program,
  numeric: true,
});

const MAKERS: Record<string, Maker> = {
  sum_range: (rng) => {
    const a = rng.int(1, 50);
    const b = a + rng.int(5, 200);
    return numeric(
      `sum_range:${a}:${b}`,
      `Use Forth to compute the sum of the integers from ${a} to ${b} inclusive.`,
      `: SUM-RANGE ( a b -- sum ) 1+ SWAP 0 -ROT DO I + LOOP ;\n${a} ${b} SUM-RANGE .`,
    );
  },
  factorial: (rng) => {
    const n = rng.int(3, 12);
    return numeric(
      `factorial:${n}`,
      `Use Forth to compute ${n} factorial.`,
      `: FACT ( n -- n! ) DUP 2 < IF DROP 1 ELSE DUP 1- RECURSE * THEN ;\n${n} FACT .`,
    );
  },
  fibonacci: (rng) => {
    const n = rng.int(5, 40);
    return numeric(
      `fibonacci:${n}`,
      `Use Forth to compute the Fibonacci number F(${n}), where F(0) = 0 and F(1) = 1.`,
      `: FIB ( n -- f ) 0 1 ROT 0 ?DO TUCK + LOOP DROP ;\n${n} FIB .`,
    );
  },
  gcd: (rng) => {
    const g = rng.int(2, 30);
    const a = g * rng.int(2, 40);
    const b = g * rng.int(2, 40);
    return numeric(
      `gcd:${a}:${b}`,
      `Use Forth to compute the greatest common divisor of ${a} and ${b}.`,
      `: GCD ( a b -- g ) BEGIN DUP WHILE TUCK MOD REPEAT DROP ;\n${a} ${b} GCD .`,
    );
  },
  collatz: (rng) => {
    const n = rng.int(3, 500);
    return numeric(
      `collatz:${n}`,
      `Use Forth to count the Collatz steps from ${n} down to 1 (n -> n/2 if even, 3n+1 if odd).`,
      `: COLLATZ ( n -- steps ) 0 SWAP BEGIN DUP 1 <> WHILE DUP 2 MOD IF 3 * 1+ ELSE 2 / THEN SWAP 1+ SWAP REPEAT DROP ;\n${n} COLLATZ .`,
    );
  },
  digit_sum: (rng) => {
    const n = rng.int(100, 99_999_999);
    return numeric(
      `digit_sum:${n}`,
      `Use Forth to compute the sum of the decimal digits of ${n}.`,
      `: DIGIT-SUM ( n -- s ) 0 SWAP BEGIN DUP WHILE 10 /MOD SWAP ROT + SWAP REPEAT DROP ;\n${n} DIGIT-SUM .`,
    );
  },
  count_primes: (rng) => {
    const n = rng.int(10, 300);
    return numeric(
      `count_primes:${n}`,
      `Use Forth to count the prime numbers less than or equal to ${n}.`,
      [
        ": PRIME? ( n -- f ) DUP 2 < IF DROP FALSE EXIT THEN",
        "  DUP 2 ?DO I I * OVER > IF LEAVE THEN DUP I MOD 0= IF DROP FALSE UNLOOP EXIT THEN LOOP DROP TRUE ;",
        ": COUNT-PRIMES ( n -- c ) 0 SWAP 1+ 2 ?DO I PRIME? IF 1+ THEN LOOP ;",
        `${n} COUNT-PRIMES .`,
      ].join("\n"),
    );
  },
  power: (rng) => {
    const a = rng.int(2, 9);
    const b = rng.int(2, a <= 3 ? 18 : 8);
    return numeric(
      `power:${a}:${b}`,
      `Use Forth to compute ${a} to the power ${b}.`,
      `: POW ( a b -- a^b ) 1 SWAP 0 ?DO OVER * LOOP NIP ;\n${a} ${b} POW .`,
    );
  },
  predict_stack: (rng) => {
    // A straight-line program over the stack words: the model runs it and reports what .S prints.
    const ops = ["DUP", "SWAP", "OVER", "ROT", "+", "-", "*", "DROP", "NIP", "TUCK", "2DUP", "MAX", "MIN"];
    for (;;) {
      const words = Array.from({ length: rng.int(3, 4) }, () => String(rng.int(1, 20)));
      for (let i = rng.int(3, 7); i > 0; i--) words.push(rng.pick(ops));
      const program = `${words.join(" ")} .S`;
      if (runForth(program).error === undefined) {
        return {
          key: `predict_stack:${program}`,
          question: `What does this Forth program print?\n\n${program}`,
          program,
          numeric: false,
        };
      }
    }
  },
};

export const FORTH_KINDS = Object.keys(MAKERS) as [string, ...string[]];

export function makeForthTask(rng: Rng, kinds: readonly string[]): ForthTaskSpec {
  return MAKERS[rng.pick(kinds)]!(rng);
}
