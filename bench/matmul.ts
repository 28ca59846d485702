// The matmul ceiling: `rlx doctor`'s probe (dist/rlx, the embedded shim) against the same float32
// matmul in Debian's python3-torch on the same libtorch and BLAS, alternating in one command so
// machine noise hits both. Usage: bun bench/matmul.ts [--n 2048] [--rounds 5]
import { join } from "node:path";
import { flag, median, PYTHON, printTable, runReference } from "./_reference.ts";

const n = flag("n", "2048");
const rounds = Number(flag("rounds", "5"));
const rlxBin = join(import.meta.dir, "../dist/rlx");
const rlx: number[] = [];
const torch: number[] = [];
for (let r = 0; r < rounds; r++) {
  const proc = Bun.spawnSync([rlxBin, "doctor", "--json", "--size", n], { stdout: "pipe", stderr: "pipe" });
  if (!proc.stdout.length) throw new Error(`${rlxBin} doctor printed nothing: ${proc.stderr}`);
  rlx.push(JSON.parse(proc.stdout.toString()).matmul_gflops);
  torch.push(runReference<{ gflops: number }>("matmul.py", [n, "5"]).gflops);
}
const [a, b] = [median(rlx), median(torch)];
console.log(`float32 matmul ${n}^2, median of ${rounds} alternating rounds (python: ${PYTHON})`);
printTable([
  ["", "GFLOP/s"],
  ["rlx doctor (dist/rlx)", a.toFixed(1)],
  ["python3-torch", b.toFixed(1)],
  ["ratio rlx / torch", (a / b).toFixed(2)],
]);
