// The decoder's teacher-forced training pass on a GPU for every decoder: any scorer, any number of
// layers, coverage; with bf16 training (autocast), its products in bf16 and the rest in float32.
// The reference pass (model/reference/) runs as it is written, and its whole forward and its whole
// backward are each recorded once as a CUDA graph per shape bucket, then replayed as one launch
// each, as PyTorch's make_graphed_callables does for a module. The per-step pass is some thousands
// of small kernels per update whose launches, not their arithmetic, set the pace; replayed, they
// run back to back.
//
// A graph replays its kernels on the memory it was recorded with and on the shapes it was recorded
// for. So a batch is padded to its bucket (B up to a multiple of 8, T and S of 4) and copied into
// inputs that keep their addresses; the graphs read the decoder's weights where they are (the
// optimizer updates them in place; weights that move make the graphs stale). Padding changes
// nothing at the real positions: padded source positions are masked out, padded target positions
// come after the real ones, and padded rows (one real source position each, so that every value
// stays finite) get zero gradients, so that their products add exact zeros.
//
// The first pass of the decoder runs as it is (it sets up the libraries' per-stream handles and
// autograd's GPU thread); every later bucket is recorded when it is first seen, forward and
// backward together, and replayed from then on. The results (a_t, w_t, the gradients) are copied
// into buffers all buckets share, so that a bucket keeps no memory of its own beyond its
// recordings' records. A pass that cannot be recorded stops training with a message
// (util/cuda_graph.h). Where a weight's gradient has a hook (data parallel's all-reduce), which
// would see this pass's inner gradients too, the reference pass runs instead, unwrapped (logged
// once at debug level). Without graphs (the CPU, which the tests run it on, or NMT_CUDA_GRAPHS=off)
// the same buckets, buffers and gradients run as they are, each backward through autograd from
// inside this pass's backward.
//
// Shapes: B batch, T target positions, S source length, L layers, H hidden size, C encoder state
// size, K key size.
#pragma once

#include <torch/types.h>

#include <functional>
#include <memory>
#include <vector>

#include "model/decoder.h"
#include "model/encoded_source.h"

namespace nmt {

namespace recorded_pass {
struct Arena;
}

// The pass to record: the decoder's reference pass from these inputs. It may read nothing that
// changes from one call to the next besides its arguments and the weights given to run().
using DecoderPassFunction = std::function<DecoderOutput(const torch::Tensor& token_gates, const DecoderState& state,
                                                        const EncodedSource& source)>;

// The recordings of one decoder. A forward's values stay in the recordings until its backward: the
// next forward overwrites them (its backward then fails with a message).
class RecordedDecoderPass {
 public:
  RecordedDecoderPass();
  ~RecordedDecoderPass();

  // token_gates [B, T, 3H]; the initial state's hidden [L, B, H], a_0 (zeros) and coverage (zeros
  // [B, S], or undefined); the source's states [B, S, C], summary [B, C], keys [B, S, K]
  // (undefined for attention none) and mask. `weights`: the parameters `pass` reads that learn, each gradient returned
  // to autograd with those of the inputs. `training`: the pass drops out (it reads the module's mode). Returns a_t [B,
  // T, H] and the attention [B, T, S] (undefined without a scorer), in float32.
  DecoderOutput run(const torch::Tensor& token_gates, const DecoderState& state, const EncodedSource& source,
                    const std::vector<torch::Tensor>& weights, bool training, const DecoderPassFunction& pass);

 private:
  std::shared_ptr<recorded_pass::Arena> arena_;
};

// How many forwards replayed a recording, in this process (for the GPU's tests).
int64_t recorded_pass_replays();

// The size a bucket pads `size` to: a multiple of `multiple`.
int64_t bucket_size(int64_t size, int64_t multiple);

// Where DecoderImpl::forward takes the recorded pass while training: on GPUs, for every decoder the
// GPU loop (gpu_graph/decoder_pass.h) does not take (recorded_pass_device), and for that one too
// with NMT_GPU_DECODER_PASS=recorded (util/cuda_graph.h), to compare the two
// (recorded_pass_takes_all); within a ScopedRecordedPassEverywhere (the tests, which run it on the
// CPU), on every device for every decoder.
bool recorded_pass_device(const torch::Device& device);
bool recorded_pass_takes_all(const torch::Device& device);

class ScopedRecordedPassEverywhere {
 public:
  ScopedRecordedPassEverywhere();
  ~ScopedRecordedPassEverywhere();
  ScopedRecordedPassEverywhere(const ScopedRecordedPassEverywhere&) = delete;
  ScopedRecordedPassEverywhere& operator=(const ScopedRecordedPassEverywhere&) = delete;

 private:
  bool previous_;
};

}  // namespace nmt
