#include "util/cuda_graph.h"

#include <cstdlib>
#include <cstring>
#include <exception>
#include <map>
#include <memory>
#include <optional>

#ifdef NMT_WITH_CUDA
#include <ATen/cuda/CUDAEvent.h>
#include <ATen/cuda/CUDAGraph.h>
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>
#endif

namespace nmt {

bool cuda_graphs_enabled(const torch::Device& device) {
#ifdef NMT_WITH_CUDA
  const char* setting = std::getenv("NMT_CUDA_GRAPHS");
  return device.is_cuda() && (setting == nullptr || std::strcmp(setting, "off") != 0);
#else
  (void)device;
  return false;
#endif
}

#ifdef NMT_WITH_CUDA
struct GpuSideStream::State {
  // The side stream waits for the work queued before it, then becomes current.
  explicit State(c10::cuda::CUDAStream side)
      : previous(c10::cuda::getCurrentCUDAStream(side.device_index())), side(side) {
    at::cuda::CUDAEvent queued;
    queued.record(previous);
    queued.block(side);
    guard.emplace(side);
  }
  c10::cuda::CUDAStream previous;
  c10::cuda::CUDAStream side;
  std::optional<c10::cuda::CUDAStreamGuard> guard;
};

struct GpuStream::State {
  c10::cuda::CUDAStream stream;
};

GpuStream::GpuStream(const torch::Device& device) {
  if (device.is_cuda()) {
    state_ = std::make_shared<State>(State{c10::cuda::getStreamFromPool(/*isHighPriority=*/false, device.index())});
  }
}
GpuStream::~GpuStream() = default;

GpuSideStream::GpuSideStream(const torch::Device& device) {
  if (!device.is_cuda()) return;
  state_ = std::make_unique<State>(c10::cuda::getStreamFromPool(/*isHighPriority=*/false, device.index()));
}

GpuSideStream::GpuSideStream(const GpuStream& stream) {
  if (stream.state_) state_ = std::make_unique<State>(stream.state_->stream);
}

GpuSideStream::~GpuSideStream() {
  if (!state_) return;
  at::cuda::CUDAEvent done;
  done.record(state_->side);
  done.block(state_->previous);
  state_->guard.reset();
}

struct StepGraph::State {
  at::cuda::CUDAGraph graph;
};

GraphPool new_graph_pool() {
  const auto id = at::cuda::graph_pool_handle();
  return {id.first, id.second};
}

// A thread's pool lives as long as some graph captured into it (LibTorch's allocators, for device
// and pinned memory, give a pool back when its last graph goes): so the last graph of a search is
// kept until the next search's graph has been captured into the same pool.
struct GraphKeeper {
  std::unique_ptr<StepGraph::State> last;
};

SearchGraphs thread_search_graphs(const torch::Device& device) {
  struct Kept {
    explicit Kept(const torch::Device& device) : stream(device), pool(new_graph_pool()) {}
    GpuStream stream;
    GraphPool pool;
    GraphKeeper keeper;
    bool used = false;
  };
  thread_local std::map<c10::DeviceIndex, std::unique_ptr<Kept>> kept;
  if (!device.is_cuda()) {
    static const GpuStream none(torch::kCPU);
    return {none, {}};
  }
  const c10::cuda::CUDAGuard on_device(device);
  std::unique_ptr<Kept>& slot = kept[c10::cuda::current_device()];
  if (!slot) slot = std::make_unique<Kept>(device);
  const bool warm = slot->used;
  slot->used = true;
  return {slot->stream, slot->pool, warm, &slot->keeper};
}

StepGraph::StepGraph(bool enabled, GraphPool pool, bool warm, GraphKeeper* keeper)
    : enabled_(enabled), pool_(pool), calls_(warm ? 1 : 0), keeper_(keeper) {}

StepGraph::~StepGraph() {
  if (keeper_ != nullptr && state_) keeper_->last = std::move(state_);  // the one kept before goes
}

void StepGraph::run(const std::function<void()>& step) {
  ++calls_;
  if (!enabled_ || calls_ == 1) {
    step();
    return;
  }
  if (!state_) {
    state_ = std::make_unique<State>();
    // Thread-local: other threads' CUDA calls (another request of the server) do not break it.
    state_->graph.capture_begin({pool_.first, pool_.second}, cudaStreamCaptureModeThreadLocal);
    try {
      step();
      state_->graph.capture_end();
    } catch (const std::exception&) {
      // Something in the step cannot be captured (it waits for the GPU, say): nothing has run
      // yet, so the steps run as they are from here on.
      try {
        state_->graph.capture_end();
      } catch (const std::exception&) {  // the capture was invalidated: ending it is all that is needed
      }
      state_.reset();
      enabled_ = false;
      step();
      return;
    }
  }
  state_->graph.replay();
}
#else
struct GpuStream::State {};
GpuStream::GpuStream(const torch::Device&) {}
GpuStream::~GpuStream() = default;

struct GpuSideStream::State {};
GpuSideStream::GpuSideStream(const torch::Device&) {}
GpuSideStream::GpuSideStream(const GpuStream&) {}
GpuSideStream::~GpuSideStream() = default;

GraphPool new_graph_pool() { return {}; }

SearchGraphs thread_search_graphs(const torch::Device&) {
  static const GpuStream none(torch::kCPU);
  return {none, {}};
}

struct StepGraph::State {};
StepGraph::StepGraph(bool enabled, GraphPool pool, bool warm, GraphKeeper* keeper)
    : enabled_(enabled), pool_(pool), calls_(warm ? 1 : 0), keeper_(keeper) {}

StepGraph::~StepGraph() = default;

void StepGraph::run(const std::function<void()>& step) {
  ++calls_;
  step();
}
#endif

}  // namespace nmt
