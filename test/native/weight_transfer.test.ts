// Weight transfer over c10d Gloo (src/native/weights.ts), both ends in this process: the receiver
// joins and receives on its native thread while this thread sends, as a trainer and a policy
// server do across processes (test/e2e/train_weight_transfer.test.ts runs those).
//   - the received model is bit-identical to the sender's weights converted to the wire dtype
//     (f32, bf16), on a model with every optional tensor (biases, q/k norms), with buckets that
//     split parameters and batch small ones;
//   - its generation (greedy tokens and logprobs) equals the sender's converted model's;
//   - a refused transfer (another version, another dtype, another architecture) fails both ends
//     with the reason, and the channel then carries the next transfer;
//   - poll() reports "busy" while the sender has not sent: the receiving side never blocks;
//   - a transfer received into the model the previous one replaced overwrites every byte of it;
//   - on a GPU (scripts/gpu_check.sh), models in CUDA memory go through Gloo's host buffers whole;
//   - a receiver whose trainer never comes reports the join's failure within its timeout;
//   - a sender killed mid-transfer fails the receiver's transfer (the served model is untouched),
//     and a receiver that dies mid-transfer fails the sender's channel, naming it, within the
//     timeout (fixtures/weight_peer.ts is the other process).
import { afterEach, describe, expect, test } from "bun:test";
import { join } from "node:path";
import { distAvailable, ProcessGroup } from "../../src/native/dist.ts";
import { generate } from "../../src/native/generate.ts";
import { type DType, NativeModel } from "../../src/native/model.ts";
import { runtimeInfo } from "../../src/native/runtime.ts";
import { freePort as freePortOn } from "../../src/processes/trainer_ranks.ts";
import { sendWeights, WeightReceiver } from "../../src/native/weights.ts";
import { TINY, TINY_FULL } from "./tiny_model.ts";
import { PEER_MODEL } from "./fixtures/weight_peer_model.ts";
import { openChannel, untilSettled } from "./weight_channel.ts";

const PEER = join(import.meta.dir, "fixtures/weight_peer.ts");

/** Starts fixtures/weight_peer.ts in `role` and waits for its first line. */
async function peer(role: "send" | "recv", port: number) {
  const proc = Bun.spawn([process.execPath, PEER, role, String(port)], {
    env: { ...process.env, RLX_THREADS: "1" },
    stdout: "pipe",
    stderr: "pipe",
  });
  cleanup.push(() => proc.kill("SIGKILL"));
  const reader = proc.stdout.getReader();
  let out = "";
  while (!out.includes("\n")) {
    const { done, value } = await reader.read();
    if (done) throw new Error(`the peer exited first:\n${await new Response(proc.stderr).text()}`);
    out += new TextDecoder().decode(value);
  }
  reader.releaseLock();
  return { proc, first: out.trim() };
}

const gloo = await distAvailable("gloo");
const cuda = (await runtimeInfo()).cuda;
const TIMEOUT_MS = 20_000;
const cleanup: Array<() => void> = [];
afterEach(() => {
  for (const free of cleanup.splice(0).reverse()) free();
});

const freePort = () => freePortOn("127.0.0.1");

const channel = (timeoutMs = TIMEOUT_MS) => openChannel(cleanup, timeoutMs);

async function model(config = TINY_FULL, dtype: DType = "f32", seed = 1, device = "cpu"): Promise<NativeModel> {
  const m = await NativeModel.create(config, { dtype, seed, device });
  cleanup.push(() => m.free());
  return m;
}

/** Greedy tokens and their logprobs of a few prompts. */
function greedy(m: NativeModel) {
  const prompts = [
    [1, 2, 3, 4],
    [7, 9, 11],
  ];
  return generate(m, prompts, { temperature: 0, maxNewTokens: 6 }).map((c) => [c.tokens, c.logprobs]);
}

