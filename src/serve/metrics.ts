// GET /metrics: the engine's load and its K/V cache in Prometheus' text format (what vLLM and
// SGLang servers expose, so the same scrapers and dashboards read it). The K/V lines say how much
// of the budget running sequences hold, how much they may still take (up to their prompt +
// max_tokens), and how much only kept prefixes hold (given up when needed): a request waits
// while its own worst case does not fit what is left.
import type { Engine } from "../engine/engine.ts";

export function metricsText(engine: Engine): string {
  const { running, queued } = engine.load;
  const cache = engine.cacheStats;
  const kv = cache.kv;
  const metrics: [name: string, type: "gauge" | "counter", help: string, value: number][] = [
    ["rlx_requests_running", "gauge", "Sequences generating now", running],
    ["rlx_requests_waiting", "gauge", "Requests queued for a slot or for K/V", queued],
    ["rlx_kv_budget_tokens", "gauge", "The K/V cache's budget in tokens (--kv-tokens)", kv.budgetTokens],
    ["rlx_kv_running_tokens", "gauge", "K/V tokens the running sequences hold", kv.runningTokens],
    ["rlx_kv_reserved_tokens", "gauge", "K/V tokens the running sequences may still take", kv.reservedTokens],
    ["rlx_kv_kept_tokens", "gauge", "K/V tokens only kept prefixes hold (given up when needed)", kv.keptTokens],
    [
      "rlx_kv_usage_ratio",
      "gauge",
      "Running + reserved K/V tokens over the budget",
      (kv.runningTokens + kv.reservedTokens) / kv.budgetTokens,
    ],
    ["rlx_prompt_tokens_total", "counter", "Prompt tokens admitted", cache.promptTokens],
    [
      "rlx_prefix_reused_tokens_total",
      "counter",
      "Prompt tokens continued from kept K/V instead of prefilled",
      cache.reusedTokens,
    ],
    ["rlx_generation_tokens_total", "counter", "Tokens generated", engine.stats.generatedTokens],
    ["rlx_policy_version", "gauge", "The weights version serving now", engine.version],
  ];
  return metrics
    .map(([name, type, help, value]) => `# HELP ${name} ${help}\n# TYPE ${name} ${type}\n${name} ${value}\n`)
    .join("");
}
