// A single-turn env in one file (docs/environments.md): reverse a word. The task is the word, the
// reply must be the word reversed; the reward is 1 for an exact reply, and `answered` says whether
// the model replied at all. Its default export is a function of the kit, which gives it zod for its
// `args` schema (a file cannot import packages from the rlx binary).
//
//   rlx env list examples/envs/reverse.ts
//   rlx env show examples/envs/reverse.ts --args '{"length": 4}'
//   rlx train my_run.toml --dry-run        # with id = "examples/envs/reverse.ts" in an env entry
//
// The `import type` line only gives editors the types inside this repository and is erased when
// the file runs (delete it elsewhere).
import type { EnvKit } from "../../src/envs/index.ts";
import type { EnvDefinition, Task } from "../../src/envs/types.ts";

const LETTERS = "abcdefghijklmnopqrstuvwxyz";

/** The n-th word of `length` letters: deterministic, so a seed and a split name the same tasks. */
function word(n: number, length: number): string {
  let x = Math.imul(n + 1, 2654435761) >>> 0; // a 32-bit LCG from a hash of n
  let out = "";
  for (let i = 0; i < length; i++) {
    x = (Math.imul(x, 1103515245) + 12345) >>> 0;
    out += LETTERS[(x >>> 16) % LETTERS.length];
  }
  return out;
}

/** FNV-1a, 32 bits: which split a word belongs to. */
function fnv1a(text: string): number {
  let h = 2166136261;
  for (const c of text) h = Math.imul(h ^ c.charCodeAt(0), 16777619) >>> 0;
  return h;
}

export default ({ z }: EnvKit): EnvDefinition => ({
  id: "reverse",
  description: "reverse a word: a single-turn exact-match reward",
  args: z.strictObject({
    /** Letters per word. */
    length: z.number().int().min(2).max(12).default(5),
    /** Tasks per split (the splits never share a word). */
    tasks: z.number().int().positive().default(500),
  }),
  create: (args: { length: number; tasks: number }) => ({
    tools: [],
    maxTurns: 1,
    async load(split, seed): Promise<Task[]> {
      // each word once, in the split its letters choose (one in five held out), so the splits
      // never share a word; fewer tasks than asked when short words run out
      const tasks: Task[] = [];
      const seen = new Set<string>();
      for (let n = 0; tasks.length < args.tasks && n < 50 * args.tasks; n++) {
        const w = word(n, args.length);
        if (seen.has(w)) continue;
        seen.add(w);
        if ((fnv1a(w) % 5 === 0) !== (split === "eval")) continue;
        tasks.push({
          id: w,
          prompt: [{ role: "user", content: `Reverse the word "${w}". Reply with the reversed word only.` }],
          answer: [...w].reverse().join(""),
        });
      }
      // the seed only orders the tasks
      return tasks
        .map((t, i) => ({ t, key: (i * 7919 + seed * 104729) % tasks.length }))
        .sort((a, b) => a.key - b.key)
        .map(({ t }) => t);
    },
    reward(task, rollout) {
      const last = rollout.messages.at(-1);
      const reply = last?.role === "assistant" ? last.content.trim().toLowerCase() : undefined;
      const correct = reply === task.answer ? 1 : 0;
      return { reward: correct, metrics: { correct, answered: reply ? 1 : 0 } };
    },
    async demonstrate(task) {
      return [...task.prompt, { role: "assistant", content: task.answer }];
    },
  }),
});
