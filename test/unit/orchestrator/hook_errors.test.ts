// A hook's error inside the step loop's collection: a ConfigError (the run's config is wrong:
// OPSD's demonstration key names no field, an ECHO filter returns masks of the wrong shape)
// stops the run at the first rollout with that error and its fix; any other error (an endpoint
// down) fails the rollouts it was scoring, as data. The real driver, env and algorithms run
// against scripted clients.
import { expect, test } from "bun:test";
import { mkdtempSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type { Rollout } from "../../../src/data/types.ts";
import { ConfigError } from "../../../src/errors.ts";
import { JudgeError } from "../../../src/judges/judge.ts";
import { ChatRenderer } from "../../../src/model/render.ts";
import { sampleGroups } from "../../../src/orchestrator/groups.ts";
import { failAsData } from "../../../src/orchestrator/hooks.ts";
import { Progress } from "../../../src/orchestrator/metrics/log.ts";
import { LETTERS_ENV } from "../../e2e/train_helpers.ts";
import { byteContext } from "../../fixtures/algo_context.ts";
import { harness, Scripted, tokenizer } from "./collect_harness.ts";

const dir = mkdtempSync(join(tmpdir(), "rlx-hook-errors-"));
const envFile = join(dir, "letters.ts");
writeFileSync(envFile, LETTERS_ENV);

async function collectWith(algo: string, client = new Scripted(() => "abc")) {
  const h = await harness({
    envFile,
    client,
    orchestrator: "batch_size = 4\ngroup_size = 2",
    envExtra: `algo = ${algo}`,
  });
  const ctx = byteContext({
    env: "letters",
    policy: client,
    connect: async () => Promise.reject(new Error("no frozen endpoints here")),
    tokenizer,
    renderer: new ChatRenderer(tokenizer),
  });
  await h.train.algorithm.setup(ctx);
  return sampleGroups(1, h.o, h.sampler, new Progress());
}

test("opsd with a demonstration key no task has: the run stops at the first rollout with the ConfigError", async () => {
  const err = await collectWith('{ type = "opsd", demo_key = "hint" }').catch((e) => e);
  expect(err).toBeInstanceOf(ConfigError);
  expect(err.message).toMatch(/opsd: task train-\d+ of env letters has no demonstration under "hint"/);
  expect(err.fix).toContain("keys present: ");
});

test("an echo filter returning the wrong number of masks stops the run with the ConfigError", async () => {
  const filter = join(dir, "two_masks.ts");
  writeFileSync(filter, "export default () => [[], []];");
  const err = await collectWith(`{ type = "echo", filter = { path = ${JSON.stringify(filter)} } }`).catch((e) => e);
  expect(err).toBeInstanceOf(ConfigError);
  expect(err.message).toMatch(/echo filter .*two_masks.ts returned 2 masks for rollout .*, which has 1 sample/);
});

test("any other hook error fails the rollouts it was scoring, as data", async () => {
  // opsd scores with the policy, whose score() throws here: an endpoint failure, not a config error
  const got = await collectWith('{ type = "opsd", demo_key = "solution" }');
  const rollouts = got.groups.flat();
  expect(rollouts.length).toBe(4);
  for (const r of rollouts) expect(r.error).toBe("scoreRollout failed: unused");
});

test("a judge's error keeps its conversation on the one rollout it failed (rollouts/failed_step_N.jsonl shows it)", async () => {
  const record = { kind: "credit", model: "judge", messages: [{ role: "assistant" as const, content: "no idea" }] };
  const thrower = async () => {
    throw new JudgeError('the credit judge\'s answer has no "STEP k: w" line', record);
  };
  const one = [{ env: "letters" } as Rollout];
  await failAsData(one, "scoreRollout", thrower);
  expect(one[0]!.error).toBe('scoreRollout failed: the credit judge\'s answer has no "STEP k: w" line');
  expect(one[0]!.judge).toBe(record);
  const group = [{ env: "letters" } as Rollout, { env: "letters" } as Rollout];
  await failAsData(group, "scoreGroup", thrower); // a group-level judge failure names no single rollout's judge
  expect(group.map((r) => [r.error !== undefined, r.judge])).toEqual([
    [true, undefined],
    [true, undefined],
  ]);
});
