// Launcher conventions (src/processes/launch_env.ts): torchrun's and Slurm's variables place a
// `rlx trainer`, flags win, and every disagreement is a ConfigError naming both sides.
import { expect, test } from "bun:test";
import { ConfigError } from "../../../src/errors.ts";
import { expandHostlist } from "../../../src/processes/hostlist.ts";
import { resolveTrainerPlace, type LaunchConfig } from "../../../src/processes/launch_env.ts";

const cuda = (world: number, port = 0): LaunchConfig => ({
  world_size: world,
  device: "cuda",
  dist: { master_port: port },
});
const noFlags = { startedByTrain: false };

function error(run: () => unknown): ConfigError {
  try {
    run();
  } catch (err) {
    expect(err).toBeInstanceOf(ConfigError);
    return err as ConfigError;
  }
  throw new Error("expected a ConfigError");
}

test("hostlist: ranges keep zero padding, lists and plain names mix, brackets combine", () => {
  expect(expandHostlist("node[01-04]")).toEqual(["node01", "node02", "node03", "node04"]);
  expect(expandHostlist("n[1-3,7],gpu5")).toEqual(["n1", "n2", "n3", "n7", "gpu5"]);
  expect(expandHostlist("a[8-10]")).toEqual(["a8", "a9", "a10"]);
  expect(expandHostlist("a[098-100]")).toEqual(["a098", "a099", "a100"]);
  expect(expandHostlist("r[1-2]-n[1-2]")).toEqual(["r1-n1", "r1-n2", "r2-n1", "r2-n2"]);
  expect(expandHostlist("solo")).toEqual(["solo"]);
  expect(error(() => expandHostlist("n[1-3")).message).toContain("unbalanced");
  expect(error(() => expandHostlist("n[3-1]")).message).toContain("backwards");
  expect(error(() => expandHostlist("n[a-b]")).message).toContain("numbers");
});

test("torchrun: RANK, WORLD_SIZE, MASTER_ADDR:MASTER_PORT, LOCAL_RANK picks the GPU", () => {
  const vars = { RANK: "5", WORLD_SIZE: "8", LOCAL_RANK: "1", MASTER_ADDR: "10.0.0.1", MASTER_PORT: "29500" };
  expect(resolveTrainerPlace(vars, noFlags, cuda(8))).toEqual({
    rank: 5,
    worldSize: 8,
    localRank: 1,
    store: { type: "tcp", host: "10.0.0.1", port: 29500 },
    device: "cuda:1",
    source: "torchrun",
  });
});

test("torchrun's static rendezvous holds MASTER_PORT: rank 0 serves on trainer.dist.master_port", () => {
  const vars = { RANK: "0", WORLD_SIZE: "2", LOCAL_RANK: "0", MASTER_ADDR: "h", MASTER_PORT: "29500" };
  const agent = { ...vars, TORCHELASTIC_USE_AGENT_STORE: "True", TORCHELASTIC_RUN_ID: "x" };
  expect(resolveTrainerPlace(agent, noFlags, cuda(2, 29600)).store).toEqual({ type: "tcp", host: "h", port: 29600 });
  expect(error(() => resolveTrainerPlace(agent, noFlags, cuda(2))).fix).toContain("--rdzv-backend=c10d");
});

test("Slurm: SLURM_PROCID, SLURM_NTASKS, the first host of the nodelist, SLURM_LOCALID", () => {
  const vars = {
    SLURM_PROCID: "6",
    SLURM_NTASKS: "8",
    SLURM_LOCALID: "2",
    SLURM_JOB_NODELIST: "gpu[07-08]",
    MASTER_PORT: "29500",
  };
  const place = resolveTrainerPlace(vars, noFlags, cuda(8));
  expect(place).toMatchObject({ rank: 6, worldSize: 8, localRank: 2, device: "cuda:2", source: "slurm" });
  expect(place.store).toEqual({ type: "tcp", host: "gpu07", port: 29500 });
  // the port from the config; one GPU bound to the task is cuda:0; cpu stays cpu
  const { MASTER_PORT: _, ...noPort } = vars;
  expect(resolveTrainerPlace(noPort, noFlags, cuda(8, 29400)).store).toMatchObject({ port: 29400 });
  expect(resolveTrainerPlace({ ...vars, CUDA_VISIBLE_DEVICES: "3" }, noFlags, cuda(8)).device).toBe("cuda:0");
  expect(resolveTrainerPlace(vars, noFlags, { ...cuda(8), device: "cpu" }).device).toBe("cpu");
  expect(resolveTrainerPlace(vars, noFlags, { ...cuda(8), device: "cuda:1" }).device).toBe("cuda:1");
  expect(error(() => resolveTrainerPlace(noPort, noFlags, cuda(8))).message).toContain("MASTER_PORT");
});

test("flags win when they agree, and a disagreement names both sides", () => {
  const vars = { SLURM_PROCID: "1", SLURM_NTASKS: "2", SLURM_JOB_NODELIST: "n[1-2]", MASTER_PORT: "29500" };
  expect(resolveTrainerPlace(vars, { rank: "1", startedByTrain: false }, cuda(2)).rank).toBe(1);
  const rank = error(() => resolveTrainerPlace(vars, { rank: "0", startedByTrain: false }, cuda(2)));
  expect(rank.message).toBe("--rank 0 but SLURM_PROCID=1");
  const store = error(() => resolveTrainerPlace(vars, { store: "tcp://n2:29500", startedByTrain: false }, cuda(2)));
  expect(store.message).toContain("--store tcp://n2:29500 but the slurm variables name tcp://n1:29500");
  const world = error(() => resolveTrainerPlace(vars, noFlags, cuda(4)));
  expect(world.message).toContain("SLURM_NTASKS=2 but trainer.world_size = 4");
  const port = error(() => resolveTrainerPlace(vars, noFlags, cuda(2, 29400)));
  expect(port.message).toBe("MASTER_PORT=29500 but trainer.dist.master_port = 29400");
});

test("torchrun against Slurm: a conflict, unless torchrun started the process (srun torchrun)", () => {
  const vars = { RANK: "3", WORLD_SIZE: "4", SLURM_PROCID: "1", SLURM_NTASKS: "2", MASTER_ADDR: "h", MASTER_PORT: "1" };
  const both = error(() => resolveTrainerPlace(vars, noFlags, cuda(4)));
  expect(both.message).toContain("RANK=3 but SLURM_PROCID=1");
  expect(resolveTrainerPlace({ ...vars, TORCHELASTIC_RUN_ID: "job" }, noFlags, cuda(4)).rank).toBe(3);
});

test("a rank rlx train started keeps its flags and ignores inherited variables", () => {
  const vars = { SLURM_PROCID: "0", SLURM_NTASKS: "1", SLURM_LOCALID: "0" };
  const place = resolveTrainerPlace(vars, { rank: "1", store: "file:///r/s", startedByTrain: true }, cuda(2));
  expect(place).toEqual({
    rank: 1,
    worldSize: 2,
    store: { type: "file", path: "/r/s" },
    device: "cuda",
    source: "flags",
  });
  expect(resolveTrainerPlace({}, noFlags, cuda(1))).toMatchObject({ rank: 0, device: "cuda", source: "flags" });
});
