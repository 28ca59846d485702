// The barrier book of one train env (docs/algorithms.md, "Barriers"; the specs: src/algorithms/
// barriers.ts). Each finished group's rollouts arrive here after their rollout and group barriers
// were scored; a rollout in no open set of its algorithm's barriers goes on to the batch at once
// (the built-ins without barriers: the book then changes nothing), one in a set waits (every
// rollout of reinforce_pp, on its batch; hierarchical_grpo's proposers). When a set's
// last member arrives the set is scored exactly once (`scoreBarrier`) and its members whose every
// set is scored leave for the batch being collected, which trains them.
//
// At each batch cut, sets without a size (byBatch) are scored, and a set still short of members
// once `min(timeoutSteps, max_off_policy_steps)` steps have passed since it opened times out: it
// drops its waiting members (never trained, counted) or, with `onTimeout: "score"`, is scored
// with what it has. A failed rollout counts towards its set's size but is never held or scored;
// it goes to the batch at once as a failure (counted, never trained). A replayed group (a replay
// sampler's) never arrives here: it trains again only its rollouts in no set (`replayable`).
//
// Waiting members and the open sets are carried state (`barriers/<env>` in carried.ts): saved in
// every step file, so a run killed with -9 and resumed from a checkpoint has every member that
// waited when that step's batch was cut. An empty book saves nothing, so the checkpoints of runs
// whose algorithms declare no barrier do not change.
import type { Algorithm } from "../algorithms/base.ts";
import { isTrainable } from "../algorithms/base.ts";
import type { BarrierSpec } from "../algorithms/barriers.ts";
import type { Rollout } from "../data/types.ts";
import { RlxError } from "../errors.ts";
import type { Carried } from "./carried.ts";
import { failAsData } from "./hooks.ts";

/** One open set: whose barrier, its key and size, the step its first member arrived, its members' ids. */
interface OpenSet {
  algo: string;
  barrier: string;
  key: string;
  size?: number;
  opened: number;
  members: string[];
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

/** Rollouts in groups by group id, in order of first appearance. */
function byGroup(rollouts: Rollout[]): Rollout[][] {
  const groups = new Map<string, Rollout[]>();
  for (const r of rollouts) groups.set(r.groupId, [...(groups.get(r.groupId) ?? []), r]);
  return [...groups.values()];
}

export class BarrierBook implements Carried {
  private sets = new Map<string, OpenSet>();
  private waiting = new Map<string, Rollout>();
  private counts: BarrierCounts = { scored: 0, timedOut: 0, dropped: 0 };

  /**
   * @param algorithms the env's algorithms by id (one per role that trains; "" for a single-agent env)
   * @param pick which algorithm a rollout belongs to
   * @param maxWait the run's max_off_policy_steps: no set waits longer
   */
  constructor(
    private readonly algorithms: ReadonlyMap<string, Algorithm<any>>,
    private readonly pick: (rollout: Rollout) => string,
    private readonly maxWait: number,
  ) {}

  /** Whether any of the env's algorithms declares a barrier of its own. */
  get active(): boolean {
    return [...this.algorithms.values()].some((a) => a.barriers().length > 0);
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

  /** A finished group's rollouts arrive at `step`: returns what trains now, in groups (sets that
   * completed are scored first; members of open sets wait). */
  async arrive(group: Rollout[], step: number): Promise<Rollout[][]> {
    const complete: OpenSet[] = [];
    const passing: Rollout[] = [];
    for (const rollout of group) {
      const algo = this.pick(rollout);
      let joined = 0;
      for (const spec of this.algorithms.get(algo)?.barriers() ?? []) {
        const member = spec.member(rollout);
        if (!member) continue;
        const id = setId({ algo, barrier: spec.name, key: member.key });
        let set = this.sets.get(id);
        if (!set) {
          set = { algo, barrier: spec.name, key: member.key, opened: step, members: [] };
          if (member.size !== undefined) set.size = member.size;
          this.sets.set(id, set);
        }
        set.members.push(rollout.id);
        joined++;
        if (set.size !== undefined && set.members.length >= set.size) {
          this.sets.delete(id); // complete: a later arrival with this key opens a new set
          complete.push(set);
        }
      }
      if (joined > 0 && isTrainable(rollout)) this.waiting.set(rollout.id, rollout);
      else passing.push(rollout);
    }
    return byGroup([...passing, ...(await this.score(complete))]);
  }

  /** The batch of `step` is cut: sets without a size are scored, overdue ones time out. Returns
   * what trains now, in groups. */
  async cut(step: number): Promise<Rollout[][]> {
    const due: OpenSet[] = [];
    for (const set of [...this.sets.values()]) {
      if (set.size === undefined) {
        due.push(set);
        continue;
      }
      const spec = this.spec(set);
      if (spec && step < set.opened + Math.min(spec.timeoutSteps, this.maxWait)) continue;
      this.counts.timedOut++;
      if (spec?.onTimeout === "score") {
        due.push(set);
        continue;
      }
      this.sets.delete(setId(set));
      for (const id of set.members) if (this.waiting.delete(id)) this.counts.dropped++;
    }
    return byGroup(await this.score(due));
  }

  /**
   * The rollouts of a stored group that a replay trains again: those in no set of their
   * algorithm's barriers. A member trains once, when its set is scored: the replay buffer stored
   * its group before that (so its credit may not exist yet, and a resumed run's buffer holds a copy
   * the book never scores), and a member dropped by a timeout never trains. A replay never joins a set.
   */
  replayable(group: readonly Rollout[]): Rollout[] {
    return group.filter((rollout) => {
      const specs = this.algorithms.get(this.pick(rollout))?.barriers() ?? [];
      return !specs.some((spec) => spec.member(rollout) !== undefined);
    });
  }

  /** Scores each set once (its trainable waiting members), then releases the members left in no open set. */
  private async score(sets: OpenSet[]): Promise<Rollout[]> {
    for (const set of sets) this.sets.delete(setId(set));
    for (const set of sets) {
      const members = set.members
        .map((id) => this.waiting.get(id))
        .filter((r): r is Rollout => r !== undefined && isTrainable(r));
      const algorithm = this.algorithms.get(set.algo)!;
      if (members.length > 0)
        await failAsData(members, `scoreBarrier(${set.barrier})`, () => algorithm.scoreBarrier(set.barrier, members));
      this.counts.scored++;
    }
    const open = new Set([...this.sets.values()].flatMap((s) => s.members));
    const released: Rollout[] = [];
    for (const id of new Set(sets.flatMap((s) => s.members))) {
      const rollout = this.waiting.get(id);
      if (!rollout || open.has(id)) continue;
      this.waiting.delete(id);
      released.push(rollout);
    }
    return released;
  }

  saveState(): BookState | undefined {
    if (this.sets.size === 0 && this.waiting.size === 0) return undefined;
    return { sets: [...this.sets.values()], waiting: [...this.waiting.values()] };
  }

  loadState(state: BookState): void {
    const unknown = state.sets.filter((s) => !this.spec(s)).map((s) => `${s.algo || "(env)"}:${s.barrier}`);
    if (unknown.length > 0)
      throw new RlxError(
        `the checkpoint holds waiting barrier sets of ${unknown.join(", ")}, which this run does not declare`,
        {
          fix: "resume with the algorithms of the run that wrote the checkpoint",
        },
      );
    this.sets = new Map(state.sets.map((s) => [setId(s), s]));
    this.waiting = new Map(state.waiting.map((r) => [r.id, r]));
  }
}
