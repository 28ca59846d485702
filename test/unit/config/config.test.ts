// Config loading: defaults < file < --set, per-env algorithm resolution, and every validation
// rule with the message a user sees (through the real CLI: exit code, no stack trace).
import { describe, expect, test } from "bun:test";
import { mkdtempSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { loadConfig } from "../../../src/config/load.ts";

const dir = mkdtempSync(join(tmpdir(), "rlx-config-"));
const ROOT = join(import.meta.dir, "../../..");
let counter = 0;

function write(toml: string): string {
  const path = join(dir, `c${counter++}.toml`);
  writeFileSync(path, toml);
  return path;
}

const BASE = `
[model]
path = "models/tiny"
[orchestrator]
batch_size = 16
group_size = 4
`;
const env = (extra = "") => `[[orchestrator.train.env]]\nid = "math"\n${extra}\n`;

describe("resolution", () => {
  test("defaults fill everything the file leaves out", () => {
    const { config, warnings } = loadConfig(write(BASE + env()));
    expect(warnings).toEqual([]);
    expect(config.trainer.optim.lr).toBe(1e-6);
    expect(config.trainer.loss).toEqual({
      type: "dppo_kl",
      reduction: "token",
      dppo_mask_low: 0.2,
      dppo_mask_high: 0.2,
      adv_tau: 1,
      kl_tau: 1e-3,
      ipo_threshold: 0.1,
      is_low: 0.5,
      is_high: 5,
      is_cap: 2,
      clip_low: 0.2,
      clip_high: 0.28,
    });
    const [math] = config.orchestrator.train.env;
    expect(math?.algo).toEqual({ type: "grpo", sampling: { source: "policy" }, std_normalize: false });
    expect(math?.group_size).toBe(4);
    expect(math?.name).toBe("math");
  });

  test("quickstart resolves add->grpo and sub->max_rl, both on the math env", () => {
    const { config } = loadConfig(join(ROOT, "configs/quickstart.toml"));
    const envs = config.orchestrator.train.env.map((e) => [e.id, e.name, e.algo.type]);
    expect(envs).toEqual([
      ["math", "add", "grpo"],
      ["math", "sub", "max_rl"],
    ]);
  });

  test("each env gets a deep copy of the default algorithm, or its own", () => {
    const path = write(
      `${BASE}[orchestrator.algo]\ntype = "grpo"\nstd_normalize = true\n${env('name = "a"')}${env('name = "b"')}${env('name = "c"\nalgo = { type = "max_rl" }')}`,
    );
    const { config } = loadConfig(path);
    const [a, b, c] = config.orchestrator.train.env;
    expect(a?.algo).toEqual(b!.algo);
    expect(a?.algo).not.toBe(b!.algo);
    (a!.algo as { std_normalize: boolean }).std_normalize = false;
    expect((b!.algo as { std_normalize: boolean }).std_normalize).toBe(true);
    expect(c?.algo.type).toBe("max_rl");
  });

  test("--set overrides the file, typed by the schema", () => {
    const path = write(BASE + env());
    const { config } = loadConfig(path, [
      "trainer.optim.lr=3e-4",
      "model.path=123",
      "orchestrator.train.env[0].ratio=2",
      "orchestrator.algo.type=echo",
    ]);
    expect(config.trainer.optim.lr).toBe(3e-4);
    expect(config.model.path).toBe("123");
    expect(config.orchestrator.train.env[0]?.ratio).toBe(2);
    expect(config.orchestrator.train.env[0]?.algo.type).toBe("echo");
  });

  test("setting any echo role replaces the default table", () => {
    const { config } = loadConfig(write(BASE + env('algo = { type = "echo", roles = { user = { alpha = 0.5 } } }')));
    const algo = config.orchestrator.train.env[0]!.algo;
    expect(algo.type === "echo" && algo.roles).toEqual({ user: { alpha: 0.5 } });
  });

  test("opd with a separate teacher is accepted, and a teacher per env", () => {
    const t = (port: number) =>
      `algo = { type = "opd", teacher = { name = "t", base_url = "http://127.0.0.1:${port}/v1" } }`;
    const { config } = loadConfig(write(BASE + env(`name = "a"\n${t(8001)}`) + env(`name = "b"\n${t(8002)}`)));
    const urls = config.orchestrator.train.env.map((e) => (e.algo.type === "opd" ? e.algo.teacher.base_url : ""));
    expect(urls).toEqual(["http://127.0.0.1:8001/v1", "http://127.0.0.1:8002/v1"]);
  });

  test("group_size 1 with a group-relative algorithm is a warning, not an error", () => {
    const { warnings } = loadConfig(write(BASE + env("group_size = 1")));
    expect(warnings.length).toBe(1);
    expect(warnings[0]).toContain("group_size 1");
  });
});

// Each case: the config text (or null for a missing file), extra CLI args, and what the one
// error message must contain: the key path and the gist.
const BAD: [string, string | null, string[], string[]][] = [
  ["unknown top-level key", `${BASE}foo = 1\n${env()}`, [], ["foo", "unknown key"]],
  [
    "unknown nested key",
    `${BASE}[trainer.optim]\nlrr = 1\n${env()}`,
    [],
    ["trainer.optim.lrr", 'unknown key; did you mean "lr"? (the keys here: lr,'],
  ],
  [
    "wrong type",
    `[model]\npath = "m"\n[orchestrator]\nbatch_size = "big"\n${env()}`,
    [],
    ["orchestrator.batch_size", "expected number"],
  ],
  [
    "negative batch size",
    `[model]\npath = "m"\n[orchestrator]\nbatch_size = -4\n${env()}`,
    [],
    ["orchestrator.batch_size", ">0"],
  ],
  [
    "opd without teacher",
    BASE + env('algo = { type = "opd" }'),
    [],
    ["orchestrator.train.env[0].algo.teacher", "required"],
  ],
  [
    "opd teacher = policy",
    BASE + env('algo = { type = "opd", teacher = "policy" }'),
    [],
    ["orchestrator.train.env[0].algo.teacher", "expected object"],
  ],
  [
    "opd teacher is the policy server",
    BASE + env('algo = { type = "opd", teacher = { name = "p", base_url = "http://localhost:8000/v1/" } }'),
    [],
    ["algo.teacher.base_url", "live policy"],
  ],
  [
    "sft without a frozen source",
    BASE + env('algo = { type = "sft" }'),
    [],
    ["orchestrator.train.env[0].algo.sampling.source", "frozen model"],
  ],
  [
    "grpo from a frozen source",
    BASE +
      env('algo = { type = "grpo", sampling = { source = { name = "t", base_url = "http://127.0.0.1:8001/v1" } } }'),
    [],
    ["algo.sampling.source", "live policy"],
  ],
  [
    "unknown algorithm type",
    `${BASE}[orchestrator.algo]\ntype = "ppo"\n${env()}`,
    [],
    ["orchestrator.algo.type", "unknown algorithm type", "grpo, max_rl, opd"],
  ],
  ["bad TOML syntax", `${BASE}[orchestrator\n${env()}`, [], [":7:", "TOML syntax error"]],
  ["missing file", null, [], ["config file not found"]],
  ["missing model.path", `[model]\n[orchestrator]\n${env()}`, [], ["model.path", "required"]],
  ["no train envs", `${BASE}`, [], ["orchestrator.train", "required"]],
  ["empty train env list", `${BASE}[orchestrator.train]\nenv = []\n`, [], ["orchestrator.train.env", "at least one"]],
  [
    "unknown env id",
    BASE + `[[orchestrator.train.env]]\nid = "chess"\n`,
    [],
    ["orchestrator.train.env[0].id", "unknown environment", "math"],
  ],
  ["duplicate env names", BASE + env() + env(), [], ["orchestrator.train.env[1].name", "used twice"]],
  [
    "batch not a multiple of group",
    `[model]\npath = "m"\n[orchestrator]\nbatch_size = 10\ngroup_size = 4\n${env()}`,
    [],
    ["orchestrator.batch_size", "multiple"],
  ],
  ["temperature out of range", BASE + env("temperature = 3"), [], ["orchestrator.train.env[0].temperature", "<=2"]],
  [
    "echo with no roles",
    BASE + env('algo = { type = "echo", roles = {} }'),
    [],
    ["orchestrator.train.env[0].algo.roles", "at least one role"],
  ],
  [
    "custom algorithm file missing",
    BASE + env('algo = { type = "custom", path = "./nope.ts" }'),
    [],
    ["orchestrator.train.env[0].algo.path", "no such file"],
  ],
  [
    "opsd template without placeholder",
    BASE + env('algo = { type = "opsd", template = "no hint" }'),
    [],
    ["algo.template", "{demonstration}"],
  ],
  [
    "unknown key in --set",
    BASE + env(),
    ["--set", "trainer.optim.lrr=1"],
    ["trainer.optim.lrr", 'unknown key; did you mean "lr"?', "--set"],
  ],
  ["malformed --set", BASE + env(), ["--set", "trainer.optim.lr"], ["--set trainer.optim.lr", "key=value"]],
  [
    "unknown env arg",
    BASE + env("args = { bogus = 1 }"),
    [],
    ["orchestrator.train.env[0].args.bogus", "unknown key (the keys here: digits,"],
  ],
  [
    "custom env file missing",
    BASE + `[[orchestrator.train.env]]\nid = "./nope_env.js"\n`,
    [],
    ["orchestrator.train.env[0].id", 'no such file "./nope_env.js"'],
  ],
  [
    "deterministic with overlap",
    `deterministic = true\n${BASE}${env()}`,
    [],
    ["orchestrator.max_async_level", "deterministic = true needs 0"],
  ],
  [
    "deterministic with external policy servers",
    `deterministic = true\n${BASE}max_async_level = 0\n[inference]\nbase_urls = ["http://127.0.0.1:9/v1"]\n${env()}`,
    [],
    ["inference.base_urls", "deterministic = true needs no external servers"],
  ],
  [
    "optimizer sharding of LoRA adapters",
    `${BASE}[trainer]\nworld_size = 2\nshard = "optimizer"\n${env()}`,
    ["--set", "model.lora.rank=8"],
    ['trainer.shard: "optimizer" shards the AdamW state of full fine-tuning', 'shard = "full"'],
  ],
  [
    "merged LoRA weights from a fully sharded trainer",
    `${BASE}[trainer]\nshard = "full"\n${env()}`,
    ["--set", "model.lora.rank=8", "--set", "model.lora.merged=true"],
    ["model.lora.merged", 'sharded "full" has no whole base weights'],
  ],
  [
    "context-parallel ranks that do not divide the world",
    `${BASE}[trainer]\nworld_size = 2\ncontext_parallel = 3\n${env()}`,
    [],
    ["trainer.context_parallel: 3 does not divide trainer.world_size 2", "set trainer.world_size to a multiple of 3"],
  ],
  [
    "a delta of whole tensors from a fully sharded trainer",
    `${BASE}[trainer]\nshard = "full"\n[inference]\nweight_transfer = "c10d"\ntransfer_delta = "tensors"\n${env()}`,
    [],
    ['inference.transfer_delta = "tensors" compares whole tensors', 'set inference.transfer_delta = "none"'],
  ],
];

describe("malformed configs: one clear message with the key path, exit 1, no stack trace", () => {
  for (const [name, toml, extra, expected] of BAD) {
    test(name, () => {
      const path = toml === null ? join(dir, "missing.toml") : write(toml);
      const proc = Bun.spawnSync([process.execPath, join(ROOT, "src/main.ts"), "train", path, "--dry-run", ...extra], {
        stdout: "pipe",
        stderr: "pipe",
      });
      const stderr = proc.stderr.toString();
      expect(proc.exitCode).toBe(1);
      expect(stderr.startsWith("error: ")).toBe(true);
      for (const part of expected) expect(stderr).toContain(part);
      expect(stderr).not.toMatch(/\n\s+at .*:\d+/); // no stack frames
    });
  }
});
