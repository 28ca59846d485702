// Sampler config: every env inherits [orchestrator.sampler] unless it sets its own; bad blocks
// fail with the file and the key path typed and a fix; a custom sampler file (the example in
// examples/samplers/) loads, validates its own fields and draws.
import { expect, test } from "bun:test";
import { mkdtempSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { loadConfig } from "../../../src/config/load.ts";
import { ROOT } from "../../e2e/train_helpers.ts";
import { group, samplerOf } from "./helpers.ts";

const dir = mkdtempSync(join(tmpdir(), "rlx-sampler-config-"));
const EXAMPLE = join(ROOT, "examples/samplers/least_seen.ts");

function config(orchestrator: string, envs = '[[orchestrator.train.env]]\nid = "math"\n') {
  const path = join(dir, "run.toml");
  writeFileSync(path, `[model]\npath = "m"\n[orchestrator]\nbatch_size = 8\ngroup_size = 4\n${orchestrator}\n${envs}`);
  return () => loadConfig(path).config;
}

test("each env inherits the run's sampler unless it sets its own; the default is uniform", () => {
  expect(config("")().orchestrator.train.env[0]!.sampler).toEqual({ type: "uniform", pass_reward: 1 });
  const envs = config(
    'sampler = { type = "filter", max_oversample = 3 }',
    '[[orchestrator.train.env]]\nid = "math"\n[[orchestrator.train.env]]\nid = "forth"\nsampler = { type = "replay" }\n',
  )().orchestrator.train.env;
  expect(envs[0]!.sampler).toMatchObject({ type: "filter", max_oversample: 3, min_reward_spread: 0 });
  expect(envs[1]!.sampler).toMatchObject({ type: "replay", buffer_size: 64, max_age: 2, share: 0.25 });
});

test("a bad sampler block names the file, the key path and the fix", () => {
  const fixOf = (load: () => unknown) => {
    try {
      load();
    } catch (err) {
      return (err as { fix?: string }).fix;
    }
  };
  expect(fixOf(config('sampler = { type = "currculum" }'))).toContain('type = "custom" with path = "./my_sampler.ts"');
  expect(fixOf(config('max_off_policy_steps = 1\nsampler = { type = "replay", max_age = 3 }'))).toBe(
    "lower max_age, or raise orchestrator.max_off_policy_steps",
  );
  expect(config('sampler = { type = "currculum" }')).toThrow(
    /run\.toml: orchestrator\.sampler\.type: unknown sampler type "currculum"; known types: uniform, filter, curriculum, replay, custom/,
  );
  expect(
    config("", '[[orchestrator.train.env]]\nid = "math"\nsampler = { type = "filter", max_pass_rate = 2 }\n'),
  ).toThrow(/orchestrator\.train\.env\[0\]\.sampler\.max_pass_rate/);
  expect(config('sampler = { type = "curriculum", bogus = 1 }')).toThrow(/orchestrator\.sampler\.bogus: unknown key/);
  expect(config('max_off_policy_steps = 1\nsampler = { type = "replay", max_age = 3 }')).toThrow(
    /orchestrator\.sampler\.max_age: 3 is above orchestrator\.max_off_policy_steps 1/,
  );
  expect(config('sampler = { type = "custom", path = "./nope.ts" }')).toThrow(
    /orchestrator\.sampler\.path: no such file "\.\/nope\.ts"/,
  );
});

test("the example custom sampler loads, checks its own fields, draws the least-seen task and keeps a cursor", async () => {
  await expect(samplerOf({ type: "custom", path: EXAMPLE, min_rollouts: 0 })).rejects.toThrow(
    /run\.toml: orchestrator\.sampler\.min_rollouts/,
  );
  const { sampler, stats } = await samplerOf({ type: "custom", path: EXAMPLE, min_rollouts: 2 }, 4);
  const ids: string[] = [];
  for (let i = 0; i < 8; i++) {
    const pick = sampler.next(1) as { task: { id: string } };
    ids.push(pick.task.id);
    stats.record(group(pick.task.id, [1, 0]), 1);
  }
  expect(new Set(ids.slice(0, 4)).size).toBe(4); // every task once before any twice
  expect(new Set(ids.slice(4)).size).toBe(4);
  expect(sampler.admit(group("t0", [1]), 0)).toBe("reject");
  expect(sampler.admit(group("t0", [1, 0]), 0)).toBe("admit");
  expect(sampler.saveState()).toEqual({ cursor: expect.any(Number) });
});

test("an env's ratio schedule resolves as written; ratio_steps alone is an error naming the key", () => {
  const envs = config("", '[[orchestrator.train.env]]\nid = "math"\nratio = 3\nratio_end = 1\nratio_steps = 50\n')()
    .orchestrator.train.env;
  expect(envs[0]).toMatchObject({ ratio: 3, ratio_end: 1, ratio_steps: 50 });
  expect(config("", '[[orchestrator.train.env]]\nid = "math"\nratio_steps = 50\n')).toThrow(
    /run\.toml: orchestrator\.train\.env\[0\]\.ratio_steps: a schedule needs ratio_end/,
  );
});
