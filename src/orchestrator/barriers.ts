// The barrier book of one train env (docs/algorithms.md, "Barriers"; the specs: src/algorithms/
// barriers.ts). Each finished group's rollouts arrive here. Every rollout is in its group's set (the
// built-in group barrier: scoreGroup by its algorithm, once the set is complete) and in a set of each
// of its algorithm's own barriers it is a member of (reinforce_pp's batch, hierarchical_grpo's
// proposer peers). A rollout's sets are scored in that order: a set is scored exactly once
// (`scoreBarrier`), when its last member has arrived and none of its members still waits on an
// earlier set; a member whose every set is scored leaves for the batch being collected, which
// trains it. A group set is complete when its group arrives, so for the built-ins without barriers
// the book changes nothing, unless a trace spawned a group of another env (`spawn`,
// src/envs/types.ts): its group set then waits until every spawned rollout has come back
// (`contribute`, from the spawned env's collect), the env's `settle` gives the spawning traces
// their rewards from what they spawned, and only then is the group scored: a proposer's reward and
// credit wait on the solver groups the orchestrator ran for it.
//
// At each batch cut, sets without a size (byBatch) are scored, and a set still short of members
// once `min(timeoutSteps, max_off_policy_steps)` steps have passed since it opened times out (a
// group set waiting on spawned groups: max_off_policy_steps): it drops its waiting members (never
// trained, counted) or, with `onTimeout: "score"`, is scored with what it has. A failed rollout
// counts towards its set's size but is never held or scored; it goes to the batch at once as a
// failure (counted, never trained). A replayed group (a replay sampler's) never arrives here: it
// trains again only its rollouts in no set of their own barriers and that spawned nothing (`replayable`).
//
// Waiting members and the open sets are carried state (`barriers/<env>` in carried.ts): saved in
// every step file, so a run killed with -9 and resumed from a checkpoint has every member that
// waited when that step's batch was cut. An empty book saves nothing, so the checkpoints of runs
// that never wait do not change.
import type { Algorithm } from "../algorithms/base.ts";
import { finishGroup, finishRollout, isTrainable } from "../algorithms/base.ts";
import type { BarrierSpec } from "../algorithms/barriers.ts";
import type { Rollout } from "../data/types.ts";
import { spawnOf } from "../envs/spawn.ts";
import type { Env, SpawnedOutcome } from "../envs/types.ts";
import { RlxError } from "../errors.ts";
import type { Carried } from "./carried.ts";
import { failAsData } from "./hooks.ts";

/** The built-in group barrier's name in sets and saved state. */
export const GROUP_BARRIER = "@group";

/** One open set: whose barrier, its key and size, the step its first member arrived, its members'
 * ids; a group set waiting on spawned groups also holds what came back, by the spawning trace's id. */
interface OpenSet {
  algo: string;
  barrier: string;
  key: string;
  size?: number;
  opened: number;
  members: string[];
  spawned?: Record<string, SpawnedOutcome[]>;
}

/** What the book saves: its open sets and the rollouts waiting in them. */
interface BookState {
  sets: OpenSet[];
  waiting: Rollout[];
}

/** Per step (taken by `takeCounts`): sets scored, sets timed out, members dropped by a timeout. */
export interface BarrierCounts {
  scored: number;
  timedOut: number;
  dropped: number;
}

const setId = (s: Pick<OpenSet, "algo" | "barrier" | "key">) => JSON.stringify([s.algo, s.barrier, s.key]);

/** Arrivals a set has had: its members and the spawned rollouts that came back. */
const arrivals = (set: OpenSet) =>
  set.members.length + Object.values(set.spawned ?? {}).reduce((n, outcomes) => n + outcomes.length, 0);

/** Rollouts in groups by group id, in order of first appearance. */
function byGroup(rollouts: Rollout[]): Rollout[][] {
  const groups = new Map<string, Rollout[]>();
  for (const r of rollouts) groups.set(r.groupId, [...(groups.get(r.groupId) ?? []), r]);
  return [...groups.values()];
}

export class BarrierBook implements Carried {
  private sets = new Map<string, OpenSet>();
  private waiting = new Map<string, Rollout>();
  /** Complete sets waiting on earlier ones are filed apart, so that a later arrival opens a new set. */
  private sealed = 0;
  private counts: BarrierCounts = { scored: 0, timedOut: 0, dropped: 0 };

  /**
   * @param algorithms the env's algorithms by id (one per role that trains; "" for a single-agent env)
   * @param pick which algorithm a rollout belongs to
   * @param maxWait the run's max_off_policy_steps: no set waits longer
   * @param settle the env's rewards for traces that spawned groups (Env.settle)
   */
  constructor(
    private readonly algorithms: ReadonlyMap<string, Algorithm<any>>,
    private readonly pick: (rollout: Rollout) => string,
    private readonly maxWait: number,
    private readonly settle?: Env["settle"],
  ) {}

