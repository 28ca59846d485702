// A policy server's weight routes (docs/serve.md, docs/engines.md "Weights in memory"):
//
//   POST /update_weights {path, version}       loads a published directory (under the server's
//                                              weights root) and swaps it in (src/engine/engine.ts)
//   POST /weight_channel {host, port, backend?, timeout_ms?, lora?: {rank, alpha, targets}}
//                                              joins the trainer's weight channel for this server
//                                              (rank 1 of a two-rank c10d group whose store the
//                                              trainer serves at host:port); answers at once, the
//                                              join runs on a native thread. A new call replaces
//                                              the channel. With lora, the transfers carry only
//                                              adapters of that shape (a served base model gets
//                                              empty ones when the first one starts).
//   POST /weight_channel {leave: true}         leaves the channel (a run that goes on without
//                                              this server: the trainer's next send fails at once)
//   POST /update_weights {version, transfer: "c10d"}
//                                              receives `version` over the channel while serving
//                                              goes on, checks it whole, swaps it in; answers once
//                                              it serves it.
//
// Both need the server's API key (every route but /health does): the key guards the control plane
// that sets a transfer up. The channel itself (c10d's store and Gloo) does not authenticate, so it
// belongs on a trusted network, as NCCL's traffic does (docs/serve.md, threat model).
import { existsSync, statSync } from "node:fs";
import { EngineClosedError, InvalidRequestError } from "../engine/errors.ts";
import { type AdapterShape, WeightReceiver } from "../native/weights.ts";
import { isUnderRoot } from "./auth.ts";
import type { ServeContext } from "./choice.ts";
import { Fields } from "./fields.ts";
import { errorResponse } from "./openai.ts";

export class WeightRoutes {
  #receiver: WeightReceiver | undefined;

  constructor(private readonly weightsRoot: string | undefined) {}

  async joinChannel(ctx: ServeContext, request: Request): Promise<Response> {
    const f = Fields.parse(await request.text());
    if (f.bool("leave", false)) {
      this.close();
      return Response.json({ status: "left" });
    }
    const host = f.string("host");
    if (!host) throw new InvalidRequestError("host is required (where the trainer serves the channel's store)", "host");
    const port = f.int("port", undefined, { min: 1, max: 65535 });
    if (port === undefined) throw new InvalidRequestError("port is required", "port");
    const backend = f.string("backend") ?? "gloo";
    if (backend !== "gloo" && backend !== "nccl")
      throw new InvalidRequestError(`backend must be "gloo" or "nccl", got "${backend}"`, "backend");
    const timeoutMs = f.int("timeout_ms", 600_000, { min: 1 });
    const lora = f.object("lora");
    let adapters: AdapterShape | undefined;
    if (lora) {
      const spec = new Fields(lora);
      if (!spec.has("rank") || !spec.has("alpha") || spec.strings("targets").length === 0)
        throw new InvalidRequestError("lora needs rank, alpha and targets (the run's [model.lora])", "lora");
      adapters = {
        rank: spec.int("rank", 1, { min: 1 }),
        alpha: spec.number("alpha", 1, { min: 0, minExclusive: true }),
        targets: spec.strings("targets"),
      };
    }
    this.#receiver?.close();
    this.#receiver = undefined;
    this.#receiver = await WeightReceiver.open({
      host,
      port,
      backend,
      timeoutMs,
      ...(adapters ? { lora: adapters } : {}),
    });
    return Response.json({ status: "joining", channel: this.#receiver.where });
  }

  async update(ctx: ServeContext, request: Request): Promise<Response> {
    const f = Fields.parse(await request.text());
    const transfer = f.string("transfer");
    if (transfer === undefined) return this.#load(ctx, f);
    if (transfer !== "c10d") throw new InvalidRequestError(`transfer must be "c10d", got "${transfer}"`, "transfer");
    if (!this.#receiver)
      throw new InvalidRequestError("no weight channel: POST /weight_channel first", "transfer", {
        fix: 'rlx train does this when [inference] weight_transfer = "c10d"',
      });
    const version = f.int("version", undefined, { min: 0 });
    if (version === undefined) throw new InvalidRequestError("version is required with transfer", "version");
    try {
      await ctx.engine.receiveWeights(this.#receiver, version);
    } catch (err) {
      if (err instanceof InvalidRequestError || err instanceof EngineClosedError) throw err;
      throw new InvalidRequestError(`receiving version ${version} failed: ${(err as Error).message}`, "transfer");
    }
    const adapterOnly = ctx.engine.model.lora !== null;
    return Response.json({ status: "ok", transfer, policy_version: ctx.engine.version, adapter_only: adapterOnly });
  }

  close(): void {
    this.#receiver?.close();
    this.#receiver = undefined;
  }

  async #load(ctx: ServeContext, f: Fields): Promise<Response> {
    const path = f.string("path") ?? f.string("model_path");
    if (path === undefined)
      throw new InvalidRequestError("path is required (a model directory in Hugging Face layout)", "path");
    if (this.weightsRoot !== undefined && !isUnderRoot(path, this.weightsRoot))
      return errorResponse(403, `path ${path} is not under the weights root this server was started with`, "path");
    if (!existsSync(path) || !statSync(path).isDirectory())
      throw new InvalidRequestError(`path ${path} is not a directory`, "path");
    const version = f.int("version", ctx.engine.version + 1, { min: 0 });
    let adapterOnly: boolean;
    try {
      ({ adapterOnly } = await ctx.engine.reloadWeights(path, version));
    } catch (err) {
      if (err instanceof InvalidRequestError || err instanceof EngineClosedError) throw err;
      throw new InvalidRequestError(`loading ${path} failed: ${(err as Error).message}`, "path");
    }
    // adapter_only: a LoRA adapter for the served base was copied into the served model (docs/lora.md)
    return Response.json({ status: "ok", path, policy_version: ctx.engine.version, adapter_only: adapterOnly });
  }
}
