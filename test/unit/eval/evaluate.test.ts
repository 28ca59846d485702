// Evaluation: the unbiased pass@k estimator against brute-force subset enumeration, and
// evaluate() end to end through the real rollout driver and the real math env, with a scripted
// sampling client standing in for the model: it answers each task correctly on exactly c of its
// k samples (and on the greedy sample when told to), so every metric has a hand-computed value.
import { beforeAll, expect, test } from "bun:test";
import { mkdtempSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type { Task } from "../../../src/envs/types.ts";
import type { Completion, CompletionRequest, SamplingClient } from "../../../src/clients/types.ts";
import { writeByteTokenizer } from "../../../src/model/byte_tokenizer.ts";
import { ChatRenderer } from "../../../src/model/render.ts";
import { Tokenizer } from "../../../src/model/tokenizer.ts";
import { evalMetrics, evaluate, lastReply, loadEvalTasks, passAtK, passKs } from "../../../src/eval/evaluate.ts";
import { compareTable, evalTable } from "../../../src/eval/table.ts";

/** Fraction of the k-subsets of n samples (c correct) that hold a correct one: pass@k by definition. */
function bruteForcePass(n: number, c: number, k: number): number {
  let hit = 0;
  let all = 0;
  for (let mask = 0; mask < 1 << n; mask++) {
    let bits = 0;
    for (let i = 0; i < n; i++) if (mask & (1 << i)) bits++;
    if (bits !== k) continue;
    all++;
    if (mask & ((1 << c) - 1)) hit++; // samples 0..c-1 are the correct ones
  }
  return hit / all;
}

test("passAtK equals the subset-counting definition for every n <= 8", () => {
  for (let n = 1; n <= 8; n++) {
    for (let c = 0; c <= n; c++) {
      for (let k = 1; k <= n; k++) expect(passAtK(n, c, k)).toBeCloseTo(bruteForcePass(n, c, k), 12);
    }
  }
  expect(passAtK(5, 2, 2)).toBeCloseTo(0.7, 12); // 1 - C(3,2)/C(5,2) = 1 - 3/10
  expect(passAtK(10, 3, 1)).toBeCloseTo(0.3, 12);
  expect(() => passAtK(4, 1, 5)).toThrow(RangeError);
});

test("passKs: powers of two up to k, and k", () => {
  expect(passKs(1)).toEqual([1]);
  expect(passKs(8)).toEqual([1, 2, 4, 8]);
  expect(passKs(6)).toEqual([1, 2, 4, 6]);
});

let renderer: ChatRenderer;
let tokenizer: Tokenizer;
let tasks: Task[];
let mathEnv: Awaited<ReturnType<typeof loadEvalTasks>>["env"];

beforeAll(async () => {
  const dir = mkdtempSync(join(tmpdir(), "rlx-eval-"));
  writeByteTokenizer(dir);
  tokenizer = Tokenizer.load(dir);
  renderer = new ChatRenderer(tokenizer);
  const loaded = await loadEvalTasks({ id: "math", args: { operations: ["+"] }, numExamples: 4 });
  mathEnv = loaded.env;
  tasks = loaded.tasks;
});

/** Answers task t correctly on its first `correct[t]` sampled requests; greedy requests per `greedy[t]`. */
class ScriptedClient implements SamplingClient {
  calls = new Map<number, number>();
  inFlight = 0;
  maxInFlight = 0;
  requests: CompletionRequest[] = [];
  constructor(
    private readonly correct: number[],
    private readonly greedy: boolean[],
    private readonly failTask = -1,
  ) {}

  async complete(request: CompletionRequest): Promise<Completion> {
    this.requests.push(request);
    this.inFlight++;
    this.maxInFlight = Math.max(this.maxInFlight, this.inFlight);
    await Bun.sleep(1);
    this.inFlight--;
    const prompt = tokenizer.decode(request.promptIds);
    const t = tasks.findIndex((task) => prompt.includes(task.prompt.at(-1)!.content));
    if (t === this.failTask) throw new Error("endpoint down");
    let right: boolean;
    if (request.temperature === 0) right = this.greedy[t]!;
    else {
      const n = this.calls.get(t) ?? 0;
      this.calls.set(t, n + 1);
      right = n < this.correct[t]!;
    }
    const answer = right ? tasks[t]!.answer : String(Number(tasks[t]!.answer) + 1);
    const tokenIds = [...tokenizer.encodePlain(`Answer: \\boxed{${answer}}`), 258];
    return { tokenIds, logprobs: tokenIds.map(() => -0.5), finishReason: "stop", policyVersion: 3 };
  }

  async score(): Promise<number[][]> {
    throw new Error("not used by evals");
  }
}

test("evaluate: avg@k, pass@j, greedy pass@1 and per-task results match hand-computed values", async () => {
  const correct = [0, 1, 2, 4];
  const client = new ScriptedClient(correct, [false, true, true, false]);
  const result = await evaluate(client, renderer, "math", mathEnv, tasks, {
    k: 4,
    temperature: 1,
    maxTokens: 32,
    greedy: true,
    concurrency: 3,
  });
  expect(result.tasks).toBe(4);
  expect(result.results.map((r) => r.solved)).toEqual(correct);
  expect(result.results.map((r) => r.greedyReward)).toEqual([0, 1, 1, 0]);
  const m = result.metrics;
  expect(m["avg@4"]).toBeCloseTo((0 + 1 + 2 + 4) / 16, 12);
  expect(m["pass@1"]).toBeCloseTo((0 + 0.25 + 0.5 + 1) / 4, 12);
  // pass@2 per task: 1 - C(4-c,2)/C(4,2) = 0, 1/2, 5/6, 1
  expect(m["pass@2"]).toBeCloseTo((0 + 0.5 + 5 / 6 + 1) / 4, 12);
  expect(m["pass@4"]).toBeCloseTo(3 / 4, 12);
  expect(m["greedy/pass@1"]).toBeCloseTo(0.5, 12);
  expect(m.error_rate).toBe(0);
  expect(m["metric/formatted"]).toBe(1);
  expect(m.completion_tokens).toBeGreaterThan(10);
  // 4 tasks x (4 samples + 1 greedy), with at most `concurrency` in flight, and really concurrent.
  expect(client.requests).toHaveLength(20);
  expect(client.maxInFlight).toBe(3);
  expect(client.requests.filter((r) => r.temperature === 0)).toHaveLength(4);
  // every sample has its own seed, so a sampling server does not return k identical answers,
  // and the seeds do not depend on whether a greedy sample is taken too
  const sampledSeeds = client.requests.filter((r) => r.temperature > 0).map((r) => r.seed);
  expect(new Set(sampledSeeds).size).toBe(16);
  const noGreedy = new ScriptedClient(correct, [false, false, false, false]);
  await evaluate(noGreedy, renderer, "math", mathEnv, tasks, { k: 4, temperature: 1, maxTokens: 32, concurrency: 3 });
  expect(noGreedy.requests.map((r) => r.seed).sort()).toEqual(sampledSeeds.sort());
  expect(evalMetrics(result)["eval/math/pass@4"]).toBeCloseTo(0.75, 12);
  expect(evalMetrics(result, "eval_before")).toHaveProperty("eval_before/math/avg@4");
});

test("evaluate: a failing endpoint is data (reward 0, error_rate, first error), never a throw", async () => {
  const client = new ScriptedClient([4, 4, 4, 4], [true, true, true, true], 2);
  const result = await evaluate(client, renderer, "math", mathEnv, tasks, {
    k: 4,
    temperature: 1,
    maxTokens: 32,
    greedy: true,
  });
  expect(result.results[2]!.errors).toBe(5);
  expect(result.results[2]!.solved).toBe(0);
  expect(result.metrics.error_rate).toBeCloseTo(5 / 20, 12);
  expect(result.metrics["pass@1"]).toBeCloseTo(3 / 4, 12);
  expect(result.firstError).toContain("endpoint down");
});

test("tables: one row per env; before/after per headline metric", async () => {
  const before = await evaluate(
    new ScriptedClient([0, 0, 0, 0], [false, false, false, false]),
    renderer,
    "math",
    mathEnv,
    tasks,
    { k: 2, temperature: 1, maxTokens: 32, greedy: true },
  );
  const after = await evaluate(
    new ScriptedClient([2, 2, 1, 0], [true, true, false, false]),
    renderer,
    "math",
    mathEnv,
    tasks,
    { k: 2, temperature: 1, maxTokens: 32, greedy: true },
  );
  const table = evalTable([after]).split("\n");
  expect(table[0]).toMatch(/^env\s+tasks\s+k\s+avg@k\s+pass@1\s+pass@k\s+greedy@1\s+errors\s+time$/);
  expect(table[2]).toMatch(/^math\s+4\s+2\s+0\.625\s+0\.625\s+0\.750\s+0\.500\s+0\.000\s+\d+\.\ds$/);
  const compare = compareTable([before], [after]);
  expect(compare).toMatch(/math greedy\/pass@1\s+0\.000\s+0\.500/);
  expect(compare).toMatch(/math pass@2\s+0\.000\s+0\.750/);
});

test("loadEvalTasks: the held-out split, first N, the same tasks every time", async () => {
  const a = await loadEvalTasks({ id: "math", numExamples: 5 });
  const b = await loadEvalTasks({ id: "math", numExamples: -1 });
  const train = await a.env.load("train", 0);
  expect(a.tasks).toHaveLength(5);
  expect(b.tasks.slice(0, 5).map((t) => t.id)).toEqual(a.tasks.map((t) => t.id));
  const trainIds = new Set(train.map((t) => t.id));
  expect(b.tasks.some((t) => trainIds.has(t.id))).toBe(false);
  await expect(loadEvalTasks({ id: "nope", numExamples: 1 })).rejects.toThrow(/unknown env "nope"/);
});

test("lastReply: the last assistant turn's text, then its tool calls, even when a tool message ends the episode", () => {
  const call = { type: "function" as const, function: { name: "forth", arguments: { code: "3 4 + ." } } };
  expect(
    lastReply([
      { role: "user", content: "q" },
      { role: "assistant", content: "Answer: 7" },
    ]),
  ).toBe("Answer: 7");
  expect(
    lastReply([
      { role: "user", content: "q" },
      { role: "assistant", content: "", tool_calls: [call] },
      { role: "tool", name: "forth", content: "7 \nstack: <0>" },
    ]),
  ).toBe('forth({"code":"3 4 + ."})');
  expect(lastReply([{ role: "assistant", content: "let me run it", tool_calls: [call, call] }])).toBe(
    'let me run it\nforth({"code":"3 4 + ."})\nforth({"code":"3 4 + ."})',
  );
  expect(lastReply([{ role: "user", content: "q" }])).toBe("");
});
