// `rlx sft`: supervised fine-tuning on a JSONL of prompt/completion pairs or chat messages.
import { defineCommand } from "citty";
import { NotBuiltError } from "../errors.ts";

export default defineCommand({
  meta: { name: "sft", description: "Supervised fine-tuning on a JSONL dataset (prompt/completion or messages)" },
  args: {
    model: { type: "string", required: true, description: "Model directory to start from" },
    data: { type: "string", required: true, description: "JSONL dataset (e.g. from `rlx env demos`)" },
    out: { type: "string", required: true, description: "Output model directory" },
    steps: { type: "string", description: "Optimizer steps" },
    lr: { type: "string", description: "Learning rate" },
  },
  run() {
    throw new NotBuiltError("rlx sft is not built yet (it comes with the end-to-end training issue)");
  },
});
