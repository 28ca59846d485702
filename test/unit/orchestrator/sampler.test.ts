// Task sampling: envs by ratio (a share of rollouts, so group sizes matter), each env walking its
// tasks as one permutation per epoch, the whole state a JSON snapshot that continues exactly.
import { expect, test } from "bun:test";
import type { Task } from "../../../src/envs/types.ts";
import { type Draw, type SamplerEnv, TaskSampler } from "../../../src/orchestrator/sampler.ts";

const tasks = (prefix: string, n: number): Task[] =>
  Array.from({ length: n }, (_, i) => ({ id: `${prefix}${i}`, prompt: [], answer: "" }));
const envs = (): SamplerEnv[] => [
  { name: "a", ratio: 1, groupSize: 4, tasks: tasks("a", 7) },
  { name: "b", ratio: 3, groupSize: 8, tasks: tasks("b", 5) },
];
const draw = (sampler: TaskSampler, n: number): Draw[] => Array.from({ length: n }, () => sampler.next());
const key = (d: Draw) => `${d.groupId}:${d.task.id}`;

test("the same seed draws the same groups; another seed draws others", () => {
  expect(draw(new TaskSampler(envs(), 1), 40).map(key)).toEqual(draw(new TaskSampler(envs(), 1), 40).map(key));
  expect(draw(new TaskSampler(envs(), 2), 40).map(key)).not.toEqual(draw(new TaskSampler(envs(), 1), 40).map(key));
});

test("ratio is a share of rollouts: 1:3 with group sizes 4 and 8 draws groups 2:3", () => {
  const draws = draw(new TaskSampler(envs(), 0), 5000);
  const rollouts = (env: string) => draws.filter((d) => d.env === env).reduce((n, d) => n + d.groupSize, 0);
  const share = rollouts("b") / (rollouts("a") + rollouts("b"));
  expect(share).toBeGreaterThan(0.72);
  expect(share).toBeLessThan(0.78);
});

test("each env walks its tasks as a permutation per epoch, reshuffled each epoch", () => {
  const draws = draw(new TaskSampler(envs(), 3), 400).filter((d) => d.env === "a");
  const epochs = [draws.slice(0, 7), draws.slice(7, 14), draws.slice(14, 21)].map((e) => e.map((d) => d.task.id));
  for (const epoch of epochs)
    expect([...epoch].sort()).toEqual(
      tasks("a", 7)
        .map((t) => t.id)
        .sort(),
    );
  expect(epochs[0]).not.toEqual(epochs[1]);
  expect(draws.map((d) => d.cursor)).toEqual(draws.map((_, i) => i));
});

test("group ids number every draw across envs", () => {
  expect(draw(new TaskSampler(envs(), 0), 5).map((d) => d.groupId.split("/")[1])).toEqual([
    "g0",
    "g1",
    "g2",
    "g3",
    "g4",
  ]);
});

test("a snapshot continues exactly where the sampler was, through JSON", () => {
  const original = new TaskSampler(envs(), 9);
  draw(original, 17);
  const snapshot = JSON.parse(JSON.stringify(original.snapshot()));
  const resumed = new TaskSampler(envs(), 9, snapshot);
  expect(draw(resumed, 30).map(key)).toEqual(draw(original, 30).map(key));
  expect(snapshot.groups).toBe(17);
  expect(snapshot.cursors.a + snapshot.cursors.b).toBe(17);
});

test("an env's task order does not depend on the other envs", () => {
  const alone = draw(new TaskSampler([envs()[0]!], 5), 14).map((d) => d.task.id);
  const mixed = draw(new TaskSampler(envs(), 5), 200)
    .filter((d) => d.env === "a")
    .slice(0, 14)
    .map((d) => d.task.id);
  expect(mixed).toEqual(alone);
});

test("an env without tasks is an error naming it", () => {
  expect(() => new TaskSampler([{ name: "empty", ratio: 1, groupSize: 2, tasks: [] }], 0)).toThrow(
    'env "empty" has no train tasks',
  );
});
