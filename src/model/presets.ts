// Named model shapes for `rlx init`, and initModel, which builds one (or a given config.json) as a
// random-initialized model in Hugging Face layout with the byte-level tokenizer
// (src/model/byte_tokenizer.ts), or with a real tokenizer copied from a directory
// (init_tokenizer.ts). The shim is imported lazily so listing presets never loads libtorch.
//
//   tiny        ~3.3M params. Qwen3 layout (q/k norm, no biases): hidden 256, 4 layers, 4 heads,
//               2 kv heads, head_dim 64, ffn 768, vocab 320. The shape of the prototype whose
//               measured rates docs/architecture.md §7 gives, so those are the baseline. Embeddings untied: with a
//               320-token vocabulary tying saves only 82k parameters, and the untied path is the one
//               the qwen3-0.6b preset does not exercise, so tests cover both.
//   tiny-long   tiny with max_position_embeddings 131072 and rope_theta 1e6 (as Qwen's long-context
//               models: a slower rotation keeps distant positions apart): the long-context tests
//               and bench/long_context.ts.
//   small       ~25.5M params. Same layout: hidden 512, 8 layers, 8 heads, 4 kv heads, ffn 1536.
//   tiny-bpe    ~20M params, for a real 128-152k Hub vocabulary (`--tokenizer DIR`): the Qwen3-0.6B
//               layout scaled down (hidden 128, 4 layers, 4/2 heads, head_dim 32, ffn 384, tied,
//               rope_theta 1e6). The embedding is ~19.4M of it: on `tiny` a real vocabulary would
//               make the (untied) embeddings 10x the rest; tying halves it and a narrow hidden
//               keeps the LM head affordable on a CPU.
//   qwen3-0.6b  The real Qwen3-0.6B shape (hidden 1024, 28 layers, 16/8 heads, head_dim 128, ffn 3072,
//               vocab 151936, rope_theta 1e6, tied, max positions 40960). Its real tokenizer is not
//               available offline, so it gets the byte tokenizer but keeps the 151936-row embedding,
//               so a checkpoint has exactly the shapes of the real model (ids >= 259 are unused).
//
// Tiny vocabularies are 259 (bytes + 3 specials) rounded up to a multiple of 64 = 320.
import { existsSync, readdirSync, readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { Template } from "@huggingface/jinja";
import { ConfigError } from "../errors.ts";
import { BYTE_TOKENIZER_SIZE, ENDOFTEXT_ID, IM_END_ID, paddedVocabSize, writeByteTokenizer } from "./byte_tokenizer.ts";
import { type ModelConfig, modelConfigFromShim, parseModelConfig, type ShimModelConfig } from "./config.ts";

/** A named shape `rlx init --preset` can build. */
export interface Preset {
  name: string;
  description: string;
  config: ModelConfig;
}

// Keys transformers reads that the shim does not need; written into config.json.
const EXTRA = {
  initializer_range: 0.02,
  bos_token_id: ENDOFTEXT_ID,
  eos_token_id: IM_END_ID,
  pad_token_id: ENDOFTEXT_ID,
  attention_dropout: 0.0,
  use_cache: true,
  use_sliding_window: false,
  sliding_window: null,
};

function qwen3(shim: Omit<ShimModelConfig, "attention_bias" | "qk_norm">): ModelConfig {
  return modelConfigFromShim("qwen3", { ...shim, attention_bias: false, qk_norm: true }, EXTRA);
}

const BYTE_VOCAB = paddedVocabSize(BYTE_TOKENIZER_SIZE);

function tinyShape(): Omit<ShimModelConfig, "attention_bias" | "qk_norm"> {
  return {
    vocab_size: BYTE_VOCAB,
    hidden_size: 256,
    intermediate_size: 768,
    num_hidden_layers: 4,
    num_attention_heads: 4,
    num_key_value_heads: 2,
    head_dim: 64,
    rms_norm_eps: 1e-6,
    rope_theta: 10000,
    max_position_embeddings: 4096,
    tie_word_embeddings: false,
  };
}

/** The presets, by name. */
export const PRESETS: Record<string, Preset> = {
  tiny: {
    name: "tiny",
    description: "~3.3M params, Qwen3 layout, byte vocabulary: CPU tests and laptop runs",
    config: qwen3(tinyShape()),
  },
  small: {
    name: "small",
    description: "~25.5M params, Qwen3 layout, byte vocabulary: CPU experiments that can learn something",
    config: qwen3({
      vocab_size: BYTE_VOCAB,
      hidden_size: 512,
      intermediate_size: 1536,
      num_hidden_layers: 8,
      num_attention_heads: 8,
      num_key_value_heads: 4,
      head_dim: 64,
      rms_norm_eps: 1e-6,
      rope_theta: 10000,
      max_position_embeddings: 4096,
      tie_word_embeddings: false,
    }),
  },
  "tiny-long": {
    name: "tiny-long",
    description: "tiny's shape with 128k positions (rope_theta 1e6): long-context tests and benches (docs/scaling.md)",
    config: qwen3({
      ...tinyShape(),
      rope_theta: 1000000,
      max_position_embeddings: 131072,
    }),
  },
  "tiny-bpe": {
    name: "tiny-bpe",
    description:
      "~20M params, Qwen3 layout, tied, sized for a 128-152k Hub vocabulary (init it with --tokenizer): CPU runs with a real tokenizer",
    config: qwen3({
      vocab_size: 151936,
      hidden_size: 128,
      intermediate_size: 384,
      num_hidden_layers: 4,
      num_attention_heads: 4,
      num_key_value_heads: 2,
      head_dim: 32,
      rms_norm_eps: 1e-6,
      rope_theta: 1000000,
      max_position_embeddings: 40960,
      tie_word_embeddings: true,
    }),
  },
  "qwen3-0.6b": {
    name: "qwen3-0.6b",
    description: "the real Qwen3-0.6B shape (596M params) with the byte tokenizer: GPU runs and load tests",
    config: qwen3({
      vocab_size: 151936,
      hidden_size: 1024,
      intermediate_size: 3072,
      num_hidden_layers: 28,
      num_attention_heads: 16,
      num_key_value_heads: 8,
      head_dim: 128,
      rms_norm_eps: 1e-6,
      rope_theta: 1000000,
      max_position_embeddings: 40960,
      tie_word_embeddings: true,
    }),
  },
};

/** The preset of that name, or a ConfigError listing the names. */
export function getPreset(name: string): Preset {
  const preset = PRESETS[name];
  if (!preset) {
    throw new ConfigError(`unknown preset "${name}"`, { fix: `use one of: ${Object.keys(PRESETS).join(", ")}` });
  }
  return preset;
}

/** Parameter count of a shape, in closed form (the shim's parameter list must agree). */
export function countParams(shim: ShimModelConfig): number {
  const h = shim.hidden_size;
  const q = shim.num_attention_heads * shim.head_dim;
  const kv = shim.num_key_value_heads * shim.head_dim;
  const attention =
    h * q + 2 * h * kv + q * h + (shim.attention_bias ? q + 2 * kv : 0) + (shim.qk_norm ? 2 * shim.head_dim : 0);
  const layer = attention + 3 * h * shim.intermediate_size + 2 * h;
  const embeddings = shim.vocab_size * h * (shim.tie_word_embeddings ? 1 : 2);
  return embeddings + shim.num_hidden_layers * layer + h;
}

/** What `rlx init` builds. */
export interface InitOptions {
  /** Exactly one of preset and configFile. */
  preset?: string;
  /** A Hugging Face config.json to build instead of a preset. */
  configFile?: string;
  out: string;
  seed: number;
  dtype: "f32" | "bf16";
  /** Replace a non-empty `out`. */
  force?: boolean;
  /** A directory with tokenizer.json and tokenizer_config.json to use instead of the byte tokenizer. */
  tokenizerDir?: string;
  /** A Jinja chat template file, written as chat_template.jinja (which takes precedence over the tokenizer's own). */
  chatTemplateFile?: string;
}

/** What `rlx init` built. */
export interface InitResult {
  name: string;
  modelType: string;
  params: number;
  dtype: "f32" | "bf16";
  seed: number;
  dir: string;
  files: string[];
  tensorBytes: number;
}

/**
 * Builds a random-initialized model (the shim's seeded init: normal(0, 0.02) in float32, norms 1)
 * and writes it with the byte tokenizer. The same seed gives byte-identical safetensors.
 */
export async function initModel(options: InitOptions): Promise<InitResult> {
  if ((options.preset === undefined) === (options.configFile === undefined)) {
    throw new ConfigError("give exactly one of --preset and --config", {
      fix: `presets: ${Object.keys(PRESETS).join(", ")}`,
    });
  }
  let config = options.preset !== undefined ? getPreset(options.preset).config : readConfigFile(options.configFile!);
  const { readInitTokenizer, initVocabSize } = await import("./init_tokenizer.ts");
  const hub = options.tokenizerDir === undefined ? undefined : readInitTokenizer(options.tokenizerDir);
  if (hub) {
    // A preset takes the tokenizer's (padded) size; a config.json keeps its own, which must hold it.
    const vocab = options.preset !== undefined ? initVocabSize(hub) : config.shim.vocab_size;
    if (vocab < hub.size)
      throw new ConfigError(`vocab_size ${vocab} is smaller than the tokenizer's ${hub.size} tokens`, {
        fix: `set vocab_size to at least ${hub.size} in ${options.configFile}`,
      });
    // A preset's token ids are the byte tokenizer's: replaced by the tokenizer's. A config.json keeps its own.
    const { bos_token_id: _b, eos_token_id: _e, pad_token_id: _p, ...rest } = config.source;
    const source =
      options.preset !== undefined
        ? { ...rest, ...hub.tokenIds, vocab_size: vocab }
        : { ...hub.tokenIds, ...config.source };
    config = parseModelConfig(source, options.preset ?? options.configFile!);
  } else if (config.shim.vocab_size < BYTE_TOKENIZER_SIZE) {
    throw new ConfigError(
      `vocab_size ${config.shim.vocab_size} is smaller than the byte tokenizer's ${BYTE_TOKENIZER_SIZE} tokens`,
      {
        fix: `set vocab_size to at least ${BYTE_TOKENIZER_SIZE} (${paddedVocabSize(BYTE_TOKENIZER_SIZE)} keeps matmuls aligned)`,
      },
    );
  }
  const chatTemplate = options.chatTemplateFile === undefined ? undefined : readChatTemplate(options.chatTemplateFile);
  if (existsSync(options.out) && readdirSync(options.out).length > 0 && !options.force) {
    throw new ConfigError(`${options.out} exists and is not empty`, {
      fix: "choose another --out, or pass --force to replace it",
    });
  }
  const { NativeModel } = await import("../native/model.ts");
  const { saveModel } = await import("./hf.ts");
  using model = await NativeModel.create(config.shim, { dtype: "f32", seed: options.seed });
  const writeTokenizer = hub ? (dir: string) => hub.copyInto(dir) : writeByteTokenizer;
  const writeExtra = (dir: string) => {
    writeTokenizer(dir);
    if (chatTemplate !== undefined) writeFileSync(join(dir, "chat_template.jinja"), chatTemplate);
  };
  const saved = saveModel(model, options.out, { dtype: options.dtype, config, writeExtra });
  return {
    name: options.preset ?? options.configFile!,
    modelType: config.modelType,
    params: countParams(config.shim),
    dtype: options.dtype,
    seed: options.seed,
    dir: saved.dir,
    files: saved.files,
    tensorBytes: saved.tensorBytes,
  };
}

/** A template file's text, parsed once here so that a syntax error names the file now, not at the first render. */
function readChatTemplate(file: string): string {
  if (!existsSync(file))
    throw new ConfigError(`--chat-template ${file}: not found`, { fix: "pass a Jinja template file" });
  const text = readFileSync(file, "utf8");
  try {
    new Template(text);
  } catch (err) {
    throw new ConfigError(`--chat-template ${file}: not a valid Jinja template (${(err as Error).message})`, {
      fix: "fix the template; the Hub's chat_template.jinja files are examples",
    });
  }
  return text;
}

function readConfigFile(file: string): ModelConfig {
  if (!existsSync(file)) throw new ConfigError(`${file}: not found`, { fix: "pass the path of a config.json" });
  let json: unknown;
  try {
    json = JSON.parse(readFileSync(file, "utf8"));
  } catch (err) {
    throw new ConfigError(`${file}: not valid JSON (${(err as Error).message})`, { fix: "fix the file" });
  }
  return parseModelConfig(json, file);
}
