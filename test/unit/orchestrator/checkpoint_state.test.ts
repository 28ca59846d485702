// Reading the orchestrator's checkpoint state: format 2 as written, format 1 (rlx before samplers
// were pluggable: per-env cursors, the RNG, the group counter) as the carried state of uniform
// samplers, so an old checkpoint resumes with the draws it would have made; anything else is
// refused naming the file.
import { expect, test } from "bun:test";
import { CarriedState } from "../../../src/orchestrator/carried.ts";
import { orchestratorState } from "../../../src/orchestrator/run.ts";
import { TaskSampler, uniformEnv } from "../../../src/orchestrator/task_sampler.ts";

const tasks = Array.from({ length: 9 }, (_, i) => ({ id: `t${i}`, prompt: [], answer: "" }));
const envs = () => [
  uniformEnv({ name: "a", ratio: 1, groupSize: 2, tasks }, 4),
  uniformEnv({ name: "b", ratio: 2, groupSize: 2, tasks }, 4),
];

test("a format-1 checkpoint resumes as uniform samplers and continues the draws exactly", () => {
  const original = new TaskSampler(envs(), 4);
  const drawn = Array.from({ length: 13 }, () => original.next(1));
  const cursors = { a: drawn.filter((d) => d.env === "a").length, b: drawn.filter((d) => d.env === "b").length };
  const v1 = { format: 1, step: 3, sampler: { cursors, rng: original.saveState().rng, groups: 13 } };
  const state = orchestratorState({ dir: "ck", step: 3, orchestratorState: v1 });
  expect(state).toEqual({
    format: 2,
    step: 3,
    carried: {
      draws: { rng: v1.sampler.rng, groups: 13 },
      "sampler/a": { cursor: cursors.a },
      "sampler/b": { cursor: cursors.b },
    },
  });
  const list = envs();
  const resumed = new TaskSampler(list, 4);
  const carried = new CarriedState();
  carried.register("draws", resumed);
  for (const env of list) carried.register(`sampler/${env.name}`, env.sampler);
  carried.load(state.carried, "ck");
  const key = (d: ReturnType<TaskSampler["next"]>) => `${d.groupId}:${d.task?.id}`;
  expect(Array.from({ length: 20 }, () => key(resumed.next(4)))).toEqual(
    Array.from({ length: 20 }, () => key(original.next(4))),
  );
});

test("a state that is neither format is refused, naming the file", () => {
  expect(() =>
    orchestratorState({ dir: "ck", step: 3, orchestratorState: { format: 2, step: 2, carried: {} } }),
  ).toThrow("ck/orchestrator.json is not an orchestrator state of step 3");
  expect(() => orchestratorState({ dir: "ck", step: 3, orchestratorState: { format: 7 } })).toThrow(
    "ck/orchestrator.json",
  );
});
