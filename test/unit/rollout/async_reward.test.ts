// Async rewards: an env's reward may return a Promise; the env's reward gate
// (src/clients/gate.ts) bounds how many run at once and how long each may take. Measured here
// with a reward that counts its own calls in flight, through the real rollout driver.
import { expect, test } from "bun:test";
import type { Env } from "../../../src/envs/types.ts";
import { CallGate, CallTimeout } from "../../../src/clients/gate.ts";
import { forthEnv, forthRollout } from "../judges/forth_rollouts.ts";

/** The forth env with a slow async reward that measures its own concurrency. */
async function slowEnv(delayMs: (call: number) => number) {
  const exact = await forthEnv();
  const seen = { running: 0, peak: 0, calls: 0, aborted: 0 };
  const env: Env = {
    ...exact,
    async reward(task, rollout, ctx) {
      const call = seen.calls++;
      seen.running++;
      seen.peak = Math.max(seen.peak, seen.running);
      try {
        await new Promise<void>((resolve, reject) => {
          const timer = setTimeout(resolve, delayMs(call));
          ctx?.signal.addEventListener("abort", () => {
            seen.aborted++;
            clearTimeout(timer);
            reject(ctx.signal.reason);
          });
        });
        return exact.reward(task, rollout);
      } finally {
        seen.running--;
      }
    },
  };
  return { env, seen };
}

test("async reward concurrency never exceeds the env's limit, and reaches it", async () => {
  for (const limit of [1, 3, 5]) {
    const { env, seen } = await slowEnv((call) => 10 + ((call * 7) % 5) * 4);
    const gate = new CallGate({ concurrency: limit, timeoutMs: 10_000 });
    const rollouts = await Promise.all(
      Array.from({ length: 12 }, (_, i) => forthRollout(`r${i}`, [i % 2 ? "Answer: 7" : "Answer: 8"], env, gate)),
    );
    expect(rollouts.map((r) => r.error)).toEqual(new Array(12).fill(undefined));
    expect(rollouts.map((r) => r.reward)).toEqual(Array.from({ length: 12 }, (_, i) => (i % 2 ? 1 : 0)));
    expect(seen.calls).toBe(12);
    expect(seen.peak).toBe(limit);
    expect(gate.peak).toBe(limit);
  }
});

test("judging overlaps generation: a finished rollout is scored while the others still generate", async () => {
  const exact = await forthEnv();
  const events: string[] = [];
  const env: Env = {
    ...exact,
    async reward(task, rollout) {
      events.push(`reward ${rollout.id}`);
      await Bun.sleep(20);
      return exact.reward(task, rollout);
    },
  };
  const gate = new CallGate({ concurrency: 4, timeoutMs: 5000 });
  await Promise.all([
    forthRollout("fast", ["Answer: 7"], env, gate, 0).then(() => events.push("fast done")),
    forthRollout("slow", ["Answer: 7"], env, gate, 300).then(() => events.push("slow done")),
  ]);
  expect(events).toEqual(["reward fast", "fast done", "reward slow", "slow done"]);
});

test("a reward past its timeout fails the rollout with the reason and its signal fires; the wait for a slot is not counted", async () => {
  const { env, seen } = await slowEnv((call) => (call === 0 ? 10_000 : 60));
  const gate = new CallGate({ concurrency: 1, timeoutMs: 100 });
  const [stalled, ...rest] = await Promise.all(["a", "b", "c"].map((id) => forthRollout(id, ["Answer: 7"], env, gate)));
  expect(stalled!.error).toBe("reward timed out after 100 ms (the env's reward.timeout_s; env forth)");
  expect(stalled!.stopReason).toBe("error");
  expect(seen.aborted).toBe(1);
  // b and c each waited for the single slot (100 ms, then 160 ms) yet ran within their own 100 ms
  expect(rest.map((r) => [r.error, r.reward])).toEqual([
    [undefined, 1],
    [undefined, 1],
  ]);
});

test("a reward that throws or rejects fails its rollout with the reason", async () => {
  const exact = await forthEnv();
  const throwing: Env = {
    ...exact,
    reward() {
      throw new Error("the grader crashed");
    },
  };
  const rejecting: Env = { ...exact, reward: async () => Promise.reject(new Error("grader said 503")) };
  const nan: Env = { ...exact, reward: async () => ({ reward: Number.NaN, metrics: {} }) };
  const gate = new CallGate({ concurrency: 2, timeoutMs: 1000 });
  expect((await forthRollout("a", ["Answer: 7"], throwing, gate)).error).toBe("reward failed: the grader crashed");
  expect((await forthRollout("b", ["Answer: 7"], rejecting, gate)).error).toBe("reward failed: grader said 503");
  expect((await forthRollout("c", ["Answer: 7"], nan)).error).toBe("env forth returned a non-finite reward (NaN)");
});

test("the gate's timeout error and signal", async () => {
  const gate = new CallGate({ concurrency: 2, timeoutMs: 20 });
  let signal: AbortSignal | undefined;
  const err = await gate
    .run((s) => {
      signal = s;
      return new Promise(() => {});
    })
    .catch((e: Error) => e);
  expect(err).toBeInstanceOf(CallTimeout);
  expect(signal!.aborted).toBe(true);
  expect(gate.running).toBe(0);
  expect(await gate.run(async () => 42)).toBe(42);
  expect(() => new CallGate({ concurrency: 0, timeoutMs: 1 })).toThrow("gate concurrency must be >= 1, got 0");
});
