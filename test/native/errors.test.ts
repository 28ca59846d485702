// Bad calls into the shim are NativeErrors with a message naming the problem, and the process
// survives them: null, freed and wrong-kind handles, wrong lengths, ids outside the vocabulary.
import { expect, test } from "bun:test";
import { NativeError } from "../../src/errors.ts";
import { check, loadNative } from "../../src/native/ffi.ts";
import { generate, NativeGenerator, score } from "../../src/native/generate.ts";
import { cstr } from "../../src/native/model.ts";
import { NativeOptimizer, trainStep } from "../../src/native/train.ts";
import { pack, randomSample, rng, tinyModel } from "./tiny_model.ts";

const lib = await loadNative();
const SETTINGS = { nRl: 1, nCe: 1, nRefKl: 1 };

function nativeError(call: () => unknown): string {
  try {
    call();
  } catch (err) {
    expect(err).toBeInstanceOf(NativeError);
    return (err as Error).message;
  }
  throw new Error("expected a NativeError");
}

test("null, freed and wrong-kind handles are errors, not crashes", async () => {
  expect(nativeError(() => check(lib, lib.rlx_model_params(null)))).toBe("null model handle");
  const model = await tinyModel();
  const raw = model.handle;
  const opt = NativeOptimizer.create(model);
  expect(nativeError(() => check(lib, lib.rlx_model_params(opt.handle)))).toMatch(/invalid model handle/);
  expect(nativeError(() => check(lib, lib.rlx_optim_zero_grad(raw)))).toMatch(/invalid optimizer handle/);
  const gen = NativeGenerator.create(model, { slots: 1, capacity: 8 });
  model.free();
  expect(nativeError(() => check(lib, lib.rlx_model_params(raw)))).toMatch(/invalid model handle \(freed/);
  expect(nativeError(() => check(lib, lib.rlx_model_free(raw)))).toMatch(/invalid model handle/);
  expect(nativeError(() => gen.add([{ prompt: [1], sampling: { maxNewTokens: 2 } }]))).toMatch(
    /the generator's model has been freed/,
  );
  expect(nativeError(() => model.getParam("model.norm.weight"))).toMatch(/freed/);
  const rawGen = gen.handle;
  gen.free();
  opt.free();
  expect(nativeError(() => check(lib, lib.rlx_gen_free(rawGen)))).toMatch(/invalid generator handle \(freed/);
});

test("wrong lengths are caught before they reach C (or by C where it can see them)", async () => {
  using model = await tinyModel();
  const row = pack([{ ...randomSample(rng(1), 8, 2), temperature: 1 }]);
  expect(nativeError(() => trainStep(model, { ...row, advantages: new Float32Array(7) }, SETTINGS))).toBe(
    "advantages has 7 entries but the row has 8 tokens",
  );
  expect(nativeError(() => trainStep(model, { ...row, rlWeights: new Float32Array(9) }, SETTINGS))).toMatch(
    /rlWeights has 9 entries/,
  );
  expect(nativeError(() => trainStep(model, { ...row, sampleLengths: Int32Array.from([3, 4]) }, SETTINGS))).toMatch(
    /sample_lengths sum to 7 but the row has T = 8/,
  );
  expect(nativeError(() => trainStep(model, { ...row, sampleLengths: Int32Array.from([8, 0]) }, SETTINGS))).toMatch(
    /must be >= 1/,
  );
  expect(nativeError(() => trainStep(model, { ...row, temperatures: new Float32Array(8) }, SETTINGS))).toMatch(
    /temperatures\[0\] = 0.000000 must be > 0/,
  );
  expect(nativeError(() => trainStep(model, row, SETTINGS, 2))).toMatch(/nEnvs > 0 needs envIndex/);
  expect(nativeError(() => score(model, [[1, 2]], { temperature: [new Float32Array(3)] }))).toMatch(/have 3 entries/);
  expect(
    nativeError(() =>
      check(
        lib,
        lib.rlx_model_set_param(model.handle, cstr("model.norm.weight"), null, 0, BigInt64Array.from([32n]), 1),
      ),
    ),
  ).toMatch(/is null/);
});

test("token ids outside the vocabulary are errors naming the position", async () => {
  using model = await tinyModel();
  const row = pack([{ ...randomSample(rng(2), 6, 2), temperature: 1 }]);
  row.tokenIds[4] = 64;
  expect(nativeError(() => trainStep(model, row, SETTINGS))).toBe(
    "token_ids[4] = 64 is outside the vocabulary (size 64)",
  );
  expect(
    nativeError(() =>
      score(model, [
        [1, 2],
        [3, -1],
      ]),
    ),
  ).toMatch(/token_ids\[3\] = -1 is outside the vocabulary/);
  expect(nativeError(() => generate(model, [[1, 99]], { maxNewTokens: 2 }))).toMatch(/prompt_ids\[1\] = 99/);
});

test("the process survives all of the above and keeps working", async () => {
  using model = await tinyModel();
  const m = trainStep(model, pack([{ ...randomSample(rng(3), 6, 2), temperature: 1 }]), { ...SETTINGS, nRl: 4 });
  expect(Number.isFinite(m.all.loss)).toBe(true);
  expect(generate(model, [[1, 2, 3]], { maxNewTokens: 3 })[0]!.tokens.length).toBe(3);
  expect(String(lib.rlx_last_error())).toBe("");
});
