// Task sampling for training (docs/architecture.md §10): which env the next group comes from (weighted by
// `ratio`) and which of its tasks it gets (walking the env's train split in a shuffled order).
//
// Why built this way: a resumed run must draw exactly the tasks the uninterrupted run would have,
// so the whole sampler is a small JSON state: a per-env cursor (how many tasks were drawn from that
// env), a 32-bit RNG state for the env choice, and a group counter. Each env's order is a
// permutation per epoch derived from (seed, env name, epoch) alone, so a cursor is enough to know
// where an env is, and an env's tasks do not depend on which other envs the run has.
//
// `ratio` is a share of rollouts, not of groups: an env with group_size 8 and one with 4 at equal
// ratio get one group of the first per two of the second.
import { hashString } from "../envs/random.ts";
import type { Task } from "../envs/types.ts";
import { RlxError } from "../errors.ts";

export interface SamplerEnv {
  name: string;
  ratio: number;
  groupSize: number;
  tasks: readonly Task[];
}

export interface SamplerState {
  /** Tasks drawn so far per env (the next task is at this position of the endless shuffled walk). */
  cursors: Record<string, number>;
  /** The env-choice RNG's 32-bit state. */
  rng: number;
  /** Groups drawn so far (group ids are numbered by it). */
  groups: number;
}

export interface Draw {
  env: string;
  task: Task;
  groupId: string;
  groupSize: number;
  /** The env's cursor before this draw (the task's position in the walk). */
  cursor: number;
}

/** mulberry32 with its state exposed, so it can be checkpointed. */
export function nextRandom(state: number): { value: number; state: number } {
  const next = (state + 0x6d2b79f5) >>> 0;
  let t = next;
  t = Math.imul(t ^ (t >>> 15), t | 1);
  t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
  return { value: ((t ^ (t >>> 14)) >>> 0) / 4294967296, state: next };
}

/** A permutation of 0..n-1, the same for the same (seed, key). */
function permutation(n: number, seed: number, key: string): Uint32Array {
  const order = new Uint32Array(n);
  for (let i = 0; i < n; i++) order[i] = i;
  let state = hashString(`${seed}:${key}`);
  for (let i = n - 1; i > 0; i--) {
    const r = nextRandom(state);
    state = r.state;
    const j = Math.floor(r.value * (i + 1));
    const tmp = order[i]!;
    order[i] = order[j]!;
    order[j] = tmp;
  }
  return order;
}

export class TaskSampler {
  private readonly envs: SamplerEnv[];
  private readonly weights: number[];
  private state: SamplerState;
  private readonly epochs = new Map<string, { epoch: number; order: Uint32Array }>();

  constructor(
    envs: SamplerEnv[],
    private readonly seed: number,
    state?: SamplerState,
  ) {
    for (const env of envs) {
      if (env.tasks.length === 0)
        throw new RlxError(`env "${env.name}" has no train tasks`, {
          fix: "check the env's args (dataset path, size)",
        });
    }
    this.envs = envs;
    const total = envs.reduce((sum, env) => sum + env.ratio / env.groupSize, 0);
    this.weights = envs.map((env) => env.ratio / env.groupSize / total);
    this.state = state
      ? structuredClone(state)
      : {
          cursors: Object.fromEntries(envs.map((env) => [env.name, 0])),
          rng: hashString(`sampler:${seed}`),
          groups: 0,
        };
    for (const env of envs) this.state.cursors[env.name] ??= 0;
  }

  /** A copy of the state (for a checkpoint). */
  snapshot(): SamplerState {
    return structuredClone(this.state);
  }

  /** The next group: an env by ratio, then that env's next task. */
  next(): Draw {
    const r = nextRandom(this.state.rng);
    this.state.rng = r.state;
    let index = 0;
    let cumulative = this.weights[0]!;
    while (r.value >= cumulative && index < this.envs.length - 1) cumulative += this.weights[++index]!;
    return this.drawFrom(this.envs[index]!);
  }

  /** The task at position `cursor` of an env's walk. */
  taskAt(envName: string, cursor: number): Task {
    const env = this.env(envName);
    const n = env.tasks.length;
    const epoch = Math.floor(cursor / n);
    let cached = this.epochs.get(env.name);
    if (!cached || cached.epoch !== epoch) {
      cached = { epoch, order: permutation(n, this.seed, `${env.name}:${epoch}`) };
      this.epochs.set(env.name, cached);
    }
    return env.tasks[cached.order[cursor % n]!]!;
  }

  private env(name: string): SamplerEnv {
    const env = this.envs.find((e) => e.name === name);
    if (!env)
      throw new RlxError(`the sampler has no env "${name}"`, {
        fix: "a checkpoint from a run with other envs cannot be resumed with this config",
      });
    return env;
  }

  private drawFrom(env: SamplerEnv): Draw {
    const cursor = this.state.cursors[env.name]!;
    this.state.cursors[env.name] = cursor + 1;
    const groupId = `${env.name}/g${this.state.groups++}`;
    return { env: env.name, task: this.taskAt(env.name, cursor), groupId, groupSize: env.groupSize, cursor };
  }
}
