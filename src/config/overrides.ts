// `--set a.b.c=value` overrides, applied to the parsed TOML before validation. The value is typed
// by the schema at that path: a string key takes the text as is, anything else parses as a TOML
// value (numbers, booleans, arrays, inline tables), so `--set trainer.optim.lr=3e-4` is a number
// and `--set model.path=123` stays a string. List items are addressed as env[0] or env.0.
import { parse as parseToml } from "smol-toml";
import type { z } from "zod";
import { ConfigError } from "../errors.ts";
import { configSchema } from "./schema.ts";

type Json = Record<string, unknown>;

export function parseKeyPath(key: string): (string | number)[] {
  return key
    .replace(/\[(\d+)\]/g, ".$1")
    .split(".")
    .filter(Boolean)
    .map((part) => (/^\d+$/.test(part) ? Number(part) : part));
}

/** The schema node at a path, through defaults, optionals and arrays; undefined past loose objects. */
function schemaAt(schema: z.core.$ZodType, path: (string | number)[]): z.core.$ZodType | undefined {
  let node: z.core.$ZodType | undefined = schema;
  for (const part of path) {
    node = node && unwrap(node);
    if (!node) return undefined;
    const def = node._zod.def as {
      type: string;
      shape?: Record<string, z.core.$ZodType>;
      element?: z.core.$ZodType;
      items?: z.core.$ZodType[];
    };
    if (def.type === "object") node = def.shape?.[String(part)];
    else if (def.type === "array") node = def.element;
    else if (def.type === "tuple" && typeof part === "number") node = def.items?.[part];
    else return undefined;
  }
  return node && unwrap(node);
}

function unwrap(node: z.core.$ZodType): z.core.$ZodType {
  let def = node._zod.def as { type: string; innerType?: z.core.$ZodType };
  while (def.innerType && ["default", "prefault", "optional", "nullable", "readonly"].includes(def.type)) {
    node = def.innerType;
    def = node._zod.def as typeof def;
  }
  return node;
}

function parseValue(text: string, expectsString: boolean): unknown {
  if (expectsString) return text;
  try {
    return parseToml(`v = ${text}`).v;
  } catch {
    return text; // a bare word: let the schema say what it expected
  }
}

/** Applies each "key=value" to the raw config object in place. */
export function applyOverrides(raw: Json, overrides: readonly string[]): void {
  for (const item of overrides) {
    const eq = item.indexOf("=");
    if (eq <= 0) throw new ConfigError(`--set ${item}: expected key=value (for example --set trainer.optim.lr=3e-4)`);
    const path = parseKeyPath(item.slice(0, eq).trim());
    const target = schemaAt(configSchema, path);
    const value = parseValue(item.slice(eq + 1).trim(), target?._zod.def.type === "string");
    let node: Json = raw;
    for (const [i, part] of path.slice(0, -1).entries()) {
      const next = node[part as string];
      if (next === undefined) {
        const created: Json = typeof path[i + 1] === "number" ? ([] as unknown as Json) : {};
        node[part as string] = created;
        node = created;
      } else if (typeof next === "object" && next !== null) {
        node = next as Json;
      } else {
        throw new ConfigError(`--set ${item}: ${path.slice(0, i + 1).join(".")} is a ${typeof next}, not a table`);
      }
    }
    node[path[path.length - 1] as string] = value;
  }
}
