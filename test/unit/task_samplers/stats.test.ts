// Per-task statistics and the replay buffer: what they count, what they drop, and that their JSON
// state restores them exactly.
import { expect, test } from "bun:test";
import { ReplayBuffer } from "../../../src/task_samplers/buffer.ts";
import { TaskStats } from "../../../src/task_samplers/stats.ts";
import { group } from "./helpers.ts";

test("task statistics count finished rollouts, passes at pass_reward, the last group's rate and step", () => {
  const stats = new TaskStats(0.5);
  const g = group("t0", [0.5, 0.2, 0.9, 0]);
  g[3]!.error = "boom"; // a failed rollout is not an attempt
  stats.record(g, 3);
  stats.record(group("t0", [0, 0]), 5);
  expect(stats.get("t0")).toEqual({ attempts: 5, passes: 2, lastPassRate: 0, lastSeenStep: 5 });
  stats.record(group("t1", [1, 1, 1, 0]), 5);
  stats.record(group("t2", [0.3]), 5);
  expect(stats.histogram()).toEqual([2, 0, 0, 1, 0]); // t0 and t2 at 0, t1 at 0.75
  const copy = new TaskStats(0.5);
  copy.loadState(JSON.parse(JSON.stringify(stats.saveState())));
  expect(copy.get("t1")).toEqual(stats.get("t1")!);
  expect(copy.size).toBe(3);
});

test("the replay buffer keeps at most its size, drops stale groups and those replayed max_replays times", () => {
  const buffer = new ReplayBuffer(3, 2, 2);
  for (let v = 0; v < 4; v++) buffer.push(group(`t${v}`, [1, 0], v));
  expect(buffer.length).toBe(3); // t0 pushed out
  expect(buffer.take(4)![0]!.taskId).toBe("t1"); // versions >= 4 - 1 - 2 = 1 are fresh
  expect(buffer.take(4)![0]!.taskId).toBe("t2"); // at most once per step
  expect(buffer.take(5)![0]!.taskId).toBe("t2"); // t1 (version 1) is stale at step 5
  expect(buffer.length).toBe(1); // t2 was replayed twice, t1 evicted
  expect(buffer.meanAge(5)).toBe(1);
  const copy = new ReplayBuffer(3, 2, 2);
  copy.loadState(JSON.parse(JSON.stringify(buffer.saveState())));
  expect(copy.take(6)![0]!.id).toBe("t3/v3/r0");
  expect(copy.take(6)).toBeUndefined();
});
