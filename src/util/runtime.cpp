#include "util/runtime.h"

#include <dlfcn.h>
#include <fcntl.h>
#include <unistd.h>

#include <ATen/autocast_mode.h>
#include <torch/cuda.h>
#include <torch/torch.h>
#include <torch/version.h>
#ifdef NMT_WITH_CUDA
#include <ATen/cuda/CUDAContext.h>
#include <ATen/cuda/CUDAEvent.h>
#include <c10/cuda/CUDAFunctions.h>
#endif

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <csignal>
#include <cstring>
#include <exception>
#include <filesystem>
#include <mutex>
#include <stdexcept>
#include <thread>
#include <vector>

namespace nmt {

void check_threads(int threads) {
  if (threads < 0 || threads > kMaxThreads) {
    throw std::invalid_argument("threads: " + std::to_string(threads) + " is out of range; give 1 to " +
                                std::to_string(kMaxThreads) + ", or 0 for the number of cores");
  }
}

void set_threads(int threads) {
  check_threads(threads);
  const int cores = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  torch::set_num_threads(threads > 0 ? threads : std::min(cores, kMaxThreads));
  flush_denormals();
}

void flush_denormals() { at::globalContext().setFlushDenormal(true); }

void run_in_parallel(size_t workers, size_t tasks, const std::function<void(size_t)>& task) {
  workers = std::max<size_t>(workers, 1);
  struct RestoreThreads {
    int count = torch::get_num_threads();
    ~RestoreThreads() { torch::set_num_threads(count); }
  } restore;
  // Sets the count new threads start with as well as this thread's own (OpenMP's is per thread).
  torch::set_num_threads(1);
  std::atomic<size_t> next{0};
  std::atomic<bool> failed{false};
  std::vector<std::exception_ptr> errors(workers);
  auto work = [&](size_t worker) {
    try {
      torch::set_num_threads(1);
      flush_denormals();
      for (size_t index = next++; index < tasks && !failed; index = next++) task(index);
    } catch (...) {
      errors[worker] = std::current_exception();
      failed = true;
    }
  };
  std::vector<std::thread> threads;
  threads.reserve(workers);
  try {
    for (size_t worker = 1; worker < workers; ++worker) threads.emplace_back(work, worker);
  } catch (...) {  // no thread for this worker: stop the others, then report it
    failed = true;
    for (auto& thread : threads) thread.join();
    throw;
  }
  work(0);
  for (auto& thread : threads) thread.join();
  for (const auto& error : errors) {
    if (error) std::rethrow_exception(error);
  }
}

void guard_standard_streams() {
  std::signal(SIGPIPE, SIG_IGN);
  std::signal(SIGXFSZ, SIG_IGN);
  for (const int descriptor : {STDIN_FILENO, STDOUT_FILENO, STDERR_FILENO}) {
    if (::fcntl(descriptor, F_GETFD) >= 0 || errno != EBADF) continue;
    const int placeholder = ::open("/dev/null", O_RDONLY);  // the lowest free number: this one
    if (placeholder >= 0 && placeholder != descriptor) {
      ::dup2(placeholder, descriptor);
      ::close(placeholder);
    }
  }
}

void flush_standard_output(std::ostream& out) {
  if (!(out << std::flush)) {
    throw std::runtime_error(std::string("standard output: write failed (") + std::strerror(errno) + ")");
  }
}

void set_seed(int seed) { torch::manual_seed(static_cast<uint64_t>(seed)); }

torch::Tensor random_state(const torch::Device& device) {
  at::Generator generator = at::globalContext().defaultGenerator(device);
  std::lock_guard<std::mutex> lock(generator.mutex());
  return generator.get_state();
}

void set_random_state(const torch::Tensor& state, const torch::Device& device) {
  at::Generator generator = at::globalContext().defaultGenerator(device);
  std::lock_guard<std::mutex> lock(generator.mutex());
  generator.set_state(state.to(torch::kCPU));  // a checkpoint loaded onto a GPU brings it there
}

std::string device_name_problem(const std::string& name) {
  if (name == "cpu" || name == "cuda") return "";
  const std::string index = name.rfind("cuda:", 0) == 0 ? name.substr(5) : "";
  if (!index.empty() && index.size() <= 4 && index.find_first_not_of("0123456789") == std::string::npos) return "";
  return "'" + name + "' is not one of cpu|cuda|cuda:N (N: a GPU's number among those CUDA_VISIBLE_DEVICES shows)";
}

torch::Device parse_device(const std::string& name, int local_rank) {
  if (const std::string problem = device_name_problem(name); !problem.empty()) {
    throw std::invalid_argument("--device: " + problem);
  }
  if (name == "cpu") return torch::kCPU;
  const int first = name == "cuda" ? 0 : std::stoi(name.substr(5));
  if (!torch::cuda::is_available()) {
    throw std::invalid_argument("--device " + name +
                                ": this LibTorch has no CUDA support or sees no GPU; use --device cpu, or build "
                                "against a CUDA LibTorch (docs/building.md, 'LibTorch 2.x and CUDA')");
  }
  const auto gpus = static_cast<int>(torch::cuda::device_count());
  const int gpu = first + local_rank;
  if (gpu >= gpus) {
    throw std::invalid_argument(
        "--device " + name + ": " +
        (local_rank > 0 ? "local rank " + std::to_string(local_rank) + " needs " : "needs ") + "GPU " +
        std::to_string(gpu) + ", and this process sees " + std::to_string(gpus) +
        ": give a GPU it sees (CUDA_VISIBLE_DEVICES picks them)" +
        (local_rank > 0 ? "; start at most one rank per GPU, and set LOCAL_RANK (as torchrun does) when the ranks "
                          "span machines"
                        : ""));
  }
  const torch::Device device(torch::kCUDA, static_cast<c10::DeviceIndex>(gpu));
#ifdef NMT_WITH_CUDA
  c10::cuda::set_device(device.index());  // where LibTorch and NCCL put what names no GPU
#endif
  return device;
}

torch::Tensor to_device(const torch::Tensor& tensor, const torch::Device& device) {
  if (device.is_cuda() && tensor.is_cpu()) return tensor.pin_memory().to(device, /*non_blocking=*/true);
  return tensor.to(device);
}

namespace {

// LibTorch 2.4 and later name the autocast state per device type; before, CUDA's had its own names.
#if TORCH_VERSION_MAJOR > 2 || (TORCH_VERSION_MAJOR == 2 && TORCH_VERSION_MINOR >= 4)
bool cuda_autocast() { return at::autocast::is_autocast_enabled(at::kCUDA); }
void set_cuda_autocast(bool on) { at::autocast::set_autocast_enabled(at::kCUDA, on); }
c10::ScalarType cuda_autocast_dtype() { return at::autocast::get_autocast_dtype(at::kCUDA); }
void set_cuda_autocast_dtype(c10::ScalarType dtype) { at::autocast::set_autocast_dtype(at::kCUDA, dtype); }
#else
bool cuda_autocast() { return at::autocast::is_enabled(); }
void set_cuda_autocast(bool on) { at::autocast::set_enabled(on); }
c10::ScalarType cuda_autocast_dtype() { return at::autocast::get_autocast_gpu_dtype(); }
void set_cuda_autocast_dtype(c10::ScalarType dtype) { at::autocast::set_autocast_gpu_dtype(dtype); }
#endif

}  // namespace

AutocastScope::AutocastScope(const torch::Device& device, bool enabled) {
  if (!device.is_cuda()) return;
  active_ = true;
  was_enabled_ = cuda_autocast();
  was_dtype_ = cuda_autocast_dtype();
  set_cuda_autocast(enabled);
  set_cuda_autocast_dtype(at::kBFloat16);
  at::autocast::increment_nesting();
}

AutocastScope::~AutocastScope() {
  if (!active_) return;
  // Leaving the outermost scope drops the casts autocast kept of the weights.
  if (at::autocast::decrement_nesting() == 0) at::autocast::clear_cache();
  set_cuda_autocast(was_enabled_);
  set_cuda_autocast_dtype(was_dtype_);
}

bool autocast_enabled(const torch::Device& device) { return device.is_cuda() && cuda_autocast(); }

bool has_bf16(const torch::Device& device) {
#ifdef NMT_WITH_CUDA
  if (device.is_cuda()) return at::cuda::getDeviceProperties(device.index())->major >= 8;
#endif
  (void)device;
  return false;
}

AsyncRead read_async(const torch::Tensor& tensor) {
#ifdef NMT_WITH_CUDA
  if (tensor.is_cuda()) {
    torch::Tensor host = torch::empty(tensor.sizes(), tensor.options().device(torch::kCPU).pinned_memory(true));
    host.copy_(tensor, /*non_blocking=*/true);
    auto event = std::make_shared<at::cuda::CUDAEvent>();
    event->record(at::cuda::getCurrentCUDAStream(tensor.device().index()));
    return {host, [event] { event->synchronize(); }};
  }
#endif
  return {tensor.cpu().clone(), [] {}};  // a copy, as from a GPU: later writes do not reach it
}

std::string slow_blas_warning() {
  // Debian's LibTorch calls sgemm_ from whatever libblas.so.3 the alternatives system selects;
  // the reference implementation lives under .../blas/ and is about 20 times slower than OpenBLAS.
  void* symbol = dlsym(RTLD_DEFAULT, "sgemm_");
  if (symbol == nullptr) return "";
  Dl_info info{};
  if (dladdr(symbol, &info) == 0 || info.dli_fname == nullptr) return "";
  std::error_code error;
  const std::string library = std::filesystem::canonical(info.dli_fname, error).string();
  if (error) return "";
  if (library.find("/blas/libblas") != std::string::npos) {
    return "LibTorch is using the reference BLAS (" + library +
           "), about 20x slower than OpenBLAS: run scripts/setup.sh as root, or apt-get install libopenblas0-openmp";
  }
  return "";
}

}  // namespace nmt
