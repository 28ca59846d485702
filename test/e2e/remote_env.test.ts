// Envs served by another process, one rollout at a time through the real driver: the reference
// Python servers (examples/envs/python/, started as a user starts them) in both shapes, and the
// three faults. A scripted client (byte tokens) makes the model call the calculator, so the tool
// result the server computed is in the conversation and in the tokens; for the env-driven shape a
// tiny real model is sampled and every sampled token and logprob of the rollout must be one the
// client served. Faults (a server that dies mid-episode, answers slowly, answers a body that is not
// JSON or JSON the protocol does not allow) each give a failed rollout with its reason.
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type { Completion, CompletionRequest, SamplingClient } from "../../src/clients/types.ts";
import { loadEnv, createEnv, remoteSettings, remoteBlock } from "../../src/envs/index.ts";
import type { Env, Task } from "../../src/envs/types.ts";
import { loadModel } from "../../src/model/hf.ts";
import { initModel } from "../../src/model/presets.ts";
import { ChatRenderer } from "../../src/model/render.ts";
import { Tokenizer } from "../../src/model/tokenizer.ts";
import type { NativeModel } from "../../src/native/model.ts";
import { runRollout } from "../../src/rollout/driver.ts";
import { episodeEndpoint } from "../../src/rollout/endpoint.ts";
import { byteRenderer } from "../unit/envs/helpers.ts";
import { ScriptedClient } from "../fixtures/scripted_client.ts";
import { fakeEnvServer, faultyEnvServer, sharedEnvServers, startEnvServer } from "../fixtures/env_servers.ts";
import { LocalSamplingClient } from "./rollout_client.ts";

const renderer = byteRenderer();
const call = (expression: string) =>
  `<tool_call>\n{"name": "calculator", "arguments": {"expression": ${JSON.stringify(expression)}}}\n</tool_call>`;
const sampling = { maxTokens: 200, temperature: 1, topP: 1, topK: 0, seed: 1 };

const servers = sharedEnvServers();

async function remote(url: string, remoteTable: Record<string, unknown> = {}): Promise<{ env: Env; task: Task }> {
  const definition = await loadEnv(url, undefined, remoteSettings(remoteBlock.parse(remoteTable)));
  const env = await createEnv(definition, { tasks: 5 });
  return { env, task: (await env.load("train", 0))[0]! };
}

function rollout(env: Env, task: Task, client: SamplingClient, r = renderer, timeoutMs?: number) {
  return runRollout({ id: "r", groupId: "g", envId: "arith", env, task, client, renderer: r, sampling, timeoutMs });
}

/** "a+b" -> the sum, as text. */
const sumOf = (task: Task) => String(task.id.split("+").reduce((s, n) => s + Number(n), 0));

describe("a step-driven Python env", () => {
  test("the calculator's result comes from the server into the conversation and the tokens; the answer is rewarded", async () => {
    const { env, task } = await remote(servers.step.url);
    expect(env.open).toBeDefined();
    expect(env.tools.map((t) => t.spec.function.name)).toEqual(["calculator"]);
    const client = new ScriptedClient(renderer, [call(task.id.replace("+", " + ")), sumOf(task)]);
    const r = await rollout(env, task, client);
    expect(r.error).toBeUndefined();
    expect(r.messages.map((m) => m.role)).toEqual(["system", "user", "assistant", "tool", "assistant"]);
    expect(r.messages[3]!.content).toBe(sumOf(task));
    expect([r.reward, r.metrics.correct, r.metrics.tool_calls, r.stopReason]).toEqual([1, 1, 1, "done"]);
    // One sample: the second turn was prompted with everything before it, the tool result included.
    expect(r.numSamples).toBe(1);
    const before = r.segments.slice(
      0,
      r.segments.findLastIndex((s) => s.sampled),
    );
    expect(client.requests[1]!.promptIds).toEqual(before.flatMap((s) => s.tokenIds));
    expect(renderer.tokenizer.decode(before.filter((s) => s.role === "tool").flatMap((s) => s.tokenIds))).toContain(
      sumOf(task),
    );
    // A conversation it did not run is scored by replaying its turns (a judge's exact reward).
    expect(await env.reward(task, { ...r, info: {} })).toEqual({
      reward: 1,
      metrics: { correct: 1, tool_calls: 1, wrong_answers: 0 },
    });
  });

  test("a wrong answer gets the env's turn asking again, to the last turn; the args reach the server, which refuses a misspelled one", async () => {
    const { env, task } = await remote(servers.step.url);
    const r = await rollout(env, task, new ScriptedClient(renderer, ["7", "8", "9", "10"]));
    expect([r.reward, r.metrics.correct, r.metrics.wrong_answers, r.stopReason, r.numTurns]).toEqual([
      0,
      0,
      4,
      "done",
      4,
    ]);
    const asked = r.messages.filter((m) => m.role === "user").slice(1);
    expect(asked.map((m) => m.content)).toEqual(
      Array(3).fill("That is not the sum. Try again; you may use the calculator."),
    );
    const bad = await createEnv(await loadEnv(servers.step.url), { digitz: 3 });
    await expect(bad.load("train", 0)).rejects.toThrow("unknown arg 'digitz'; the args are digits, tasks");
  });

  test("a reset's messages are the prompt; a tool call that does not parse reaches the env as its text, counted", async () => {
    const server = fakeEnvServer("step", (path) =>
      path === "/reset"
        ? { session_id: "s1", messages: [{ role: "user", content: "from reset" }] }
        : path === "/step"
          ? { messages: [], reward: 0, done: true }
          : {},
    );
    try {
      const { env, task } = await remote(server.url);
      const broken = "<tool_call>\n{not json\n</tool_call>";
      const r = await rollout(env, task, new ScriptedClient(renderer, [broken]));
      expect(r.error).toBeUndefined();
      expect(r.messages[0]).toEqual({ role: "user", content: "from reset" });
      expect(renderer.tokenizer.decode(r.segments[0]!.tokenIds)).toContain("from reset");
      const stepped = server.requests.find((q) => q.path === "/step")!.body.message as { content: string };
      expect(stepped.content).toBe(broken);
      expect(r.metrics.malformed_tool_calls).toBe(1);
      await Bun.sleep(50); // the close is not awaited by the rollout
      expect(server.requests.map((q) => q.path)).toEqual(["/reset", "/step", "/close"]);
    } finally {
      server.stop();
    }
  });

  test("remote.shape that the server contradicts is refused, naming both", async () => {
    await expect(remote(servers.step.url, { shape: "env" })).rejects.toThrow(
      `remote.shape is "env" but the server at ${servers.step.url} is "step"`,
    );
  });
});

