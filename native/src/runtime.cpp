// Runtime entry points: ABI version, errors, handle registry, threads, what libtorch and BLAS
// this process runs on, and a matmul probe (rlx doctor, and the native smoke test).
#include "common.h"

#include <ATen/detail/CUDAHooksInterface.h>
#include <dlfcn.h>
#include <link.h>
#if defined(RLX_CUDA)
#include <ATen/cuda/CUDAContext.h>
#include <c10/cuda/CUDACachingAllocator.h>
#endif
#include <chrono>
#include <thread>

#if defined(RLX_CUDA)
#define RLX_CUDA_BUILD true
#else
#define RLX_CUDA_BUILD false
#endif

namespace rlx {

std::string& last_error() {
  static thread_local std::string message;
  return message;
}

namespace {
std::mutex g_handles_mutex;
std::unordered_map<const void*, Kind>& handles() {
  static std::unordered_map<const void*, Kind> live;
  return live;
}
}  // namespace

void register_handle(const void* p, Kind kind) {
  std::lock_guard<std::mutex> lock(g_handles_mutex);
  handles()[p] = kind;
}

void unregister_handle(const void* p, Kind kind) {
  std::lock_guard<std::mutex> lock(g_handles_mutex);
  auto it = handles().find(p);
  if (it == handles().end() || it->second != kind)
    throw ArgError(std::string("invalid ") + kind_name(kind) + " handle (already freed?)");
  handles().erase(it);
}

bool is_live(const void* p, Kind kind) {
  std::lock_guard<std::mutex> lock(g_handles_mutex);
  auto it = handles().find(p);
  return it != handles().end() && it->second == kind;
}

const char* kind_name(Kind kind) {
  switch (kind) {
    case Kind::Model: return "model";
    case Kind::Optimizer: return "optimizer";
    case Kind::Generator: return "generator";
    case Kind::Group: return "process group";
    case Kind::Receiver: return "weight receiver";
  }
  return "unknown";
}

// The BLAS actually mapped into this process: the first loaded object whose file name says blas.
// On Debian, libblas.so.3 is an alternatives link, so the resolved path names the implementation.
// The resolved path of the first loaded library whose name contains one of `parts`.
static std::string loaded_library(std::vector<std::string> parts) {
  struct Search {
    std::vector<std::string> parts;
    std::string found;
  } search{std::move(parts), ""};
  dl_iterate_phdr(
      [](struct dl_phdr_info* info, size_t, void* data) -> int {
        std::string name = info->dlpi_name ? info->dlpi_name : "";
        auto* s = static_cast<Search*>(data);
        for (const auto& part : s->parts) {
          if (!s->found.empty() || name.find(part) == std::string::npos) continue;
          char resolved[4096];
          s->found = realpath(name.c_str(), resolved) ? std::string(resolved) : name;
        }
        return 0;
      },
      &search);
  return search.found;
}

static std::string loaded_blas_path() { return loaded_library({"libblas", "libopenblas", "mkl_"}); }

static std::string blas_kind(const std::string& path) {
  if (path.find("openblas-openmp") != std::string::npos) return "openblas-openmp";
  if (path.find("openblas-pthread") != std::string::npos) return "openblas-pthread";
  if (path.find("openblas") != std::string::npos) return "openblas";
  if (path.find("mkl") != std::string::npos) return "mkl";
  if (path.find("/blas/") != std::string::npos) return "reference";
  if (path.empty()) return at::hasMKL() ? "mkl" : "builtin";
  return "unknown";
}

static std::string json_escape(const std::string& s) {
  std::string out;
  for (char c : s) {
    if (c == '"' || c == '\\') out += '\\';
    out += c;
  }
  return out;
}

// CUDA as libtorch sees it: runtime and cuDNN versions (0 when absent) and each GPU. The hooks
// answer in every build (a CPU libtorch says no CUDA); device properties need a CUDA build.
static std::string cuda_json() {
  const auto& hooks = at::detail::getCUDAHooks();
  const bool cuda = at::hasCUDA();
  std::string gpus = "[";
#if defined(RLX_CUDA)
  for (int i = 0; cuda && i < hooks.getNumGPUs(); ++i) {
    const auto* p = at::cuda::getDeviceProperties(i);
    gpus += std::string(i ? "," : "") + "{\"name\":\"" + json_escape(p->name) + "\",\"memory_gib\":" +
            std::to_string(p->totalGlobalMem / double(1 << 30)) + ",\"capability\":\"" + std::to_string(p->major) +
            "." + std::to_string(p->minor) + "\"}";
  }
#endif
  gpus += "]";
  return std::string(",\"cuda\":") + (cuda ? "true" : "false") +
         ",\"cuda_build\":" + (RLX_CUDA_BUILD ? "true" : "false") +
         ",\"nccl_built\":" + (nccl_compiled() ? "true" : "false") +
         ",\"cuda_runtime\":" + std::to_string(cuda ? hooks.versionCUDART() : 0) +
         ",\"cudnn\":" + std::to_string(cuda && hooks.hasCuDNN() ? hooks.versionCuDNN() : 0) + ",\"gpus\":" + gpus;
}

}  // namespace rlx

