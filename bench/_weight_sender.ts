// The trainer's side of bench/weight_transfer.ts, in its own process (as the trainer is): loads
// the model in float32, joins the channels whose ports it is given, then for each command line on
// stdin publishes one step and answers one JSON line:
//   disk DIR VERSION   saveModel(DIR) as the run's dtype: {"write": seconds}
//   c10d VERSION       sendWeights on every channel:      {"send": seconds}
//   bun bench/_weight_sender.ts MODEL_DIR DTYPE PORT[,PORT...] DEVICE
import { saveModel, loadModel } from "../src/model/hf.ts";
import { ProcessGroup } from "../src/native/dist.ts";
import { sendWeights } from "../src/native/weights.ts";

const [modelDir, dtype, portList, device] = process.argv.slice(2) as [string, "f32" | "bf16", string, string];
const model = await loadModel(modelDir, { dtype: "f32", device });
const channels: ProcessGroup[] = [];
for (const port of portList.split(",").filter(Boolean))
  channels.push(
    await ProcessGroup.create({
      rank: 0,
      worldSize: 2,
      store: { type: "tcp", host: "127.0.0.1", port: Number(port) },
      timeoutMs: 600_000,
    }),
  );
console.log(JSON.stringify({ ready: true }));
for await (const line of console) {
  const [what, a, b] = line.trim().split(" ");
  const start = performance.now();
  if (what === "disk") {
    saveModel(model, a!, { dtype, sourceDir: modelDir });
    console.log(JSON.stringify({ write: (performance.now() - start) / 1000, version: Number(b) }));
  } else if (what === "c10d") {
    const result = sendWeights(model, channels, { dtype, version: Number(a) });
    if (result.failed.length) throw new Error(result.error);
    console.log(JSON.stringify({ send: (performance.now() - start) / 1000 }));
  } else break;
}
