// `rlx push MODEL_DIR --repo namespace/name`: uploads a model directory rlx wrote to the Hugging
// Face Hub (src/hub/push.ts) with a token from the environment ($HF_TOKEN, or --token-var NAME),
// never from the command line, where `ps` would show it. Progress per file on stderr, a summary
// (or --json) on stdout.
import { defineCommand } from "citty";
import { ConfigError } from "../errors.ts";

export default defineCommand({
  meta: {
    name: "push",
    description:
      "Upload a model directory (RUN_DIR/weights/step_N, a checkpoint's trainer/model, rlx sft's model/) to a Hugging Face Hub repo, creating it if needed",
  },
  args: {
    dir: {
      type: "positional",
      required: true,
      description: "Model directory to upload (config.json, weights, tokenizer)",
    },
    repo: {
      type: "string",
      required: true,
      description: "Hub repo, namespace/name (created as a model repo if missing)",
    },
    "hub-url": { type: "string", description: "Hub endpoint (default https://huggingface.co, or $HF_ENDPOINT)" },
    "token-var": { type: "string", default: "HF_TOKEN", description: "Environment variable holding a write token" },
    branch: { type: "string", description: "Branch to commit to (default main)" },
    private: { type: "boolean", description: "Create the repo private (an existing repo keeps its visibility)" },
    message: { type: "string", description: "Commit title (default: rlx push MODEL_DIR)" },
    json: { type: "boolean", description: "Print the result as one JSON object" },
  },
  async run({ args }) {
    const token = process.env[args["token-var"]];
    if (!token)
      throw new ConfigError(`$${args["token-var"]} is not set: pushing needs a Hub token with write access`, {
        fix: `export ${args["token-var"]}=hf_... (https://huggingface.co/settings/tokens), or name another variable with --token-var`,
      });
    const { pushModel } = await import("../hub/push.ts");
    const seen = new Set<string>();
    const result = await pushModel({
      dir: args.dir,
      repo: args.repo,
      token,
      hubUrl: args["hub-url"] ?? process.env.HF_ENDPOINT,
      ...(args.branch ? { branch: args.branch } : {}),
      private: args.private ?? false,
      ...(args.message ? { message: args.message } : {}),
      onProgress: ({ phase, path, progress }) => {
        const line = path ? `${phase} ${path}${progress === 1 ? " done" : ""}` : phase;
        if (progress !== undefined && progress < 1) return; // one line per file and state
        if (!seen.has(line)) (seen.add(line), console.error(`push: ${line}`));
      },
    });
    if (args.json) console.log(JSON.stringify(result));
    else
      console.log(
        `pushed ${result.files.length} files (${(result.bytes / 2 ** 20).toFixed(1)} MiB) to ${result.url}${result.created ? " (created)" : ""} in ${result.seconds.toFixed(1)} s; commit ${result.commit}`,
      );
  },
});
