// Which libtorch a binary's shim is for (src/native/shim_path.ts, src/native/compile.ts), on fake
// libtorch folders (headers stating a version, an empty libtorch.so): the shipped shim when its own
// libtorch is the one to use, another libtorch (to compile for) when $LIBTORCH names one, and the
// flags each version needs. Nothing is loaded or compiled here.
import { afterEach, expect, test } from "bun:test";
import { mkdirSync, mkdtempSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { compileFlags, torchAt } from "../../../src/native/compile.ts";
import { otherTorch } from "../../../src/native/shim_path.ts";

const root = mkdtempSync(join(tmpdir(), "rlx-shim-path-"));
const saved = process.env.LIBTORCH;
afterEach(() => (saved === undefined ? delete process.env.LIBTORCH : (process.env.LIBTORCH = saved)));

/** A folder shaped like a pip wheel's torch/ (2.x: headeronly/version.h) or a 1.13 libtorch. */
function fakeTorch(name: string, version: string): string {
  const prefix = join(root, name);
  const [major, minor, patch] = version.split(".");
  const header = major === "1" ? "torch/csrc/api/include/torch/version.h" : "torch/headeronly/version.h";
  mkdirSync(join(prefix, "include", header, ".."), { recursive: true });
  mkdirSync(join(prefix, "lib"), { recursive: true });
  writeFileSync(
    join(prefix, "include", header),
    `#define TORCH_VERSION_MAJOR ${major}\n#define TORCH_VERSION_MINOR ${minor}\n#define TORCH_VERSION_PATCH ${patch}\n`,
  );
  writeFileSync(join(prefix, "lib/libtorch.so"), "");
  return prefix;
}

const built = fakeTorch("built", "1.13.1");
const wheel = fakeTorch("wheel", "2.13.0");
const shipped = { version: "1.13.1", libDir: join(built, "lib"), cuda: false };

test("the shipped shim when nothing asks for another libtorch and its own is there", () => {
  delete process.env.LIBTORCH;
  expect(otherTorch(shipped)).toBeUndefined();
  process.env.LIBTORCH = built;
  expect(otherTorch(shipped)).toBeUndefined();
});

test("$LIBTORCH naming another libtorch: that one, with its version", () => {
  process.env.LIBTORCH = wheel;
  const torch = otherTorch(shipped)!;
  expect([torch.version, torch.major, torch.libDir, torch.cuda]).toEqual(["2.13.0", 2, join(wheel, "lib"), false]);
});

test("C++20 for 2.x headers, C++17 for 1.13", () => {
  expect(compileFlags(torchAt(wheel, "wheel"))).toContain("-std=c++20");
  expect(compileFlags(torchAt(built, "built"))).toContain("-std=c++17");
});

test("a folder without headers is refused by name", () => {
  mkdirSync(join(root, "empty/include/torch"), { recursive: true });
  expect(() => torchAt(join(root, "empty"), "LIBTORCH=empty")).toThrow(/LIBTORCH=empty: no torch\/version.h/);
});
