// GET /v1/models and the model-name check every generation request goes through. vLLM answers a
// request for a model it does not serve with 404 NotFoundError naming `model`; rlx does the same,
// and a request without `model` gets the served one. The model card carries vLLM's max_model_len
// and rlx's vocab_size (embedding rows), tokenizer_size (ids the tokenizer produces) and
// policy_version, so a client can check a teacher's tokenizer against its student's before a run.
import { ModelNotFoundError } from "../engine/errors.ts";
import type { ServeContext } from "./choice.ts";
import { nowSeconds } from "./openai.ts";

export function checkModelName(ctx: ServeContext, model: string | undefined): void {
  if (model !== undefined && model !== ctx.modelName)
    throw new ModelNotFoundError(`The model \`${model}\` does not exist.`, "model", {
      fix: `this server serves "${ctx.modelName}"`,
    });
}

export function modelList(ctx: ServeContext) {
  return {
    object: "list",
    data: [
      {
        id: ctx.modelName,
        object: "model",
        created: nowSeconds(),
        owned_by: "rlx",
        root: ctx.modelName,
        parent: null,
        max_model_len: ctx.engine.maxModelLen,
        vocab_size: ctx.engine.vocabSize,
        tokenizer_size: ctx.tokenizer.size,
        policy_version: ctx.engine.version,
        permission: [],
      },
    ],
  };
}
