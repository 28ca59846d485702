/*
 * rlx.h: the whole C ABI of the rlx shim over libtorch. Hand-written, coarse calls.
 *
 * Conventions
 *   - Names are rlx_<object>_<verb>. Objects are opaque handles (void*); every create has a free.
 *   - Every call catches C++ exceptions. On failure it returns -1 (int), NULL (pointer) or NaN
 *     (double), and rlx_last_error() holds the message for the calling thread.
 *   - Handles are validated: a null, freed or wrong-kind handle is an error, never a crash.
 *   - Bulk data crosses as caller-owned arrays with explicit lengths; the shim copies what it keeps.
 *   - Strings returned by the shim (const char*) stay valid until the next call on the same thread.
 *
 * src/native/symbols.ts mirrors every declaration here; test/native/abi.test.ts checks both agree.
 */
#ifndef RLX_H
#define RLX_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define RLX_ABI_VERSION 1

/* ---- runtime ------------------------------------------------------------------------------ */

int rlx_abi_version(void);
const char* rlx_last_error(void);
/* Sets the intra-op thread count (at::set_num_threads); n <= 0 means the number of cores. */
int rlx_set_threads(int n);
/* JSON: {"abi","torch_version","threads","cores","blas","blas_path","cuda","cuda_devices",
 *        "mkldnn","bf16_cpu","cxx11_abi"} */
const char* rlx_runtime_info(void);
/* Measured float32 matmul rate: iters products of two n x n matrices, GFLOP/s. */
double rlx_bench_matmul(int n, int iters);

/* ---- models ------------------------------------------------------------------------------- */
/* dtype codes used across the ABI: */
#define RLX_F32 0
#define RLX_BF16 1
#define RLX_F16 2
#define RLX_F64 3

/* A decoder-only Llama/Qwen2/Qwen3 model from the text of a Hugging Face config.json.
 * dtype: the run's parameter dtype; device: "cpu" or "cuda[:N]". Parameters are random-initialized
 * (normal with std = initializer_range, norms at 1) from seed; load real weights with set_param. */
void* rlx_model_create(const char* config_json, int dtype, const char* device, uint64_t seed);
int rlx_model_free(void* model);
/* JSON list of parameters in a fixed order: [{"name": HF name, "shape": [...]}, ...] */
const char* rlx_model_params(void* model);
/* Copies data (dtype code, shape of ndim dims, which must equal the parameter's) into a parameter,
 * converting to the model's dtype. The error names the parameter and both shapes. */
int rlx_model_set_param(void* model, const char* name, const void* data, int dtype, const int64_t* shape, int ndim);
/* Copies a parameter out, converted to dtype, into out (nbytes must be exactly its size). */
int rlx_model_get_param(void* model, const char* name, void* out, int dtype, int64_t nbytes);

#ifdef __cplusplus
}
#endif

#endif /* RLX_H */
