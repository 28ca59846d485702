// The judges over real HTTP (a scripted judge endpoint, test/fixtures/judge_server.ts) on real
// forth rollouts: the agentic judge reads the trace, runs the policy's Forth with the env's own
// tool and gives its verdict, all of it in the rollout's judge record; the rubric judge parses its
// SCORE line; a judge that fails, stalls or answers garbage fails the rollout with the reason.
import { afterEach, expect, test } from "bun:test";
import { CallGate } from "../../../src/clients/gate.ts";
import { OpenAIChatClient } from "../../../src/clients/chat_client.ts";
import { createJudge } from "../../../src/judges/index.ts";
import { judgedEnv } from "../../../src/judges/judge.ts";
import { parseRubricScore } from "../../../src/judges/rubric.ts";
import { judgeSchema } from "../../../src/judges/schema.ts";
import { type JudgeReply, type JudgeServer, startJudgeServer, type ChatBody } from "../../fixtures/judge_server.ts";
import { forthCall, forthEnv, forthJudgeRule, forthRollout } from "./forth_rollouts.ts";

let server: JudgeServer | undefined;
afterEach(() => server?.stop());

/** A forth env judged by a scripted server answering `rule`; judge calls through a gate. */
async function judged(type: "rubric" | "agentic", rule: (body: ChatBody, n: number) => JudgeReply, timeoutMs = 5000) {
  server = startJudgeServer(rule);
  const config = judgeSchema.parse({ type, name: "judge", base_url: server.url, max_turns: 6 });
  const exact = await forthEnv();
  const client = new OpenAIChatClient("judge", server.url, { retries: 0 });
  const env = judgedEnv(exact, await createJudge(config, client, exact, { source: "test", path: [] }));
  return { env, gate: new CallGate({ concurrency: 4, timeoutMs }) };
}

test("the agentic judge reads the trace, runs the policy's Forth itself, and its verdict is the reward", async () => {
  const { env, gate } = await judged("agentic", forthJudgeRule);
  const good = await forthRollout("good", [forthCall("3 4 + ."), "Answer: 7"], env, gate);
  const bad = await forthRollout("bad", [forthCall("3 4 - ."), "Answer: 7"], env, gate);
  expect([good.error, bad.error]).toEqual([undefined, undefined]);
  expect([good.reward, bad.reward]).toEqual([1, 0]);
  // the exact reward reads only the final answer (7 in both): the judge disagrees on "bad"
  expect([good.metrics.exact_reward, bad.metrics.exact_reward]).toEqual([1, 1]);
  expect([good.metrics.judge_agrees, bad.metrics.judge_agrees]).toEqual([1, 0]);
  const record = good.judge!;
  expect(record.kind).toBe("agentic");
  expect(record.score).toBe(1);
  expect(record.reason).toBe("printed 7");
  const roles = record.messages.map((m) => m.role);
  expect(roles).toEqual(["system", "user", "assistant", "tool", "assistant", "tool", "assistant"]);
  const [read, ran, verdict] = [record.messages[2]!, record.messages[4]!, record.messages[6]!];
  expect(read.tool_calls![0]!.function).toEqual({ name: "read_message", arguments: { index: 2 } });
  expect(record.messages[3]!.content).toContain('tool call: forth({"code":"3 4 + ."})');
  expect(ran.tool_calls![0]!.function).toEqual({ name: "forth", arguments: { code: "3 4 + ." } });
  expect(record.messages[5]).toMatchObject({ role: "tool", name: "forth", content: "7 \nstack: <0>" });
  expect(verdict.tool_calls![0]!.function).toEqual({ name: "verdict", arguments: { score: 1, reason: "printed 7" } });
  expect(good.metrics.judge_turns).toBe(3);
  // the judge was offered read_message, the env's own tool and verdict
  expect(server!.requests[0]!.tools!.map((t) => t.function.name)).toEqual(["read_message", "forth", "verdict"]);
});

