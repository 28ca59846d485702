// The config resolver as properties over random configs (fast-check, bounded runs): any config
// either resolves or is a ConfigError (never another exception), most of the generated ones
// resolve, and a resolved config round-trips through config.resolved.toml: loading the file a run
// writes gives the same resolved config and the same TOML values again, floats and all.
import { expect, test } from "bun:test";
import fc from "fast-check";
import { mkdtempSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { parse, stringify } from "smol-toml";
import { loadConfig, resolvedToml } from "../../../src/config/load.ts";
import { ConfigError } from "../../../src/errors.ts";

const dir = mkdtempSync(join(tmpdir(), "rlx-config-prop-"));
let counter = 0;
const write = (text: string) => {
  const path = join(dir, `c${counter++}.toml`);
  writeFileSync(path, text);
  return path;
};

const positive = (max: number) => fc.integer({ min: 1, max });
const algoArb = fc.oneof(
  fc.record({ type: fc.constant("grpo"), std_normalize: fc.boolean() }),
  fc.record({ type: fc.constant("max_rl") }),
  fc.record({ type: fc.constant("echo") }),
  fc.record({ type: fc.constant("opsd"), demo_key: fc.constant("solution") }),
);
const envArb = fc.record(
  {
    id: fc.constantFrom("math", "forth", "search"),
    ratio: fc.double({ min: 0.01, max: 10, noNaN: true }),
    temperature: fc.double({ min: 0, max: 2, noNaN: true }),
    max_tokens: positive(512),
    algo: algoArb,
  },
  { requiredKeys: ["id"] },
);
const configArb = fc.record({
  max_steps: positive(1000),
  seed: fc.integer({ min: 0, max: 2 ** 31 }),
  model: fc.record({ path: fc.constant("models/tiny"), dtype: fc.constantFrom("f32", "bf16") }),
  trainer: fc.record(
    {
      threads: fc.integer({ min: 0, max: 8 }),
      optim: fc.record({
        lr: fc.double({ min: 1e-9, max: 1, noNaN: true }),
        betas: fc.tuple(fc.double({ min: 0, max: 0.99, noNaN: true }), fc.double({ min: 0, max: 0.999, noNaN: true })),
        weight_decay: fc.double({ min: 0, max: 1, noNaN: true }),
      }),
      schedule: fc.record({ type: fc.constantFrom("constant", "linear", "cosine"), warmup_steps: fc.nat(50) }),
    },
    { requiredKeys: [] },
  ),
  orchestrator: fc.record({
    batch_size: positive(16), // groups per batch: made a multiple of group_size below
    group_size: positive(16),
    seq_len: positive(8192),
    max_async_level: fc.nat(4),
    max_tokens: positive(1024),
    temperature: fc.double({ min: 0, max: 2, noNaN: true }),
    filter_zero_advantages: fc.boolean(),
    train: fc.record({
      env: fc
        .array(envArb, { minLength: 1, maxLength: 3 })
        .map((envs) => envs.map((env, i) => ({ ...env, name: `env${i}` }))),
    }),
  }),
  inference: fc.record(
    {
      servers: positive(4),
      port: fc.integer({ min: 1024, max: 60000 }),
      reload: fc.constantFrom("in-flight", "drain"),
    },
    { requiredKeys: [] },
  ),
  ckpt: fc.record({ interval: fc.nat(100), keep: positive(5) }, { requiredKeys: [] }),
});

test("any config resolves or is a ConfigError, and what resolves round-trips through config.resolved.toml", () => {
  let resolved = 0;
  fc.assert(
    fc.property(configArb, (raw) => {
      let first;
      raw.orchestrator.batch_size *= raw.orchestrator.group_size;
      try {
        first = loadConfig(write(stringify(raw))).config;
      } catch (err) {
        expect(err).toBeInstanceOf(ConfigError);
        return;
      }
      resolved++;
      const text = resolvedToml(first);
      const again = loadConfig(write(text)).config;
      expect(again).toEqual(first);
      expect(parse(resolvedToml(again))).toEqual(parse(text)); // key order may differ, values do not
      expect(first.orchestrator.train.env.map((e) => e.name)).toEqual(raw.orchestrator.train.env.map((e) => e.name));
    }),
    { numRuns: 80, seed: 25 },
  );
  expect(resolved).toBeGreaterThan(40); // the property was not vacuous
});
