// The curriculum sampler: tasks weighed by their statistics (retire solved ones, retry hard ones
// later, prefer pass rates near a target that follows a schedule), its draws a pure function of
// its seed, the statistics and its JSON state.
import { expect, test } from "bun:test";
import type { Curriculum } from "../../../src/task_samplers/curriculum.ts";
import { group, samplerOf } from "./helpers.ts";

const drawIds = (sampler: { next(step: number): unknown }, n: number, step = 1) =>
  Array.from({ length: n }, () => (sampler.next(step) as { task: { id: string } }).task.id);

test("with weight 0 for solved tasks, a task observed at pass rate 1.0 is drawn 0 times in the next 500 draws", async () => {
  const { sampler, stats } = await samplerOf({ type: "curriculum", solved_weight: 0 });
  stats.record(group("t3", [1, 1, 1, 1]), 1);
  stats.record(group("t4", [1, 0, 1, 0]), 1);
  const ids = drawIds(sampler, 500, 2);
  expect(ids.filter((id) => id === "t3").length).toBe(0);
  expect(ids.filter((id) => id === "t4").length).toBeGreaterThan(20); // at the target, weight 1 like a new task
  expect(new Set(ids).size).toBe(9);
});

test("an unsolved task rests until retry_after steps have passed, then comes back", async () => {
  const { sampler, stats } = await samplerOf({ type: "curriculum", retry_after: 5 });
  stats.record(group("t0", [0, 0, 0, 0]), 3);
  expect(drawIds(sampler, 300, 7).filter((id) => id === "t0").length).toBe(0);
  expect(drawIds(sampler, 300, 8).filter((id) => id === "t0").length).toBeGreaterThan(5);
});

test("tasks are weighed by the distance of their pass rate from the target, which follows its schedule", async () => {
  const { sampler } = await samplerOf({ type: "curriculum", target: 0.8, target_end: 0.2, schedule_steps: 11 });
  const c = sampler as Curriculum;
  expect([c.target(1), c.target(6), c.target(11), c.target(50)].map((t) => t.toFixed(2))).toEqual([
    "0.80",
    "0.50",
    "0.20",
    "0.20",
  ]);
  const { sampler: plain, stats } = await samplerOf({ type: "curriculum" });
  stats.record(group("t1", [1, 0, 0, 0]), 1); // pass rate 0.25
  stats.record(group("t2", [1, 1, 0, 0]), 1); // 0.5, the target
  const p = plain as Curriculum;
  expect(p.weight({ id: "t2", prompt: [], answer: "" }, 2)).toBe(1);
  expect(p.weight({ id: "t1", prompt: [], answer: "" }, 2)).toBeCloseTo(0.5);
  expect(p.weight({ id: "t9", prompt: [], answer: "" }, 2)).toBe(1); // never drawn: new_weight
});

test("when every task is retired the draw falls back to the uniform walk", async () => {
  const { sampler, stats } = await samplerOf({ type: "curriculum" }, 3);
  for (const id of ["t0", "t1", "t2"]) stats.record(group(id, [1, 1]), 1);
  expect(new Set(drawIds(sampler, 3, 2))).toEqual(new Set(["t0", "t1", "t2"]));
});

test("a curriculum restored from its JSON state and its statistics draws the same tasks", async () => {
  const a = await samplerOf({ type: "curriculum" });
  a.stats.record(group("t1", [1, 0]), 1);
  drawIds(a.sampler, 37);
  const b = await samplerOf({ type: "curriculum" });
  b.sampler.loadState(JSON.parse(JSON.stringify(a.sampler.saveState())));
  b.stats.loadState(JSON.parse(JSON.stringify(a.stats.saveState())));
  expect(drawIds(b.sampler, 100, 3)).toEqual(drawIds(a.sampler, 100, 3));
});
