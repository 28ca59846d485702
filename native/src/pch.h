// Precompiled header for every translation unit of the shim. ATen only (not torch/torch.h:
// three times slower to parse, docs/architecture.md §7). Built once by build.ts
// with exactly the flags of the TUs; -Winvalid-pch reports a mismatch.
#pragma once
#include <ATen/ATen.h>
#include <ATen/Parallel.h>
#include <ATen/CPUGeneratorImpl.h>
#include <ATen/autocast_mode.h>
#include <c10/core/InferenceMode.h>
#include <c10/util/Exception.h>
#include <torch/version.h>
#include <torch/csrc/autograd/autograd.h>
#include <torch/csrc/autograd/generated/variable_factories.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <vector>