describe("faults become failed rollouts with their reason", () => {
  test("a server that dies mid-episode", async () => {
    const dying = await startEnvServer("arith_step.py");
    const { env, task } = await remote(dying.url);
    const client = new ScriptedClient(renderer, [call("1 + 2"), "3"], 7, async (n) => {
      if (n === 2) {
        dying.stop();
        await dying.proc.exited;
      }
    });
    const r = await rollout(env, task, client);
    expect(r.stopReason).toBe("error");
    expect(r.error).toContain(`${dying.url}/step`);
    expect(r.error).toContain("connection failed");
    expect(r.messages.filter((m) => m.role === "tool").length).toBe(1); // the first step was answered
  });

  test("a server that answers slowly (past remote.timeout_s)", async () => {
    const server = faultyEnvServer("slow");
    try {
      const { env, task } = await remote(server.url, { timeout_s: 0.3 });
      const r = await rollout(env, task, new ScriptedClient(renderer, ["hi"]));
      expect(r.stopReason).toBe("error");
      expect(r.error).toContain("no answer within 300 ms");
    } finally {
      server.stop();
    }
  });

  test("a session that opens after the rollout's deadline is closed then, freeing its slot", async () => {
    const server = fakeEnvServer("step", async (path) => {
      if (path === "/reset") await Bun.sleep(400);
      if (path === "/step") return { messages: [], reward: 1, done: true };
      return path === "/reset" ? { session_id: "late" } : {};
    });
    try {
      const { env, task } = await remote(server.url, { concurrency: 1 });
      const r = await rollout(env, task, new ScriptedClient(renderer, ["hi"]), renderer, 100);
      expect(r.stopReason).toBe("error");
      expect(r.error).toContain("rollout timed out");
      await Bun.sleep(600);
      expect(server.requests.map((q) => [q.path, q.body.session_id])).toEqual([
        ["/reset", undefined],
        ["/close", "late"],
      ]);
      // concurrency = 1: the next rollout gets the slot back
      expect((await rollout(env, task, new ScriptedClient(renderer, ["hi"]))).reward).toBe(1);
    } finally {
      server.stop();
    }
  });

  test("a server that answers a body that is not JSON, or JSON without a reward", async () => {
    for (const [fault, reason] of [
      ["bad_json", "status 200 but the body is not JSON: {reward: 1, done: tru"],
      ["bad_answer", "the answer does not fit the env protocol: reward:"],
    ] as const) {
      const server = faultyEnvServer(fault);
      try {
        const { env, task } = await remote(server.url);
        const r = await rollout(env, task, new ScriptedClient(renderer, ["hi"]));
        expect(r.stopReason).toBe("error");
        expect(r.error).toContain(`${server.url}/step`);
        expect(r.error).toContain(reason);
      } finally {
        server.stop();
      }
    }
  });

  test("a server that is not there is a clear error when the env loads", async () => {
    await expect(
      loadEnv("http://127.0.0.1:9", { source: "run.toml", path: ["orchestrator", "train", "env", 0, "id"] }),
    ).rejects.toThrow("run.toml: orchestrator.train.env[0].id: the env server does not answer");
  });
});