describe.skipIf(!gloo)("weight transfer over a c10d channel", () => {
  for (const dtype of ["f32", "bf16"] as const) {
    test(`${dtype}: the received weights are the sender's, bit for bit, and generate the same`, async () => {
      const { receiver, sender } = await channel();
      const trained = await model(TINY_FULL, "f32", 5); // the trainer's float32 masters
      const served = await model(TINY_FULL, dtype, 9); // the server's current (older) weights
      receiver.start(served, 3);
      expect(receiver.poll()).toBe("busy"); // nothing sent yet, and nothing blocks here
      // 256-byte buckets: the embedding and projections are split, norms and biases batched
      const result = sendWeights(trained, [sender], { dtype, version: 3, bucketBytes: 256 });
      expect(result).toMatchObject({ failed: [], error: "" });
      expect(await untilSettled(receiver)).toBe("ready");
      const received = receiver.take(served);
      cleanup.push(() => received.free());
      expect(receiver.poll()).toBe("idle");
      const reference = await model(TINY_FULL, dtype); // what a load from disk at `dtype` holds
      for (const { name, shape } of trained.params())
        reference.setParam(name, trained.getParam(name, dtype), dtype, shape);
      for (const { name } of trained.params()) expect(received.getParam(name)).toEqual(reference.getParam(name));
      expect(greedy(received)).toEqual(greedy(reference));
      expect(greedy(received)).not.toEqual(greedy(served));
    });
  }

  test.skipIf(!cuda)("GPU models over Gloo: sent from and received into CUDA memory, bit for bit", async () => {
    const { receiver, sender } = await channel();
    const trained = await model(TINY_FULL, "f32", 5, "cuda");
    const served = await model(TINY_FULL, "bf16", 9, "cuda");
    receiver.start(served, 2);
    expect(sendWeights(trained, [sender], { dtype: "bf16", version: 2, bucketBytes: 256 })).toMatchObject({
      failed: [],
      error: "",
    });
    expect(await untilSettled(receiver)).toBe("ready");
    const received = receiver.take(served);
    cleanup.push(() => received.free());
    expect(received.device).toBe("cuda");
    for (const { name } of trained.params()) expect(received.getParam(name)).toEqual(trained.getParam(name, "bf16"));
  });

  test("a transfer into the model the last one replaced overwrites all of it; `into` of another shape is refused", async () => {
    const { receiver, sender } = await channel();
    const served = await model(TINY_FULL, "f32", 9);
    const first = await model(TINY_FULL, "f32", 5);
    receiver.start(served, 1);
    sendWeights(first, [sender], { dtype: "f32", version: 1, bucketBytes: 512 });
    expect(await untilSettled(receiver)).toBe("ready");
    const retired = receiver.take(served); // holds version 1 now
    const second = await model(TINY_FULL, "f32", 6);
    expect(() => receiver.start(served, 2, served)).toThrow(/another model of the served model's shape/);
    const small = await model(TINY, "f32");
    expect(() => receiver.start(served, 2, small)).toThrow(/another model of the served model's shape/);
    receiver.start(served, 2, retired);
    expect(() => retired.handle).toThrow(/freed/); // the receiver owns it now
    sendWeights(second, [sender], { dtype: "f32", version: 2, bucketBytes: 512 });
    expect(await untilSettled(receiver)).toBe("ready");
    const received = receiver.take(served);
    cleanup.push(() => received.free());
    for (const { name } of second.params()) expect(received.getParam(name)).toEqual(second.getParam(name));
  });

  test("a refused transfer names the reason on both ends, and the channel carries the next one", async () => {
    const { receiver, sender } = await channel();
    const trained = await model(TINY_FULL, "f32", 5);
    const served = await model(TINY_FULL, "f32", 9);
    const cases: Array<[string, () => Promise<NativeModel>, number, RegExp]> = [
      ["another version", async () => served, 4, /told to receive another version.*expects version 4/],
      ["another dtype", () => model(TINY_FULL, "bf16"), 3, /another dtype/],
      ["another architecture", () => model(TINY, "f32"), 3, /another size/],
    ];
    for (const [, like, want, pattern] of cases) {
      receiver.start(await like(), want);
      const result = sendWeights(trained, [sender], { dtype: "f32", version: 3, bucketBytes: 4096 });
      expect(result.failed).toEqual([0]);
      expect(result.error).toMatch(pattern);
      await expect(untilSettled(receiver)).rejects.toThrow(/refused the transfer/);
    }
    // a refusal ends the transfer on both ends at the header: the channel carries the next one
    receiver.start(served, 3);
    expect(sendWeights(trained, [sender], { dtype: "f32", version: 3, bucketBytes: 4096 })).toMatchObject({
      failed: [],
      error: "",
    });
    expect(await untilSettled(receiver)).toBe("ready");
    receiver.take(served).free();
  });

  test("a receiver whose trainer never joins fails within its timeout, naming the channel", async () => {
    const port = freePort();
    const receiver = await WeightReceiver.open({ host: "127.0.0.1", port, timeoutMs: 1500 });
    cleanup.push(() => receiver.close());
    const start = performance.now();
    let error = "";
    while (!error) {
      try {
        receiver.poll();
      } catch (err) {
        error = (err as Error).message;
      }
      await Bun.sleep(20);
    }
    expect(error).toContain(`cannot join the weight channel tcp://127.0.0.1:${port}`);
    expect(performance.now() - start).toBeLessThan(15_000);
    const served = await model();
    expect(() => receiver.start(served, 1)).toThrow(/cannot be used again/);
  });

  test("a sender killed mid-transfer fails the receiver's transfer; the served model is untouched", async () => {
    const port = freePort();
    const receiver = await WeightReceiver.open({ host: "127.0.0.1", port, timeoutMs: TIMEOUT_MS });
    cleanup.push(() => receiver.close());
    const served = await model(PEER_MODEL, "f32", 7);
    const before = served.getParam("model.embed_tokens.weight");
    receiver.start(served, 1);
    const { proc, first } = await peer("send", port);
    expect(first).toBe("sending");
    await Bun.sleep(100);
    expect(receiver.poll()).toBe("busy"); // mid-transfer
    proc.kill("SIGKILL");
    await expect(untilSettled(receiver)).rejects.toThrow(/receiving version 1 over the weight channel .* failed/);
    expect(served.getParam("model.embed_tokens.weight")).toEqual(before);
    expect(() => receiver.start(served, 2)).toThrow(/cannot be used again.*--resume/);
  });

  test("a receiver that dies mid-transfer fails the sender's channel, naming it", async () => {
    const port = freePort();
    const sending = await model(PEER_MODEL, "f32", 2);
    const join = ProcessGroup.create({
      rank: 0,
      worldSize: 2,
      store: { type: "tcp", host: "127.0.0.1", port },
      timeoutMs: 10_000,
    });
    const { proc, first } = await peer("recv", port); // exits with code 3 200 ms into the transfer
    const sender = await join;
    cleanup.push(() => sender.free());
    expect(first).toBe("receiving");
    const start = performance.now();
    const result = sendWeights(sending, [sender], { dtype: "f32", version: 1, bucketBytes: 1024 });
    expect(await proc.exited).toBe(3);
    expect(result.failed).toEqual([0]);
    expect(result.error).toMatch(/^channel 0: (message \d+ of \d+|the trailer) failed/);
    expect(performance.now() - start).toBeLessThan(15_000);
  });
});
