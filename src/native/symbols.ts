// The TypeScript mirror of native/include/rlx.h: one entry per C function, same order, same
// arity. test/native/abi.test.ts parses rlx.h and checks that both agree.
import { FFIType } from "bun:ffi";

const { i32, i64, u64, i64_fast, f64, ptr, cstring } = FFIType;

export const symbols = {
  // runtime
  rlx_abi_version: { args: [], returns: i32 },
  rlx_last_error: { args: [], returns: cstring },
  rlx_set_threads: { args: [i32], returns: i32 },
  rlx_runtime_info: { args: [], returns: cstring },
  rlx_bench_matmul: { args: [i32, i32], returns: f64 },
  rlx_device_memory: { args: [ptr, i32, ptr], returns: i32 },
  // models
  rlx_model_create: { args: [ptr, i32, ptr, u64], returns: ptr },
  rlx_model_free: { args: [ptr], returns: i32 },
  rlx_model_params: { args: [ptr], returns: cstring },
  rlx_model_set_param: { args: [ptr, ptr, ptr, i32, ptr, i32], returns: i32 },
  rlx_model_get_param: { args: [ptr, ptr, ptr, i32, i64], returns: i32 },
  rlx_model_get_grad: { args: [ptr, ptr, ptr, i32, i64], returns: i32 },
  rlx_model_zero_grad: { args: [ptr], returns: i32 },
  rlx_model_set_option: { args: [ptr, ptr, f64], returns: i32 },
  rlx_model_lora_add: { args: [ptr, i32, f64, f64, ptr, u64], returns: i32 },
  rlx_model_lora_params: { args: [ptr], returns: cstring },
  rlx_model_get_merged_param: { args: [ptr, ptr, ptr, i32, i64], returns: i32 },
  // training
  rlx_abi_layout: { args: [], returns: cstring },
  rlx_train_step: { args: [ptr, ptr, ptr, ptr, i64], returns: i32 },
  rlx_loss_eval: { args: [ptr, ptr, ptr, i64, ptr, ptr, i64, ptr, ptr], returns: i32 },
  // optimizer
  rlx_optim_create: { args: [ptr, f64, f64, f64, f64], returns: ptr },
  rlx_optim_free: { args: [ptr], returns: i32 },
  rlx_optim_zero_grad: { args: [ptr], returns: i32 },
  rlx_optim_step: { args: [ptr, f64, f64, ptr, i32], returns: i32 },
  rlx_optim_state_size: { args: [ptr], returns: i64_fast },
  rlx_optim_state_save: { args: [ptr, ptr, i64], returns: i32 },
  rlx_optim_state_load: { args: [ptr, ptr, i64], returns: i32 },
  // generation and scoring
  rlx_gen_create: { args: [ptr, i32, i32, i64], returns: ptr },
  rlx_gen_free: { args: [ptr], returns: i32 },
  rlx_gen_free_slots: { args: [ptr], returns: i32 },
  rlx_gen_set_model: { args: [ptr, ptr], returns: i32 },
  rlx_gen_add: { args: [ptr, i32, ptr, ptr, ptr, ptr, ptr, ptr, ptr, ptr, ptr], returns: i32 },
  rlx_gen_step: { args: [ptr, ptr, ptr, ptr, ptr, i32], returns: i32 },
  rlx_gen_remove: { args: [ptr, i32], returns: i32 },
  rlx_gen_top_logprobs: { args: [ptr, i32, i32, ptr, ptr, ptr], returns: i32 },
  rlx_gen_cache_stats: { args: [ptr, ptr, i32], returns: i32 },
  rlx_gen_set_option: { args: [ptr, ptr, f64], returns: i32 },
  rlx_score: { args: [ptr, i64, ptr, ptr, i32, ptr, i64, ptr, ptr], returns: i32 },
  rlx_score_top: { args: [ptr, i64, ptr, ptr, i32, ptr, i64, i32, ptr, ptr, ptr, ptr], returns: i32 },
  // distributed
  rlx_dist_available: { args: [ptr], returns: i32 },
  rlx_dist_create: { args: [ptr, ptr, ptr, i32, i32, i32, i64], returns: ptr },
  rlx_dist_free: { args: [ptr], returns: i32 },
  rlx_dist_subgroup: { args: [ptr, ptr, i32], returns: ptr },
  rlx_dist_allreduce_grads: { args: [ptr, ptr, i64], returns: i32 },
  rlx_dist_allreduce: { args: [ptr, ptr, i32, i64, i32], returns: i32 },
  rlx_dist_broadcast_params: { args: [ptr, ptr, i32], returns: i32 },
  rlx_dist_verify_params: { args: [ptr, ptr], returns: i32 },
  rlx_dist_barrier: { args: [ptr], returns: i32 },
  rlx_model_shard: { args: [ptr, ptr, i32], returns: i32 },
  rlx_model_shard_layout: { args: [ptr], returns: cstring },
  rlx_model_shard_local: { args: [ptr, i32, ptr, i64, i32], returns: i32 },
  rlx_model_shard_gather: { args: [ptr], returns: i32 },
  // weight transfer
  rlx_weights_send: { args: [ptr, ptr, i32, i32, i64, i64, i32, ptr, ptr], returns: i32 },
  rlx_receiver_open: { args: [ptr, ptr, i32, i64], returns: ptr },
  rlx_receiver_start: { args: [ptr, ptr, ptr, i64], returns: i32 },
  rlx_receiver_poll: { args: [ptr], returns: i32 },
  rlx_receiver_take: { args: [ptr], returns: ptr },
  rlx_receiver_take_adapters: { args: [ptr, ptr], returns: i32 },
  rlx_receiver_free: { args: [ptr], returns: i32 },
  rlx_engine_group_join: { args: [ptr, ptr, i32, i32, i32, ptr, i64], returns: ptr },
  rlx_engine_broadcast: { args: [ptr, ptr, i32, i32, ptr], returns: i32 },
  rlx_group_broadcast_bytes: { args: [ptr, ptr, i64, i32], returns: i32 },
} as const;

export const ABI_VERSION = 14;
