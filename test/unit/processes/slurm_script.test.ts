// `rlx launch slurm`: the key lines of the sbatch script, and --dry-run writes nothing.
import { expect, test } from "bun:test";
import { existsSync, mkdtempSync, readdirSync, readFileSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { loadConfig } from "../../../src/config/load.ts";
import { policyNote, slurmScript } from "../../../src/processes/slurm_script.ts";

const ROOT = join(import.meta.dir, "../../..");
// docs/scaling.md's example: the script `rlx launch slurm` prints for these arguments in a checkout at
// /shared/rlx with rlx at /opt/rlx/rlx (to regenerate it, print the script the last test builds)
const DOC_ARGS =
  "/shared/rlx/configs/quickstart.toml --nodes 2 --set output_dir=/shared/runs/quickstart --partition cpu --time 01:00:00 --dry-run";

const job = {
  rlx: ["/opt/rlx/rlx"],
  commandLine: "rlx launch slurm run.toml --nodes 2 --gpus-per-node 4",
  config: "/shared/run.toml",
  overrides: ["orchestrator.seq_len=512", "output_dir=/shared/runs/a"],
  runDir: "/shared/runs/a",
  nodes: 2,
  gpusPerNode: 4,
  partition: "gpu",
  time: "04:00:00",
  jobName: "rlx-a",
  policy: "spawned",
  masterPort: 29500,
};

test("the script places ranks as srun tasks and the orchestrator once, with launcher = external", () => {
  const script = slurmScript(job);
  for (const line of [
    "#SBATCH --nodes=2",
    "#SBATCH --ntasks-per-node=4",
    "#SBATCH --gpus-per-node=4",
    "#SBATCH --partition=gpu",
    "#SBATCH --time=04:00:00",
    "#SBATCH --output=/shared/runs/a.slurm/job-%j.out",
    "#SBATCH --requeue",
    "RLX=(/opt/rlx/rlx)",
    "RUN_DIR=/shared/runs/a",
    "export MASTER_PORT=29500",
    "WORLD_SIZE=$((NODES * TASKS_PER_NODE))",
    "  --set orchestrator.seq_len=512 \\",
    "  --set trainer.dist.launcher=external \\",
    "srun --ntasks=$WORLD_SIZE --ntasks-per-node=$TASKS_PER_NODE",
    '  "${RLX[@]}" trainer --run-dir "$RUN_DIR" &',
    "resume=(--resume-if-any)",
  ])
    expect(script).toContain(line);
  expect(script).not.toContain("--set output_dir=/shared"); // RUN_DIR says it once
  // every #SBATCH line comes before the first command, or sbatch ignores it
  const lines = script.split("\n");
  const lastDirective = lines.findLastIndex((l) => l.startsWith("#SBATCH"));
  expect(lines.slice(0, lastDirective).every((l) => l.startsWith("#"))).toBe(true);
  // on CPU: one rank per node, no GPUs asked for
  const cpu = slurmScript({ ...job, gpusPerNode: undefined });
  expect(cpu).toContain("#SBATCH --ntasks-per-node=1");
  expect(cpu).not.toContain("#SBATCH --gpus-per-node");
  // bash reads it
  const dir = mkdtempSync(join(tmpdir(), "rlx-sbatch-"));
  writeFileSync(join(dir, "job.sh"), script);
  expect(Bun.spawnSync(["bash", "-n", join(dir, "job.sh")]).exitCode).toBe(0);
});

function rlx(args: string[], cwd: string) {
  const proc = Bun.spawnSync([process.execPath, join(ROOT, "src/main.ts"), ...args], {
    cwd,
    stdout: "pipe",
    stderr: "pipe",
  });
  return { code: proc.exitCode, out: proc.stdout.toString(), err: proc.stderr.toString() };
}

test("rlx launch slurm --dry-run prints the script and writes nothing; /tmp, a CPU/GPU mismatch and two ports are refused", () => {
  const dir = mkdtempSync(join(tmpdir(), "rlx-launch-"));
  const config = join(ROOT, "configs/quickstart.toml");
  const runDir = `/srv/rlx-launch-test-${Date.now()}/run`;
  const launch = (...args: string[]) => rlx(["launch", "slurm", config, "--nodes", "2", ...args, "--dry-run"], dir);
  const dry = launch("--set", `output_dir=${runDir}`);
  expect(dry.err).toBe("");
  expect(dry.code).toBe(0);
  expect(dry.out).toContain("#SBATCH --nodes=2");
  expect(existsSync(`${runDir}.slurm`)).toBe(false);
  expect(readdirSync(dir)).toEqual([]);
  const tmp = launch("--set", `output_dir=${dir}/run`);
  expect(tmp.code).toBe(1);
  expect(tmp.err).toContain("which every node has its own of");
  expect(launch("--gpus-per-node", "4").err).toContain("--gpus-per-node 4 but trainer.device is cpu");
  const port = ["--set", `output_dir=${runDir}`, "--set", "trainer.dist.master_port=29600"];
  expect(launch(...port).out).toContain("export MASTER_PORT=29600");
  expect(launch(...port, "--master-port", "29700").err).toContain(
    "--master-port 29700 but trainer.dist.master_port = 29600",
  );
});

test("docs/scaling.md's --dry-run example is the script rlx launch slurm writes for it", () => {
  const { config } = loadConfig(join(ROOT, "configs/quickstart.toml"), ["output_dir=/shared/runs/quickstart"]);
  const script = slurmScript({
    rlx: ["/opt/rlx/rlx"],
    commandLine: `rlx launch slurm ${DOC_ARGS}`,
    config: "/shared/rlx/configs/quickstart.toml",
    overrides: ["output_dir=/shared/runs/quickstart"],
    runDir: "/shared/runs/quickstart",
    nodes: 2,
    partition: "cpu",
    time: "01:00:00",
    jobName: "rlx-quickstart",
    policy: policyNote(config.inference),
    masterPort: 29500,
  });
  const doc = readFileSync(join(ROOT, "docs/scaling.md"), "utf8");
  expect(doc).toContain(`rlx launch slurm ${DOC_ARGS.replace(" --set", " \\\n  --set")}`);
  const shown = /```bash\n(#!\/bin\/bash\n# One rlx run[\s\S]*?)```/.exec(doc)?.[1];
  expect(shown).toBe(script); // regenerate: see the comment above DOC_ARGS
});
