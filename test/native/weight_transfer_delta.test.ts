// What a weight transfer carries besides full weights (src/native/weights.ts), both ends in this
// process as in weight_transfer.test.ts:
//   - with LoRA only the adapters travel (their bytes, nothing of the base), into a served base
//     model given empty adapters of the run's shape (serveAdapters): after the take it holds the
//     trainer's adapters bit for bit and generates as the trainer's model does;
//   - changedOnly sends only the tensors whose bytes changed since the channel's last transfer:
//     the first transfer sends every tensor, a second one after one tensor changed sends that
//     tensor's bytes alone, and the received model equals the trainer's in every tensor;
//   - a server whose copy of an unsent tensor differs from the trainer's refuses the delta, naming
//     the tensor, and keeps serving what it had.
import { afterEach, describe, expect, test } from "bun:test";
import { serveAdapters } from "../../src/model/adapter.ts";
import { distAvailable } from "../../src/native/dist.ts";
import { generate } from "../../src/native/generate.ts";
import { type DType, NativeModel } from "../../src/native/model.ts";
import { sendWeights } from "../../src/native/weights.ts";
import { rng, TINY_FULL } from "./tiny_model.ts";
import { openChannel, untilSettled } from "./weight_channel.ts";

const gloo = await distAvailable("gloo");
const TIMEOUT_MS = 20_000;
const cleanup: Array<() => void> = [];
afterEach(() => {
  for (const free of cleanup.splice(0).reverse()) free();
});

const channel = () => openChannel(cleanup, TIMEOUT_MS);

async function model(dtype: DType = "f32", seed = 1): Promise<NativeModel> {
  const m = await NativeModel.create(TINY_FULL, { dtype, seed });
  cleanup.push(() => m.free());
  return m;
}

const greedy = (m: NativeModel) =>
  generate(
    m,
    [
      [1, 2, 3, 4],
      [7, 9, 11],
    ],
    { temperature: 0, maxNewTokens: 6 },
  ).map((c) => [c.tokens, c.logprobs]);

/** Overwrites `name` with seeded values of scale `scale` (a trained adapter B is no longer zero). */
function fill(m: NativeModel, name: string, seed: number, scale = 0.2) {
  const { shape } = m.param(name);
  const next = rng(seed);
  const values = Float32Array.from({ length: shape.reduce((a, b) => a * b, 1) }, () => (next() - 0.5) * scale);
  m.setParam(name, values, "f32", shape);
}

const bytesOf = (m: NativeModel, names: string[], dtype: DType) =>
  names.reduce((n, name) => n + m.param(name).shape.reduce((a, b) => a * b, 1) * (dtype === "bf16" ? 2 : 4), 0);

const LORA = { rank: 4, alpha: 8, targets: ["q_proj", "v_proj", "down_proj"] };

describe.skipIf(!gloo)("weight transfer: LoRA adapters and deltas", () => {
  for (const dtype of ["f32", "bf16"] as const) {
    test(`${dtype}: with LoRA only the adapters travel, into a served base given empty ones`, async () => {
      const { receiver, sender } = await channel();
      const trained = await model("f32", 5); // the trainer: the base plus trained adapters
      trained.addLora({ ...LORA, dropout: 0 }, 3);
      for (const { name } of trained.loraParams()) fill(trained, name, name.length);
      const served = await model(dtype, 5); // the policy: the same base at its dtype
      const before = greedy(served);
      serveAdapters(served, LORA);
      expect(greedy(served)).toEqual(before); // empty adapters (B = 0) change nothing
      receiver.start(served, 1);
      const result = sendWeights(trained, [sender], { dtype, version: 1, bucketBytes: 512 });
      expect(result).toEqual({ failed: [], error: "", bytes: bytesOf(trained, names(trained), "f32") });
      expect(await untilSettled(receiver)).toBe("ready");
      expect(() => receiver.take(served)).toThrow(/take them with rlx_receiver_take_adapters/);
      receiver.takeAdapters(served);
      expect(receiver.poll()).toBe("idle");
      for (const name of names(trained)) expect(served.getParam(name, "f32")).toEqual(trained.getParam(name, "f32"));
      // what the server generates: the base at its dtype with the trainer's adapters
      const reference = await model(dtype, 5);
      reference.addLora({ ...LORA, dropout: 0 }, 0);
      for (const { name, shape } of reference.loraParams())
        reference.setParam(name, trained.getParam(name, "f32"), "f32", shape);
      expect(greedy(served)).toEqual(greedy(reference));
      expect(greedy(served)).not.toEqual(before);
    });
  }

  test("a served model with adapters of another shape is refused by serveAdapters", async () => {
    const served = await model();
    serveAdapters(served, LORA);
    serveAdapters(served, LORA); // the same shape: left as it is
    expect(() => serveAdapters(served, { ...LORA, rank: 8 })).toThrow(/are not the run's \(rank 8/);
  });

  test("changedOnly: the first transfer sends every tensor, the next only the one that changed", async () => {
    const { receiver, sender } = await channel();
    const trained = await model("f32", 5);
    const all = trained.params().map((p) => p.name);
    let served = await model("bf16", 9);
    const send = (version: number) =>
      sendWeights(trained, [sender], { dtype: "bf16", version, bucketBytes: 1024, changedOnly: true });
    const receive = async (version: number) => {
      expect(await untilSettled(receiver)).toBe("ready");
      served = receiver.take(served);
      cleanup.push(() => served.free());
      for (const name of all) expect(served.getParam(name)).toEqual(trained.getParam(name, "bf16"));
      expect(receiver.poll()).toBe("idle");
      void version;
    };
    receiver.start(served, 1);
    expect(send(1)).toEqual({ failed: [], error: "", bytes: bytesOf(trained, all, "bf16") });
    await receive(1);

    const changed = "model.layers.1.mlp.up_proj.weight";
    fill(trained, changed, 11);
    receiver.start(served, 2);
    expect(send(2)).toEqual({ failed: [], error: "", bytes: bytesOf(trained, [changed], "bf16") });
    await receive(2);

    receiver.start(served, 3); // nothing changed: nothing but the header and the manifest travels
    expect(send(3)).toEqual({ failed: [], error: "", bytes: 0 });
    await receive(3);
  });

  test("a server whose copy of an unsent tensor differs refuses the delta, naming it, and keeps its weights", async () => {
    const { receiver, sender } = await channel();
    const trained = await model("f32", 5);
    let served = await model("f32", 9);
    receiver.start(served, 1);
    expect(sendWeights(trained, [sender], { dtype: "f32", version: 1, changedOnly: true }).failed).toEqual([]);
    expect(await untilSettled(receiver)).toBe("ready");
    served = receiver.take(served);
    cleanup.push(() => served.free());
    const drifted = "model.layers.0.input_layernorm.weight"; // the server's copy no longer the trainer's
    fill(served, drifted, 4);
    const held = served.getParam(drifted);
    fill(trained, "model.embed_tokens.weight", 12);
    receiver.start(served, 2);
    expect(sendWeights(trained, [sender], { dtype: "f32", version: 2, changedOnly: true }).failed).toEqual([]);
    await expect(untilSettled(receiver)).rejects.toThrow(new RegExp(`this server's ${drifted} \\(not sent`));
    expect(served.getParam(drifted)).toEqual(held);
    expect(served.getParam("model.embed_tokens.weight")).not.toEqual(trained.getParam("model.embed_tokens.weight"));
  });
});

const names = (m: NativeModel) => m.loraParams().map((p) => p.name);
