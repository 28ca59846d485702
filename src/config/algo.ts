// The config schemas of the algorithms, one per type, and what the config layer needs to know
// about each (its loss component, whether its credit is group-relative). The algorithm classes
// (src/orchestrator/algo/) take their `schema` from here, so a config is validated before any
// class is loaded. Defaults are the vetted setting (reference/prime-rl.md §1.5): `type = "opd"`
// plus a teacher *is* OPD.
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

const samplingSchema = z.strictObject({ source: modelReferenceSchema.default("policy") }).prefault({});

const lengthPenaltySchema = z.strictObject({
  type: z.literal("linear").default("linear"),
  num_output_tokens_weight: z.number().min(0).default(0.25),
  num_input_tokens_weight: z.number().min(0).default(0.1),
  num_turns_weight: z.number().min(0).default(0.1),
});

const grpoFields = {
  sampling: samplingSchema,
  /** Divide centered rewards by the group's std (off: Dr. GRPO, as prime-rl ships it). */
  std_normalize: z.boolean().default(false),
  length_penalty: lengthPenaltySchema.optional(),
};

// No prefault: an absent role must stay absent (zod 4 applies an inner default under .optional()).
const echoRoleSchema = z.strictObject({ alpha: z.number().gt(0).default(0.1) });

export const algoSchemas = {
  grpo: z.strictObject({ type: z.literal("grpo"), ...grpoFields }),
  max_rl: z.strictObject({ type: z.literal("max_rl"), sampling: samplingSchema }),
  opd: z.strictObject({
    type: z.literal("opd"),
    sampling: samplingSchema,
    teacher: frozenModelSchema,
  }),
  opsd: z.strictObject({
    type: z.literal("opsd"),
    sampling: samplingSchema,
    demo_key: z.string().min(1).default("demonstration"),
    template: z
      .string()
      .refine((t) => t.includes("{demonstration}"), "the template must contain {demonstration}")
      .default("Here is an example of an expert response:\n<demonstration>\n{demonstration}\n</demonstration>"),
  }),
  sft: z.strictObject({ type: z.literal("sft"), sampling: samplingSchema }),
  echo: z.strictObject({
    type: z.literal("echo"),
    ...grpoFields,
    /** Observation roles whose content tokens get CE weight alpha. Setting any role replaces the table. */
    roles: z
      .strictObject({
        system: echoRoleSchema.optional(),
        user: echoRoleSchema.optional(),
        assistant: echoRoleSchema.optional(),
        tool: echoRoleSchema.optional(),
      })
      .refine((r) => Object.values(r).some(Boolean), "echo needs at least one role enabled")
      .default({ tool: { alpha: 0.1 } }),
    /** Optional keep-mask filter: a .ts file exporting default (rollout, kwargs) => boolean[][], one keep-mask per sample. */
    filter: z.strictObject({ path: z.string().min(1), kwargs: z.record(z.string(), z.unknown()).default({}) }).optional(),
  }),
  /** A user's algorithm class from a .ts file; its own schema validates the rest when it loads. */
  custom: z.looseObject({ type: z.literal("custom"), path: z.string().min(1), sampling: samplingSchema }),
} as const;

export type AlgoType = keyof typeof algoSchemas;
export type AlgoConfig = { [K in AlgoType]: z.infer<(typeof algoSchemas)[K]> }[AlgoType];
export type LossComponent = "rl" | "ce" | "ref_kl";

/** What the config layer checks per type (DESIGN §5). Custom algorithms declare theirs on the class. */
export const algoTraits: Record<Exclude<AlgoType, "custom">, { loss: LossComponent; groupRelative: boolean }> = {
  grpo: { loss: "rl", groupRelative: true },
  max_rl: { loss: "rl", groupRelative: true },
  opd: { loss: "ref_kl", groupRelative: false },
  opsd: { loss: "ref_kl", groupRelative: false },
  sft: { loss: "ce", groupRelative: false },
  echo: { loss: "rl", groupRelative: true },
};

export const ALGO_TYPES = Object.keys(algoSchemas) as AlgoType[];
