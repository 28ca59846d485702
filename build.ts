// build.ts: compiles the native shim (native/ -> native/build/librlx.so) with a precompiled
// header and incremental objects, then the single binary (src/main.ts -> dist/rlx) with the shim
// embedded. `bun build.ts --shim` stops after the shim (enough for `bun run src/main.ts` and tests).
//
// libtorch is taken from, in order: $LIBTORCH (a directory with include/ and lib/), Debian's
// libtorch-dev (/usr/include/torch), or the torch package of `python3` (GPU nodes). The shim gets
// an absolute rpath to it, because the embedded copy runs from /tmp where $ORIGIN means nothing.
import { existsSync, mkdirSync, readdirSync, readFileSync, statSync, writeFileSync } from "node:fs";
import { cpus } from "node:os";
import { dirname, join, resolve } from "node:path";

const ROOT = import.meta.dir;
const SRC = join(ROOT, "native/src");
const BUILD = join(ROOT, "native/build");
const LIB = join(BUILD, "librlx.so");
const DEBIAN_OPENMP_BLAS = "/usr/lib/x86_64-linux-gnu/openblas-openmp/libblas.so.3";

interface Torch {
  source: string;
  includes: string[];
  libDir: string;
  cxx11Abi: number | null;
  cuda: boolean;
}

function run(cmd: string[], what: string): string {
  const proc = Bun.spawnSync(cmd, { stdout: "pipe", stderr: "pipe" });
  if (proc.exitCode !== 0) {
    const err = proc.stderr.toString().split("\n").slice(0, 40).join("\n");
    throw new Error(`${what} failed (exit ${proc.exitCode}):\n$ ${cmd.join(" ")}\n${err}`);
  }
  return proc.stdout.toString();
}

function torchFromPrefix(source: string, prefix: string): Torch {
  const inc = join(prefix, "include");
  return {
    source,
    includes: [inc, join(inc, "torch/csrc/api/include")],
    libDir: join(prefix, "lib"),
    cxx11Abi: null,
    cuda: existsSync(join(prefix, "lib/libtorch_cuda.so")),
  };
}

function findTorch(): Torch {
  const env = process.env.LIBTORCH;
  if (env) {
    if (!existsSync(join(env, "include/torch")))
      throw new Error(`LIBTORCH=${env} has no include/torch; point it at a libtorch or torch package directory`);
    return torchFromPrefix(`LIBTORCH=${env}`, env);
  }
  if (existsSync("/usr/include/torch/csrc")) {
    return {
      source: "debian libtorch-dev",
      includes: ["/usr/include/torch/csrc/api/include"],
      libDir: "/usr/lib/x86_64-linux-gnu",
      cxx11Abi: null,
      cuda: false,
    };
  }
  const py = Bun.spawnSync(
    [
      "python3",
      "-c",
      "import torch,os;print(os.path.dirname(torch.__file__));print(int(torch._C._GLIBCXX_USE_CXX11_ABI))",
    ],
    { stdout: "pipe", stderr: "pipe" },
  );
  if (py.exitCode === 0) {
    const [dir, abi] = py.stdout.toString().trim().split("\n");
    if (dir && existsSync(join(dir, "include/torch")))
      return { ...torchFromPrefix(`python torch at ${dir}`, dir), cxx11Abi: Number(abi) };
  }
  throw new Error(
    "no libtorch found: run `bash scripts/setup.sh` (installs Debian's libtorch-dev), or set LIBTORCH to a libtorch directory",
  );
}

function compileFlags(torch: Torch): string[] {
  const flags = [
    "-std=c++17",
    "-O2",
    "-fPIC",
    "-fvisibility=hidden",
    "-Winvalid-pch",
    "-Wall",
    "-Wno-unused-parameter",
    "-Wno-sign-compare",
  ];
  for (const inc of torch.includes) flags.push("-isystem", inc);
  if (torch.cxx11Abi !== null) flags.push(`-D_GLIBCXX_USE_CXX11_ABI=${torch.cxx11Abi}`);
  if (torch.cuda) flags.push("-DRLX_CUDA=1");
  const glooHeaders =
    torch.includes.some((inc) => existsSync(join(inc, "gloo"))) || existsSync("/usr/include/gloo/algorithm.h");
  if (glooHeaders) flags.push("-DUSE_C10D_GLOO");
  return flags;
}

