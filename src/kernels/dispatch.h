// The one place that decides whether the hand-written CPU kernels run or the LibTorch reference
// operations they replace. Every fast operation (GRU step, attention energy and weighted sum,
// output-layer loss, BiGru and decoder loops, packed products, Adam, dropout masks) asks here and
// has its reference expression beside it in the same file.
//
// The level in force is the best this build and CPU support, unless the environment variable
// NMT_KERNELS (off | avx2 | avx512) asks for less; `off` runs the references everywhere, so a user
// can rule the kernels out when a result looks wrong, and the tests run every operation both ways.
#pragma once

#include <torch/types.h>

#include <functional>
#include <initializer_list>
#include <string>

namespace nmt::kernels {

enum class KernelLevel { kOff, kAvx2, kAvx512 };

// "off", "avx2", "avx512".
std::string to_string(KernelLevel level);

// The best level this build and CPU support.
KernelLevel supported_kernel_level();

// The level in force. The first call reads NMT_KERNELS (throws std::invalid_argument for an
// unknown value or a level this CPU lacks).
KernelLevel kernel_level();

// Sets the level in force (throws std::invalid_argument when the CPU lacks it). Not meant to
// change while a model is running: a LoopWeight packs its weight for the level of its making.
void set_kernel_level(KernelLevel level);

// Sets a level for one scope (tests), restoring the previous one after.
class ScopedKernelLevel {
 public:
  explicit ScopedKernelLevel(KernelLevel level) : previous_(kernel_level()) { set_kernel_level(level); }
  ~ScopedKernelLevel() { set_kernel_level(previous_); }
  ScopedKernelLevel(const ScopedKernelLevel&) = delete;
  ScopedKernelLevel& operator=(const ScopedKernelLevel&) = delete;

 private:
  KernelLevel previous_;
};

using TensorRefs = std::initializer_list<std::reference_wrapper<const torch::Tensor>>;

// True when the AVX2 kernels are in force and every defined tensor given is float32 on the CPU;
// undefined tensors (an absent bias) are skipped. Otherwise callers run the reference expressions.
bool kernels_take(TensorRefs tensors);

// True when the AVX-512 packed products (kernels/packed_gemm.h) are in force.
bool packed_products_on();

// True when autograd records an operation on these inputs: grad mode is on and one of them
// requires grad. Otherwise a kernel's forward can run alone, keeping nothing for a backward.
bool autograd_records(TensorRefs tensors);

}  // namespace nmt::kernels