  /** Whether rollouts may wait here: an algorithm declares a barrier of its own, or the env settles spawns. */
  get active(): boolean {
    return this.settle !== undefined || [...this.algorithms.values()].some((a) => a.barriers().length > 0);
  }

  /** Rollouts waiting in open sets. */
  get held(): number {
    return this.waiting.size;
  }

  /** This step's counts, reset. */
  takeCounts(): BarrierCounts {
    const counts = this.counts;
    this.counts = { scored: 0, timedOut: 0, dropped: 0 };
    return counts;
  }

  private spec(set: Pick<OpenSet, "algo" | "barrier">): BarrierSpec | undefined {
    return this.algorithms
      .get(set.algo)
      ?.barriers()
      .find((b) => b.name === set.barrier);
  }

  /** A set's place in its members' order: the group set first, then the algorithm's barriers as declared. */
  private rank(set: Pick<OpenSet, "algo" | "barrier">): number {
    if (set.barrier === GROUP_BARRIER) return -1;
    return (
      this.algorithms
        .get(set.algo)
        ?.barriers()
        .findIndex((b) => b.name === set.barrier) ?? 0
    );
  }

  /** A finished group's rollouts arrive at `step`: returns what trains now, in groups (sets that
   * completed are scored first; members of open sets wait). */
  async arrive(group: Rollout[], step: number): Promise<Rollout[][]> {
    const passing: Rollout[] = [];
    const joined = new Set<Rollout>(); // in a set of its algorithm's own barriers, or waiting on what it spawned
    const groupSets = new Map<string, OpenSet>();
    for (const rollout of group) {
      const algo = this.pick(rollout);
      const own = groupSets.get(algo) ?? {
        algo,
        barrier: GROUP_BARRIER,
        key: rollout.groupId,
        opened: step,
        members: [],
        size: 0,
      };
      groupSets.set(algo, own);
      own.members.push(rollout.id);
      const spawned = isTrainable(rollout) ? (spawnOf(rollout)?.size ?? 0) : 0;
      own.size! += 1 + spawned;
      if (spawned > 0) joined.add(rollout);
      for (const spec of this.algorithms.get(algo)?.barriers() ?? []) {
        const member = spec.member(rollout);
        if (!member) continue;
        if (isTrainable(rollout)) joined.add(rollout);
        const id = setId({ algo, barrier: spec.name, key: member.key });
        let set = this.sets.get(id);
        if (!set) {
          set = { algo, barrier: spec.name, key: member.key, opened: step, members: [] };
          if (member.size !== undefined) set.size = member.size;
          this.sets.set(id, set);
        }
        set.members.push(rollout.id);
        if (set.size !== undefined && arrivals(set) >= set.size) {
          this.sets.delete(id);
          this.sets.set(`${id}#${this.sealed++}`, set);
        }
      }
      if (isTrainable(rollout)) this.waiting.set(rollout.id, rollout);
      else passing.push(rollout);
    }
    for (const set of groupSets.values()) this.sets.set(setId(set), set);
    const released = await this.release();
    // those in no set but their group's, in the group's order; then the members of sets that completed
    const now = new Set([...passing, ...released]);
    const first = new Set(group.filter((r) => now.has(r) && !joined.has(r)));
    return byGroup([...first, ...released.filter((r) => !first.has(r))]);
  }

  /** A group spawned by a trace of this env finished: each rollout comes back to the group set of
   * the trace that spawned it (a trace no longer waiting, dropped by a timeout, takes nothing).
   * Returns what trains now, in groups. */
  async contribute(spawned: Rollout[], parentId: string): Promise<Rollout[][]> {
    const parent = this.waiting.get(parentId);
    const set =
      parent && this.sets.get(setId({ algo: this.pick(parent), barrier: GROUP_BARRIER, key: parent.groupId }));
    if (!set) return [];
    set.spawned ??= {};
    const outcomes = (set.spawned[parentId] ??= []);
    for (const r of spawned)
      if (!outcomes.some((o) => o.rolloutId === r.id))
        outcomes.push({ rolloutId: r.id, reward: r.reward, metrics: r.metrics, failed: r.error !== undefined });
    return byGroup(await this.release());
  }

  /** The batch of `step` is cut: sets without a size are scored, overdue ones time out. Returns
   * what trains now, in groups. */
  async cut(step: number): Promise<Rollout[][]> {
    for (const set of [...this.sets.values()]) {
      if (set.size === undefined) continue; // scored below, once its members wait on nothing earlier
      const spec = this.spec(set);
      const timeout = set.barrier === GROUP_BARRIER ? this.maxWait : Math.min(spec?.timeoutSteps ?? 0, this.maxWait);
      if (step < set.opened + timeout) continue;
      this.counts.timedOut++;
      if (spec?.onTimeout === "score") {
        set.size = undefined; // scored with what it has
        continue;
      }
      this.forget(set);
      for (const id of set.members) if (this.waiting.delete(id)) this.counts.dropped++;
    }
    return byGroup(await this.release(true));
  }

