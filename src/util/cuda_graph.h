// CUDA graphs for a loop of identical GPU steps. A decoder step is a few dozen small kernels whose
// launches, not their arithmetic, take the time; captured once as a graph, a step is one launch.
//
// A graph replays the same kernels on the same memory: the step must read and write tensors that
// stay put (update them in place), keep its shapes, take no value from the host that changes
// between steps, and never wait for the GPU. Capture needs a stream of its own (GpuSideStream).
// Without a CUDA build, or with NMT_CUDA_GRAPHS=off, steps simply run.
#pragma once

#include <torch/types.h>

#include <functional>
#include <memory>
#include <vector>

namespace torch::autograd {
struct Node;
}

namespace nmt {

// Whether steps on `device` are captured as graphs: a CUDA build, a GPU device, and
// NMT_CUDA_GRAPHS not "off".
bool cuda_graphs_enabled(const torch::Device& device);

// NMT_GPU_DECODER_PASS: "recorded" trains every decoder on a GPU with the recorded pass
// (model/gpu_graph/recorded_pass.h), the recipe's too, to compare it with the GPU loop; unset or
// "loop" (the default) leaves the recipe's decoder to the loop. Another value throws
// std::invalid_argument, naming it.
bool gpu_decoder_pass_recorded();

// A stream picked once and kept: for graphs recorded and replayed over many calls, so that the
// libraries' per-stream handles (cuBLAS's workspace) are set up by the first call, which runs as it
// is, and not inside a recording. Nothing without a GPU.
class GpuStream {
 public:
  explicit GpuStream(const torch::Device& device);
  ~GpuStream();

 private:
  friend class GpuSideStream;
  friend class AccumulatorsOnStream;
  struct State;
  std::shared_ptr<State> state_;
};

// For its lifetime, the GPU work of this thread goes to a stream of its own, which first waits for
// the work queued before it; at the end, that stream's work comes before anything queued after.
// Nothing on the CPU.
class GpuSideStream {
 public:
  explicit GpuSideStream(const torch::Device& device);
  // The same on `stream`.
  explicit GpuSideStream(const GpuStream& stream);
  ~GpuSideStream();
  GpuSideStream(const GpuSideStream&) = delete;
  GpuSideStream& operator=(const GpuSideStream&) = delete;

 private:
  struct State;
  std::unique_ptr<State> state_;
};

// A memory pool that several graphs share: graphs that never run at once (one stream, one after the
// other) and keep nothing of their own past a replay can share one, so that their temporaries take
// the same memory. {0, 0} is a pool of the graph's own.
struct GraphPool {
  unsigned long long first = 0, second = 0;  // LibTorch's MempoolId_t
};
// A fresh pool to share (a CUDA build; else {0, 0}).
GraphPool new_graph_pool();

// A program recorded once as a graph and then replayed as one launch: work that repeats on the
// same shapes and the same memory (a decoder step; the decoder's whole training pass for a shape,
// forward and backward each). capture() records the program on the current stream, which must
// be a side stream (GpuSideStream), without running it; where something in it cannot be recorded
// (it waits for the GPU, say), it throws std::runtime_error saying so and that NMT_CUDA_GRAPHS=off
// runs without graphs (LibTorch's allocator and generator are not fit to go on after a failed
// capture). replay() runs the recording. Call it only where cuda_graphs_enabled() holds (in a
// build without CUDA, capture() throws).
class RecordedGraph {
 public:
  explicit RecordedGraph(GraphPool pool = {});
  ~RecordedGraph();
  RecordedGraph(const RecordedGraph&) = delete;
  RecordedGraph& operator=(const RecordedGraph&) = delete;

  void capture(const std::function<void()>& program);
  void replay();
  bool recorded() const { return recorded_; }

 private:
  struct State;
  std::unique_ptr<State> state_;
  GraphPool pool_;
  bool recorded_ = false;
};

// Weights and gradient accumulators of their own (autograd's nodes that hand a leaf its gradient).
struct AccumulatorSet {
  std::vector<torch::Tensor> weights;
  std::vector<std::shared_ptr<torch::autograd::Node>> nodes;  // keeps them: a weight holds only a weak pointer
};

// For its lifetime, each of `weights` has a gradient accumulator of its own made on `stream`, which
// the operations autograd records meanwhile point to; then each has its accumulator of before
// again (the one the caller's graph points to). A backward on `stream` that reached an accumulator
// on another stream would cross streams, and in a CUDA graph's recording would pull the other
// stream in. A backward through what was recorded meanwhile, if it runs later, must find the same
// accumulators: own() hands them to a second scope, which puts them back for its lifetime.
// Nothing without a GPU.
class AccumulatorsOnStream {
 public:
  AccumulatorsOnStream(const GpuStream& stream, const std::vector<torch::Tensor>& weights);
  explicit AccumulatorsOnStream(AccumulatorSet own);
  ~AccumulatorsOnStream();
  AccumulatorsOnStream(const AccumulatorsOnStream&) = delete;
  AccumulatorsOnStream& operator=(const AccumulatorsOnStream&) = delete;

  const AccumulatorSet& own() const { return own_; }

 private:
  AccumulatorSet own_;
  std::vector<std::shared_ptr<torch::autograd::Node>> before_;
};

struct GraphKeeper;

// What a thread's searches keep from one batch to the next on `device`: one stream, whose
// libraries' handles are set up once, and one pool that the graphs of successive batches share, so
// that a batch's capture finds the memory of the batch before it reserved, instead of allocating
// a pool of its own (which LibTorch does not give back). The pool lives as long as the thread:
// graphs captured into it must not run at once, which one thread's searches never do. Without a
// GPU: no stream, {0, 0}.
struct SearchGraphs {
  const GpuStream& stream;
  GraphPool pool;
  bool warm = false;              // an earlier search ran on the stream: graphs may capture their first step
  GraphKeeper* keeper = nullptr;  // for StepGraph: keeps the pool alive between searches
};
SearchGraphs thread_search_graphs(const torch::Device& device);

// Runs a step: the first call runs it as it is (which also warms up the libraries' handles), the
// second captures it as a graph and replays that, later calls replay the graph. Each call does the
// step exactly once. Without graphs (cuda_graphs_enabled false) every call runs it as it is. A
// step that cannot be captured throws (RecordedGraph).
class StepGraph {
 public:
  // warm: the stream's handles are set up already, so the first call captures at once. keeper
  // (SearchGraphs): the graph is handed to it at the end, so that its pool outlives it.
  explicit StepGraph(bool enabled, GraphPool pool = {}, bool warm = false, GraphKeeper* keeper = nullptr);
  ~StepGraph();
  StepGraph(const StepGraph&) = delete;
  StepGraph& operator=(const StepGraph&) = delete;

  void run(const std::function<void()>& step);

 private:
  friend struct GraphKeeper;
  std::unique_ptr<RecordedGraph> graph_;
  bool enabled_;
  GraphPool pool_;
  int calls_ = 0;
  GraphKeeper* keeper_;
};

}  // namespace nmt
