// rlx's trainer side of SGLang's in-memory weight update (src/native/engine_group.ts) against
// PyTorch's own Python code on the receiving side (fixtures/sglang_torch_peer.py: the group joined
// and the tensors received as SGLang's code does): the group forms under torch 2's store keys, and
// every parameter arrives in the manifest's order with the bytes of the trainer's weights converted
// to the engine's dtype (f32 masters sent as bf16 and as f32).
//
// It needs torch 2 at both ends, as the engines run it: the shim built against a torch 2 libtorch
// (RLX_SHIM, as scripts/torch_matrix.sh's cpu leg runs the suite) and a python3 that imports torch
// 2 (its own, else the torch-2 CPU wheel that torch_matrix.sh finds, unpacked once beside its
// libtorch). Elsewhere it is skipped, saying why; test/e2e/train_sglang_c10d.test.ts covers the
// routes with both ends on rlx's shim.
import { afterEach, expect, test } from "bun:test";
import { existsSync, mkdtempSync, readdirSync, readFileSync, writeFileSync } from "node:fs";
import { homedir, tmpdir } from "node:os";
import { join } from "node:path";
import { EngineGroup, engineBroadcast, engineManifest } from "../../src/native/engine_group.ts";
import { NativeModel } from "../../src/native/model.ts";
import { runtimeInfo } from "../../src/native/runtime.ts";
import { freePort } from "../../src/processes/trainer_ranks.ts";
import { TINY_FULL } from "./tiny_model.ts";

const PEER = join(import.meta.dir, "fixtures/sglang_torch_peer.py");
const WHEEL_DIRS = (process.env.RLX_WHEELS ?? "/opt/wheels /opt/pypi /opt/pypi-more").split(" ");
const CACHE = process.env.RLX_WHEEL_CACHE ?? join(homedir(), ".cache/rlx/wheels");

const pythonTorch = (pythonPath: string) =>
  Bun.spawnSync(
    ["python3", "-c", "import torch.distributed as d, torch; print(torch.__version__, d.is_gloo_available())"],
    {
      env: { ...process.env, PYTHONPATH: pythonPath },
    },
  )
    .stdout.toString()
    .trim();

/** A PYTHONPATH under which python3 imports torch 2 with Gloo, or null. */
function torch2Python(): string | null {
  if (/^2\.\S+ True$/.test(pythonTorch(process.env.PYTHONPATH ?? ""))) return process.env.PYTHONPATH ?? "";
  const wheels = WHEEL_DIRS.filter(existsSync).flatMap((dir) =>
    readdirSync(dir)
      .filter((f) => /^torch-2.*\+cpu-.*\.whl$/.test(f))
      .map((f) => join(dir, f)),
  );
  const wheel = wheels.sort().at(-1);
  if (!wheel) return null;
  const target = join(
    CACHE,
    `${wheel
      .split("/")
      .at(-1)!
      .replace(/\.whl$/, "")}-python`,
  );
  if (!existsSync(join(target, ".unpacked"))) {
    const unpack = `import sys, zipfile; zipfile.ZipFile(sys.argv[1]).extractall(sys.argv[2]); open(sys.argv[2] + "/.unpacked", "w")`;
    if (Bun.spawnSync(["python3", "-c", unpack, wheel, target]).exitCode !== 0) return null;
  }
  return /^2\.\S+ True$/.test(pythonTorch(target)) ? target : null;
}

const torch = (await runtimeInfo()).torch_version;
const python = torch.startsWith("2.") ? torch2Python() : null;
const skip = !torch.startsWith("2.")
  ? `the shim's libtorch is ${torch}, not torch 2`
  : python === null
    ? "no python3 with torch 2 and Gloo (nor a torch-2 CPU wheel to unpack)"
    : "";
if (skip) console.log(`engine_group_torch: skipped (${skip})`);

const cleanup: Array<() => void> = [];
afterEach(() => {
  for (const free of cleanup.splice(0).reverse()) free();
});

for (const dtype of ["bf16", "f32"] as const)
  test.skipIf(skip !== "")(
    `torch's Python receives every parameter as ${dtype}, bit for bit, in order`,
    async () => {
      const model = await NativeModel.create(TINY_FULL, { dtype: "f32", seed: 7 });
      cleanup.push(() => model.free());
      const dir = mkdtempSync(join(tmpdir(), "rlx-engine-torch-"));
      const manifest = engineManifest(model, dtype);
      writeFileSync(join(dir, "manifest.json"), JSON.stringify(manifest));
      const port = freePort("127.0.0.1");
      const out = join(dir, "received.bin");
      const group = "rlx-weights-0";
      const args = ["127.0.0.1", String(port), "1", "2", group, "gloo", join(dir, "manifest.json"), out];
      const peer = Bun.spawn(["python3", PEER, ...args], {
        env: { ...process.env, PYTHONPATH: python! },
        stdout: "pipe",
        stderr: "pipe",
      });
      cleanup.push(() => peer.kill("SIGKILL"));
      // rank 0 serves the store: this blocks until the peer has joined every backend of the group
      const g = await EngineGroup.join({
        backend: "gloo",
        host: "127.0.0.1",
        port,
        rank: 0,
        worldSize: 2,
        groupName: group,
        timeoutMs: 30_000,
      });
      cleanup.push(() => g.free());
      expect(engineBroadcast(model, [g], dtype)).toEqual({ failed: [], error: "" });
      const code = await peer.exited;
      const [stdout, stderr] = [await new Response(peer.stdout).text(), await new Response(peer.stderr).text()];
      expect(stderr).not.toContain("Error");
      expect(code).toBe(0);
      expect(stdout).toContain(`received ${manifest.names.length}`);
      const expected = Buffer.concat(manifest.names.map((name) => model.getParam(name, dtype)));
      expect(Buffer.compare(readFileSync(out), expected)).toBe(0);
    },
    120_000,
  );
