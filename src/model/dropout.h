// Dropout with a fast mask. LibTorch's CPU dropout draws its mask with bernoulli_, which in a
// build without MKL (Debian's) calls the shared generator once per element, a noticeable share of
// a training update (docs/dev/performance-notes.md). This draws one 64-bit seed from LibTorch's default
// generator per call (so torch::manual_seed still makes runs reproducible) and derives each
// element's decision from a hash of (seed, index), in a branch-free loop.
// On other devices (CUDA), and with NMT_KERNELS=off (kernels/dispatch.h), it uses LibTorch's own
// dropout, the reference.
#pragma once

#include <torch/types.h>

namespace nmt {

// Inverted dropout: while training, each element of `input` is zeroed with probability p and the
// rest scaled by 1 / (1 - p); `input` unchanged when not training or p == 0. Needs 0 <= p < 1.
torch::Tensor apply_dropout(const torch::Tensor& input, double p, bool training);

// The mask itself: a tensor of `shape` with `options`' dtype and device whose elements are 0 with
// probability p and 1 / (1 - p) otherwise. Multiply by it (broadcasting allowed) to drop.
torch::Tensor dropout_mask(at::IntArrayRef shape, double p, const torch::TensorOptions& options);

}  // namespace nmt