function linkFlags(torch: Torch): string[] {
  const flags = [
    "-shared",
    `-L${torch.libDir}`,
    `-Wl,-rpath,${torch.libDir}`,
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

const mtime = (path: string) => (existsSync(path) ? statSync(path).mtimeMs : 0);

async function runParallel(jobs: { cmd: string[]; what: string }[]): Promise<void> {
  const width = Math.max(1, cpus().length);
  const queue = [...jobs];
  const worker = async () => {
    for (let job = queue.shift(); job; job = queue.shift()) {
      const proc = Bun.spawn(job.cmd, { stdout: "inherit", stderr: "pipe" });
      const [code, err] = [await proc.exited, await new Response(proc.stderr).text()];
      if (code !== 0)
        throw new Error(`${job.what} failed:\n$ ${job.cmd.join(" ")}\n${err.split("\n").slice(0, 60).join("\n")}`);
      if (err.trim()) process.stderr.write(err);
    }
  };
  await Promise.all(Array.from({ length: width }, worker));
}

export async function buildShim(): Promise<string> {
  const torch = findTorch();
  mkdirSync(BUILD, { recursive: true });
  const cflags = compileFlags(torch);
  const stamp = join(BUILD, "flags.txt");
  const flagsChanged = !existsSync(stamp) || readFileSync(stamp, "utf8") !== cflags.join(" ");

  const pchHeader = join(BUILD, "pch.h");
  const pch = `${pchHeader}.gch`;
  if (flagsChanged || mtime(join(SRC, "pch.h")) > mtime(pch)) {
    console.log(`[build] precompiled header (${torch.source}), once: ~15 s`);
    writeFileSync(pchHeader, readFileSync(join(SRC, "pch.h")));
    run(["g++", ...cflags, "-x", "c++-header", pchHeader, "-o", pch], "precompiled header");
    writeFileSync(stamp, cflags.join(" "));
  }

  const headers = [
    ...readdirSync(SRC)
      .filter((f) => f.endsWith(".h"))
      .map((f) => join(SRC, f)),
    join(ROOT, "native/include/rlx.h"),
  ];
  const newestHeader = Math.max(...headers.map(mtime), mtime(pch));
  const sources = readdirSync(SRC)
    .filter((f) => f.endsWith(".cpp"))
    .sort();
  const objects = sources.map((f) => join(BUILD, f.replace(/\.cpp$/, ".o")));
  const jobs = sources
    .map((f, i) => ({ src: join(SRC, f), obj: objects[i]! }))
    .filter(({ src, obj }) => mtime(obj) < Math.max(mtime(src), newestHeader))
    .map(({ src, obj }) => ({
      cmd: ["g++", ...cflags, "-include", pchHeader, "-c", src, "-o", obj],
      what: `compile ${src}`,
    }));
  if (jobs.length) console.log(`[build] compiling ${jobs.length} of ${sources.length} translation units`);
  await runParallel(jobs);

  if (jobs.length || !existsSync(LIB) || Math.max(...objects.map(mtime)) > mtime(LIB)) {
    run(["g++", ...objects, "-o", LIB, ...linkFlags(torch)], "link librlx.so");
    console.log(`[build] ${LIB}`);
  }
  return LIB;
}

async function buildBinary(): Promise<void> {
  mkdirSync(join(ROOT, "dist"), { recursive: true });
  const out = resolve(ROOT, "dist/rlx");
  const bun = process.execPath;
  run([bun, "build", "--compile", join(ROOT, "src/main.ts"), "--outfile", out], "bun build --compile");
  console.log(`[build] ${out}`);
}

if (import.meta.main) {
  try {
    await buildShim();
    if (!process.argv.includes("--shim")) await buildBinary();
  } catch (err) {
    console.error(`[build] ${(err as Error).message}`);
    process.exit(1);
  }
}
