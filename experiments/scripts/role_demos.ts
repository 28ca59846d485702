// Warm-start demonstrations for the multi-agent experiments (experiments/scripts/multi_agent.sh,
// docs/results.md §13). A random tiny model never makes a legal Nim move or a valid expression, so
// self-play and proposer-solver RL start from a model taught the formats, not the skills:
//
//   nim        the env's lean format (`format = "bare"`): a position of 1 to max_pile stones -> a
//              legal move by a habit drawn at random per pile: its favourite move (any legal one,
//              uniformly) 6 times in 10, another legal move otherwise. The habits make the move
//              depend on the pile, so the model learns to read it (with uniformly random moves a
//              tiny model's move did not depend on the pile at all, not even at 1 or 2 stones;
//              docs/results.md §13); which move is favoured is chance, so the strategy is left for
//              self-play to find (a third of the habits are winning moves)
//   proposer   the env's lean format (`format = "bare"`). 3 in 10 proposer turns: a seed problem's
//              prompt -> a random expression of 1 to max_ops operations on 1- or 2-digit numbers
//              (every difficulty alike); the rest solver turns, `E=` -> its value: 5 in 10 on one
//              operation on 1-digit numbers (243 facts, so that the solver soon gets the easiest
//              tasks right), 2 in 10 on expressions like the proposer's
//
// The prompts are the envs' own (src/envs/nim, src/envs/proposer), so the demonstrations read as
// the episodes will. Chat-messages JSONL for `rlx sft`.
//
//   bun experiments/scripts/role_demos.ts nim|proposer OUT.jsonl [N] [SEED]
import { writeFileSync } from "node:fs";
import { Rng } from "../../src/envs/random.ts";
import nimEnv, { position } from "../../src/envs/nim/index.ts";
import proposerEnv, { proposePrompt, solvePrompt } from "../../src/envs/proposer/index.ts";
import { generateProblem, type Operation } from "../../src/envs/math/generate.ts";
import { checkExpression } from "../../src/envs/proposer/expression.ts";

const [env, out, n = "4000", seed = "0"] = process.argv.slice(2);
if ((env !== "nim" && env !== "proposer") || !out)
  throw new Error("usage: role_demos.ts nim|proposer OUT.jsonl [N] [SEED]");
const rng = new Rng(Number(seed));
// the envs' defaults, in their lean format, as the experiment's configs run them
const nim = nimEnv.args!.parse({ format: "bare" });
const proposer = proposerEnv.args!.parse({ format: "bare" });
const operations: Operation[] = ["+", "-", "*"];

/** An expression of 1 to max_ops operations on 1- or 2-digit numbers (or one operation on 1-digit
 * numbers), checked by the env's grammar. */
function expression(easiest = false): { text: string; value: number } {
  const problem = generateProblem(rng, {
    digits: easiest ? 1 : rng.int(1, proposer.digits),
    operations,
    steps: easiest ? 1 : rng.int(1, proposer.max_ops),
    wordProblems: false,
  });
  const checked = checkExpression(problem.expression, proposer.digits, proposer.max_ops);
  if ("error" in checked) throw new Error(`${problem.expression}: ${checked.error}`);
  return { text: problem.expression.replaceAll(" ", ""), value: checked.value };
}

// each pile's favourite move, drawn for nim only: the proposer's demonstrations keep the random
// stream they were made with
const favourite =
  env === "nim"
    ? Array.from({ length: nim.max_pile + 1 }, (_, pile) => rng.int(1, Math.max(1, Math.min(nim.max_take, pile))))
    : [];
/** A legal move at `pile` by its habit: the favourite 6 times in 10, another legal move otherwise. */
function habitualMove(pile: number): number {
  const legal = Math.min(nim.max_take, pile);
  if (legal === 1 || rng.next() < 0.6) return favourite[pile]!;
  const others = Array.from({ length: legal }, (_, j) => j + 1).filter((take) => take !== favourite[pile]);
  return rng.pick(others);
}

const rows: object[] = [];
for (let i = 0; i < Number(n); i++) {
  if (env === "nim") {
    const pile = rng.int(1, nim.max_pile);
    const take = habitualMove(pile);
    rows.push({
      messages: [...position(pile, nim.max_take, nim.format), { role: "assistant", content: String(take) }],
    });
  } else if (i % 10 < 3) {
    const seedProblem = generateProblem(rng, { digits: proposer.digits, operations, steps: 1, wordProblems: false });
    const proposal = expression().text;
    rows.push({
      messages: [...proposePrompt(seedProblem.expression, proposer), { role: "assistant", content: proposal }],
    });
  } else {
    const task = expression(i % 10 < 8);
    rows.push({
      messages: [...solvePrompt(task.text, proposer.format), { role: "assistant", content: String(task.value) }],
    });
  }
}
writeFileSync(out, rows.map((row) => JSON.stringify(row)).join("\n") + "\n");
console.log(`wrote ${rows.length} ${env} demonstrations to ${out}`);
