// A judged env as `rlx train` sets it up (the config's `judge` and `reward` blocks through
// setupTrainEnvs) collecting real batches: the scripted agentic judge's tool calls and verdict are
// in the audit records, its calls never exceed reward.concurrency, a judge that fails for some
// rollouts fails those rollouts with the reason while the batch trains (under max_failure_rate),
// and past max_failure_rate the run stops naming the judge's error.
import { afterAll, expect, test } from "bun:test";
import { mkdtempSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { loadConfig } from "../../../src/config/load.ts";
import { ChatRenderer } from "../../../src/model/render.ts";
import { collectStep } from "../../../src/orchestrator/collect.ts";
import { FailureWindow } from "../../../src/orchestrator/failures.ts";
import { judgeMetrics } from "../../../src/orchestrator/metrics/rollouts.ts";
import { Progress } from "../../../src/orchestrator/metrics/log.ts";
import type { LivePolicy } from "../../../src/processes/live_policy.ts";
import { taskSamplerState } from "../../../src/orchestrator/task_sampler.ts";
import { setupTrainEnvs } from "../../../src/orchestrator/setup.ts";
import { auditRecord } from "../../../src/rundir/audit.ts";
import { LETTERS_ENV } from "../../e2e/train_helpers.ts";
import { type ChatBody, type JudgeReply, startJudgeServer } from "../../fixtures/judge_server.ts";
import { Scripted, tokenizer } from "./collect_harness.ts";

const dir = mkdtempSync(join(tmpdir(), "rlx-judged-"));
const envFile = join(dir, "letters.ts");
writeFileSync(envFile, LETTERS_ENV);

/** Reads the final message, then scores it 1 when it is all letters; a reply of "FAIL" makes it err. */
const rule = async (body: ChatBody): Promise<JudgeReply> => {
  await Bun.sleep(15);
  const user = body.messages[1]!.content;
  const final = Number(/the final message is \[(\d+)\]/.exec(user)![1]);
  const read = body.messages.find((m) => m.role === "tool");
  if (!read) return { tool_calls: [{ name: "read_message", arguments: { index: final } }] };
  const text = read.content.split("\n").slice(1).join("\n");
  if (text === "FAIL") return { status: 400, error: "the judge cannot read this (test)" };
  return { tool_calls: [{ name: "verdict", arguments: { score: /^[a-z]+$/.test(text) ? 1 : 0, reason: text } }] };
};
const server = startJudgeServer(rule);
afterAll(() => server.stop());

async function judgedRun(reply: (call: number) => string, maxFailureRate: number) {
  const toml = join(dir, `run${maxFailureRate}.toml`);
  writeFileSync(
    toml,
    `model = { path = "unused" }\nmax_steps = 10\n[orchestrator]\nbatch_size = 8\ngroup_size = 2\nmax_failure_rate = ${maxFailureRate}\n[[orchestrator.train.env]]\nid = ${JSON.stringify(envFile)}\nname = "letters"\njudge = { type = "agentic", name = "judge", base_url = "${server.url}", max_turns = 3 }\nreward = { concurrency = 2, timeout_s = 5 }\n`,
  );
  const { config } = loadConfig(toml);
  const policy = { client: new Scripted(reply) } as unknown as LivePolicy;
  const renderer = new ChatRenderer(tokenizer);
  const envs = await setupTrainEnvs({ config, source: toml, policy, tokenizer, renderer, info() {}, warn() {} });
  const o = { config, envs, renderer, warn: () => {} };
  const { sampler } = taskSamplerState(envs, config.seed, config.max_steps);
  return collectStep(1, o, sampler, new Progress(), new FailureWindow(config.orchestrator.max_failure_rate));
}

test("the agentic judge's calls and verdict are in the audit record; its calls stay within reward.concurrency", async () => {
  server.peak = 0;
  const collected = await judgedRun((call) => ["abc", "ab1", "xyz", "x y"][call % 4]!, 0.5);
  const rollouts = collected.groups.flat();
  expect(rollouts.map((r) => r.reward)).toEqual([1, 0, 1, 0, 1, 0, 1, 0]);
  expect(server.peak).toBe(2);
  const record = auditRecord({ step: 1, ...collected.kept[0]! });
  expect(record.reward).toBe(1);
  expect(record.judge!.kind).toBe("agentic");
  expect(record.judge!.score).toBe(1);
  const calls = record.judge!.messages.flatMap((m) => (m.tool_calls as Array<{ function: { name: string } }>) ?? []);
  expect(calls.map((c) => c.function.name)).toEqual(["read_message", "verdict"]);
  expect(record.judge!.messages.at(-2)).toMatchObject({
    role: "tool",
    name: "read_message",
    content: "[1] assistant:\nabc",
  });
  // the exact reward is the share of letters: 1 on "abc", 2/3 on "ab1" and "x y", which the
  // stricter judge scores 0: it agrees on half the rollouts
  const metrics = judgeMetrics(rollouts, ["letters"]);
  expect(metrics["judge/letters/agree"]).toBe(0.5);
  expect(metrics["judge/letters/agree_right"]).toBe(0.5); // every exact reward here is >= 0.5
  expect(metrics["judge/letters/agree_wrong"]).toBeUndefined();
  expect(metrics["judge/letters/score"]).toBe(0.5);
  expect(metrics["judge/letters/turns"]).toBe(2);
  expect(metrics["judge/letters/exact_reward"]).toBeCloseTo((1 + 2 / 3 + 1 + 2 / 3) / 4, 12);
});

test("a judge that fails some rollouts: they fail with the reason and the batch trains, under max_failure_rate", async () => {
  const collected = await judgedRun((call) => ["abc", "x1", "FAIL", "zz"][call % 4]!, 0.5);
  const rollouts = collected.groups.flat();
  const failed = rollouts.filter((r) => r.error);
  expect(failed.length).toBe(2);
  for (const r of failed) {
    expect(r.error).toMatch(/^reward failed: .*status 400: .*the judge cannot read this \(test\)/);
    expect(r.metrics.error).toBe(1);
  }
  expect(collected.kept.length).toBeGreaterThan(0);
  expect(collected.kept.every((k) => !k.rollout.error)).toBe(true);
});

test("past max_failure_rate the run stops, naming the judge's error", async () => {
  await expect(judgedRun((call) => (call % 2 ? "FAIL" : "abc"), 0.25)).rejects.toThrow(
    /more than orchestrator.max_failure_rate = 0.25\); letters: reward failed: .*the judge cannot read this \(test\)/,
  );
});
