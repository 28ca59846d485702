// build.ts: compiles the native shim (native/ -> native/build/librlx.so) with a precompiled header
// and incremental objects, then the single binary (src/main.ts -> dist/rlx) with the shim embedded.
//
//   bun build.ts                      shim + dist/rlx
//   bun build.ts --shim               the shim only (enough for `bun run src/main.ts` and tests)
//   bun build.ts --shim --out-dir D   the shim into D instead (one folder per libtorch; load it
//                                     with RLX_SHIM=D/librlx.so)
//
// Which libtorch, and the flags its version needs: src/native/compile.ts ($LIBTORCH, Debian's
// libtorch-dev, or python3's torch).
import { mkdirSync, readdirSync, readFileSync, writeFileSync } from "node:fs";
import { join, resolve } from "node:path";
import { buildShim, findTorch, ShimBuildError } from "./src/native/compile.ts";

const ROOT = import.meta.dir;
const SOURCES = { srcDir: join(ROOT, "native/src"), includeDir: join(ROOT, "native/include") };

function flag(name: string): string | undefined {
  const at = process.argv.indexOf(name);
  return at > 0 ? process.argv[at + 1] : undefined;
}

/** native/build/shim_sources.json: the shim's sources, shipped inside the binary so that a node
 * with another libtorch can compile its own (src/native/shim_path.ts). */
function writeShippedSources(outDir: string): void {
  const files: Record<string, string> = {};
  for (const name of readdirSync(SOURCES.srcDir)
    .filter((f) => /\.(cpp|h)$/.test(f))
    .sort())
    files[`src/${name}`] = readFileSync(join(SOURCES.srcDir, name), "utf8");
  files["include/rlx.h"] = readFileSync(join(SOURCES.includeDir, "rlx.h"), "utf8");
  writeFileSync(join(outDir, "shim_sources.json"), JSON.stringify(files));
}

function buildBinary(): void {
  mkdirSync(join(ROOT, "dist"), { recursive: true });
  const out = resolve(ROOT, "dist/rlx");
  const proc = Bun.spawnSync([process.execPath, "build", "--compile", join(ROOT, "src/main.ts"), "--outfile", out], {
    stdout: "pipe",
    stderr: "pipe",
  });
  if (proc.exitCode !== 0) throw new ShimBuildError(`bun build --compile failed:\n${proc.stderr.toString()}`);
  console.log(`[build] ${out}`);
}

if (import.meta.main) {
  try {
    const outDir = resolve(flag("--out-dir") ?? join(ROOT, "native/build"));
    await buildShim(SOURCES, outDir, findTorch());
    writeShippedSources(outDir);
    if (!process.argv.includes("--shim")) buildBinary();
  } catch (err) {
    console.error(`[build] ${(err as Error).message}`);
    process.exit(1);
  }
}