RLX_API int rlx_abi_version(void) { return RLX_ABI_VERSION; }

RLX_API const char* rlx_last_error(void) { return rlx::last_error().c_str(); }

RLX_API int rlx_set_threads(int n) {
  RLX_TRY(-1, {
    int cores = static_cast<int>(std::thread::hardware_concurrency());
    at::set_num_threads(n > 0 ? n : std::max(1, cores));
    return at::get_num_threads();
  })
}

RLX_API const char* rlx_runtime_info(void) {
  static thread_local std::string json;
  RLX_TRY(nullptr, {
    std::string blas_path = rlx::loaded_blas_path();
    json = "{\"abi\":" + std::to_string(RLX_ABI_VERSION) +
           ",\"torch_version\":\"" + std::string(TORCH_VERSION) + "\"" +
           ",\"torch_lib\":\"" + rlx::json_escape(rlx::loaded_library({"libtorch_cpu.so"})) + "\"" +
           ",\"threads\":" + std::to_string(at::get_num_threads()) +
           ",\"cores\":" + std::to_string(std::thread::hardware_concurrency()) +
           ",\"blas\":\"" + rlx::blas_kind(blas_path) + "\"" +
           ",\"blas_path\":\"" + rlx::json_escape(blas_path) + "\"" +
           rlx::cuda_json() +
           ",\"mkldnn\":" + (at::hasMKLDNN() ? "true" : "false") +
           ",\"cxx11_abi\":" + std::to_string(_GLIBCXX_USE_CXX11_ABI) +
           ",\"omp_wait_policy\":\"" + rlx::json_escape(getenv("OMP_WAIT_POLICY") ? getenv("OMP_WAIT_POLICY") : "") + "\"}";
    return json.c_str();
  })
}

RLX_API double rlx_bench_matmul(int n, int iters) {
  RLX_TRY(std::nan(""), {
    rlx::require(n > 0 && n <= 16384, "rlx_bench_matmul: n must be in 1..16384, got " + std::to_string(n));
    rlx::require(iters > 0, "rlx_bench_matmul: iters must be positive");
    c10::InferenceMode guard;
    auto a = at::randn({n, n});
    auto b = at::randn({n, n});
    at::mm(a, b);  // warm-up: thread pools, BLAS buffers
    auto start = std::chrono::steady_clock::now();
    for (int i = 0; i < iters; ++i) at::mm(a, b);
    double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    return 2.0 * n * static_cast<double>(n) * n * iters / seconds / 1e9;
  })
}

RLX_API int rlx_device_memory(const char* device, int reset_peak, int64_t* out) {
  RLX_TRY(-1, {
    rlx::require(device != nullptr && out != nullptr, "rlx_device_memory: device and out are required");
    at::Device d(device);
    out[0] = out[1] = out[2] = 0;
#if defined(RLX_CUDA)
    if (d.is_cuda() && at::hasCUDA()) {
      namespace alloc = c10::cuda::CUDACachingAllocator;
      const auto index = d.has_index() ? d.index() : c10::cuda::current_device();
      const auto stats = alloc::getDeviceStats(index);
      const size_t all = 0;  // StatType::AGGREGATE, first in every version (its namespace moved in 2.x)
      out[0] = stats.allocated_bytes[all].current;
      out[1] = stats.allocated_bytes[all].peak;
      out[2] = stats.reserved_bytes[all].current;
      if (reset_peak) alloc::resetPeakStats(index);
    }
#endif
    return 0;
  })
}
