// Process-wide run settings: threads, seeds, the device, and a check of LibTorch's BLAS.
#pragma once

#include <torch/types.h>

#include <functional>
#include <ostream>
#include <string>

namespace nmt {

// The most threads any command runs: sentencepiece's trainer takes no more, and past the cores
// more threads only wait on each other.
constexpr int kMaxThreads = 128;

// Throws std::invalid_argument naming the threads option unless 0 <= threads <= kMaxThreads.
void check_threads(int threads);

// Sets LibTorch's intra-op threads after check_threads; 0 means the number of cores (at most
// kMaxThreads). Also flush_denormals() for the calling thread.
void set_threads(int threads);

// Makes this thread treat denormal floats (magnitudes below 1.2e-38) as 0, as inputs and as
// results (x86's FTZ and DAZ; LibTorch's set_flush_denormal). A softmax over widely spread scores
// (an unscaled dot product, say) leaves weights of that size, and on x86 every operation that
// meets one runs many times slower; as 0 they change no result that matters. The mode is per
// thread: set_threads sets it for the main thread, run_in_parallel for its workers and
// run_as_team (util/team.h) for the fused loops' threads.
void flush_denormals();

// Runs task(0) ... task(tasks - 1) on `workers` threads (the calling one included), each taking
// the next task as it finishes one, with LibTorch's operators single-threaded inside them; the
// previous thread count is restored afterwards. Once a task throws, tasks not yet started are
// skipped, and an exception (the calling thread's first, else the lowest-numbered worker's) is
// rethrown here after all threads have stopped. Relies on LibTorch's OpenMP backend (Debian's),
// where the thread count is per thread.
void run_in_parallel(size_t workers, size_t tasks, const std::function<void(size_t)>& task);

// For the start of main: a write to a closed pipe or a write over the file-size limit fails with
// an error (EPIPE, EFBIG) that the program reports, instead of a signal that ends it silently;
// and a standard stream the program was started without (`nmt translate >&-`) is held by
// /dev/null opened read-only, so that no file opened later takes its number (and receives the
// translation) and a write to it fails with a message.
void guard_standard_streams();

// Flushes `out` (standard output); throws std::runtime_error "standard output: write failed
// (REASON)" when it is full, closed or a pipe nobody reads.
void flush_standard_output(std::ostream& out);

// Seeds LibTorch's generators (CPU and CUDA).
void set_seed(int seed);

// The state of LibTorch's generator for `device` (the CPU's, or a GPU's), to store in a
// checkpoint and restore on --resume: dropout draws from the generator of the device it runs on.
torch::Tensor random_state(const torch::Device& device = torch::kCPU);
void set_random_state(const torch::Tensor& state, const torch::Device& device = torch::kCPU);

// What is wrong with a --device name, in words; "" for cpu, cuda and cuda:N.
std::string device_name_problem(const std::string& name);

// "cpu", "cuda" (cuda:0) or "cuda:N"; throws std::invalid_argument for another name, or when CUDA is
// asked for but unavailable. With CUDA, GPU N + `local_rank` of those the process sees (ranks take
// consecutive GPUs from N, as torchrun numbers a machine's processes), which becomes the process's
// current GPU; there must be that many GPUs.
torch::Device parse_device(const std::string& name, int local_rank = 0);

// `tensor` on `device`. A CPU tensor bound for a GPU goes through pinned memory without waiting:
// a plain copy from pageable memory waits for all the GPU's queued work first.
torch::Tensor to_device(const torch::Tensor& tensor, const torch::Device& device);

// For its lifetime, LibTorch's autocast for `device` is on (bfloat16 products; softmax, losses and
// reductions in float32, as torch.autocast does it) or off, as `enabled` says; then as it was.
// GPUs only: on the CPU it does nothing.
class AutocastScope {
 public:
  AutocastScope(const torch::Device& device, bool enabled);
  ~AutocastScope();
  AutocastScope(const AutocastScope&) = delete;
  AutocastScope& operator=(const AutocastScope&) = delete;

 private:
  bool active_ = false, was_enabled_ = false;
  c10::ScalarType was_dtype_ = c10::ScalarType::Half;
};
// Whether autocast is on for `device` (a GPU) in this thread.
bool autocast_enabled(const torch::Device& device);
// Whether `device` computes in bfloat16 at full speed (a GPU of compute capability 8.0 or later).
bool has_bf16(const torch::Device& device);

// A copy of `tensor` on the CPU that a GPU sends while the host goes on: `host` holds the values
// once wait() has returned. For a CPU tensor they are there at once.
struct AsyncRead {
  torch::Tensor host;
  std::function<void()> wait;
};
AsyncRead read_async(const torch::Tensor& tensor);

// A warning text when the BLAS that LibTorch calls is the slow reference BLAS, else empty.
std::string slow_blas_warning();

}  // namespace nmt
