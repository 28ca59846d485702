// Compiling the native shim against a libtorch: where libtorch is, which version it is, the flags
// that version needs, and an incremental build with a precompiled header. build.ts uses it on a
// development machine; src/native/ffi.ts uses it on a node whose libtorch differs from the one the
// binary's embedded shim was built against (the shim's sources travel inside the binary, and the
// result is cached per libtorch, as PyTorch's own C++ extensions are).
//
// libtorch is taken from, in order: $LIBTORCH (a directory with include/ and lib/: an unpacked
// libtorch zip, or a pip wheel's torch/ folder), Debian's libtorch-dev (/usr/include/torch), or
// the torch package of `python3`. The flags follow the version: PyTorch 2.x headers need C++20
// (2.14's refuse C++17), 1.13's build with C++17. A CUDA libtorch also gets CUDA's and NCCL's
// headers (from $CUDA_HOME, the pip `nvidia/*` packages beside torch, or /usr/local/cuda), so the
// NCCL backend compiles, and -rpath-link to the `nvidia/*/lib` folders that libtorch_cuda's own
// RPATH ($ORIGIN/../../nvidia/...) finds at run time. The shim gets an absolute rpath to
// libtorch: the copy embedded in a binary runs from /tmp, where $ORIGIN means nothing.
import { existsSync, mkdirSync, readdirSync, readFileSync, statSync, writeFileSync } from "node:fs";
import { cpus } from "node:os";
import { dirname, join, resolve } from "node:path";

const DEBIAN_INCLUDE = "/usr/include/torch/csrc/api/include";
const DEBIAN_LIB = "/usr/lib/x86_64-linux-gnu";
const DEBIAN_OPENMP_BLAS = "/usr/lib/x86_64-linux-gnu/openblas-openmp/libblas.so.3";

export interface Torch {
  /** Where it was found, for messages. */
  source: string;
  /** "2.13.0" */
  version: string;
  major: number;
  minor: number;
  includes: string[];
  libDir: string;
  cxx11Abi: number | null;
  cuda: boolean;
  /** CUDA and NCCL headers (CUDA builds). */
  cudaIncludes: string[];
  /** Folders of the CUDA libraries libtorch_cuda needs (pip's nvidia/*\/lib), for the linker. */
  cudaLibDirs: string[];
}

export class ShimBuildError extends Error {}

/** The version libtorch's headers state (torch/version.h moved in 2.x; both places are read). */
function headerVersion(includes: string[]): { version: string; major: number; minor: number } | undefined {
  for (const inc of includes) {
    for (const rel of ["torch/headeronly/version.h", "torch/version.h", "torch/csrc/api/include/torch/version.h"]) {
      const path = join(inc, rel);
      if (!existsSync(path)) continue;
      const text = readFileSync(path, "utf8");
      const num = (key: string) => Number(new RegExp(`#define TORCH_VERSION_${key} (\\d+)`).exec(text)?.[1]);
      const [major, minor, patch] = [num("MAJOR"), num("MINOR"), num("PATCH")];
      if (Number.isFinite(major) && Number.isFinite(minor))
        return { version: `${major}.${minor}.${patch || 0}`, major, minor };
    }
  }
  return undefined;
}

/**
 * CUDA's and NCCL's headers and the pip CUDA library folders for a torch package at `prefix`.
 * ATen's CUDA headers pull in the CUDA libraries' headers (cusparse.h, cublas_v2.h, ...): the pip
 * `nvidia/*` packages beside torch have them all, a toolkit install may have only the runtime's.
 * So every pip package's include/ comes first, then the toolkit's.
 */
function cudaPaths(prefix: string): { cudaIncludes: string[]; cudaLibDirs: string[] } {
  const nvidia = join(dirname(prefix), "nvidia");
  const pipPackages = existsSync(nvidia) ? readdirSync(nvidia).map((name) => join(nvidia, name)) : [];
  const toolkit = [process.env.CUDA_HOME, "/usr/local/cuda", ...globCuda()].filter((d): d is string => Boolean(d));
  const cudaIncludes = [...pipPackages, ...toolkit].map((d) => join(d, "include")).filter((d) => existsSync(d));
  const cudaLibDirs = pipPackages.map((d) => join(d, "lib")).filter((d) => existsSync(d));
  return { cudaIncludes: [...new Set(cudaIncludes)], cudaLibDirs };
}

function globCuda(): string[] {
  if (!existsSync("/usr/local")) return [];
  return readdirSync("/usr/local")
    .filter((name) => /^cuda-\d+/.test(name))
    .sort()
    .reverse()
    .map((name) => join("/usr/local", name));
}

