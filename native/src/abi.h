// The struct ABI's entry: a caller's rlx_batch or rlx_loss read into the shim's own copy, after
// checking its size field (rlx.h: a longer struct is read as far as the shim knows it, a shorter
// one is refused naming both sizes).
#pragma once
#include "common.h"

namespace rlx {

rlx_batch batch_of(const rlx_batch* in);
rlx_loss loss_of(const rlx_loss* in);

}  // namespace rlx
