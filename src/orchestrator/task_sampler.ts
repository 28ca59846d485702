// The run-level draw for training (docs/architecture.md §10, docs/task_samplers.md): which env the next
// group comes from (weighted by `ratio`), then the env's own sampler (src/task_samplers/) says which of
// its tasks it gets, or which stored group is replayed in its place.
//
// Why built this way: a resumed run must draw exactly what the uninterrupted run would have, so
// the run-level state is a 32-bit RNG state for the env choice, a group counter and the groups
// pending from the last step (registered as "draws" in carried.ts), and each env sampler's state
// is its own. With `uniform` samplers the draws are rlx's draws since its first sampler, bit for
// bit (test/unit/orchestrator/task_sampler.test.ts).
//
// `ratio` is a share of rollouts, not of groups: an env with group_size 8 and one with 4 at equal
// ratio get one group of the first per two of the second. With `ratio_end` an env's ratio follows
// a schedule over steps (linear from `ratio` at step 1 to `ratio_end` at `ratio_steps`).
import type { Rollout, Task } from "../data/types.ts";
import { hashString } from "../envs/random.ts";
import { RlxError } from "../errors.ts";
import type { Sampler } from "../task_samplers/base.ts";
import { TaskStats } from "../task_samplers/stats.ts";
import { Uniform } from "../task_samplers/uniform.ts";
import { nextRandom } from "../task_samplers/walk.ts";
import { CarriedState } from "./carried.ts";
import type { TrainEnv } from "./setup.ts";

/** One train env as the run-level draw sees it. */
export interface SamplerEnv {
  name: string;
  ratio: number;
  /** The ratio's schedule: `ratio` at step 1, `end` at step `steps`, flat after. */
  schedule?: { end: number; steps: number };
  groupSize: number;
  sampler: Sampler<any>;
  /** Checked to be non-empty (an env without train tasks cannot be drawn from). */
  tasks: readonly Task[];
}

/** An env drawn by the default `uniform` sampler (tools and tests that replay a run's draws). */
export function uniformEnv(env: Omit<SamplerEnv, "sampler">, seed: number): SamplerEnv {
  const stats = new TaskStats(1);
  const ctx = { env: env.name, tasks: env.tasks, seed, groupSize: env.groupSize, batchSize: env.groupSize, stats };
  return { ...env, sampler: new Uniform({ type: "uniform", pass_reward: 1 }, ctx) };
}

/** A group drawn ahead for an earlier step, admitted, and not needed there (groups.ts). */
export interface PendingGroup {
  group: Rollout[];
  /** It came from a replay buffer (it is trained again, not for the first time). */
  replay: boolean;
}

/** The run-level draw's state. */
export interface DrawState {
  /** The env-choice RNG's 32-bit state. */
  rng: number;
  /** Fresh groups drawn so far (group ids are numbered by it). */
  groups: number;
  /** Groups waiting to be the first ones of the next step, oldest first. */
  pending: PendingGroup[];
}

/** The next group: a fresh one (`task`, a new group id), a stored one to train again (`replay`), or
 * one drawn ahead for an earlier step and admitted there (`pending`). */
export type Draw = { env: string; groupSize: number } & (
  | { kind: "fresh"; task: Task; groupId: string; group?: undefined }
  | { kind: "replay" | "pending"; group: Rollout[]; task?: undefined; groupId?: undefined }
);

/** An env's ratio at `step` (its schedule, if it has one). */
export function ratioAt(env: Pick<SamplerEnv, "ratio" | "schedule">, step: number): number {
  if (!env.schedule) return env.ratio;
  const t = Math.min(1, Math.max(0, (step - 1) / Math.max(1, env.schedule.steps - 1)));
  return env.ratio + (env.schedule.end - env.ratio) * t;
}

/** Each env's probability of being drawn at `step`: its ratio per rollout of a group, normalized. */
function envWeights(envs: readonly SamplerEnv[], step: number): number[] {
  const total = envs.reduce((sum, env) => sum + ratioAt(env, step) / env.groupSize, 0);
  return envs.map((env) => ratioAt(env, step) / env.groupSize / total);
}

export class TaskSampler {
  private weights: number[];
  private weightsStep = 1;
  private state: DrawState;

  constructor(
    private readonly envs: SamplerEnv[],
    seed: number,
  ) {
    for (const env of envs) {
      if (env.tasks.length === 0)
        throw new RlxError(`env "${env.name}" has no train tasks`, {
          fix: "check the env's args (dataset path, size)",
        });
    }
    this.weights = envWeights(envs, 1);
    this.state = { rng: hashString(`sampler:${seed}`), groups: 0, pending: [] };
  }

  saveState(): DrawState {
    return { ...this.state, pending: [...this.state.pending] };
  }

  loadState(state: DrawState): void {
    this.state = { ...state, pending: [...(state.pending ?? [])] };
  }

  /** Groups waiting for the next step. */
  get pending(): number {
    return this.state.pending.length;
  }

  /** Keeps an admitted group for the next step (it is drawn before anything else). */
  keep(pending: PendingGroup): void {
    this.state.pending.push(pending);
  }

  /** The next group for `step`: a pending one, else an env by ratio and whatever its sampler picks. */
  next(step: number): Draw {
    const waiting = this.state.pending.shift();
    if (waiting) {
      const { group, replay } = waiting;
      return { env: group[0]!.env, groupSize: group.length, kind: replay ? "replay" : "pending", group };
    }
    if (step !== this.weightsStep && this.envs.some((env) => env.schedule)) {
      this.weights = envWeights(this.envs, step);
      this.weightsStep = step;
    }
    const r = nextRandom(this.state.rng);
    this.state.rng = r.state;
    let index = 0;
    let cumulative = this.weights[0]!;
    const last = this.weights.findLastIndex((w) => w > 0); // an env at ratio 0 is never drawn
    while (index < last && (r.value >= cumulative || this.weights[index] === 0)) cumulative += this.weights[++index]!;
    const env = this.envs[index]!;
    const pick = env.sampler.next(step);
    if ("replay" in pick) return { env: env.name, groupSize: pick.replay.length, kind: "replay", group: pick.replay };
    const groupId = `${env.name}/g${this.state.groups++}`;
    return { env: env.name, groupSize: env.groupSize, kind: "fresh", task: pick.task, groupId };
  }
}

/** The run-level draw over the envs' samplers, and the registry of all state that outlives a step. */
export function taskSamplerState(
  envs: readonly TrainEnv[],
  seed: number,
  maxSteps: number,
): { sampler: TaskSampler; carried: CarriedState } {
  const sampler = new TaskSampler(
    envs.map((e) => ({
      name: e.resolved.name,
      ratio: e.resolved.ratio,
      ...(e.resolved.ratio_end === undefined
        ? {}
        : { schedule: { end: e.resolved.ratio_end, steps: e.resolved.ratio_steps ?? maxSteps } }),
      groupSize: e.resolved.group_size,
      sampler: e.sampler,
      tasks: e.tasks,
    })),
    seed,
  );
  const carried = new CarriedState();
  carried.register("draws", sampler);
  for (const e of envs) {
    carried.register(`stats/${e.resolved.name}`, e.stats);
    carried.register(`sampler/${e.resolved.name}`, e.sampler);
    carried.register(`algorithm/${e.resolved.name}`, e.algorithm);
    carried.register(`barriers/${e.resolved.name}`, e.barriers);
    for (const [role, r] of e.roleAlgorithms ?? [])
      carried.register(`algorithm/${e.resolved.name}/${role}`, r.algorithm);
  }
  return { sampler, carried };
}
