#include "util/cuda_graph.h"

#include <cstdlib>
#include <cstring>
#include <exception>
#include <map>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <utility>

#ifdef NMT_WITH_CUDA
#include <ATen/cuda/CUDAEvent.h>
#include <ATen/cuda/CUDAGraph.h>
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>
#include <torch/csrc/autograd/function.h>
#include <torch/csrc/autograd/variable.h>
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

bool gpu_decoder_pass_recorded() {
  static const bool recorded = [] {
    const char* setting = std::getenv("NMT_GPU_DECODER_PASS");
    if (setting == nullptr || *setting == '\0' || std::strcmp(setting, "loop") == 0) return false;
    if (std::strcmp(setting, "recorded") == 0) return true;
    throw std::invalid_argument("NMT_GPU_DECODER_PASS=" + std::string(setting) +
                                ": not loop or recorded (unset it for the default, loop)");
  }();
  return recorded;
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

struct RecordedGraph::State {
  at::cuda::CUDAGraph graph;
};

RecordedGraph::RecordedGraph(GraphPool pool) : pool_(pool) {}
RecordedGraph::~RecordedGraph() = default;

void RecordedGraph::capture(const std::function<void()>& program) {
  auto state = std::make_unique<State>();
  // Thread-local: other threads' CUDA calls (another request of the server, a batch being read)
  // do not break it.
  try {
    state->graph.capture_begin({pool_.first, pool_.second}, cudaStreamCaptureModeThreadLocal);
    program();
    state->graph.capture_end();
  } catch (const std::exception& error) {
    try {
      state->graph.capture_end();
    } catch (const std::exception&) {  // the capture was invalidated: ending it is all that is needed
    }
    (void)cudaGetLastError();
    const std::string what = error.what();
    throw std::runtime_error("a CUDA graph could not be recorded (" + what.substr(0, what.find('\n')) +
                             "): set NMT_CUDA_GRAPHS=off to run without graphs");
  }
  state_ = std::move(state);
  recorded_ = true;
}

void RecordedGraph::replay() {
  TORCH_CHECK(recorded_, "RecordedGraph::replay: nothing was recorded");
  state_->graph.replay();
}

GraphPool new_graph_pool() {
  const auto id = at::cuda::graph_pool_handle();
  return {id.first, id.second};
}

// A thread's pool lives as long as some graph captured into it (LibTorch's allocators, for device
// and pinned memory, give a pool back when its last graph goes): so the last graph of a search is
// kept until the next search's graph has been captured into the same pool.
struct GraphKeeper {
  std::unique_ptr<RecordedGraph> last;
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

StepGraph::~StepGraph() {
  if (keeper_ != nullptr && graph_) keeper_->last = std::move(graph_);  // the one kept before goes
}

AccumulatorsOnStream::AccumulatorsOnStream(const GpuStream& stream, const std::vector<torch::Tensor>& weights) {
  if (!stream.state_) return;
  const GpuSideStream side(stream);  // an accumulator takes the stream current when it is made
  for (const torch::Tensor& weight : weights) {
    if (!weight.requires_grad() || !weight.is_leaf()) continue;
    own_.weights.push_back(weight);
    before_.push_back(torch::autograd::impl::try_get_grad_accumulator(weight));
    torch::autograd::impl::set_grad_accumulator(weight, std::weak_ptr<torch::autograd::Node>());
    own_.nodes.push_back(torch::autograd::impl::grad_accumulator(weight));  // a new one, on `stream`
  }
}

AccumulatorsOnStream::AccumulatorsOnStream(AccumulatorSet own) : own_(std::move(own)) {
  for (size_t i = 0; i < own_.weights.size(); ++i) {
    before_.push_back(torch::autograd::impl::try_get_grad_accumulator(own_.weights[i]));
    torch::autograd::impl::set_grad_accumulator(own_.weights[i], own_.nodes[i]);
  }
}

AccumulatorsOnStream::~AccumulatorsOnStream() {
  for (size_t i = 0; i < before_.size(); ++i) {
    torch::autograd::impl::set_grad_accumulator(own_.weights[i], before_[i]);
  }
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

struct RecordedGraph::State {};
RecordedGraph::RecordedGraph(GraphPool pool) : pool_(pool) {}
RecordedGraph::~RecordedGraph() = default;
void RecordedGraph::capture(const std::function<void()>&) {
  throw std::runtime_error("CUDA graphs need a CUDA build of nmt and a GPU");
}
void RecordedGraph::replay() { throw std::runtime_error("RecordedGraph::replay: nothing was recorded"); }

AccumulatorsOnStream::AccumulatorsOnStream(const GpuStream&, const std::vector<torch::Tensor>&) {}
AccumulatorsOnStream::AccumulatorsOnStream(AccumulatorSet own) : own_(std::move(own)) {}
AccumulatorsOnStream::~AccumulatorsOnStream() = default;

StepGraph::~StepGraph() = default;
#endif

StepGraph::StepGraph(bool enabled, GraphPool pool, bool warm, GraphKeeper* keeper)
    : enabled_(enabled), pool_(pool), calls_(warm ? 1 : 0), keeper_(keeper) {}

void StepGraph::run(const std::function<void()>& step) {
  ++calls_;
  if (!enabled_ || calls_ == 1) {
    step();
    return;
  }
  if (!graph_) {
    auto graph = std::make_unique<RecordedGraph>(pool_);
    graph->capture(step);
    graph_ = std::move(graph);
  }
  graph_->replay();
}

}  // namespace nmt
