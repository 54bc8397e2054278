#include "model/dropout.h"

#include <ATen/CPUGeneratorImpl.h>
#include <torch/torch.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <mutex>

#include "kernels/dispatch.h"

namespace nmt {
namespace {

// Chris Wellons' "lowbias32" integer hash: 32 well-mixed bits from a 32-bit key, in a few
// multiplies and shifts that the compiler vectorises.
inline uint32_t hash32(uint32_t x) {
  x ^= x >> 16;
  x *= 0x7feb352dU;
  x ^= x >> 15;
  x *= 0x846ca68bU;
  x ^= x >> 16;
  return x;
}

void check_probability(double p) { TORCH_CHECK(p >= 0 && p < 1, "dropout probability must be in [0, 1), not ", p); }

uint64_t draw_seed() {
  at::Generator generator = at::detail::getDefaultCPUGenerator();
  std::lock_guard<std::mutex> lock(generator.mutex());
  return generator.get<at::CPUGeneratorImpl>()->random64();
}

// Fills `out[0, n)` with 0 or `scale`: element i is kept when hash(hash(i + seed_low) ^ seed_high),
// a 32-bit draw, is below `threshold`. Branch-free, so a 30% drop rate costs no mispredictions.
template <typename T>
void fill_mask(T* out, int64_t n, uint64_t seed, uint32_t threshold, T scale) {
  TORCH_CHECK(n <= (int64_t{1} << 32), "dropout: a tensor of more than 2^32 elements");
  const auto low = static_cast<uint32_t>(seed);
  const auto high = static_cast<uint32_t>(seed >> 32);
  for (int64_t i = 0; i < n; ++i) {
    const uint32_t draw = hash32(hash32(static_cast<uint32_t>(i) + low) ^ high);
    out[i] = draw < threshold ? scale : T(0);
  }
}

}  // namespace

torch::Tensor dropout_mask(at::IntArrayRef shape, double p, const torch::TensorOptions& options) {
  check_probability(p);
  const double keep = 1.0 - p;
  // The reference: LibTorch's own draw (on other devices, and with NMT_KERNELS=off).
  if (!kernels::use_kernel(kernels::Operation::kDropoutMask, {}, kernels::run_on(options.device()))) {
    return torch::empty(shape, options).bernoulli_(keep).div_(keep);
  }
  if (p == 0) return torch::ones(shape, options);
  torch::Tensor mask = torch::empty(shape, options);
  const uint64_t seed = draw_seed();
  // keep x 2^32 as a 32-bit threshold (below 2^32, since p > 0 here).
  const auto threshold = static_cast<uint32_t>(std::min(std::ldexp(keep, 32), 4294967295.0));
  AT_DISPATCH_FLOATING_TYPES_AND2(at::kHalf, at::kBFloat16, mask.scalar_type(), "dropout_mask", [&] {
    fill_mask<scalar_t>(mask.data_ptr<scalar_t>(), mask.numel(), seed, threshold, static_cast<scalar_t>(1.0 / keep));
  });
  return mask;
}

torch::Tensor apply_dropout(const torch::Tensor& input, double p, bool training) {
  if (!training || p == 0) return input;
  if (!kernels::use_kernel(kernels::Operation::kDropoutMask, {input})) {
    check_probability(p);  // dropout_mask checks it on the CPU path
    return torch::dropout(input, p, true);
  }
  return input * dropout_mask(input.sizes(), p, input.options().requires_grad(false));
}

}  // namespace nmt
