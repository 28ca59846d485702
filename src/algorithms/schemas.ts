// Config pieces every algorithm's schema shares: the frozen endpoint block and the sampling
// source. Each algorithm's own schema lives in its file, beside its class.
import { z } from "zod";

/** A frozen OpenAI-compatible endpoint (rlx serve, vLLM, ...). rlx never updates its weights. */
export const frozenModelSchema = z.strictObject({
  /** Model name sent in requests (the server's /v1/models id). */
  name: z.string().min(1),
  /** Base URL including /v1, e.g. "http://127.0.0.1:8001/v1". Required: there is no sensible default. */
  base_url: z.url({ protocol: /^https?$/ }),
  /** Environment variable holding the API key, if the endpoint needs one. */
  api_key_var: z.string().optional(),
});
export type FrozenModel = z.infer<typeof frozenModelSchema>;

/** Which model generates an env's training rollouts: the live policy or a frozen endpoint. */
export const modelReferenceSchema = z.union([z.literal("policy"), frozenModelSchema]);

/** `sampling = { source = ... }`, "policy" unless set. */
export const samplingSchema = z.strictObject({ source: modelReferenceSchema.default("policy") }).prefault({});