  /**
   * The rollouts of a stored group that a replay trains again: those in no set of their
   * algorithm's barriers and that spawned nothing. A member trains once, when its set is scored: the
   * replay buffer stored its group before that (so its credit may not exist yet, and a resumed run's
   * buffer holds a copy the book never scores), and a member dropped by a timeout never trains. A
   * replay never joins a set.
   */
  replayable(group: readonly Rollout[]): Rollout[] {
    return group.filter((rollout) => {
      const specs = this.algorithms.get(this.pick(rollout))?.barriers() ?? [];
      return !spawnOf(rollout) && !specs.some((spec) => spec.member(rollout) !== undefined);
    });
  }

  /** Whether a set can be scored now: complete (or due at a cut) and none of its waiting members in
   * an open set that comes before it. */
  private ready(set: OpenSet, cutting: boolean): boolean {
    if (set.size === undefined ? !cutting : arrivals(set) < set.size) return false;
    const rank = this.rank(set);
    return set.members.every(
      (id) =>
        !this.waiting.has(id) ||
        ![...this.sets.values()].some(
          (other) => other !== set && other.members.includes(id) && this.rank(other) < rank,
        ),
    );
  }

  /** Scores every set that is ready, until none is, then releases the members left in no open set. */
  private async release(cutting = false): Promise<Rollout[]> {
    const scored = new Set<string>();
    for (;;) {
      const due = [...this.sets.values()].filter((set) => this.ready(set, cutting));
      if (due.length === 0) break;
      for (const set of due) {
        this.forget(set);
        await this.score(set);
        for (const id of set.members) {
          scored.delete(id); // released in the order of the last set that scored them
          scored.add(id);
        }
      }
    }
    const open = new Set([...this.sets.values()].flatMap((s) => s.members));
    const released: Rollout[] = [];
    for (const id of scored) {
      const rollout = this.waiting.get(id);
      if (!rollout || open.has(id)) continue;
      this.waiting.delete(id);
      released.push(rollout);
    }
    return released;
  }

  private forget(set: OpenSet): void {
    for (const [key, open] of this.sets) if (open === set) this.sets.delete(key);
  }

  /** Scores one set with its trainable waiting members: a group set settles what its traces
   * spawned and runs scoreGroup; an algorithm's own runs scoreBarrier. */
  private async score(set: OpenSet): Promise<void> {
    const members = set.members
      .map((id) => this.waiting.get(id))
      .filter((r): r is Rollout => r !== undefined && isTrainable(r));
    const algorithm = this.algorithms.get(set.algo)!;
    if (set.barrier !== GROUP_BARRIER) {
      if (members.length > 0)
        await failAsData(members, `scoreBarrier(${set.barrier})`, () => algorithm.scoreBarrier(set.barrier, members));
      this.counts.scored++;
      return;
    }
    if (set.spawned) await this.settleSpawned(members, set.spawned, algorithm);
    await failAsData(members, "scoreGroup", () => finishGroup(algorithm, members));
  }

  /** The spawning traces' rewards from what came back (the env's settle), then their scoreRollout,
   * which waited for the reward. */
  private async settleSpawned(
    members: Rollout[],
    spawned: Record<string, SpawnedOutcome[]>,
    algorithm: Algorithm<any>,
  ): Promise<void> {
    const spawning = members.filter((r) => spawnOf(r));
    await failAsData(members, "settle", async () => {
      if (!this.settle) throw new Error(`env ${members[0]!.env} spawned groups but defines no settle() to reward them`);
      const settled = this.settle(members.map((rollout) => ({ rollout, spawned: spawned[rollout.id] ?? [] })));
      members.forEach((rollout, i) => {
        const result = settled[i];
        if (!result) return;
        if (!Number.isFinite(result.reward))
          throw new Error(`env ${rollout.env} settled trace ${rollout.id} with no finite reward (${result.reward})`);
        rollout.reward = result.reward;
        rollout.metrics = { ...rollout.metrics, ...result.metrics };
      });
    });
    for (const rollout of spawning)
      await failAsData([rollout], "scoreRollout", () => finishRollout(algorithm, rollout));
  }

  saveState(): BookState | undefined {
    if (this.sets.size === 0 && this.waiting.size === 0) return undefined;
    return { sets: [...this.sets.values()], waiting: [...this.waiting.values()] };
  }

  loadState(state: BookState): void {
    const unknown = state.sets
      .filter((s) => s.barrier !== GROUP_BARRIER && !this.spec(s))
      .map((s) => `${s.algo || "(env)"}:${s.barrier}`);
    if (unknown.length > 0)
      throw new RlxError(
        `the checkpoint holds waiting barrier sets of ${unknown.join(", ")}, which this run does not declare`,
        {
          fix: "resume with the algorithms of the run that wrote the checkpoint",
        },
      );
    this.sets = new Map(
      state.sets.map((s, i) => [s.size !== undefined && arrivals(s) >= s.size ? `${setId(s)}#${i}` : setId(s), s]),
    );
    this.sealed = state.sets.length;
    this.waiting = new Map(state.waiting.map((r) => [r.id, r]));
  }
}
