// Task sampling: envs by ratio (a share of rollouts, so group sizes matter), each env walking its
// tasks as one permutation per epoch, the whole state a JSON snapshot that continues exactly.
import { expect, test } from "bun:test";
import { createHash } from "node:crypto";
import type { Task } from "../../../src/envs/types.ts";
import { CarriedState } from "../../../src/orchestrator/carried.ts";
import {
  type Draw,
  ratioAt,
  type SamplerEnv,
  TaskSampler,
  uniformEnv,
} from "../../../src/orchestrator/task_sampler.ts";

const tasks = (prefix: string, n: number): Task[] =>
  Array.from({ length: n }, (_, i) => ({ id: `${prefix}${i}`, prompt: [], answer: "" }));
const envs = (seed: number): SamplerEnv[] => [
  uniformEnv({ name: "a", ratio: 1, groupSize: 4, tasks: tasks("a", 7) }, seed),
  uniformEnv({ name: "b", ratio: 3, groupSize: 8, tasks: tasks("b", 5) }, seed),
];
const sampler = (seed: number, list = envs(seed)) => new TaskSampler(list, seed);
const draw = (s: TaskSampler, n: number): Draw[] => Array.from({ length: n }, () => s.next(1));
const key = (d: Draw) => `${d.groupId}:${d.task?.id}`;

test("uniform samplers draw bit for bit what rlx drew before samplers were pluggable", () => {
  // digest of 2000 draws by src/orchestrator/task_sampler.ts at commit 574e267 (seed 11, these envs)
  const draws = draw(sampler(11), 2000).map(key);
  expect(draws.slice(0, 8).join(",")).toBe("b/g0:b0,b/g1:b1,b/g2:b3,b/g3:b2,a/g4:a6,a/g5:a4,a/g6:a3,b/g7:b4");
  expect(createHash("sha256").update(draws.join("\n")).digest("hex")).toBe(
    "77664e0c68d5178ba0fd549de16915470d0894f5fb816d9b46cfe14f5a989852",
  );
});

test("the same seed draws the same groups; another seed draws others", () => {
  expect(draw(sampler(1), 40).map(key)).toEqual(draw(sampler(1), 40).map(key));
  expect(draw(sampler(2), 40).map(key)).not.toEqual(draw(sampler(1), 40).map(key));
});

test("ratio is a share of rollouts: 1:3 with group sizes 4 and 8 draws groups 2:3", () => {
  const draws = draw(sampler(0), 5000);
  const rollouts = (env: string) => draws.filter((d) => d.env === env).reduce((n, d) => n + d.groupSize, 0);
  const share = rollouts("b") / (rollouts("a") + rollouts("b"));
  expect(share).toBeGreaterThan(0.72);
  expect(share).toBeLessThan(0.78);
});

test("each env walks its tasks as a permutation per epoch, reshuffled each epoch", () => {
  const draws = draw(sampler(3), 400).filter((d) => d.env === "a");
  const epochs = [draws.slice(0, 7), draws.slice(7, 14), draws.slice(14, 21)].map((e) => e.map((d) => d.task!.id));
  for (const epoch of epochs)
    expect([...epoch].sort()).toEqual(
      tasks("a", 7)
        .map((t) => t.id)
        .sort(),
    );
  expect(epochs[0]).not.toEqual(epochs[1]);
});

test("group ids number every draw across envs", () => {
  expect(draw(sampler(0), 5).map((d) => d.groupId!.split("/")[1])).toEqual(["g0", "g1", "g2", "g3", "g4"]);
});

test("a snapshot of the carried state continues exactly where the sampler was, through JSON", () => {
  const registered = (seed: number) => {
    const list = envs(seed);
    const s = sampler(seed, list);
    const carried = new CarriedState();
    carried.register("draws", s);
    for (const env of list) carried.register(`sampler/${env.name}`, env.sampler);
    return { s, carried };
  };
  const original = registered(9);
  draw(original.s, 17);
  const snapshot = JSON.parse(JSON.stringify(original.carried.save()));
  const resumed = registered(9);
  resumed.carried.load(snapshot, "test");
  expect(draw(resumed.s, 30).map(key)).toEqual(draw(original.s, 30).map(key));
  expect(snapshot.draws.groups).toBe(17);
  expect(snapshot["sampler/a"].cursor + snapshot["sampler/b"].cursor).toBe(17);
});

test("a checkpoint holding state this run has no part for is refused, naming the key", () => {
  const carried = new CarriedState();
  carried.register("draws", sampler(0));
  expect(() => carried.load({ draws: { rng: 1, groups: 0 }, "sampler/gone": { cursor: 3 } }, "step 4")).toThrow(
    'step 4: the checkpoint holds state for "sampler/gone", which this run does not have',
  );
  expect(() => carried.register("draws", sampler(0))).toThrow('two parts named "draws"');
});

test("an env's task order does not depend on the other envs", () => {
  const alone = draw(new TaskSampler([envs(5)[0]!], 5), 14).map((d) => d.task!.id);
  const mixed = draw(sampler(5), 200)
    .filter((d) => d.env === "a")
    .slice(0, 14)
    .map((d) => d.task!.id);
  expect(mixed).toEqual(alone);
});

test("an env without tasks is an error naming it", () => {
  expect(() => new TaskSampler([uniformEnv({ name: "empty", ratio: 1, groupSize: 2, tasks: [] }, 0)], 0)).toThrow(
    'env "empty" has no train tasks',
  );
});

test("an env's ratio can follow a schedule over steps: linear from ratio to ratio_end, flat after", () => {
  const list = [
    { ...uniformEnv({ name: "a", ratio: 3, groupSize: 4, tasks: tasks("a", 7) }, 0), schedule: { end: 1, steps: 11 } },
    uniformEnv({ name: "b", ratio: 1, groupSize: 4, tasks: tasks("b", 5) }, 0),
  ];
  expect([1, 6, 11, 40].map((step) => ratioAt(list[0]!, step))).toEqual([3, 2, 1, 1]);
  const s = new TaskSampler(list, 0);
  const share = (step: number) => {
    const draws = Array.from({ length: 4000 }, () => s.next(step));
    return draws.filter((d) => d.env === "a").length / draws.length;
  };
  expect(share(1)).toBeCloseTo(0.75, 1);
  expect(share(6)).toBeCloseTo(2 / 3, 1);
  expect(share(20)).toBeCloseTo(0.5, 1);
});
