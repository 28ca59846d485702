// Which engines weight_transfer = "c10d" reaches (docs/engines.md, "Weights in memory"): rlx's own
// policies and SGLang resolve; vLLM is refused naming the fix; LoRA, deltas and lost_server =
// "continue" are rlx's (refused with SGLang); "continue" with a long transfer timeout warns.
import { expect, test } from "bun:test";
import { mkdtempSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { loadConfig } from "../../../src/config/load.ts";
import { ConfigError } from "../../../src/errors.ts";

const dir = mkdtempSync(join(tmpdir(), "rlx-transfer-config-"));
let counter = 0;

function load(inference: string, extra = ""): ReturnType<typeof loadConfig> {
  const path = join(dir, `c${counter++}.toml`);
  writeFileSync(
    path,
    `[model]\npath = "models/tiny"\n${extra}\n[inference]\nweight_transfer = "c10d"\n${inference}\n[[orchestrator.train.env]]\nid = "math"\n`,
  );
  return loadConfig(path);
}

const urls = `base_urls = ["http://127.0.0.1:30000/v1"]`;

test("rlx and SGLang resolve with c10d", () => {
  expect(load("").config.inference.weight_transfer).toBe("c10d");
  const { config } = load(`engine = "sglang"\n${urls}`);
  expect(config.inference.engine).toBe("sglang");
  expect(config.inference.weight_transfer).toBe("c10d");
});

test("vLLM with c10d is refused, naming the fix", () => {
  const err = (() => {
    try {
      load(`engine = "vllm"\n${urls}`);
    } catch (e) {
      return e as ConfigError;
    }
  })();
  expect(err).toBeInstanceOf(ConfigError);
  expect(err!.message).toContain('inference.engine is "vllm"');
  expect(err!.fix).toContain('weight_transfer = "disk"');
});

test("LoRA with c10d: rlx policies receive the adapters; SGLang is refused", () => {
  expect(load("", "[model.lora]\nrank = 4").config.model.lora?.rank).toBe(4);
  expect(() => load(`engine = "sglang"\n${urls}`, "[model.lora]\nrank = 4\nmerged = true")).toThrow(
    "[model.lora] trains adapters",
  );
});

test("deltas and lost_server = continue are rlx's; continue with a long timeout warns", () => {
  expect(() => load(`engine = "sglang"\n${urls}\ntransfer_delta = "tensors"`)).toThrow("are rlx serve's");
  expect(() => load(`engine = "sglang"\n${urls}\nlost_server = "continue"`)).toThrow("are rlx serve's");
  expect(load(`lost_server = "continue"`).warnings.join()).toContain("consider transfer_timeout_s = 30");
  expect(load(`lost_server = "continue"\ntransfer_timeout_s = 30`).warnings).toEqual([]);
});
