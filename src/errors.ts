// The error hierarchy. Every error a user can cause is an RlxError: the CLI prints its message
// (and its fix) without a stack trace and exits non-zero. Anything else is a bug and keeps its stack.
// Also here: zod issues turned into one ConfigError whose lines each name the file, the key path
// the user typed (orchestrator.train.env[1].algo.teacher) and what was expected, so every layer
// that validates a config block (config, algorithms, envs, sft) reports it the same way.
import type { z } from "zod";
import { didYouMean, keysAt } from "./did_you_mean.ts";

export class RlxError extends Error {
  /** What to do about it, printed on its own line under the message. */
  readonly fix?: string;
  constructor(message: string, options: { fix?: string; cause?: unknown } = {}) {
    super(message, { cause: options.cause });
    this.name = new.target.name;
    this.fix = options.fix;
  }
}

/** A bad config file, key, value or override: the message names the file and the key path. */
export class ConfigError extends RlxError {}

/** A command line with an unknown flag, command or extra argument (names it, suggests the closest). */
export class UsageError extends RlxError {}

/** A failed call into the native shim; the message is the shim's (a C++ exception's text). */
export class NativeError extends RlxError {}

/** A model directory or file that cannot be read or written (names the file and tensor). */
export class ModelFileError extends RlxError {}

/** A file whose bytes disagree with the checksum recorded when it was written (names the file and tensor). */
export class ChecksumError extends RlxError {}

/** A write that the disk refused (full, over quota, read-only, I/O error): names what was being written. */
export class DiskError extends RlxError {}

/** An environment that cannot load tasks or run (a bad dataset file, a missing field). */
export class EnvError extends RlxError {}

/** An HTTP endpoint that failed (names the endpoint and the status). */
export class EndpointError extends RlxError {}

export function formatError(err: unknown): string {
  if (err instanceof RlxError) return err.fix ? `${err.message}\n  fix: ${err.fix}` : err.message;
  return err instanceof Error ? (err.stack ?? err.message) : String(err);
}

export function keyPath(path: readonly PropertyKey[]): string {
  let out = "";
  for (const part of path) out += typeof part === "number" ? `[${part}]` : out ? `.${String(part)}` : String(part);
  return out || "(top level)";
}

function describe(issue: z.core.$ZodIssue, schema?: z.ZodType): { path: readonly PropertyKey[]; text: string } {
  switch (issue.code) {
    case "unrecognized_keys": {
      const key = issue.keys[0] ?? "?";
      const more = issue.keys.length > 1 ? ` (and ${issue.keys.slice(1).join(", ")})` : "";
      const known = schema ? keysAt(schema, issue.path) : [];
      const keys = known.length ? ` (the keys here: ${known.join(", ")})` : "";
      const guess = didYouMean(key, known);
      return { path: [...issue.path, key], text: `unknown key${more}${guess ? `;${guess}` : ""}${keys}` };
    }
    case "invalid_type": {
      const missing = issue.message.includes("received undefined");
      return {
        path: issue.path,
        text: missing ? `required (expected ${issue.expected})` : `expected ${issue.expected}: ${issue.message}`,
      };
    }
    default:
      return { path: issue.path, text: issue.message };
  }
}

/** A ConfigError from zod issues: its fix line, and the schema the issues came from (an unknown
 * key is answered with the keys it accepts there, and the closest one). */
export interface IssueOptions {
  fix?: string;
  schema?: z.ZodType;
}

/** One error listing every issue, each as `FILE: key.path: what is wrong`. */
export function configError(
  issues: readonly z.core.$ZodIssue[],
  source: string,
  prefix: readonly PropertyKey[] = [],
  { fix = "edit the file, or override with --set key=value", schema }: IssueOptions = {},
): ConfigError {
  const lines = issues.map((issue) => {
    const { path, text } = describe(issue, schema);
    return `${source}: ${keyPath([...prefix, ...path])}: ${text}`;
  });
  return new ConfigError(lines.join("\n"), { fix });
}
