#include "util/cuda_graph.h"

#include <cstdlib>
#include <cstring>
#include <exception>
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

StepGraph::StepGraph(bool enabled, GraphPool pool) : enabled_(enabled), pool_(pool) {}
StepGraph::~StepGraph() = default;

void StepGraph::run(const std::function<void()>& step) {
  ++calls_;
  if (!enabled_ || calls_ == 1) {
    step();
    return;
  }
  if (calls_ == 2) {
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

struct StepGraph::State {};
StepGraph::StepGraph(bool enabled, GraphPool pool) : enabled_(enabled), pool_(pool) {}
StepGraph::~StepGraph() = default;

void StepGraph::run(const std::function<void()>& step) {
  ++calls_;
  step();
}
#endif

}  // namespace nmt
