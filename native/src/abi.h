// The struct ABI's entry: a caller's rlx_batch, rlx_loss or rlx_rl_loss read into the shim's own copy, after
// checking its size field (rlx.h: a longer struct is read as far as the shim knows it, a shorter
// one is refused naming both sizes).
#pragma once
#include "common.h"

namespace rlx {

rlx_batch batch_of(const rlx_batch* in);
rlx_loss loss_of(const rlx_loss* in);
// The entries of loss.losses, each read as its size field says.
std::vector<rlx_rl_loss> rl_losses_of(const rlx_loss& loss);

}  // namespace rlx