describe("an env-driven Python env", () => {
  test("the server's calculator call and answer go through the episode's endpoint; the tool result is bridged into the tokens", async () => {
    const { env, task } = await remote(servers.agent.url);
    expect(env.drive).toBeDefined();
    const client = new ScriptedClient(renderer, [call(task.id), sumOf(task)]);
    const r = await rollout(env, task, client);
    expect(r.error).toBeUndefined();
    expect(r.messages.map((m) => m.role)).toEqual(["system", "user", "assistant", "tool", "assistant"]);
    expect(r.messages[3]!.content).toBe(sumOf(task));
    expect([r.reward, r.metrics.correct, r.metrics.tool_calls, r.numTurns, r.numSamples]).toEqual([1, 1, 1, 2, 1]);
    const before = r.segments.slice(
      0,
      r.segments.findLastIndex((s) => s.sampled),
    );
    expect(client.requests[1]!.promptIds).toEqual(before.flatMap((s) => s.tokenIds));
  });

  test("a turn past the context limit fails the episode with that reason; a key that is no episode's is refused", async () => {
    const { env, task } = await remote(servers.agent.url);
    const tools = env.tools.map((t) => t.spec);
    const first = renderer.render(task.prompt, { tools, addGenerationPrompt: true }).tokenIds.length;
    // Room for the first turn ("7" and its end token) but not for the env's "try again" after it.
    const r = await runRollout({
      ...{ id: "r", groupId: "g", envId: "arith_agent", env, task, renderer, sampling },
      client: new ScriptedClient(renderer, ["7", "8"]),
      maxContextTokens: first + 10,
    });
    expect([r.stopReason, r.numTurns]).toEqual(["error", 1]);
    expect(r.error).toContain("context limit: the prompt has");
    const refused = await fetch(`${episodeEndpoint().baseUrl}/chat/completions`, {
      method: "POST",
      headers: { authorization: "Bearer rlx-episode-0" },
      body: JSON.stringify({ model: "policy", messages: [{ role: "user", content: "hi" }] }),
    });
    expect(refused.status).toBe(401);
    expect(((await refused.json()) as { message: string }).message).toContain("unknown or expired API key");
  });

  test("a conversation the env rewrites is a new sample after the first, every segment's message where it was", async () => {
    const server = fakeEnvServer("env", async (path, body) => {
      const policy = body.policy as { base_url: string; api_key: string };
      const chat = (content: string) =>
        fetch(`${policy.base_url}/chat/completions`, {
          method: "POST",
          headers: { authorization: `Bearer ${policy.api_key}` },
          body: JSON.stringify({ model: "policy", messages: [{ role: "user", content }] }),
        }).then((r) => r.json());
      await chat("first");
      await chat("second, from scratch");
      return { reward: 0.5 };
    });
    try {
      const { env, task } = await remote(server.url);
      const r = await rollout(env, task, new ScriptedClient(renderer, ["x", "y"]));
      expect(r.error).toBeUndefined();
      expect([r.reward, r.numSamples, r.numTurns]).toEqual([0.5, 2, 2]);
      expect(r.messages.map((m) => `${m.role}:${m.content}`)).toEqual([
        "user:first",
        "assistant:x",
        "user:second, from scratch",
        "assistant:y",
      ]);
      for (const segment of r.segments)
        expect(segment.role).toBe(r.messages[segment.messageIndex]?.role ?? "assistant");
      expect(r.segments.filter((s) => s.sampled).map((s) => [s.messageIndex, s.sample])).toEqual([
        [1, 0],
        [3, 1],
      ]);
    } finally {
      server.stop();
    }
  });
  describe("against a tiny real model", () => {
    let dir: string;
    let model: NativeModel;
    beforeAll(async () => {
      dir = mkdtempSync(join(tmpdir(), "rlx-remote-env-"));
      await initModel({ preset: "tiny", out: join(dir, "tiny"), seed: 0, dtype: "f32" });
      model = await loadModel(join(dir, "tiny"));
    }, 120_000);
    afterAll(() => {
      model?.free();
      rmSync(dir, { recursive: true, force: true });
    });

    test("every sampled token and logprob of the rollout is one the policy served to the env", async () => {
      const served: Completion[] = [];
      const inner = new LocalSamplingClient(model, 3);
      const client: SamplingClient = {
        complete: async (request: CompletionRequest) => {
          const completion = await inner.complete(request);
          served.push(completion);
          return completion;
        },
        score: (sequences) => inner.score(sequences),
      };
      const tiny = new ChatRenderer(Tokenizer.load(join(dir, "tiny")));
      const { env, task } = await remote(servers.agent.url);
      for (let i = 0; i < 3; i++) {
        served.length = 0;
        const r = await rollout(env, task, client, tiny);
        expect(r.error).toBeUndefined();
        const sampled = r.segments.filter((s) => s.sampled);
        expect(sampled.length).toBe(served.length);
        expect(sampled.map((s) => s.tokenIds)).toEqual(served.map((c) => c.tokenIds));
        expect(sampled.map((s) => s.logprobs)).toEqual(served.map((c) => c.logprobs));
        expect(sampled.every((s) => s.policyVersion === 3)).toBe(true);
        expect(r.messages.slice(0, 2)).toEqual(task.prompt);
        expect(r.messages[2]!.role).toBe("assistant"); // the prompt once, then the model's turn
        expect([0, 1]).toContain(r.reward);
      }
    }, 120_000);
  });
});
