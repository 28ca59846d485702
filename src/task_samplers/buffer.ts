// The replay buffer: finished groups kept to be trained again in later steps, oldest first, at
// most `size` of them. A group leaves when it was replayed `maxReplays` times, when a newer group
// pushes it out, or when it grows stale: a group is replayable at step N only while every rollout
// was sampled by weights no older than N - 1 - maxAge (the step loop's own staleness rule, with
// maxAge <= max_off_policy_steps, so a replayed group is never one the loop would drop). Rollouts
// are kept whole (their tokens, sampling logprobs, advantages and original policy version), so a
// replayed sample is the same sample the trainer saw before and its importance ratio corrects for
// the policy having moved. The buffer is JSON (its groups as they are), saved in checkpoints.
import type { Rollout } from "../data/types.ts";

/** One stored group. */
export interface BufferedGroup {
  group: Rollout[];
  /** The oldest policy version among its rollouts. */
  version: number;
  /** Times it was trained again so far. */
  replays: number;
  /** The step it was last replayed in (a group is replayed at most once per step). */
  lastStep: number;
}

/** The oldest weights version that sampled a rollout of the group (failed rollouts aside). */
export function groupVersion(group: readonly Rollout[]): number {
  const versions = group.filter((r) => r.numTurns > 0).map((r) => r.policyVersion);
  return versions.length ? Math.min(...versions) : -1;
}

export class ReplayBuffer {
  private groups: BufferedGroup[] = [];

  constructor(
    private readonly size: number,
    private readonly maxAge: number,
    private readonly maxReplays: number,
  ) {}

  get length(): number {
    return this.groups.length;
  }

  /** Keeps a group; the oldest one leaves when the buffer is full. */
  push(group: readonly Rollout[]): void {
    this.groups.push({ group: [...group], version: groupVersion(group), replays: 0, lastStep: -1 });
    if (this.groups.length > this.size) this.groups.shift();
  }

  /** Drops the groups too stale to train at `step`. */
  evict(step: number): void {
    this.groups = this.groups.filter((g) => g.version >= step - 1 - this.maxAge);
  }

  /** The oldest group replayable at `step` (not yet replayed in it), counted as replayed; or undefined. */
  take(step: number): Rollout[] | undefined {
    this.evict(step);
    const entry = this.groups.find((g) => g.lastStep !== step);
    if (!entry) return undefined;
    entry.replays++;
    entry.lastStep = step;
    if (entry.replays >= this.maxReplays) this.groups = this.groups.filter((g) => g !== entry);
    return entry.group;
  }

  /** Mean versions behind step N's newest weights (N - 1 - version) of the stored groups; 0 when empty. */
  meanAge(step: number): number {
    if (this.groups.length === 0) return 0;
    return this.groups.reduce((n, g) => n + (step - 1 - g.version), 0) / this.groups.length;
  }

  saveState(): BufferedGroup[] {
    return this.groups;
  }

  loadState(groups: BufferedGroup[]): void {
    this.groups = groups;
  }
}