test("the agentic judge's bad calls are observations it can recover from", async () => {
  const { env, gate } = await judged("agentic", (_body, n) => {
    const script: JudgeReply[] = [
      { content: "thinking without a tool" },
      { tool_calls: [{ name: "read_message", arguments: { index: 99 } }] },
      { tool_calls: [{ name: "nope", arguments: {} }] },
      { tool_calls: [{ name: "verdict", arguments: "{not json" }] },
      { tool_calls: [{ name: "verdict", arguments: { score: 7 } }] },
      { tool_calls: [{ name: "verdict", arguments: { score: 0.5, reason: "half" } }] },
    ];
    return script[n]!;
  });
  const r = await forthRollout("r", ["Answer: 7"], env, gate);
  expect(r.error).toBeUndefined();
  expect(r.reward).toBe(0.5);
  const said = r
    .judge!.messages.slice(2)
    .filter((m) => m.role !== "assistant")
    .map((m) => m.content);
  expect(said).toEqual([
    "Call a tool: read_message, the environment's tools, or verdict.",
    "error: index must be an integer from 0 to 2",
    'error: unknown tool "nope" (available: read_message, forth, verdict)',
    "error: the arguments are not a JSON object: {not json",
    "error: score must be a number from 0 to 1",
  ]);
});

test("the rubric judge's last SCORE line is the reward; the judge sees task, reference and numbered trace", async () => {
  const { env, gate } = await judged("rubric", () => ({ content: "SCORE: 0.2\nLooks right.\nSCORE: 0.75" }));
  const r = await forthRollout("r", [forthCall("3 4 + ."), "Answer: 7"], env, gate);
  expect(r.reward).toBe(0.75);
  const asked = server!.requests[0]!.messages[1]!.content;
  expect(asked).toStartWith(
    "TASK:\nUse Forth to compute 3 + 4.\n\nREFERENCE ANSWER:\n7\n\nCONVERSATION:\n[2] assistant:\n",
  );
  expect(asked).toContain("[3] tool (forth):\n7 \nstack: <0>\n\n[4] assistant:\nAnswer: 7");
  expect(r.judge!.messages.at(-1)!.content).toBe("SCORE: 0.2\nLooks right.\nSCORE: 0.75");
  expect([parseRubricScore("SCORE: 1.5"), parseRubricScore("score: 1"), parseRubricScore("SCORE: x")]).toEqual([
    undefined,
    1,
    undefined,
  ]);
});

test("a judge that fails, stalls or answers garbage fails the rollout with the reason, never a score", async () => {
  const cases: Array<["rubric" | "agentic", JudgeReply, RegExp]> = [
    ["rubric", { status: 500, error: "judge is down" }, /^reward failed: .*status 500: .*judge is down/],
    ["rubric", { notJson: "<html>" }, /^reward failed: .*the body is not JSON: <html>/],
    [
      "rubric",
      { content: "it is fine" },
      /^reward failed: the rubric judge's reply has no "SCORE: x" line .*"it is fine"/,
    ],
    ["agentic", { content: "no tools for me" }, /^reward failed: the agentic judge gave no verdict in 6 turns/],
    ["rubric", { stall: true }, /^reward timed out after 300 ms \(the env's reward.timeout_s; env forth\)$/],
  ];
  for (const [type, reply, reason] of cases) {
    const { env, gate } = await judged(type, () => reply, 300);
    const r = await forthRollout("r", ["Answer: 7"], env, gate);
    expect(r.error).toMatch(reason);
    expect(r.stopReason).toBe("error");
    expect(r.metrics.error).toBe(1);
    expect("exact_reward" in r.metrics).toBe(false);
    server!.stop();
  }
  // the agentic judge's conversation so far is kept on the failed rollout
  const { env, gate } = await judged("agentic", () => ({ content: "hmm" }));
  const r = await forthRollout("r", ["Answer: 7"], env, gate);
  expect(r.judge!.messages.length).toBe(2 + 6 * 2);
});
