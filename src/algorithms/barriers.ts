// Dependency barriers (docs/algorithms.md, "Barriers"): the sets of rollouts an algorithm's credit
// waits on. Two barriers are built in and complete inside one group's run, so they never wait:
//
//   rollout   each rollout alone, as it finishes          -> Algorithm.scoreRollout
//   group     the rollouts of one draw of one task        -> Algorithm.scoreGroup
//
// Beyond those, an algorithm's `barriers()` declares its own; the orchestrator's barrier book
// (src/orchestrator/barriers.ts) holds each finished rollout in every set it belongs to and calls
// `scoreBarrier(name, members)` exactly once per set, when its last member has arrived:
//
//   byTask(name, size)   `size` rollouts of one task, across groups and steps (a running baseline)
//   byKey(name, field)   a set the env names: `rollout.info.barriers[field] = { key, size }` (a group
//                        of groups: a proposer's task and the solver groups spawned from it)
//   byBatch(name)        every member of the batch being cut (batch-normalized advantages)
//
// Rules (the book enforces them): a failed rollout arrives (it counts towards its set's size) but
// is never scored or trained, as in a group today; a set still short of members when the batch of
// step `opened + timeoutSteps` is cut times out (timeoutSteps capped at the run's
// max_off_policy_steps, so no member trains staler than the run allows) and then either drops its
// members (`onTimeout: "drop"`, the default: never trained, counted) or is scored with the members
// it has (`"score"`). A rollout trains once every set it belongs to was scored.
import type { Rollout } from "../data/types.ts";

/** Where a rollout sits in one barrier: the set's key, and how many arrivals complete the set
 * (undefined: the set completes when the batch is cut). */
export interface BarrierMembership {
  key: string;
  size?: number;
}

/** One kind of set an algorithm's credit waits on. */
export interface BarrierSpec {
  /** Unique within the algorithm: the first argument of scoreBarrier, metrics, saved state. */
  name: string;
  /** The set a finished rollout belongs to; undefined: not a member of this barrier. */
  member(rollout: Rollout): BarrierMembership | undefined;
  /** Steps an incomplete set may wait after its first member arrived (capped at max_off_policy_steps). */
  timeoutSteps: number;
  /** A timed-out set drops its members (never trained) or is scored with the members it has. */
  onTimeout: "drop" | "score";
}

export interface BarrierOptions {
  timeoutSteps?: number;
  onTimeout?: "drop" | "score";
}

const options = (o: BarrierOptions) => ({
  timeoutSteps: o.timeoutSteps ?? Number.POSITIVE_INFINITY,
  onTimeout: o.onTimeout ?? "drop",
});

/** `size` rollouts of one task, across groups and steps. */
export function byTask(name: string, size: number, o: BarrierOptions = {}): BarrierSpec {
  return { name, member: (r) => ({ key: r.taskId, size }), ...options(o) };
}

/** The set the env names in `rollout.info.barriers[field]` ({ key, size }); rollouts without one
 * are not members. */
export function byKey(name: string, field: string, o: BarrierOptions = {}): BarrierSpec {
  return {
    name,
    member(r) {
      const emitted = (r.info.barriers as Record<string, BarrierMembership> | undefined)?.[field];
      return emitted && typeof emitted.key === "string" ? emitted : undefined;
    },
    ...options(o),
  };
}

/** Every member of the batch being cut. */
export function byBatch(name: string): BarrierSpec {
  return { name, member: () => ({ key: "batch" }), timeoutSteps: 0, onTimeout: "score" };
}
