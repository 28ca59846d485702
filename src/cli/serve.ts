// `rlx serve`: an OpenAI-compatible server (vLLM's subset) over the shim, batched.
import { defineCommand } from "citty";
import { NotBuiltError } from "../errors.ts";

export default defineCommand({
  meta: { name: "serve", description: "Serve a model over an OpenAI-compatible HTTP API (completions, chat, prompt logprobs)" },
  args: {
    model: { type: "string", required: true, description: "Model directory (HF layout)" },
    host: { type: "string", default: "127.0.0.1", description: "Address to bind" },
    port: { type: "string", default: "8000", description: "Port" },
    "max-batch": { type: "string", default: "64", description: "Sequences decoded together" },
    policy: { type: "boolean", description: "Accept POST /update_weights (the live policy of a training run)" },
  },
  run() {
    throw new NotBuiltError("rlx serve is not built yet (the HTTP server and scheduler come with the inference issue)");
  },
});
