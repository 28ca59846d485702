// `rlx train` with judges, end to end: a real run (trainer child, in-process policy, a tiny random
// model) whose "judged" env is scored by a scripted agentic judge and whose "credit" env trains
// with agentic credit assignment, both answered by the scripted judge endpoint of
// test/fixtures/judge_server.ts running in this process. Checks what the run directory holds: the
// judge's conversation (tool calls, verdict) and the credit's per-part weights and token spans in
// the audit records, and the judge metrics in metrics.jsonl; and a judge that never answers with a
// verdict, whose failed rollouts stop the run and stay on disk with the judge's conversation.
import { afterAll, beforeAll, expect, test } from "bun:test";
import { readFileSync, rmSync } from "node:fs";
import { join } from "node:path";
import { CREDIT_SYSTEM_PROMPT } from "../../src/algorithms/agentic_credit.ts";
import { parseFailed } from "../../src/rundir/failed.ts";
import { type ChatBody, type JudgeReply, type JudgeServer, startJudgeServer } from "../fixtures/judge_server.ts";
import { readAudit, readMetrics, rlx, type Workspace, workspace, writeConfig } from "./train_helpers.ts";

let ws: Workspace;
let server: JudgeServer;

/** Credit: weight 1 on odd steps, 0.25 on even ones; judge: read the reply, score 1 when it has a lowercase letter. */
function rule(body: ChatBody): JudgeReply {
  const user = body.messages[1]!.content;
  if (body.messages[0]!.content === CREDIT_SYSTEM_PROMPT) {
    const steps = Number(/CONVERSATION \((\d+) steps\)/.exec(user)![1]);
    return { content: Array.from({ length: steps }, (_, k) => `STEP ${k + 1}: ${k % 2 ? 0.25 : 1}`).join("\n") };
  }
  const read = body.messages.find((m) => m.role === "tool");
  if (!read) return { tool_calls: [{ name: "read_message", arguments: { index: 1 } }] };
  const text = read.content.split("\n").slice(1).join("\n");
  const letters = [...text].filter((c) => c >= "a" && c <= "z").length;
  return {
    tool_calls: [{ name: "verdict", arguments: { score: letters > text.length / 2 ? 1 : 0, reason: "letters" } }],
  };
}

beforeAll(async () => {
  ws = await workspace();
  server = startJudgeServer(rule);
});

afterAll(() => {
  server?.stop();
  if (ws) rmSync(ws.dir, { recursive: true, force: true });
});

test("a judged env and agentic credit train; the audit records carry the judges' conversations and weights", async () => {
  const judge = `{ name = "judge", base_url = "${server.url}" }`;
  const { path, runDir } = writeConfig(
    ws,
    "judges",
    `max_steps = 2
[orchestrator]
batch_size = 16
group_size = 4
seq_len = 128
max_tokens = 8
temperature = 1.5
filter_zero_advantages = false
[[orchestrator.train.env]]
id = ${JSON.stringify(ws.lettersEnv)}
name = "judged"
judge = { type = "agentic", name = "judge", base_url = "${server.url}" }
reward = { concurrency = 2 }
[[orchestrator.train.env]]
id = ${JSON.stringify(ws.lettersEnv)}
name = "credit"
algo = { type = "agentic_credit", judge = ${judge}, mix = 1 }
`,
  );
  const { code, err } = await rlx(["train", path, "--inference", "in-process"]).done;
  expect(err).not.toContain("[warn]");
  expect(code).toBe(0);
  const metrics = readMetrics(runDir);
  expect(metrics.map((m) => m.step)).toEqual([1, 2]);
  for (const m of metrics) {
    expect(m["errors/count"]).toBe(0);
    if (m["rollouts/judged"]) {
      expect(m["judge/judged/turns"]).toBe(2);
      expect(typeof m["judge/judged/agree"]).toBe("number");
      expect(m["reward/judged"]).toBe(m["judge/judged/score"]!);
    }
    if (m["rollouts/credit"]) expect(m["credit/credit/weight"]).toBe(1);
  }
  expect(new Set(metrics.flatMap((m) => Object.keys(m))).has("credit/credit/weight")).toBe(true);
  const records = [...readAudit(runDir).values()].flat();
  const judged = records.filter((r) => r.env === "judged");
  const credited = records.filter((r) => r.env === "credit");
  expect(judged.length).toBeGreaterThan(0);
  expect(credited.length).toBeGreaterThan(0);
  for (const r of judged) {
    expect(r.judge!.kind).toBe("agentic");
    expect(r.reward).toBe(r.judge!.score!);
    const calls = r.judge!.messages.flatMap((m) => (m.tool_calls as Array<{ function: { name: string } }>) ?? []);
    expect(calls.map((c) => c.function.name)).toEqual(["read_message", "verdict"]);
  }
  for (const r of credited) {
    // single-turn: one part, the whole completion; with mix 1 and weight 1 its factor is 1
    expect(r.credit!.parts.length).toBe(1);
    const [part] = r.credit!.parts;
    expect(part!.weight).toBe(1);
    expect(part!.factor).toBe(1);
    expect(r.loss_mask.slice(part!.token_start, part!.token_end).every((m) => m === 1)).toBe(true);
    expect(r.loss_mask.filter((m) => m === 1).length).toBe(part!.token_end - part!.token_start);
    expect(r.credit!.judge.messages.at(-1)!.content).toBe("STEP 1: 1");
  }
}, 180_000);

test("a judge that never gives a verdict fails every rollout: the run stops, and rollouts/failed_step_1.jsonl keeps each with its error and the judge's conversation", async () => {
  const mute = startJudgeServer(() => ({ content: "I am not sure." }));
  try {
    const { path, runDir } = writeConfig(
      ws,
      "mute",
      `max_steps = 2
[orchestrator]
batch_size = 8
group_size = 4
seq_len = 128
max_tokens = 8
[[orchestrator.train.env]]
id = ${JSON.stringify(ws.lettersEnv)}
name = "judged"
judge = { type = "agentic", name = "mute", base_url = "${mute.url}", max_turns = 2 }
`,
    );
    const { code, err } = await rlx(["train", path, "--inference", "in-process"]).done;
    expect(code).toBe(1);
    expect(err).toContain("8 of the last 8 rollouts failed");
    expect(err).toContain("the agentic judge gave no verdict in 2 turns");
    const failed = parseFailed(readFileSync(join(runDir, "rollouts", "failed_step_1.jsonl"), "utf8"));
    expect(failed.length).toBe(8);
    expect(new Set(failed.map((r) => r.rollout_id)).size).toBe(8);
    for (const r of failed) {
      expect([r.step, r.try, r.env]).toEqual([1, 0, "judged"]);
      expect(r.error).toContain("reward failed: the agentic judge gave no verdict in 2 turns");
      expect(r.messages.at(-1)!.role).toBe("assistant"); // the policy's reply the judge was shown
      // system, task, then per turn the judge's reply and the reminder to call a tool
      expect(r.judge!.messages.map((m) => m.role)).toEqual([
        "system",
        "user",
        "assistant",
        "user",
        "assistant",
        "user",
      ]);
      expect(r.judge!.messages[2]!.content).toBe("I am not sure.");
    }
  } finally {
    mute.stop();
  }
}, 180_000);
