// Which librlx.so this process loads (src/native/ffi.ts dlopens it):
//
//   1. $RLX_SHIM, when set: a shim built against another libtorch (`bun build.ts --shim --out-dir`).
//   2. The shim this build ships (native/build/librlx.so from source; the embedded copy in a
//      binary), when the libtorch it was built against is the one to use: no $LIBTORCH, or
//      $LIBTORCH naming that same libtorch, and its library folder present on this machine.
//   3. Otherwise the node's own libtorch ($LIBTORCH, Debian's, or python3's torch, as
//      src/native/compile.ts finds it): the shim's sources, shipped inside the binary, are compiled
//      against it once (g++, about a minute) and cached under ~/.cache/rlx/shim/, one folder per
//      libtorch and source version, as PyTorch's own C++ extensions are. A copied `dist/rlx`
//      therefore runs on a GPU node with its own pip-installed PyTorch.
import { createHash } from "node:crypto";
import { existsSync, mkdirSync, writeFileSync } from "node:fs";
import { homedir } from "node:os";
import { dirname, join, resolve } from "node:path";
import { NativeError } from "../errors.ts";
import { buildShim, findTorch, type Torch, torchTag } from "./compile.ts";

interface Shipped {
  path: string;
  builtAgainst: { version: string; libDir: string; cuda: boolean };
  sources: Record<string, string>;
}

async function shipped(): Promise<Shipped> {
  try {
    return (await import("./shim_file.ts")).default;
  } catch (err) {
    throw new NativeError(`the native shim is not built (${(err as Error).message.split("\n")[0]})`, {
      fix: "run `bun build.ts --shim` (or `bash scripts/setup.sh`, which installs libtorch and builds)",
    });
  }
}

/** The libtorch this node should use instead of the shipped shim's, or undefined to use the shipped one. */
export function otherTorch(built: Shipped["builtAgainst"]): Torch | undefined {
  if (!process.env.LIBTORCH && existsSync(join(built.libDir, "libtorch.so"))) return undefined;
  const torch = findTorch();
  return resolve(torch.libDir) === resolve(built.libDir) ? undefined : torch;
}

const cacheRoot = () => join(process.env.XDG_CACHE_HOME || join(homedir(), ".cache"), "rlx", "shim");

/** Compiles the shipped sources against `torch` into the cache (once) and returns the library. */
async function compiledFor(torch: Torch, sources: Record<string, string>): Promise<string> {
  const hash = createHash("sha256").update(torch.libDir).update(JSON.stringify(sources)).digest("hex").slice(0, 12);
  const dir = join(cacheRoot(), `${torchTag(torch)}-${hash}`);
  const lib = join(dir, "librlx.so");
  if (existsSync(lib)) return lib;
  const log = (line: string) => process.stderr.write(`${line}\n`);
  log(`[rlx] compiling the native shim against ${torch.source} (torch ${torch.version}), once, into ${dir}`);
  for (const [name, text] of Object.entries(sources)) {
    const path = join(dir, "sources", name);
    mkdirSync(dirname(path), { recursive: true });
    writeFileSync(path, text);
  }
  try {
    await buildShim({ srcDir: join(dir, "sources/src"), includeDir: join(dir, "sources/include") }, dir, torch, log);
  } catch (err) {
    throw new NativeError(`cannot compile the native shim against ${torch.source}: ${(err as Error).message}`, {
      fix: "install g++ (apt-get install g++), or point RLX_SHIM at a librlx.so built for this libtorch (bun build.ts --shim --out-dir DIR)",
    });
  }
  return lib;
}

/** The path of the librlx.so to dlopen (see the file header). */
export async function shimPath(): Promise<string> {
  const chosen = process.env.RLX_SHIM;
  if (chosen) {
    if (!existsSync(chosen))
      throw new NativeError(`RLX_SHIM=${chosen}: no such file`, {
        fix: "point RLX_SHIM at a built librlx.so (`bun build.ts --shim --out-dir DIR` writes DIR/librlx.so), or unset it",
      });
    return chosen;
  }
  const ship = await shipped();
  let torch: Torch | undefined;
  try {
    torch = otherTorch(ship.builtAgainst);
  } catch (err) {
    throw new NativeError(
      `this rlx's shim was built against torch ${ship.builtAgainst.version} in ${ship.builtAgainst.libDir}; another libtorch is needed here, and none was usable: ${(err as Error).message}`,
      {
        fix: "pip install torch (python3 must import it), or set LIBTORCH to an unpacked libtorch or a torch package folder",
      },
    );
  }
  return torch ? compiledFor(torch, ship.sources) : ship.path;
}
