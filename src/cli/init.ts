// `rlx init`: a random-initialized model in Hugging Face layout (config.json, model.safetensors,
// the byte-level tokenizer with a ChatML template, or a Hub tokenizer's files with --tokenizer;
// --chat-template replaces the template)
// from a preset or a config.json. Seeded: the same
// seed writes byte-identical weights. The work is initModel in src/model/presets.ts.
import { defineCommand } from "citty";
import { ConfigError } from "../errors.ts";

export default defineCommand({
  meta: {
    name: "init",
    description:
      "Create a random-initialized model directory (HF layout; byte tokenizer or --tokenizer DIR) from a preset or config.json",
  },
  args: {
    preset: {
      type: "string",
      description:
        "tiny (~3.3M), small (~25.5M), tiny-bpe (~20M, for a real 128-152k vocabulary) or qwen3-0.6b (the real Qwen3-0.6B shape)",
    },
    tokenizer: {
      type: "string",
      description:
        "A directory with a Hub tokenizer (tokenizer.json, tokenizer_config.json) to use instead of the byte tokenizer",
    },
    "chat-template": {
      type: "string",
      description:
        "A Jinja chat template file to write as chat_template.jinja (it takes precedence over the tokenizer's)",
    },
    config: { type: "string", description: "A Hugging Face config.json to build instead of a preset" },
    out: { type: "string", required: true, description: "Directory to write (must be empty or absent)" },
    seed: { type: "string", default: "0", description: "Initialization seed" },
    dtype: { type: "string", default: "f32", description: "Weights on disk: f32 or bf16" },
    force: { type: "boolean", description: "Replace a non-empty --out" },
    json: { type: "boolean", description: "Print one JSON object" },
  },
  async run({ args }) {
    const seed = Number(args.seed);
    if (!Number.isSafeInteger(seed) || seed < 0)
      throw new ConfigError(`--seed ${args.seed}: expected a non-negative integer`);
    if (args.dtype !== "f32" && args.dtype !== "bf16")
      throw new ConfigError(`--dtype ${args.dtype}: expected f32 or bf16`);
    const { initModel } = await import("../model/presets.ts");
    const result = await initModel({
      preset: args.preset,
      configFile: args.config,
      out: args.out,
      seed,
      dtype: args.dtype,
      force: args.force,
      tokenizerDir: args.tokenizer,
      chatTemplateFile: args["chat-template"],
    });
    if (args.json) {
      console.log(JSON.stringify(result));
      return;
    }
    console.log(
      `${result.name}: ${result.modelType}, ${result.params.toLocaleString("en-US")} params, ${result.dtype}, seed ${result.seed}`,
    );
    console.log(`  dir    ${result.dir}`);
    console.log(`  files  ${result.files.join(", ")}`);
    console.log(`  size   ${(result.tensorBytes / 1e6).toFixed(1)} MB of weights`);
  },
});
