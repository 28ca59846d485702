// The algorithm rules of docs/architecture.md §5, as a user meets them in a config file, per algorithm type (the CLI
// path of the same errors is in test/unit/config/config.test.ts; the custom-class rules in custom.test.ts;
// the shared-tokenizer rule, checked at setup, in algorithms.test.ts).
import { describe, expect, test } from "bun:test";
import { mkdtempSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { loadConfig } from "../../../src/config/load.ts";
import { ConfigError } from "../../../src/errors.ts";
import type { AlgorithmClass } from "../../../src/algorithms/base.ts";
import { type DistillConfig, distillBeta } from "../../../src/algorithms/distill.ts";
import { BUILTIN_ALGORITHMS, groupRelativeTypes } from "../../../src/algorithms/registry.ts";

const dir = mkdtempSync(join(tmpdir(), "rlx-rules-"));
let n = 0;
const FROZEN = '{ name = "t", base_url = "http://127.0.0.1:8001/v1" }';
function load(algo: string, groupSize = 4) {
  const path = join(dir, `c${n++}.toml`);
  writeFileSync(
    path,
    `[model]\npath = "m"\n[orchestrator]\nbatch_size = 8\ngroup_size = ${groupSize}\n[[orchestrator.train.env]]\nid = "math"\nalgo = ${algo}\n`,
  );
  return loadConfig(path);
}
const rejects = (algo: string, ...parts: string[]) => {
  let error: unknown;
  try {
    load(algo);
  } catch (err) {
    error = err;
  }
  expect(error).toBeInstanceOf(ConfigError);
  for (const part of parts) expect((error as Error).message).toContain(part);
};

test("each registry entry is its class's type, with the loss component and group-relativity of the design's table", () => {
  const table = Object.entries(BUILTIN_ALGORITHMS).map(([type, cls]) => [type, cls.type, cls.actionLossType]);
  expect(table).toEqual([
    ["grpo", "grpo", "rl"],
    ["max_rl", "max_rl", "rl"],
    ["opd", "opd", "ref_kl"],
    ["opsd", "opsd", "ref_kl"],
    ["sft", "sft", "ce"],
    ["echo", "echo", "rl"],
    ["agentic_credit", "agentic_credit", "rl"],
    ["rae", "rae", "rl"],
    ["hierarchical_grpo", "hierarchical_grpo", "rl"],
    ["rloo", "rloo", "rl"],
    ["reinforce_pp", "reinforce_pp", "rl"],
  ]);
  expect(groupRelativeTypes()).toEqual(["grpo", "max_rl", "echo", "agentic_credit", "hierarchical_grpo", "rloo"]);
});

describe("rl and ref_kl algorithms must sample from the live policy", () => {
  for (const type of ["grpo", "max_rl", "echo", "agentic_credit", "rloo", "reinforce_pp"]) {
    test(type, () =>
      rejects(
        `{ type = "${type}", sampling = { source = ${FROZEN} }${type === "agentic_credit" ? `, judge = ${FROZEN}` : ""} }`,
        "orchestrator.train.env[0].algo.sampling.source",
        "rl loss",
        '"policy"',
      ),
    );
  }
  test("opd (ref_kl)", () =>
    rejects(
      `{ type = "opd", teacher = ${FROZEN}, sampling = { source = ${FROZEN} } }`,
      "algo.sampling.source",
      "ref_kl loss",
    ));
  test("opsd (ref_kl)", () =>
    rejects(`{ type = "opsd", sampling = { source = ${FROZEN} } }`, "algo.sampling.source", "ref_kl loss"));
  test("sft (ce) may and must sample from a frozen model", () => {
    const { config } = load(`{ type = "sft", sampling = { source = ${FROZEN} } }`);
    expect(config.orchestrator.train.env[0]!.algo.sampling.source).toEqual({
      name: "t",
      base_url: "http://127.0.0.1:8001/v1",
    });
    rejects('{ type = "sft" }', "algo.sampling.source", "frozen model");
  });
});

describe("opd needs a frozen teacher that is not the policy; opsd's optional one is not the policy either", () => {
  test("opd without a teacher, or with the policy as teacher", () => {
    rejects('{ type = "opd" }', "algo.teacher", "required");
    rejects('{ type = "opd", teacher = "policy" }', "algo.teacher");
    rejects(
      '{ type = "opd", teacher = { name = "p", base_url = "http://127.0.0.1:8000/v1" } }',
      "algo.teacher.base_url",
      "identically zero",
    );
  });
  test("opd teacher needs a base_url", () =>
    rejects('{ type = "opd", teacher = { name = "t" } }', "algo.teacher.base_url", "required"));
  test("opsd takes a frozen teacher, but not the live policy's server (its default without one)", () => {
    expect(load(`{ type = "opsd", teacher = ${FROZEN} }`).warnings).toEqual([]);
    rejects(
      '{ type = "opsd", teacher = { name = "p", base_url = "http://127.0.0.1:8000/v1" } }',
      "algo.teacher.base_url",
      "live policy server",
    );
  });

  test("opsd's lagged self-teacher (teacher_refresh) excludes a frozen teacher, and lags by a whole step or more", () => {
    expect(load('{ type = "opsd", teacher_refresh = 5 }').warnings).toEqual([]);
    rejects(
      `{ type = "opsd", teacher = ${FROZEN}, teacher_refresh = 5 }`,
      "algo.teacher_refresh",
      "exclude each other",
    );
    rejects('{ type = "opsd", teacher_refresh = 0 }', "teacher_refresh");
  });
});

describe("group_size 1", () => {
  for (const type of ["grpo", "max_rl", "echo", "rloo"]) {
    test(`${type} (group-relative) warns`, () => {
      const { warnings } = load(`{ type = "${type}" }`, 1);
      expect(warnings).toHaveLength(1);
      expect(warnings[0]).toContain(`${type} with group_size 1`);
    });
  }
  test("reinforce_pp does not (its baseline variant is plain REINFORCE++ on singleton groups)", () =>
    expect(load('{ type = "reinforce_pp" }', 1).warnings).toEqual([]));
  test("opd, opsd and sft do not (group_size only fans out sampling)", () => {
    expect(load(`{ type = "opd", teacher = ${FROZEN} }`, 1).warnings).toEqual([]);
    expect(load('{ type = "opsd" }', 1).warnings).toEqual([]);
    expect(load(`{ type = "sft", sampling = { source = ${FROZEN} } }`, 1).warnings).toEqual([]);
  });
});

describe("top-k distillation settings (k, divergence, beta, min_teacher_prob) of opd and opsd name the key and the file", () => {
  const TEACHER = '{ name = "t", base_url = "http://127.0.0.1:8002/v1" }';
  for (const [type, extra] of [
    ["opd", `, teacher = ${TEACHER}`],
    ["opsd", ""],
  ] as const) {
    const algo = (fields: string) => `{ type = "${type}"${extra}, ${fields} }`;
    test(`${type}: a bad k, divergence or beta`, () => {
      rejects(algo("k = -1"), ".toml", "orchestrator.train.env[0].algo.k", ">=0");
      rejects(algo("k = 2.5"), ".toml", "orchestrator.train.env[0].algo.k");
      rejects(algo('k = 8, divergence = "kl"'), ".toml", "orchestrator.train.env[0].algo.divergence", "forward_kl");
      rejects(algo('k = 8, divergence = "jsd", beta = 1'), ".toml", "orchestrator.train.env[0].algo.beta");
      rejects(algo("k = 8, beta = 0.5"), ".toml", "orchestrator.train.env[0].algo.beta", "generalized JSD");
      rejects(algo('divergence = "forward_kl"'), ".toml", "orchestrator.train.env[0].algo.divergence", "k = 0");
      expect(load(algo('divergence = "reverse_kl"')).config.orchestrator.train.env[0]!.algo).toMatchObject({ k: 0 });
      rejects(algo("min_teacher_prob = 0.01"), ".toml", "orchestrator.train.env[0].algo.min_teacher_prob", "k = 0");
      rejects(algo("k = 8, min_teacher_prob = 1"), ".toml", "orchestrator.train.env[0].algo.min_teacher_prob");
    });
    test(`${type}: k > 0 routes the action tokens to distill with the divergence's beta; k = 0 keeps ref_kl`, () => {
      const cls: AlgorithmClass = BUILTIN_ALGORITHMS[type];
      const config = (fields: Record<string, unknown>) =>
        cls.schema.parse({
          type,
          ...(type === "opd" ? { teacher: { name: "t", base_url: "http://h:1/v1" } } : {}),
          ...fields,
        });
      expect(new cls(config({})).actionLoss).toBe("ref_kl");
      expect(new cls(config({ k: 4 })).actionLoss).toBe("distill");
      expect(
        [
          {},
          { divergence: "reverse_kl" },
          { divergence: "forward_kl" },
          { divergence: "jsd" },
          { divergence: "jsd", beta: 0.2 },
        ].map((f) => distillBeta({ k: 4, ...f } as DistillConfig)),
      ).toEqual([1, 1, 0, 0.5, 0.2]); // the reverse KL by default, as k = 0
      expect(load(algo('k = 16, divergence = "jsd", beta = 0.3')).config.orchestrator.train.env[0]!.algo).toMatchObject(
        { k: 16, divergence: "jsd", beta: 0.3 },
      );
    });
    test(`${type}: teacher and student at temperature 1: the env samples at 1 or 0 (greedy), k = 0 and k > 0 alike`, () => {
      for (const k of [0, 8]) {
        rejects(`${algo(`k = ${k}`)}\ntemperature = 0.7`, "orchestrator.train.env[0].temperature", "not 0.7");
        for (const temperature of ["1.0", "0.0"])
          expect(load(`${algo(`k = ${k}`)}\ntemperature = ${temperature}`).config.orchestrator.train.env).toHaveLength(
            1,
          );
      }
      const inherited = join(dir, `t${n++}.toml`);
      writeFileSync(
        inherited,
        `[model]\npath = "m"\n[orchestrator]\ntemperature = 1.2\n[[orchestrator.train.env]]\nid = "math"\nalgo = ${algo("k = 0")}\n`,
      );
      expect(() => loadConfig(inherited)).toThrow(
        `${inherited}: orchestrator.temperature: ${type} compares the student`,
      );
    });
  }
  test("the temperature rule is distillation's: grpo samples at any temperature", () => {
    expect(load('{ type = "grpo" }\ntemperature = 0.7').config.orchestrator.train.env[0]!.temperature).toBe(0.7);
  });
});

describe("reinforce_pp's baseline and the overlong block of grpo, max_rl, rloo and reinforce_pp name the key and the file", () => {
  test("defaults: reinforce_pp's group baseline; overlong's penalty_factor 1 and max_tokens from the env", () => {
    expect(load('{ type = "reinforce_pp" }').config.orchestrator.train.env[0]!.algo).toEqual({
      type: "reinforce_pp",
      sampling: { source: "policy" },
      baseline: "group",
    });
    expect(load('{ type = "rloo", overlong = { buffer = 64 } }').config.orchestrator.train.env[0]!.algo).toEqual({
      type: "rloo",
      sampling: { source: "policy" },
      overlong: { buffer: 64, penalty_factor: 1 },
    });
  });
  test("reinforce_pp: an unknown baseline", () =>
    rejects(
      '{ type = "reinforce_pp", baseline = "batch" }',
      ".toml",
      "orchestrator.train.env[0].algo.baseline",
      "group",
    ));
  for (const type of ["grpo", "max_rl", "rloo", "reinforce_pp"]) {
    test(`${type}: an unknown key, a missing or bad buffer, a buffer not below max_tokens`, () => {
      const at = "orchestrator.train.env[0].algo.overlong";
      rejects(`{ type = "${type}", overlong = { buffer = 8, bufer = 8 } }`, ".toml", at, "bufer");
      rejects(`{ type = "${type}", overlong = { max_tokens = 100 } }`, ".toml", `${at}.buffer`);
      rejects(`{ type = "${type}", overlong = { buffer = 0 } }`, ".toml", `${at}.buffer`);
      rejects(`{ type = "${type}", overlong = { buffer = 4.5 } }`, ".toml", `${at}.buffer`);
      rejects(`{ type = "${type}", overlong = { buffer = 8, penalty_factor = -1 } }`, ".toml", `${at}.penalty_factor`);
      rejects(
        `{ type = "${type}", overlong = { buffer = 100, max_tokens = 100 } }`,
        ".toml",
        `${at}.buffer`,
        "less than",
      );
      expect(load(`{ type = "${type}", overlong = { buffer = 99, max_tokens = 100 } }`).warnings).toEqual([]);
    });
  }
});
