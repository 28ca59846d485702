// A custom rlx sampler in one file: draw the task with the fewest finished attempts so far (the
// statistics the orchestrator keeps for every env), breaking ties by a shuffled walk, and admit a
// group only when at least `min_rollouts` of its rollouts finished without an error. It keeps one
// number across steps, the walk's cursor, and hands it to rlx as its state, so a resumed run
// continues exactly.
//
// How a custom sampler plugs in (docs/task_samplers.md): the default export receives rlx's kit (the
// Sampler base class, zod, the shuffled walk, the replay buffer, a seeded RNG step) and returns
// the class. Nothing is imported from rlx at run time; the `import type` lines only give editors
// the types inside this repository and are erased when the file runs. Use it with:
//
//   [[orchestrator.train.env]]
//   id = "math"
//   sampler = { type = "custom", path = "examples/samplers/least_seen.ts", min_rollouts = 2 }
import type { Pick, Verdict } from "../../src/task_samplers/base.ts";
import type { SamplerKit } from "../../src/task_samplers/registry.ts";
import type { Rollout } from "../../src/data/types.ts";

interface LeastSeenConfig {
  type: string;
  pass_reward: number;
  min_rollouts: number;
}

export default ({ Sampler, z, ShuffledWalk }: SamplerKit) =>
  class LeastSeen extends Sampler<LeastSeenConfig> {
    static override type = "least_seen";
    // the sampler's own fields (the block minus type, path and pass_reward), with defaults
    static override schema = z.strictObject({ min_rollouts: z.number().int().min(1).default(1) });

    private walk = new ShuffledWalk(this.ctx.tasks, this.ctx.seed, this.ctx.env);
    private cursor = 0;

    override next(_step: number): Pick {
      // one pass of the walk from the cursor: the first task with the fewest attempts wins
      const n = this.ctx.tasks.length;
      let best = this.walk.at(this.cursor);
      let bestOffset = 0;
      for (let offset = 0; offset < n; offset++) {
        const task = this.walk.at(this.cursor + offset);
        const attempts = this.ctx.stats.get(task.id)?.attempts ?? 0;
        if (attempts < (this.ctx.stats.get(best.id)?.attempts ?? 0)) [best, bestOffset] = [task, offset];
      }
      this.cursor += bestOffset + 1;
      return { task: best };
    }

    override admit(group: readonly Rollout[]): Verdict {
      return group.filter((r) => !r.error).length >= this.config.min_rollouts ? "admit" : "reject";
    }

    override saveState(): unknown {
      return { cursor: this.cursor };
    }

    override loadState(state: { cursor: number }): void {
      this.cursor = state.cursor;
    }
  };
