// Typed reads of a JSON request body, each failure an InvalidRequestError naming the field, so
// every 400 the server sends says which field is wrong and why (vLLM's `param`). Unknown fields
// are ignored as vLLM ignores them; fields rlx knows but does not implement are rejected by
// `unsupported` only when a non-neutral value would change the result.
import { InvalidRequestError } from "../engine/errors.ts";

type Json = Record<string, unknown>;

const describe = (value: unknown) =>
  value === null
    ? "null"
    : Array.isArray(value)
      ? "an array"
      : typeof value === "string"
        ? `the string ${JSON.stringify(value).slice(0, 40)}`
        : `${typeof value} ${String(value)}`;

export class Fields {
  constructor(readonly body: Json) {}

  static parse(text: string): Fields {
    let body: unknown;
    try {
      body = JSON.parse(text);
    } catch (err) {
      throw new InvalidRequestError(`the request body is not valid JSON: ${(err as Error).message}`, null);
    }
    if (typeof body !== "object" || body === null || Array.isArray(body))
      throw new InvalidRequestError("the request body must be a JSON object", null);
    return new Fields(body as Json);
  }

  has(name: string): boolean {
    return this.body[name] !== undefined && this.body[name] !== null;
  }

  raw(name: string): unknown {
    return this.body[name] ?? undefined;
  }

  number(name: string, fallback: number, range: { min?: number; max?: number; minExclusive?: boolean } = {}): number {
    const value = this.raw(name);
    if (value === undefined) return fallback;
    if (typeof value !== "number" || !Number.isFinite(value))
      throw new InvalidRequestError(`${name} must be a number, got ${describe(value)}`, name);
    const { min, max, minExclusive } = range;
    if (min !== undefined && (minExclusive ? value <= min : value < min))
      throw new InvalidRequestError(`${name} must be ${minExclusive ? ">" : ">="} ${min}, got ${value}`, name);
    if (max !== undefined && value > max)
      throw new InvalidRequestError(`${name} must be <= ${max}, got ${value}`, name);
    return value;
  }

  int(name: string, fallback: number, range?: { min?: number; max?: number }): number;
  int(name: string, fallback: number | undefined, range?: { min?: number; max?: number }): number | undefined;
  int(name: string, fallback: number | undefined, range: { min?: number; max?: number } = {}): number | undefined {
    const value = this.raw(name);
    if (value === undefined) return fallback;
    if (typeof value !== "number" || !Number.isInteger(value))
      throw new InvalidRequestError(`${name} must be an integer, got ${describe(value)}`, name);
    return this.number(name, 0, range);
  }

  bool(name: string, fallback: boolean): boolean {
    const value = this.raw(name);
    if (value === undefined) return fallback;
    if (typeof value !== "boolean")
      throw new InvalidRequestError(`${name} must be true or false, got ${describe(value)}`, name);
    return value;
  }

  string(name: string): string | undefined {
    const value = this.raw(name);
    if (value === undefined) return undefined;
    if (typeof value !== "string")
      throw new InvalidRequestError(`${name} must be a string, got ${describe(value)}`, name);
    return value;
  }

  object(name: string): Json | undefined {
    const value = this.raw(name);
    if (value === undefined) return undefined;
    if (typeof value !== "object" || Array.isArray(value))
      throw new InvalidRequestError(`${name} must be an object, got ${describe(value)}`, name);
    return value as Json;
  }

  /** A string or a list of strings (stop). */
  strings(name: string): string[] {
    const value = this.raw(name);
    if (value === undefined) return [];
    if (typeof value === "string") return value === "" ? [] : [value];
    if (!Array.isArray(value) || value.some((s) => typeof s !== "string"))
      throw new InvalidRequestError(`${name} must be a string or a list of strings, got ${describe(value)}`, name);
    return (value as string[]).filter((s) => s !== "");
  }

  /** A list of integer token ids in 0..vocab-1. */
  tokenIds(name: string, vocab: number): number[] {
    const value = this.raw(name);
    if (value === undefined) return [];
    return checkTokenIds(value, name, vocab);
  }

  /**
   * Rejects a field rlx does not implement when its value is not the neutral one (the one that
   * leaves the result unchanged), so a client never silently gets a result it did not ask for.
   */
  unsupported(name: string, isNeutral: (value: unknown) => boolean, what = "is not supported by rlx serve"): void {
    const value = this.raw(name);
    if (value !== undefined && !isNeutral(value))
      throw new InvalidRequestError(`${name} ${what} (got ${JSON.stringify(value).slice(0, 60)})`, name);
  }
}

export function checkTokenIds(value: unknown, name: string, vocab: number): number[] {
  if (!Array.isArray(value))
    throw new InvalidRequestError(`${name} must be a list of token ids, got ${describe(value)}`, name);
  value.forEach((t, i) => {
    if (typeof t !== "number" || !Number.isInteger(t))
      throw new InvalidRequestError(`${name}[${i}] must be an integer token id, got ${describe(t)}`, name);
    if (t < 0 || t >= vocab)
      throw new InvalidRequestError(`${name}[${i}] is token id ${t}, outside the vocabulary 0..${vocab - 1}`, name);
  });
  return value as number[];
}