/** A torch package or libtorch folder: `prefix` holds include/ and lib/. */
export function torchAt(prefix: string, source: string, cxx11Abi: number | null = null): Torch {
  const includes = [join(prefix, "include"), join(prefix, "include/torch/csrc/api/include")];
  const version = headerVersion(includes);
  if (!version) throw new ShimBuildError(`${source}: no torch/version.h under ${prefix}/include`);
  const cuda = existsSync(join(prefix, "lib/libtorch_cuda.so"));
  return {
    source,
    ...version,
    includes,
    libDir: join(prefix, "lib"),
    cxx11Abi,
    cuda,
    ...(cuda ? cudaPaths(prefix) : { cudaIncludes: [], cudaLibDirs: [] }),
  };
}

/** The torch package of `python3`, if it has one with headers. */
export function pythonTorch(): Torch | undefined {
  const py = Bun.spawnSync(
    [
      "python3",
      "-c",
      "import torch,os;print(os.path.dirname(torch.__file__));print(int(torch._C._GLIBCXX_USE_CXX11_ABI))",
    ],
    { stdout: "pipe", stderr: "pipe" },
  );
  if (py.exitCode !== 0) return undefined;
  const [dir, abi] = py.stdout.toString().trim().split("\n");
  if (!dir || !existsSync(join(dir, "include/torch"))) return undefined;
  return torchAt(dir, `python torch at ${dir}`, Number(abi));
}

/** libtorch from $LIBTORCH, Debian's libtorch-dev, or python3's torch, in that order. */
export function findTorch(env: string | undefined = process.env.LIBTORCH): Torch {
  if (env) {
    if (!existsSync(join(env, "include/torch")))
      throw new ShimBuildError(
        `LIBTORCH=${env} has no include/torch; point it at a libtorch or torch package directory`,
      );
    return torchAt(resolve(env), `LIBTORCH=${env}`);
  }
  if (existsSync(DEBIAN_INCLUDE)) {
    const version = headerVersion([DEBIAN_INCLUDE]);
    if (!version) throw new ShimBuildError(`no torch/version.h under ${DEBIAN_INCLUDE}`);
    return {
      source: "debian libtorch-dev",
      ...version,
      includes: [DEBIAN_INCLUDE],
      libDir: DEBIAN_LIB,
      cxx11Abi: null,
      cuda: false,
      cudaIncludes: [],
      cudaLibDirs: [],
    };
  }
  const python = pythonTorch();
  if (python) return python;
  throw new ShimBuildError(
    "no libtorch found: run `bash scripts/setup.sh` (installs Debian's libtorch-dev), set LIBTORCH to a libtorch directory, or `pip install torch`",
  );
}

/** A folder name for a libtorch's build outputs: torch-2.13.0-cpu, torch-2.14.1-cuda, ... */
export function torchTag(torch: Torch): string {
  return `torch-${torch.version}-${torch.cuda ? "cuda" : "cpu"}`;
}

export function compileFlags(torch: Torch): string[] {
  const flags = [
    torch.major >= 2 ? "-std=c++20" : "-std=c++17",
    "-O2",
    "-fPIC",
    "-fvisibility=hidden",
    "-Winvalid-pch",
    "-Wall",
    "-Wno-unused-parameter",
    "-Wno-sign-compare",
  ];
  for (const inc of [...torch.includes, ...torch.cudaIncludes]) flags.push("-isystem", inc);
  if (torch.cxx11Abi !== null) flags.push(`-D_GLIBCXX_USE_CXX11_ABI=${torch.cxx11Abi}`);
  if (torch.cuda) flags.push("-DRLX_CUDA=1");
  const glooHeaders =
    torch.includes.some((inc) => existsSync(join(inc, "gloo"))) || existsSync("/usr/include/gloo/algorithm.h");
  if (glooHeaders) flags.push("-DUSE_C10D_GLOO");
  return flags;
}

export function linkFlags(torch: Torch): string[] {
  const flags = [
    "-shared",
    `-L${torch.libDir}`,
    `-Wl,-rpath,${torch.libDir}`,
    ...torch.cudaLibDirs.map((dir) => `-Wl,-rpath-link,${dir}`),
    "-Wl,--no-as-needed",
    "-ltorch",
    "-ltorch_cpu",
    "-lc10",
  ];
  // CUDA kernels register through static initialisers: keep libtorch_cuda even though no symbol is referenced.
  if (torch.cuda) flags.push("-ltorch_cuda", "-lc10_cuda");
  // Debian's libtorch links libblas.so.3, an alternatives link that may name the reference BLAS
  // (30x slower). Naming OpenMP OpenBLAS as our own dependency loads it first, so it wins.
  if (torch.source.startsWith("debian") && existsSync(DEBIAN_OPENMP_BLAS))
    (flags.unshift(`-Wl,-rpath,${dirname(DEBIAN_OPENMP_BLAS)}`), flags.push(DEBIAN_OPENMP_BLAS));
  return flags;
}

