// The one mechanism for state that outlives a step (src/orchestrator/carried.ts), as a run
// registers it: the draws, each env's task statistics and sampler, and each env's algorithm when
// it keeps state of its own. A snapshot through JSON restores every part, and an algorithm
// without state (GRPO) adds nothing to the checkpoint.
import { expect, test } from "bun:test";
import { mkdtempSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { Grpo } from "../../../src/algorithms/grpo.ts";
import { BarrierBook } from "../../../src/orchestrator/barriers.ts";
import { sampleGroups } from "../../../src/orchestrator/groups.ts";
import { Progress } from "../../../src/orchestrator/metrics/log.ts";
import { taskSamplerState } from "../../../src/orchestrator/task_sampler.ts";
import { LETTERS_ENV } from "../../e2e/train_helpers.ts";
import { harness, Scripted } from "./collect_harness.ts";

const envFile = join(mkdtempSync(join(tmpdir(), "rlx-carried-")), "letters.ts");
writeFileSync(envFile, LETTERS_ENV);

/** GRPO that counts the groups it scored: state of its own. */
class CountingGrpo extends Grpo {
  scored = 0;
  override async scoreGroup(group: Parameters<Grpo["scoreGroup"]>[0]): Promise<void> {
    this.scored++;
    await super.scoreGroup(group);
  }
  override saveState(): unknown {
    return { scored: this.scored };
  }
  override loadState(state: { scored: number }): void {
    this.scored = state.scored;
  }
}

test("a run's carried state holds draws, statistics, sampler and algorithm state, and restores them through JSON", async () => {
  const client = new Scripted((call) => (call % 2 ? "ab1" : "xyz"));
  const orchestrator = 'batch_size = 4\ngroup_size = 2\nsampler = { type = "replay", share = 0.5 }';
  const plain = await harness({ envFile, client, orchestrator });
  await sampleGroups(1, plain.o, plain.sampler, new Progress());
  expect(Object.keys(plain.carried.save()).sort()).toEqual(["draws", "sampler/letters", "stats/letters"]);

  const counting = new CountingGrpo(plain.train.algorithm.config as any);
  const run = await harness({ envFile, client, orchestrator });
  run.train.algorithm = counting;
  run.train.barriers = new BarrierBook(new Map([["", counting]]), () => "", 8); // its book scores its groups
  const { sampler, carried } = taskSamplerState([run.train], 0, 10);
  const o = { ...run.o, envs: [run.train] };
  for (let step = 1; step <= 3; step++) await sampleGroups(step, o, sampler, new Progress());
  const saved = JSON.parse(JSON.stringify(carried.save()));
  expect(saved["algorithm/letters"]).toEqual({ scored: counting.scored });
  expect(counting.scored).toBeGreaterThan(0);
  expect(Object.keys(saved["stats/letters"]).length).toBeGreaterThan(0);

  const again = await harness({ envFile, client, orchestrator });
  const restored = new CountingGrpo(plain.train.algorithm.config as any);
  again.train.algorithm = restored;
  const resumed = taskSamplerState([again.train], 0, 10);
  resumed.carried.load(saved, "test");
  expect(restored.scored).toBe(counting.scored);
  expect(JSON.parse(JSON.stringify(resumed.carried.save()))).toEqual(saved);
});
