// The search env: a deterministic world for a seed, BM25 scores against a hand computation, the
// gold queries of generated questions retrieving the document that holds the answer, tool output
// format, demonstrations with real tool outputs, and the exact-match reward.
import { describe, expect, test } from "bun:test";
import { createEnv } from "../../../src/envs/index.ts";
import { Bm25Index, terms } from "../../../src/envs/search/bm25.ts";
import { generateWorld } from "../../../src/envs/search/corpus.ts";
import search from "../../../src/envs/search/index.ts";
import { assistant, finishedRollout, rewardNow } from "./helpers.ts";

const SIZE = { countries: 12, cities: 40, companies: 60, people: 300 };

describe("BM25", () => {
  test("scores match a hand computation (k1 1.2, b 0.75)", () => {
    const docs = ["red fox", "red red dog", "blue whale swims"];
    const index = new Bm25Index(docs);
    // avgdl = 8/3; "red" is in 2 of 3 docs: idf = ln(1 + (3 - 2 + 0.5) / (2 + 0.5)) = ln(1.6)
    const idf = Math.log(1.6);
    const score = (tf: number, len: number) => (idf * tf * 2.2) / (tf + 1.2 * (0.25 + (0.75 * len) / (8 / 3)));
    const hits = index.search("red", 5);
    expect(hits.map((h) => h.index)).toEqual([1, 0]);
    expect(hits[0]!.score).toBeCloseTo(score(2, 3), 12);
    expect(hits[1]!.score).toBeCloseTo(score(1, 2), 12);
    expect(index.search("nothing here", 5)).toEqual([]);
    expect(terms("Ölberg-Strasse, 12!")).toEqual(["ölberg", "strasse", "12"]);
  });

  test("ties break by document order", () => {
    expect(new Bm25Index(["a b", "a b", "a b"]).search("a", 3).map((h) => h.index)).toEqual([0, 1, 2]);
  });
});

describe("search env", () => {
  test("the world and the tasks are deterministic for a seed", async () => {
    expect(generateWorld(3, SIZE)).toEqual(generateWorld(3, SIZE));
    expect(generateWorld(3, SIZE).documents).not.toEqual(generateWorld(4, SIZE).documents);
    const env = await createEnv(search, {});
    expect(await env.load("eval", 5)).toEqual(await env.load("eval", 5));
    const world = generateWorld(0, SIZE);
    expect(new Set(world.documents.map((d) => d.title.toLowerCase())).size).toBe(world.documents.length);
  });

  test("train and eval never share a question", async () => {
    const env = await createEnv(search, { train_size: 1000, eval_size: 200 });
    const train = new Set((await env.load("train", 0)).map((t) => t.id));
    expect((await env.load("eval", 0)).filter((t) => train.has(t.id))).toEqual([]);
  });

  test("for every generated question, each gold query's top document is the next hop, the last holds the answer", async () => {
    const env = await createEnv(search, { train_size: 1000, eval_size: 200 });
    const [tool] = env.tools;
    const world = generateWorld(0, SIZE);
    const tasks = [...(await env.load("train", 0)), ...(await env.load("eval", 0))];
    let twoHop = 0;
    for (const task of tasks) {
      const queries = task.info!.queries as string[];
      twoHop += queries.length === 2 ? 1 : 0;
      const outputs = await Promise.all(queries.map((query) => tool!.run({ query }, task)));
      // The top document is titled by the query's entity; the answer is in the last one.
      queries.forEach((query, i) => expect(outputs[i]!.output.startsWith(`[1] ${query}\n`)).toBe(true));
      const top = outputs.at(-1)!.output.split("\n\n")[0]!;
      expect(top).toContain(task.answer);
      // A two-hop question's second query is named in the first document.
      if (queries.length === 2) expect(outputs[0]!.output.split("\n\n")[0]).toContain(queries[1]!);
      expect(world.documents.some((d) => top.endsWith(d.text))).toBe(true);
    }
    expect(twoHop).toBeGreaterThan(tasks.length / 4);
  });

  test("the question text alone retrieves the subject's document in the top 3", async () => {
    const env = await createEnv(search, {});
    const [tool] = env.tools;
    for (const task of await env.load("eval", 0)) {
      const out = await tool!.run({ query: task.prompt.at(-1)!.content }, task);
      expect(out.output).toContain(`] ${(task.info!.queries as string[])[0]}\n`);
    }
  });

  test("tool output format, top_k, and bad arguments", async () => {
    const env = await createEnv(search, { top_k: 2 });
    const [tool] = env.tools;
    const world = generateWorld(0, SIZE);
    const person = world.people[0]!;
    const out = await tool!.run({ query: person.employer }, { id: "t", prompt: [], answer: "" });
    expect(out.isError).toBe(false);
    const hits = out.output.split("\n\n");
    expect(hits.length).toBe(2);
    expect(hits[0]).toMatch(
      new RegExp(
        `^\\[1\\] ${person.employer}\\n${person.employer} is an? \\w+ company founded in \\d{4}\\. The headquarters of ${person.employer} are in \\w+\\.$`,
      ),
    );
    expect(hits[1]).toMatch(/^\[2\] /);
    expect((await tool!.run({ query: "zzqx" }, { id: "t", prompt: [], answer: "" })).output).toBe(
      "no documents match the query",
    );
    expect(await tool!.run({ q: "x" }, { id: "t", prompt: [], answer: "" })).toEqual({
      output: 'error: missing string argument "query"',
      isError: true,
    });
  });

  test("demonstrations call search with the gold queries and get real documents; reward is exact match", async () => {
    const env = await createEnv(search, { hops: [2], train_size: 100 });
    const [task] = await env.load("train", 0);
    const demo = await env.demonstrate!(task!);
    expect(demo.map((m) => m.role)).toEqual(["system", "user", "assistant", "tool", "assistant", "tool", "assistant"]);
    expect(demo[2]!.tool_calls![0]!.function.arguments).toEqual({ query: (task!.info!.queries as string[])[0] });
    expect(demo[5]!.content).toContain(task!.answer);
    const grade = (text: string) =>
      rewardNow(env, task!, finishedRollout(task!, ...demo.slice(2, -1), assistant(text))).reward;
    expect(grade(demo.at(-1)!.content)).toBe(1);
    expect(grade(`Answer: **${task!.answer.toUpperCase()}.**`)).toBe(1);
    expect(grade(`Answer: ${task!.answer}ia`)).toBe(0);
    expect(grade("")).toBe(0);
    expect(grade("Answer:")).toBe(0);
  });
});