function run(cmd: string[], what: string): void {
  const proc = Bun.spawnSync(cmd, { stdout: "pipe", stderr: "pipe" });
  if (proc.exitCode !== 0) {
    const err = proc.stderr.toString().split("\n").slice(0, 40).join("\n");
    throw new ShimBuildError(`${what} failed (exit ${proc.exitCode}):\n$ ${cmd.join(" ")}\n${err}`);
  }
}

async function runParallel(jobs: { cmd: string[]; what: string }[]): Promise<void> {
  const queue = [...jobs];
  const worker = async () => {
    for (let job = queue.shift(); job; job = queue.shift()) {
      const proc = Bun.spawn(job.cmd, { stdout: "inherit", stderr: "pipe" });
      const [code, err] = [await proc.exited, await new Response(proc.stderr).text()];
      if (code !== 0)
        throw new ShimBuildError(
          `${job.what} failed:\n$ ${job.cmd.join(" ")}\n${err.split("\n").slice(0, 60).join("\n")}`,
        );
      if (err.trim()) process.stderr.write(err);
    }
  };
  await Promise.all(Array.from({ length: Math.max(1, cpus().length) }, worker));
}

const mtime = (path: string) => (existsSync(path) ? statSync(path).mtimeMs : 0);

export interface ShimSources {
  /** native/src: *.cpp, *.h, pch.h */
  srcDir: string;
  /** native/include (rlx.h) */
  includeDir: string;
}

/**
 * Builds `outDir/librlx.so` from `sources` against `torch`, recompiling only what changed (the
 * precompiled header when the flags or pch.h change, an object when its source or any header is
 * newer). Writes `outDir/torch.json` (what it was built against). Returns the library's path.
 */
export async function buildShim(
  sources: ShimSources,
  outDir: string,
  torch: Torch,
  log: (line: string) => void = console.log,
): Promise<string> {
  const lib = join(outDir, "librlx.so");
  mkdirSync(outDir, { recursive: true });
  const cflags = compileFlags(torch);
  const stamp = join(outDir, "flags.txt");
  const flagsChanged = !existsSync(stamp) || readFileSync(stamp, "utf8") !== cflags.join(" ");

  const pchHeader = join(outDir, "pch.h");
  const pch = `${pchHeader}.gch`;
  if (flagsChanged || mtime(join(sources.srcDir, "pch.h")) > mtime(pch)) {
    log(`[build] precompiled header (${torch.source}, torch ${torch.version}), once: ~15 s`);
    writeFileSync(pchHeader, readFileSync(join(sources.srcDir, "pch.h")));
    run(["g++", ...cflags, "-x", "c++-header", pchHeader, "-o", pch], "precompiled header");
    writeFileSync(stamp, cflags.join(" "));
  }

  const headers = [
    ...readdirSync(sources.srcDir)
      .filter((f) => f.endsWith(".h"))
      .map((f) => join(sources.srcDir, f)),
    join(sources.includeDir, "rlx.h"),
  ];
  const newestHeader = Math.max(...headers.map(mtime), mtime(pch));
  const cpp = readdirSync(sources.srcDir)
    .filter((f) => f.endsWith(".cpp"))
    .sort();
  const objects = cpp.map((f) => join(outDir, f.replace(/\.cpp$/, ".o")));
  const jobs = cpp
    .map((f, i) => ({ src: join(sources.srcDir, f), obj: objects[i]! }))
    .filter(({ src, obj }) => mtime(obj) < Math.max(mtime(src), newestHeader))
    .map(({ src, obj }) => ({
      cmd: ["g++", ...cflags, "-include", pchHeader, "-c", src, "-o", obj],
      what: `compile ${src}`,
    }));
  if (jobs.length) log(`[build] compiling ${jobs.length} of ${cpp.length} translation units`);
  await runParallel(jobs);

  if (jobs.length || !existsSync(lib) || Math.max(...objects.map(mtime)) > mtime(lib)) {
    run(["g++", ...objects, "-o", lib, ...linkFlags(torch)], "link librlx.so");
    log(`[build] ${lib}`);
  }
  writeFileSync(
    join(outDir, "torch.json"),
    JSON.stringify({ version: torch.version, libDir: torch.libDir, cuda: torch.cuda, source: torch.source }),
  );
  return lib;
}
