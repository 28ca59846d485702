// vLLM and SGLang as the live policy ([inference] engine), against loopback stand-ins that speak
// their routes and generate with rlx's own engine (test/fixtures/mock_engines.ts): a 3-step
// `rlx train` reloads each published step through the engine's own routes, in order, and stamps
// every rollout with a version rlx published; the start checks refuse an engine whose dev-mode
// routes are off or whose logprobs are not tempered; a refused reload stops the run.
import { afterAll, beforeAll, expect, test } from "bun:test";
import { ConfigError, type RlxError } from "../../src/errors.ts";
import { policyEngine } from "../../src/clients/policy_engines.ts";
import { checkTemperedLogprobs } from "../../src/clients/tempered_probe.ts";
import { Tokenizer } from "../../src/model/tokenizer.ts";
import { type MockEngine, startMockSglang, startMockVllm } from "../fixtures/mock_engines.ts";
import { readAudit, rlx, type Workspace, workspace, writeConfig } from "./train_helpers.ts";

let ws: Workspace;
const started: MockEngine[] = [];
const start = async (engine: Promise<MockEngine>) => {
  const mock = await engine;
  started.push(mock);
  return mock;
};

beforeAll(async () => {
  ws = await workspace();
});

afterAll(async () => {
  for (const mock of started) await mock.stop();
});

const runConfig = (name: string, engine: string, url: string) =>
  writeConfig(
    ws,
    name,
    `max_steps = 3
[orchestrator]
batch_size = 8
group_size = 4
seq_len = 256
max_tokens = 12
[inference]
engine = "${engine}"
base_urls = ["${url}"]
[[orchestrator.train.env]]
id = ${JSON.stringify(ws.lettersEnv)}
`,
  );

/** Every rollout's version is one rlx published (0 = the base) and at most the step before its batch. */
function expectPublishedVersions(runDir: string, published: number[]) {
  const audit = readAudit(runDir);
  expect(audit.size).toBe(3);
  for (const [step, records] of audit)
    for (const r of records) {
      expect([0, ...published]).toContain(r.policy_version);
      expect(r.policy_version).toBeLessThanOrEqual(step - 1);
    }
}

test("vLLM: each published step reaches the engine as update_config, reload_weights, reset_prefix_cache", async () => {
  const vllm = await start(startMockVllm(ws.model));
  const { path, runDir } = runConfig("vllm", "vllm", vllm.url);
  const { code, err } = await rlx(["train", path]).done;
  expect(err).not.toContain("error:");
  expect(code).toBe(0);
  expect(vllm.calls.length).toBeGreaterThan(0);
  expect(vllm.calls.length % 3).toBe(0);
  const steps: number[] = [];
  for (let i = 0; i < vllm.calls.length; i += 3) {
    const [config, reload, reset] = vllm.calls.slice(i, i + 3);
    const match = new RegExp(`^update_config ${runDir}/weights/step_(\\d+)$`).exec(config!.detail ?? "");
    expect(match).not.toBeNull();
    steps.push(Number(match![1]));
    expect(reload).toEqual({ route: "/collective_rpc", detail: "reload_weights" });
    expect(reset).toEqual({ route: "/reset_prefix_cache" });
  }
  expect(steps).toEqual([...steps].sort((a, b) => a - b));
  expect(new Set(steps).size).toBe(steps.length);
  expect(vllm.loaded).toBe(steps.length);
  expectPublishedVersions(runDir, steps);
}, 180_000);

test("SGLang: each published step reaches the engine as update_weights_from_disk with its version", async () => {
  const sglang = await start(startMockSglang(ws.model));
  const { path, runDir } = runConfig("sglang", "sglang", sglang.url);
  const { code, err } = await rlx(["train", path]).done;
  expect(err).not.toContain("error:");
  expect(code).toBe(0);
  expect(sglang.calls.length).toBeGreaterThan(0);
  const steps = sglang.calls.map((call) => {
    expect(call.route).toBe("/update_weights_from_disk");
    const step = Number(/\/weights\/step_(\d+)$/.exec(call.detail!)![1]);
    expect(call.detail).toBe(`${runDir}/weights/step_${step}`);
    expect(call.version).toBe(String(step));
    return step;
  });
  expect(steps).toEqual([...steps].sort((a, b) => a - b));
  expectPublishedVersions(runDir, steps);
}, 180_000);

test("a reload the engine refuses stops the run with the engine's message", async () => {
  const sglang = await start(startMockSglang(ws.model, { refuseReload: true }));
  const { path } = runConfig("refused", "sglang", sglang.url);
  const { code, err } = await rlx(["train", path]).done;
  expect(code).not.toBe(0);
  expect(err).toContain("/update_weights_from_disk");
  expect(err).toContain("Failed to load weights");
}, 180_000);

test("start checks: dev-mode routes off, untempered logprobs, and an engine without base_urls are refused", async () => {
  const off = await start(startMockVllm(ws.model, { devMode: false }));
  const engine = policyEngine("vllm", { baseUrls: [off.url], model: "policy" });
  const off404 = await engine.check().catch((e: Error) => e);
  expect(String(off404)).toContain("/is_sleeping answered 404: vLLM's dev-mode routes");
  expect((off404 as RlxError).fix).toContain("VLLM_SERVER_DEV_MODE=1");

  const prompt = Tokenizer.load(ws.model).encode("1 + 1 =");
  const good = await start(startMockVllm(ws.model));
  await checkTemperedLogprobs(policyEngine("vllm", { baseUrls: [good.url], model: "policy" }).client, prompt, "vllm");
  const sglang = await start(startMockSglang(ws.model));
  await checkTemperedLogprobs(
    policyEngine("sglang", { baseUrls: [sglang.url], model: "policy" }).client,
    prompt,
    "sglang",
  );
  const raw = await start(startMockVllm(ws.model, { rawLogprobs: true }));
  const rawClient = policyEngine("vllm", { baseUrls: [raw.url], model: "policy" }).client;
  const refused = await checkTemperedLogprobs(rawClient, prompt, "vllm").catch((e: Error) => e);
  expect(refused).toBeInstanceOf(ConfigError);
  expect(String(refused)).toMatch(/ratio 1\.000, tempered gives 0\.5/);
  expect((refused as ConfigError).fix).toContain("--logprobs-mode processed_logprobs");

  const { path } = writeConfig(
    ws,
    "no-urls",
    `[inference]\nengine = "vllm"\n[[orchestrator.train.env]]\nid = "math"\n`,
  );
  const { code, err } = await rlx(["train", path]).done;
  expect(code).toBe(1);
  expect(err).toContain('inference.engine = "vllm" needs inference.base_urls');
}, 120_000);
