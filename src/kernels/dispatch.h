// The one place that decides whether the hand-written CPU kernels run or the LibTorch reference
// operations they replace, as CTranslate2's one CPU ISA dispatch does. Every fast operation asks
// use_kernel() with its Operation; the list below names, for each, the function that asks and
// where its reference runs (beside the call, in the same file, unless it says otherwise).
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

// The fast operations: who asks (file), the kernel, and the reference it replaces.
enum class Operation {
  // GruCellImpl::from_gates (model/gru_cell.cpp): kernels/gru_kernels.h, or the step in LibTorch's
  // ops beside it.
  kGruStep,
  // additive_energy (model/ops/attention_products.cpp): kernels/attention_kernels.h, or tanh and a product
  // with v beside it.
  kAdditiveEnergy,
  // weighted_sum (model/ops/attention_products.cpp): kernels/attention_kernels.h, or a broadcast product and
  // sum beside it.
  kWeightedSum,
  // output_layer_loss (train/loss.cpp): kernels/row_kernels.h, or linear and
  // smoothed_cross_entropy_sum in the same file.
  kOutputLayerLoss,
  // BiGruImpl::forward (model/bigru.cpp): both directions in fused_bigru_layer (model/fused_cpu/bigru_layer.h),
  // or BiGruImpl::run per direction in the same file.
  kBiGruLayer,
  // DecoderImpl::takes_fused_loop (model/decoder.cpp): the teacher-forced loop in
  // fused_decoder_loop (model/fused_cpu/decoder_pass.h) while autograd records, or the reference,
  // DecoderImpl::advance per step (model/reference/decoder_steps.h; its steps ask for their own
  // operations).
  kDecoderLoop,
  // LoopWeight (model/linear/loop_weight.cpp): the packed products of kernels/packed_gemm.h (the AVX-512
  // kernel at level avx512, the AVX2 one at avx2; in a bf16 training step at level avx512, the
  // tile kernel of kernels/bf16_kernels.h on a CPU with AMX, else its AVX512_BF16 one), or
  // at::addmm (the BLAS) in LoopWeight::multiply.
  kPackedProducts,
  // Int8Linear (model/linear/int8_linear.cpp), compute type int8: the AVX-512 VNNI kernel of
  // kernels/int8_gemm.h at level avx512 on a CPU with VNNI, else the AVX2 one; or the plain int8
  // reference in the same header (the same integer sums; the AVX2 kernel's activations have 6 bits,
  // Int8Linear::activation_limit).
  kInt8Products,
  // FusedAdam::step (train/fused_adam.cpp): kernels/adam_kernel.h, or torch::optim::Adam::step,
  // LibTorch's own.
  kAdam,
  // dropout_mask and apply_dropout (model/dropout.cpp): the hashed mask there (plain C++, any
  // floating type), or LibTorch's bernoulli_ and dropout beside it.
  kDropoutMask,
  // log_softmax_rows and best_extensions_of_logits (search/ensemble.cpp, search/beam.cpp): the
  // row kernels of kernels/row_kernels.h, or torch::log_softmax and topk in the same files.
  kLogSoftmax,
  // to_bf16 and to_float (model/linear/bf16_products.cpp), precision bf16: kernels/bf16_kernels.h's
  // AVX-512 conversions at level avx512 where the CPU has them (bf16_kernels_available), or
  // Tensor::to (copy_) beside them.
  kBf16Conversions,
};

using TensorRefs = std::initializer_list<std::reference_wrapper<const torch::Tensor>>;

// True when `operation`'s kernel runs: the level in force reaches the operation's (avx2 for every
// one but the bf16 conversions, avx512, which also need the CPU's bf16 conversion kernels), every
// defined tensor given is on the CPU and float32 (any
// type for kDropoutMask), and `fits`, the caller's own conditions (shapes, types, options), holds.
// Undefined tensors (an absent bias) are skipped. Otherwise the caller runs the reference.
// The first time each operation takes each path, logs which at debug level ("kernels: gru_step
// uses avx2"); after that, a relaxed atomic load per call.
bool use_kernel(Operation operation, TensorRefs tensors = {}, bool fits = true);

// The kernels of the operations that have more than one, chosen here from the level in force and
// what the CPU has (kernels/available.h), so that no caller reads the CPU itself.
//
// Int8Linear's products (kInt8Products): the AVX-512 VNNI kernel at level avx512 on a CPU with
// VNNI, else the AVX2 one; kReference where use_kernel(kInt8Products) says no.
enum class Int8Kernel { kReference, kAvx2, kVnni };
Int8Kernel int8_kernel();
// A LoopWeight's products (kPackedProducts), for a weight that use_kernel(kPackedProducts) took:
// at level avx512, in a bf16 training step (`bf16`), the AMX tile kernel on a CPU with AMX, else
// the AVX512_BF16 one where the CPU has it, else the float32 AVX-512 kernel; at level avx2 the
// AVX2 one.
enum class PackedKernel { kAvx2, kAvx512, kAvx512Bf16, kAmx };
PackedKernel packed_kernel(bool bf16);
// Whether this CPU computes bfloat16 products (AVX512_BF16 or AMX-BF16), which training with
// precision bf16 on a CPU asks before it starts.
bool cpu_has_bf16();

// Whether the CPU kernels, and the weights prepared for them (packed float32, int8), serve a model
// on `device`: the CPU. A model anywhere else runs LibTorch's operations (util/device_rules.h).
bool run_on(const torch::Device& device);

// Whether every defined tensor given is where the kernels read it, in the CPU's memory: the
// argument checks of the classes that run nothing else (model/linear/).
bool on_cpu(TensorRefs tensors);

// True when autograd records an operation on these inputs: grad mode is on and one of them
// requires grad. Otherwise a kernel's forward can run alone, keeping nothing for a backward.
bool autograd_records(TensorRefs tensors);

}  // namespace nmt::kernels
