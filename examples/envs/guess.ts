// A multi-agent env in one file (docs/algorithms.md, "Roles"): a guesser guesses a number in
// [1, 8] and a hinter, who knows it, answers higher or lower; both get 1 / rounds when it is found.
// Both roles are played by the live policy unless the config makes the hinter a frozen endpoint;
// `roles = { hinter = { train = false } }` lets only the guesser learn.
// The `import type` line only gives editors the types inside this repository and is erased when the
// file runs (delete it elsewhere).
import type { EnvDefinition } from "../../src/envs/types.ts";

const guess: EnvDefinition = {
  id: "guess",
  description: "number guessing: a guesser and a hinter",
  create: () => ({
    tools: [],
    maxTurns: 1,
    roles: ["guesser", "hinter"],
    load: async (split) =>
      Array.from({ length: 50 }, (_, i) => ({ id: `${split}-${i}`, prompt: [], answer: String((i % 8) + 1) })),
    async episode({ task, turn }) {
      const secret = Number(task.answer);
      let hint = "Guess my number in 1..8. Reply with a number.";
      for (let round = 1; round <= 4; round++) {
        const guess = Number(/\d+/.exec(await turn("guesser", [{ role: "user", content: hint }]))?.[0]);
        if (guess === secret) return { rewards: { guesser: 1 / round, hinter: 1 / round }, metrics: { rounds: round } };
        const said = await turn("hinter", [
          { role: "user", content: `The number is ${secret}; the guess was ${guess}. Say "higher" or "lower".` },
        ]);
        hint = `Your guess ${guess} was wrong. Hint: ${said}. Guess again.`;
      }
      return { rewards: { guesser: 0, hinter: 0 }, metrics: { rounds: 5 } };
    },
    reward: () => ({ reward: 0, metrics: {} }), // eval scores single-agent rollouts; unused here
  }),
};

export default guess;
