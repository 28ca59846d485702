// Pushes a model directory rlx wrote (a published step `weights/step_N`, a checkpoint's
// `trainer/model`, `rlx sft`'s `model/`) to a Hugging Face Hub repo with @huggingface/hub: the
// directory is checked against its checksums first (a damaged file is never pushed), the repo is
// created when it does not exist, and every file goes up in one commit (large ones through the
// Hub's LFS route). The hub URL is a parameter, so tests run it against a local server
// that answers the Hub's routes (test/fixtures/mock_hub.ts). Nothing local is changed; a refused
// push is an EndpointError naming the route and the status.
import { existsSync, readdirSync, statSync } from "node:fs";
import { join, relative } from "node:path";
import { ConfigError, EndpointError } from "../errors.ts";
import { assertWhole, checkModelDir } from "../model/integrity.ts";

export const HUB_URL = "https://huggingface.co";
/** rlx's own marker of a whole published step (src/rundir/paths.ts): not part of the model. */
const LOCAL_ONLY = new Set(["published.json"]);

export interface PushOptions {
  dir: string;
  /** "user/name" or "org/name". */
  repo: string;
  token: string;
  hubUrl?: string;
  branch?: string;
  private?: boolean;
  message?: string;
  /** A file's upload progress, 0..1, and phase changes. */
  onProgress?: (event: { phase: string; path?: string; progress?: number }) => void;
}

export interface PushResult {
  repo: string;
  url: string;
  commit: string;
  created: boolean;
  files: Array<{ path: string; bytes: number }>;
  bytes: number;
  seconds: number;
}

/** Every file under dir (relative paths, sorted), rlx's local markers left out. */
export function filesToPush(dir: string): Array<{ path: string; bytes: number }> {
  const out: Array<{ path: string; bytes: number }> = [];
  const walk = (at: string) => {
    for (const entry of readdirSync(at, { withFileTypes: true })) {
      const path = join(at, entry.name);
      if (entry.isDirectory()) walk(path);
      else if (entry.isFile() && !LOCAL_ONLY.has(entry.name))
        out.push({ path: relative(dir, path), bytes: statSync(path).size });
    }
  };
  walk(dir);
  return out.sort((a, b) => a.path.localeCompare(b.path));
}

/** The hub's error as an EndpointError: its route, status and message, and what to do. */
function hubError(err: unknown, repo: string, hubUrl: string): Error {
  const e = err as { statusCode?: number; url?: string; message?: string };
  if (e.statusCode === undefined) return err as Error;
  const fix =
    e.statusCode === 401 || e.statusCode === 403
      ? `check the token ($HF_TOKEN or --token-var): it must have write access to ${repo}`
      : e.statusCode === 404
        ? `check --repo (namespace/name) and --hub-url (${hubUrl})`
        : "nothing was changed locally; run the same command again to retry";
  return new EndpointError(`${e.url ?? hubUrl}: ${e.statusCode}: ${e.message ?? "refused"}`, { fix });
}

export async function pushModel(o: PushOptions): Promise<PushResult> {
  const started = performance.now();
  if (!/^[\w.-]+\/[\w.-]+$/.test(o.repo))
    throw new ConfigError(`--repo: "${o.repo}" is not namespace/name`, { fix: "e.g. --repo my-user/qwen3-0.6b-grpo" });
  // a model directory, or a LoRA adapter in PEFT's layout (docs/lora.md)
  if (!existsSync(join(o.dir, "config.json")) && !existsSync(join(o.dir, "adapter_config.json")))
    throw new ConfigError(
      `${o.dir} has no config.json or adapter_config.json, so it is not a model or adapter directory`,
      {
        fix: "push a published step (RUN_DIR/weights/step_N), a checkpoint's trainer/model, or rlx sft's model/",
      },
    );
  assertWhole(o.dir, checkModelDir(o.dir), "the model directory"); // a damaged file is never pushed
  const hub = await import("@huggingface/hub");
  const hubUrl = (o.hubUrl ?? HUB_URL).replace(/\/+$/, "");
  const repo = { type: "model" as const, name: o.repo };
  const common = { accessToken: o.token, hubUrl };
  const files = filesToPush(o.dir);
  let created = false;
  try {
    o.onProgress?.({ phase: "creating the repo" });
    await hub.createRepo({ ...common, repo, private: o.private ?? false });
    created = true;
  } catch (err) {
    if ((err as { statusCode?: number }).statusCode !== 409) throw hubError(err, o.repo, hubUrl); // 409: it exists
  }
  try {
    let commit: { oid: string; url?: string } | undefined;
    const upload = hub.uploadFilesWithProgress({
      ...common,
      repo,
      // Bun's own lazy file blobs: Bun's fetch streams them (the library's URL-backed blobs reach it empty)
      files: files.map((f) => ({ path: f.path, content: Bun.file(join(o.dir, f.path)) })),
      commitTitle: o.message ?? `rlx push ${o.dir}`,
      ...(o.branch ? { branch: o.branch } : {}),
      useXet: false, // the Hub's LFS route; Xet storage needs its own CAS service
    });
    for (;;) {
      const next = await upload.next();
      if (next.done) {
        commit = next.value?.commit;
        break;
      }
      const event = next.value;
      if (event.event === "phase") o.onProgress?.({ phase: event.phase });
      else o.onProgress?.({ phase: event.state, path: event.path, progress: event.progress });
    }
    return {
      repo: o.repo,
      url: `${hubUrl}/${o.repo}`,
      commit: commit?.oid ?? "",
      created,
      files,
      bytes: files.reduce((n, f) => n + f.bytes, 0),
      seconds: (performance.now() - started) / 1000,
    };
  } catch (err) {
    throw hubError(err, o.repo, hubUrl);
  }
}
