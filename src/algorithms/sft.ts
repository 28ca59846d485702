// SFT as hard distillation: rollouts are sampled by a frozen model (`sampling.source`, required),
// and every token it sampled is a cross-entropy target (ce weight 1, no advantage):
//
//   l_ce = -log pi(y_t | y_<t),   normalized by the step's ce token count
//
// The routing stamp (routing.ts) does all the work; the one hook is setup, which refuses a source
// with another tokenizer (its token ids would become ce targets meaning other text), as OPD
// refuses such a teacher. Rejection sampling by reward, if wanted, belongs to the data (or a
// custom algorithm), not here. The frozen source's tokens never go stale, and their logprobs are
// not used (ce has no importance ratio).
import { z } from "zod";
import { Algorithm, type AlgorithmContext, type LossComponent, type RuleViolation } from "./base.ts";
import { samplingSchema } from "./schemas.ts";
import { checkSameTokenizer } from "./tokenizer_check.ts";

const schema = z.strictObject({ type: z.literal("sft"), sampling: samplingSchema });
type SftConfig = z.infer<typeof schema>;

export class Sft extends Algorithm<SftConfig> {
  static override type = "sft";
  static override actionLossType: LossComponent = "ce";
  static override schema = schema;

  static override checkConfig(config: SftConfig): RuleViolation | undefined {
    if (config.sampling.source !== "policy") return undefined;
    return {
      key: "sampling.source",
      message: 'sft needs a frozen model to sample rollouts from (it is "policy")',
      fix: 'set sampling.source = { name = "teacher", base_url = "http://127.0.0.1:8001/v1" }',
    };
  }

  override async setup(ctx: AlgorithmContext): Promise<void> {
    const source = this.config.sampling.source;
    if (source === "policy") return; // checkConfig refuses it before a run starts
    const frozen = await ctx.connect(source);
    await checkSameTokenizer(ctx, frozen, `the sft sampling source "${source.name}" (${source.base_url})`);
  }
}
