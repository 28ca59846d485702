// GET /metrics: the engine's load and its K/V cache in Prometheus' text format (what vLLM and
// SGLang servers expose, so the same scrapers and dashboards read it). The K/V lines say how much
// of the budget running sequences hold, how much they may still take (up to their prompt +
// max_tokens), and how much only kept prefixes hold (given up when needed): a request waits
// while its own worst case does not fit what is left.
import type { Engine } from "../engine/engine.ts";

const METRICS: [name: string, type: "gauge" | "counter", help: string][] = [
  ["rlx_requests_running", "gauge", "Sequences generating now"],
  ["rlx_requests_waiting", "gauge", "Requests queued for a slot or for K/V"],
  ["rlx_kv_budget_tokens", "gauge", "The K/V cache's budget in tokens (--kv-tokens)"],
  ["rlx_kv_running_tokens", "gauge", "K/V tokens the running sequences hold"],
  ["rlx_kv_reserved_tokens", "gauge", "K/V tokens the running sequences may still take"],
  ["rlx_kv_kept_tokens", "gauge", "K/V tokens only kept prefixes hold (given up when needed)"],
  ["rlx_kv_usage_ratio", "gauge", "Running + reserved K/V tokens over the budget"],
  ["rlx_prompt_tokens_total", "counter", "Prompt tokens admitted"],
  ["rlx_prefix_reused_tokens_total", "counter", "Prompt tokens continued from kept K/V instead of prefilled"],
  ["rlx_generation_tokens_total", "counter", "Tokens generated"],
  ["rlx_policy_version", "gauge", "The weights version serving now"],
];

export function metricsText(engine: Engine): string {
  const { running, queued } = engine.load;
  const cache = engine.cacheStats;
  const kv = cache.kv;
  const values: Record<string, number> = {
    rlx_requests_running: running,
    rlx_requests_waiting: queued,
    rlx_kv_budget_tokens: kv.budgetTokens,
    rlx_kv_running_tokens: kv.runningTokens,
    rlx_kv_reserved_tokens: kv.reservedTokens,
    rlx_kv_kept_tokens: kv.keptTokens,
    rlx_kv_usage_ratio: (kv.runningTokens + kv.reservedTokens) / kv.budgetTokens,
    rlx_prompt_tokens_total: cache.promptTokens,
    rlx_prefix_reused_tokens_total: cache.reusedTokens,
    rlx_generation_tokens_total: engine.stats.generatedTokens,
    rlx_policy_version: engine.version,
  };
  return METRICS.map(
    ([name, type, help]) => `# HELP ${name} ${help}\n# TYPE ${name} ${type}\n${name} ${values[name]}\n`,
  ).join("");
}
