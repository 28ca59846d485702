// The C ABI and its TypeScript mirror agree: every function declared in native/include/rlx.h is
// in src/native/symbols.ts with the same name, the same arity and the same order, and the built
// shim exports exactly those rlx_* symbols (-fvisibility=hidden keeps everything else private).
import { expect, test } from "bun:test";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { symbols } from "../../src/native/symbols.ts";

const ROOT = join(import.meta.dir, "../..");

function declaredFunctions(): { name: string; arity: number }[] {
  const header = readFileSync(join(ROOT, "native/include/rlx.h"), "utf8")
    .replace(/\/\*[\s\S]*?\*\//g, "")
    .replace(/\/\/.*$/gm, "")
    .replace(/^\s*#.*$/gm, "");
  const found: { name: string; arity: number }[] = [];
  for (const m of header.matchAll(/\b(rlx_\w+)\s*\(([^)]*)\)\s*;/g)) {
    const params = m[2]!.trim();
    const arity = params === "" || params === "void" ? 0 : params.split(",").length;
    found.push({ name: m[1]!, arity });
  }
  return found;
}

test("rlx.h and symbols.ts declare the same functions, in order, with the same arity", () => {
  const header = declaredFunctions();
  const table: { name: string; arity: number }[] = Object.entries(symbols).map(([name, def]) => ({
    name,
    arity: def.args.length,
  }));
  expect(header.length).toBeGreaterThan(4);
  expect(table).toEqual(header);
});

test("the shim exports exactly the functions of rlx.h", () => {
  const nm = Bun.spawnSync(["nm", "-D", "--defined-only", join(ROOT, "native/build/librlx.so")], { stdout: "pipe" });
  expect(nm.exitCode).toBe(0);
  const exported = nm.stdout
    .toString()
    .split("\n")
    .map((line) => line.trim().split(/\s+/)[2])
    .filter((name): name is string => !!name && name.startsWith("rlx_"))
    .sort();
  expect(exported).toEqual(
    declaredFunctions()
      .map((f) => f.name)
      .sort(),
  );
});
