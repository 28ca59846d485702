// Seeded randomness the samplers checkpoint: a mulberry32 step whose whole state is one 32-bit
// number (so a sampler's RNG fits in its JSON state), and the shuffled walk over an env's tasks
// that the uniform sampler (and every built-in that draws fresh tasks in order) follows.
//
// The walk is a permutation per epoch derived from (seed, env name, epoch) alone, so a cursor is
// all a sampler needs to know where it is, and an env's task order does not depend on which other
// envs the run has. These are rlx's draws since its first sampler: the uniform sampler must keep
// them bit for bit (test/unit/task_samplers/uniform.test.ts holds them to a golden digest).
import { hashString } from "../envs/random.ts";
import type { Task } from "../data/types.ts";

/** mulberry32 with its state exposed, so it can be checkpointed. */
export function nextRandom(state: number): { value: number; state: number } {
  const next = (state + 0x6d2b79f5) >>> 0;
  let t = next;
  t = Math.imul(t ^ (t >>> 15), t | 1);
  t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
  return { value: ((t ^ (t >>> 14)) >>> 0) / 4294967296, state: next };
}

/** A permutation of 0..n-1, the same for the same (seed, key). */
export function permutation(n: number, seed: number, key: string): Uint32Array {
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

/** An env's tasks as an endless walk, reshuffled each epoch; position `cursor` is a pure function. */
export class ShuffledWalk {
  private cached: { epoch: number; order: Uint32Array } | undefined;

  constructor(
    private readonly tasks: readonly Task[],
    private readonly seed: number,
    private readonly env: string,
  ) {}

  /** The task at position `cursor` of the walk. */
  at(cursor: number): Task {
    const n = this.tasks.length;
    const epoch = Math.floor(cursor / n);
    if (!this.cached || this.cached.epoch !== epoch)
      this.cached = { epoch, order: permutation(n, this.seed, `${this.env}:${epoch}`) };
    return this.tasks[this.cached.order[cursor % n]!]!;
  }
}
