// Turns zod issues into one ConfigError whose lines each name the file, the key path the user
// typed (orchestrator.train.env[1].algo.teacher) and what was expected.
import type { z } from "zod";
import { ConfigError } from "../errors.ts";

export function keyPath(path: readonly PropertyKey[]): string {
  let out = "";
  for (const part of path) out += typeof part === "number" ? `[${part}]` : out ? `.${String(part)}` : String(part);
  return out || "(top level)";
}

function describe(issue: z.core.$ZodIssue): { path: readonly PropertyKey[]; text: string } {
  switch (issue.code) {
    case "unrecognized_keys": {
      const key = issue.keys[0] ?? "?";
      const more = issue.keys.length > 1 ? ` (and ${issue.keys.slice(1).join(", ")})` : "";
      return { path: [...issue.path, key], text: `unknown key${more}; check the spelling against the schema (src/config/schema.ts)` };
    }
    case "invalid_type": {
      const missing = issue.message.includes("received undefined");
      return { path: issue.path, text: missing ? `required (expected ${issue.expected})` : `expected ${issue.expected}: ${issue.message}` };
    }
    default:
      return { path: issue.path, text: issue.message };
  }
}

/** One error listing every issue, each as `FILE: key.path: what is wrong`. */
export function configError(issues: readonly z.core.$ZodIssue[], source: string, prefix: readonly PropertyKey[] = []): ConfigError {
  const lines = issues.map((issue) => {
    const { path, text } = describe(issue);
    return `${source}: ${keyPath([...prefix, ...path])}: ${text}`;
  });
  return new ConfigError(lines.join("\n"), { fix: "edit the file, or override with --set key=value" });
}
