// Seeded randomness and stable hashing for task generators. Generators must give the same tasks
// for the same seed on every machine and every run (resume, eval sets, demonstrations), so they
// never touch Math.random; and the train/eval split must be a property of the task itself, so it
// is decided by a hash of the task's key, not by the order tasks were drawn in.

/** A small, fast, seedable generator (mulberry32). */
export class Rng {
  private state: number;
  constructor(seed: number) {
    this.state = (Math.imul(seed | 0, 0x9e3779b1) ^ 0x85ebca6b) >>> 0;
  }
  /** Uniform in [0, 1). */
  next(): number {
    let t = (this.state = (this.state + 0x6d2b79f5) >>> 0);
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  }
  /** Uniform integer in [lo, hi] (inclusive). */
  int(lo: number, hi: number): number {
    return lo + Math.floor(this.next() * (hi - lo + 1));
  }
  pick<T>(items: readonly T[]): T {
    if (items.length === 0) throw new Error("Rng.pick on an empty list");
    return items[Math.floor(this.next() * items.length)]!;
  }
  shuffle<T>(items: T[]): T[] {
    for (let i = items.length - 1; i > 0; i--) {
      const j = Math.floor(this.next() * (i + 1));
      [items[i], items[j]] = [items[j]!, items[i]!];
    }
    return items;
  }
}

/** FNV-1a, 32-bit: a stable hash of a string. */
export function hashString(text: string): number {
  let h = 0x811c9dc5;
  for (let i = 0; i < text.length; i++) {
    h ^= text.charCodeAt(i);
    h = Math.imul(h, 0x01000193);
  }
  return h >>> 0;
}

/** Which split a task belongs to, from its key alone: about `evalFraction` of keys go to eval. */
export function splitOf(key: string, evalFraction: number): "train" | "eval" {
  return (hashString(`split:${key}`) % 10_000) / 10_000 < evalFraction ? "eval" : "train";
}
