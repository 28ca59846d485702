// A judge and a credit-assigning algorithm, each a user's file in one file (examples/judges/yes_no.ts,
// examples/algorithms/blame_turn.ts), loaded through the config the way `rlx train` loads them
// and run on real forth rollouts against the scripted judge endpoint.
import { afterEach, expect, test } from "bun:test";
import { join } from "node:path";
import { finishGroup, finishRollout } from "../../../src/algorithms/base.ts";
import { createAlgorithm, parseAlgoConfig } from "../../../src/algorithms/registry.ts";
import { ConfigError } from "../../../src/errors.ts";
import { OpenAIChatClient } from "../../../src/clients/chat_client.ts";
import { CallGate } from "../../../src/clients/gate.ts";
import { createJudge } from "../../../src/judges/index.ts";
import { judgedEnv } from "../../../src/judges/judge.ts";
import { judgeSchema } from "../../../src/judges/schema.ts";
import { byteContext } from "../../fixtures/algo_context.ts";
import { type ChatBody, type JudgeReply, type JudgeServer, startJudgeServer } from "../../fixtures/judge_server.ts";
import { forthCall, forthEnv, forthRollout, renderer, tokenizer } from "./forth_rollouts.ts";

const EXAMPLES = join(import.meta.dir, "../../../examples");
let server: JudgeServer | undefined;
afterEach(() => server?.stop());

test("a custom judge file scores through the kit; its garbage fails the rollout", async () => {
  server = startJudgeServer((body) => ({ content: body.messages[0]!.content.includes("Answer: 7") ? "YES." : "no" }));
  const path = join(EXAMPLES, "judges/yes_no.ts");
  const config = judgeSchema.parse({
    type: "custom",
    path,
    name: "judge",
    base_url: server.url,
    args: { question: "Right?" },
  });
  const exact = await forthEnv();
  const judge = await createJudge(config, new OpenAIChatClient("judge", server.url, { retries: 0 }), exact, {
    source: "run.toml",
    path: ["j"],
  });
  const env = judgedEnv(exact, judge);
  const gate = new CallGate({ concurrency: 2, timeoutMs: 5000 });
  const [right, wrong] = await Promise.all([
    forthRollout("a", ["Answer: 7"], env, gate),
    forthRollout("b", ["Answer: 8"], env, gate),
  ]);
  expect([right.reward, wrong.reward]).toEqual([1, 0]);
  expect(right.judge!.kind).toBe("yes_no");
  expect(server.requests[0]!.messages[0]!.content).toEndWith("Right? Reply YES or NO.");
  server.stop();
  server = startJudgeServer(() => ({ content: "maybe" }));
  const garbage = judgedEnv(
    exact,
    await createJudge({ ...config, base_url: server.url }, new OpenAIChatClient("judge", server.url), exact, {
      source: "x",
      path: [],
    }),
  );
  expect((await forthRollout("c", ["Answer: 7"], garbage, gate)).error).toBe(
    "reward failed: the yes/no judge said neither: maybe",
  );
});

test("custom judge blocks are checked: path only with type custom, and the file's shape", async () => {
  const base = { name: "judge", base_url: "http://127.0.0.1:1/v1" };
  expect(judgeSchema.safeParse({ type: "custom", ...base }).error!.issues[0]!.path).toEqual(["path"]);
  expect(judgeSchema.safeParse({ type: "rubric", path: "x.ts", ...base }).success).toBe(false);
  const config = judgeSchema.parse({ type: "custom", path: join(EXAMPLES, "algorithms/rloo.ts"), ...base });
  const err = await createJudge(config, new OpenAIChatClient("judge", base.base_url), await forthEnv(), {
    source: "run.toml",
    path: ["orchestrator", "train", "env", 0, "judge"],
  }).catch((e: Error) => e);
  expect(err).toBeInstanceOf(ConfigError);
  expect((err as Error).message).toStartWith("run.toml: orchestrator.train.env[0].judge.path: the default export of");
});

test("a custom credit-assigning algorithm file puts a failed rollout's blame on the turn its judge names", async () => {
  const rule = (body: ChatBody): JudgeReply => ({
    content: body.messages[0]!.content.includes("3 4 - .") ? "MISTAKE: 1" : "MISTAKE: none",
  });
  server = startJudgeServer(rule);
  const block = {
    type: "custom",
    path: join(EXAMPLES, "algorithms/blame_turn.ts"),
    judge: { name: "judge", base_url: server.url },
  };
  const site = { source: "run.toml", path: ["orchestrator", "algo"] };
  const { algorithm } = await createAlgorithm(parseAlgoConfig(block, site), site, { isPolicyUrl: () => false });
  const ctx = byteContext({
    env: "forth",
    connectJudge: async (j) => new OpenAIChatClient(j.name, j.base_url, { retries: 0 }),
    tokenizer,
    renderer,
  });
  await algorithm.setup(ctx);
  const rollouts = await Promise.all([
    forthRollout("good", [forthCall("3 4 + ."), "Answer: 7"]),
    forthRollout("bad", [forthCall("3 4 - ."), "Answer: -1"]),
  ]);
  for (const r of rollouts) await finishRollout(algorithm, r);
  await finishGroup(algorithm, rollouts);
  const [good, bad] = rollouts;
  expect([good!.advantage, bad!.advantage]).toEqual([0.5, -0.5]);
  const turns = (r: typeof good) => r!.segments.map((s, i) => ({ s, i })).filter(({ s }) => s.sampled);
  const valueOn = (r: typeof good, segment: number) => {
    const start = r!.segments.slice(0, segment).reduce((n, s) => n + s.tokenIds.length, 0);
    return r!.advantages!.slice(start, start + r!.segments[segment]!.tokenIds.length);
  };
  for (const { s, i } of turns(good)) expect(valueOn(good, i)).toEqual(new Array(s.tokenIds.length).fill(0.5));
  const [first, second] = turns(bad);
  expect(valueOn(bad, first!.i)).toEqual(new Array(first!.s.tokenIds.length).fill(-1));
  expect(valueOn(bad, second!.i)).toEqual(new Array(second!.s.tokenIds.length).fill(-0));
  expect(bad!.credit!.parts.map((p) => [p.weight, p.factor])).toEqual([
    [1, 2],
    [0, 0],
  ]);
});
