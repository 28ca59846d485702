// `rlx eval`: pass@k / avg@k of a model directory or an endpoint over environments.
import { defineCommand } from "citty";
import { NotBuiltError } from "../errors.ts";

export default defineCommand({
  meta: { name: "eval", description: "Evaluate a model or an OpenAI-compatible endpoint on environments (pass@k table, --json)" },
  args: {
    model: { type: "string", description: "Model directory (HF layout) to evaluate in-process" },
    "base-url": { type: "string", description: "Or an OpenAI-compatible endpoint, e.g. http://127.0.0.1:8000/v1" },
    env: { type: "string", description: "Environment id(s), comma-separated (default: math)" },
    n: { type: "string", description: "Held-out tasks per env (default 64)" },
    k: { type: "string", description: "Samples per task for pass@k (default 8)" },
    json: { type: "boolean", description: "Print results as JSON" },
  },
  run() {
    throw new NotBuiltError("rlx eval is not built yet (it needs the inference client and the rollout loop)", { fix: "see the open issues; `rlx env show` lists tasks today" });
  },
});
