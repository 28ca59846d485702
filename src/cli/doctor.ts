// `rlx doctor`: what this machine runs rlx on (libtorch, threads, BLAS, CUDA), a measured float32
// matmul rate, and each problem found with its fix. The BLAS check matters most: Debian's
// default reference BLAS is ~30x slower than OpenBLAS (docs/architecture.md §7, measured facts).
import { defineCommand } from "citty";
import { formatError } from "../errors.ts";
import type { RuntimeInfo } from "../native/runtime.ts";

/** The CUDA runtime version ("13.0"), "CUDA build, no GPU visible", or "no (CPU libtorch)". */
function cudaLine(rt: RuntimeInfo): string {
  if (rt.cuda) return `${Math.floor(rt.cuda_runtime / 1000)}.${(rt.cuda_runtime % 1000) / 10}`;
  return rt.cuda_build ? "CUDA build, no GPU visible" : "no (CPU libtorch)";
}

const gpuLine = (rt: RuntimeInfo) =>
  rt.gpus.length
    ? rt.gpus.map((g) => `${g.name} (${g.memory_gib.toFixed(0)} GiB, sm ${g.capability})`).join("; ")
    : "-";

interface Finding {
  ok: boolean;
  what: string;
  fix?: string;
}

export default defineCommand({
  meta: { name: "doctor", description: "Check libtorch, threads, BLAS and CUDA, and measure the matmul rate" },
  args: {
    json: { type: "boolean", description: "Print one JSON object" },
    size: { type: "string", default: "2048", description: "Matrix size of the matmul probe" },
  },
  async run({ args }) {
    const findings: Finding[] = [];
    let info: (RuntimeInfo & { shim: string; backends: string }) | null = null;
    let gflops: number | null = null;
    try {
      const { runtimeInfo, benchMatmul } = await import("../native/runtime.ts");
      const { distAvailable } = await import("../native/dist.ts");
      const rt = await runtimeInfo();
      const backends = [];
      for (const backend of ["gloo", "nccl"] as const) if (await distAvailable(backend)) backends.push(backend);
      if (rt.nccl_built && !backends.includes("nccl")) backends.push("nccl built in (no GPU visible)");
      info = { ...rt, backends: backends.join(", ") || "none" };
      gflops = await benchMatmul(Number(args.size), 5);
      findings.push({ ok: true, what: `libtorch ${rt.torch_version} loaded` });
      if (rt.blas === "reference") {
        findings.push({
          ok: false,
          what: `BLAS is the reference implementation (${rt.blas_path}): matmul ~30x slower`,
          fix: "apt-get install -y libopenblas0-openmp, then rebuild (bun build.ts)",
        });
      } else if (rt.blas === "openblas-pthread" && rt.threads > 1) {
        findings.push({
          ok: false,
          what: "pthread OpenBLAS with several torch threads oversubscribes the cores (2x slower)",
          fix: "install libopenblas0-openmp, or set RLX_THREADS=1",
        });
      } else {
        findings.push({ ok: true, what: `BLAS ${rt.blas}` });
      }
      if (rt.threads < rt.cores)
        findings.push({
          ok: false,
          what: `${rt.threads} threads on ${rt.cores} cores`,
          fix: "unset RLX_THREADS (default: one thread per core)",
        });
    } catch (err) {
      findings.push({ ok: false, what: `native shim: ${formatError(err)}`, fix: "bash scripts/setup.sh" });
    }
    if (args.json) {
      console.log(JSON.stringify({ runtime: info, matmul_gflops: gflops, findings }, null, 2));
      return;
    }
    if (info) {
      const rows: [string, unknown][] = [
        ["libtorch", `${info.torch_version} ${info.torch_lib}`],
        ["shim", info.shim],
        ["threads", `${info.threads} (cores ${info.cores})`],
        ["BLAS", `${info.blas} ${info.blas_path}`],
        ["CUDA", cudaLine(info)],
        ["cuDNN", info.cudnn ? String(info.cudnn) : "-"],
        ["GPUs", gpuLine(info)],
        ["c10d backends", info.backends],
        ["oneDNN", info.mkldnn ? "yes" : "no"],
        ["OMP_WAIT_POLICY", info.omp_wait_policy || "(libgomp default: spin)"],
        [`matmul f32 ${args.size}^2`, gflops === null ? "-" : `${gflops.toFixed(1)} GFLOP/s`],
      ];
      for (const [k, v] of rows) console.log(`${k.padEnd(20)} ${v}`);
      console.log("");
    }
    for (const f of findings) console.log(`${f.ok ? "ok  " : "FAIL"} ${f.what}${f.fix ? `\n     fix: ${f.fix}` : ""}`);
    if (findings.some((f) => !f.ok)) process.exitCode = 1;
  },
});
