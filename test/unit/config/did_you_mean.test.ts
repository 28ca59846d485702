// The suggestions for a misspelled name (src/did_you_mean.ts): a close known name is offered, a far
// one is not, and the keys a schema accepts are found at a key path through the wrappers a config
// schema uses (default, optional, transform, lazy, union, array, record).
import { expect, test } from "bun:test";
import { z } from "zod";
import { didYouMean, keysAt } from "../../../src/did_you_mean.ts";

test("didYouMean offers the closest name only when it is close", () => {
  expect(didYouMean("lrr", ["lr", "betas", "eps"])).toBe(' did you mean "lr"?');
  expect(didYouMean("batch_tokenz", ["steps", "batch_tokens"])).toBe(' did you mean "batch_tokens"?');
  expect(didYouMean("bogus", ["digits", "operations"])).toBe("");
  expect(didYouMean("x", [])).toBe("");
});

test("keysAt walks a schema along a key path through its wrappers", () => {
  const leaf = z.strictObject({ c: z.string(), d: z.number() });
  const schema = z
    .strictObject({
      a: z.number().default(1),
      b: leaf.optional(),
      list: z.array(z.strictObject({ e: z.number() })),
      either: z.discriminatedUnion("type", [
        z.strictObject({ type: z.literal("x"), p: z.number() }),
        z.strictObject({ type: z.literal("y"), q: z.number() }),
      ]),
      shaped: z.strictObject({ f: z.number() }).transform((v) => v.f),
      later: z.lazy(() => z.strictObject({ g: z.number() })),
      named: z.record(z.string(), z.strictObject({ h: z.number() })),
    })
    .refine(() => true);
  expect(keysAt(schema, [])).toEqual(["a", "b", "list", "either", "shaped", "later", "named"]);
  expect(keysAt(schema, ["b"])).toEqual(["c", "d"]);
  expect(keysAt(schema, ["list", 3])).toEqual(["e"]);
  expect(keysAt(schema, ["either"])).toEqual(["type", "p", "q"]);
  expect(keysAt(schema, ["shaped"])).toEqual(["f"]);
  expect(keysAt(schema, ["later"])).toEqual(["g"]);
  expect(keysAt(schema, ["named", "any"])).toEqual(["h"]);
  expect(keysAt(schema, ["a"])).toEqual([]);
  expect(keysAt(schema, ["nowhere", "deeper"])).toEqual([]);
  const before = z.preprocess((v) => v, z.strictObject({ i: z.number() }));
  expect(keysAt(before, [])).toEqual(["i"]);
  expect(keysAt(z.intersection(z.object({ j: z.number() }), z.object({ k: z.number() })), [])).toEqual(["j", "k"]);
  // an env file may bring any schema with safeParse: no keys known, no crash
  expect(keysAt({ safeParse: () => ({ success: true }) } as never, ["x"])).toEqual([]);
});
