// `system_prompt` in the built-in envs' args: each env's own prompt by default (none for math),
// the given text instead, and no system message at all for "" (the tool schema, which the chat
// template adds from the env's tools, is not part of it). The task's user turn is unchanged.
import { expect, test } from "bun:test";
import { createEnv } from "../../../src/envs/index.ts";
import forth, { FORTH_SYSTEM_PROMPT } from "../../../src/envs/forth/index.ts";
import math from "../../../src/envs/math/index.ts";
import search, { SEARCH_SYSTEM_PROMPT } from "../../../src/envs/search/index.ts";
import type { EnvDefinition } from "../../../src/envs/types.ts";

const cases: Array<[string, EnvDefinition, string | undefined]> = [
  ["forth", forth, FORTH_SYSTEM_PROMPT],
  ["search", search, SEARCH_SYSTEM_PROMPT],
  ["math", math, undefined],
];

for (const [name, definition, defaultPrompt] of cases) {
  test(`${name}: system_prompt replaces the env's system message, "" drops it`, async () => {
    const first = async (args: Record<string, unknown>) =>
      (await (await createEnv(definition, { train_size: 20, eval_size: 5, ...args })).load("train", 0))[0]!;
    const byDefault = await first({});
    const custom = await first({ system_prompt: "Be brief." });
    const none = await first({ system_prompt: "" });
    const question = byDefault.prompt.at(-1)!;
    expect(question.role).toBe("user");
    expect(byDefault.prompt.length).toBe(defaultPrompt === undefined ? 1 : 2);
    if (defaultPrompt !== undefined) expect(byDefault.prompt[0]).toEqual({ role: "system", content: defaultPrompt });
    expect(custom.prompt).toEqual([{ role: "system", content: "Be brief." }, question]);
    expect(none.prompt).toEqual([question]);
  });
}
