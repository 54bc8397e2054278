// The decoder's training pass recorded whole on a GPU (gpu_graph/recorded_pass.h): the buckets,
// the inputs that keep their addresses, the two recordings, and the autograd function around them.
#include "model/gpu_graph/recorded_pass.h"

#include <ATen/autocast_mode.h>
#include <c10/util/accumulate.h>
#include <spdlog/spdlog.h>
#include <torch/torch.h>

#include <array>
#include <atomic>
#include <exception>
#include <map>
#include <mutex>
#include <tuple>
#include <utility>

#include "util/cuda_graph.h"
#include "util/runtime.h"

namespace nmt {

int64_t bucket_size(int64_t size, int64_t multiple) { return (size + multiple - 1) / multiple * multiple; }

namespace recorded_pass {
namespace {

using torch::autograd::AutogradContext;
using torch::autograd::tensor_list;

constexpr int64_t kRowMultiple = 8;       // B's bucket
constexpr int64_t kPositionMultiple = 4;  // T's and S's
constexpr size_t kMostBuckets = 256;      // beyond it the recordings start again

// The buffers the buckets' inputs are views of: every bucket reads from the start of the same
// memory, so that the memory is that of the largest bucket, not of all of them.
enum Buffer : size_t {
  kGates,            // [B, T, 3H]
  kHidden,           // [L, B, H]
  kFed,              // [B, H] a_0, zeros
  kCoverage,         // [B, S] zeros
  kStates,           // [B, S, C]
  kSummary,          // [B, C]
  kKeys,             // [B, S, K]
  kMask,             // [B, S] bool
  kGradAttentional,  // [B, T, H] dL/da_t, from the loss
  kGradAttention,    // [B, T, S] dL/dw_t, from the loss
  kBufferCount
};

// A batch's sizes and its bucket's.
struct Sizes {
  int64_t batch, steps, positions;               // B, T, S
  int64_t rows, padded_steps, padded_positions;  // the bucket's
  int64_t layers, size, state_size, key_size;    // L, H, C, K (0: no keys)
  bool coverage;
};

Sizes sizes_of(const torch::Tensor& gates, const torch::Tensor& hidden, const torch::Tensor& states,
               const torch::Tensor& keys, const torch::Tensor& coverage) {
  Sizes n{};
  n.batch = gates.size(0), n.steps = gates.size(1), n.positions = states.size(1);
  n.rows = bucket_size(n.batch, kRowMultiple);
  n.padded_steps = bucket_size(n.steps, kPositionMultiple);
  n.padded_positions = bucket_size(n.positions, kPositionMultiple);
  n.layers = hidden.size(0), n.size = hidden.size(2), n.state_size = states.size(2);
  n.key_size = keys.defined() ? keys.size(2) : 0;
  n.coverage = coverage.defined();
  return n;
}

}  // namespace

// One bucket: its inputs, what its forward left for its backward, and its recordings.
struct Bucket {
  // Views of the arena's buffers. Those autograd differentiates (gates, hidden, states, summary,
  // keys) are
  // leaves that require gradients; the rest are constants of the pass.
  torch::Tensor gates, hidden, fed, coverage, states, summary, keys, mask;
  torch::Tensor grad_attentional, grad_attention;
  std::vector<torch::Tensor> weights;                // the decoder's, as the pass reads them
  std::vector<torch::Tensor> outputs;                // a_t, then the attention (with a scorer): the last forward's
  std::vector<torch::Tensor> grads;                  // of the differentiable inputs, then of the weights
  std::unique_ptr<RecordedGraph> forward, backward;  // null: the pass runs as it is

  std::vector<torch::Tensor> differentiable() const {
    std::vector<torch::Tensor> inputs{gates, hidden, states, summary};
    if (keys.defined()) inputs.push_back(keys);
    return inputs;
  }
};

struct Arena {
  // The bucket's B, T, S, dropout on or off, and bf16 products (autocast) or float32.
  using Key = std::tuple<int64_t, int64_t, int64_t, bool, bool>;
  std::array<torch::Tensor, kBufferCount> flat;  // 1-D; each bucket's views start at the first element
  std::map<Key, std::unique_ptr<Bucket>> buckets;
  std::vector<const void*> weights_seen;  // the weights the recordings read
  GraphPool pool;                         // the recordings' memory: one pool, as they run one after another
  std::unique_ptr<GpuStream> stream;      // every pass runs on it (util/cuda_graph.h)
  torch::Device device{torch::kCPU};
  bool warm = false;              // a pass ran as it is, forward and backward: the handles are set up
  bool recording_failed = false;  // something in the pass cannot be recorded: it runs as it is
  int64_t passes = 0;             // forwards run; the buckets hold the last one's values

  // Before a forward: the stream of `device`, and recordings that hold only while the weights stay put.
  void prepare(const torch::Device& on, const std::vector<torch::Tensor>& weights) {
    if (!stream || device != on) {
      clear();
      device = on;
      stream = std::make_unique<GpuStream>(on);
      warm = false;
    }
    std::vector<const void*> pointers;
    for (const torch::Tensor& weight : weights) pointers.push_back(weight.data_ptr());
    if (pointers != weights_seen) clear();
    weights_seen = std::move(pointers);
  }

  // The bucket of `n`, its views made (and every recording dropped when a buffer had to move).
  static Key key_of(const Sizes& n, bool dropout, bool bf16) {
    return Key{n.rows, n.padded_steps, n.padded_positions, dropout, bf16};
  }

  Bucket& bucket(const Sizes& n, bool dropout, bool bf16, const torch::TensorOptions& options) {
    const int64_t B = n.rows, T = n.padded_steps, S = n.padded_positions;
    const int64_t L = n.layers, H = n.size, C = n.state_size, K = n.key_size;
    bool moved = reserve(kGates, B * T * 3 * H, options);
    moved |= reserve(kHidden, L * B * H, options);
    moved |= reserve(kFed, B * H, options);
    if (n.coverage) moved |= reserve(kCoverage, B * S, options);
    moved |= reserve(kStates, B * S * C, options);
    moved |= reserve(kSummary, B * C, options);
    if (K > 0) moved |= reserve(kKeys, B * S * K, options);
    moved |= reserve(kMask, B * S, options.dtype(torch::kBool));
    moved |= reserve(kGradAttentional, B * T * H, options);
    moved |= reserve(kGradAttention, B * T * S, options);
    if (moved || buckets.size() >= kMostBuckets) clear();

    std::unique_ptr<Bucket>& slot = buckets[key_of(n, dropout, bf16)];
    if (!slot) {
      slot = std::make_unique<Bucket>();
      const auto leaf = [](const torch::Tensor& view) { return view.detach().requires_grad_(true); };
      slot->gates = leaf(view(kGates, {B, T, 3 * H}));
      slot->hidden = leaf(view(kHidden, {L, B, H}));
      slot->fed = view(kFed, {B, H});
      if (n.coverage) slot->coverage = view(kCoverage, {B, S});
      slot->states = leaf(view(kStates, {B, S, C}));
      slot->summary = leaf(view(kSummary, {B, C}));
      if (K > 0) slot->keys = leaf(view(kKeys, {B, S, K}));
      slot->mask = view(kMask, {B, S});
      slot->grad_attentional = view(kGradAttentional, {B, T, H});
      slot->grad_attention = view(kGradAttention, {B, T, S});
    }
    return *slot;
  }

  void clear() {
    buckets.clear();
    pool = GraphPool{};  // a new one with the next recording
  }

 private:
  // Whether buffer `id` had to move to hold `size` elements.
  bool reserve(Buffer id, int64_t size, const torch::TensorOptions& options) {
    torch::Tensor& buffer = flat[id];
    if (buffer.defined() && buffer.numel() >= size && buffer.device() == options.device() &&
        buffer.scalar_type() == options.dtype().toScalarType()) {
      return false;
    }
    buffer = torch::zeros({size + size / 2}, options);  // room to grow: each move drops the recordings
    return true;
  }

  torch::Tensor view(Buffer id, at::IntArrayRef shape) const {
    return flat[id].narrow(0, 0, c10::multiply_integers(shape)).view(shape);
  }
};

namespace {

// `bucket` [rows, ...] padded: zeros, then `real` [batch, ...] in its first rows and positions.
void fill_padded(const torch::Tensor& bucket, const torch::Tensor& real) {
  bucket.zero_();
  torch::Tensor region = bucket;
  for (int64_t dim = 0; dim < real.dim(); ++dim) region = region.narrow(dim, 0, real.size(dim));
  region.copy_(real);
}

// The first `sizes` of each dimension of a bucket's tensor.
torch::Tensor real_part(const torch::Tensor& padded, at::IntArrayRef sizes) {
  torch::Tensor region = padded;
  for (size_t dim = 0; dim < sizes.size(); ++dim) region = region.narrow(static_cast<int64_t>(dim), 0, sizes[dim]);
  return region;
}

// The pass on the bucket's inputs, with autograd recording: bucket.outputs, in float32. Its
// products are in bf16 where the caller trains in bf16 (autocast), else in float32.
void run_forward(Bucket& bucket, const DecoderPassFunction& pass) {
  const torch::AutoGradMode records(true);
  EncodedSource source;
  source.states = bucket.states, source.keys = bucket.keys, source.mask = bucket.mask;
  source.summary = bucket.summary;  // the context of a decoder without attention
  const DecoderOutput output = pass(bucket.gates, DecoderState{bucket.hidden, bucket.fed, bucket.coverage, 0}, source);
  bucket.outputs = {output.attentional.to(torch::kFloat)};
  if (output.attention.defined()) bucket.outputs.push_back(output.attention.to(torch::kFloat));
}

// Its backward, from the bucket's output gradients: bucket.grads.
void run_backward(Bucket& bucket) {
  std::vector<torch::Tensor> inputs = bucket.differentiable();
  inputs.insert(inputs.end(), bucket.weights.begin(), bucket.weights.end());
  std::vector<torch::Tensor> outputs, grads;
  const torch::Tensor* given[] = {&bucket.grad_attentional, &bucket.grad_attention};
  for (size_t i = 0; i < bucket.outputs.size(); ++i) {
    if (!bucket.outputs[i].requires_grad()) continue;
    outputs.push_back(bucket.outputs[i]);
    grads.push_back(*given[i]);
  }
  bucket.grads = torch::autograd::grad(outputs, inputs, grads, /*retain_graph=*/false, /*create_graph=*/false,
                                       /*allow_unused=*/true);
}

// Records the bucket's forward and backward; false, with nothing kept, where the pass cannot be
// recorded.
bool record(Arena& arena, Bucket& bucket, const DecoderPassFunction& pass) {
  if (arena.pool.first == 0 && arena.pool.second == 0) arena.pool = new_graph_pool();
  auto forward = std::make_unique<RecordedGraph>(arena.pool);
  auto backward = std::make_unique<RecordedGraph>(arena.pool);
  // Autocast keeps its bf16 copies of the weights for the rest of the update: a copy made during a
  // recording would be memory the recording does not own. Each product casts its weight anew.
  const bool cache = at::autocast::is_autocast_cache_enabled();
  at::autocast::set_autocast_cache_enabled(false);
  try {
    forward->capture([&] { run_forward(bucket, pass); });
    backward->capture([&] { run_backward(bucket); });
    at::autocast::set_autocast_cache_enabled(cache);
  } catch (const std::exception& error) {
    at::autocast::set_autocast_cache_enabled(cache);
    bucket.outputs.clear(), bucket.grads.clear();
    static std::once_flag logged;
    std::call_once(logged, [&] {
      spdlog::debug("decoder: the training pass could not be recorded as a CUDA graph ({}); it runs as it is",
                    error.what());
    });
    return false;
  }
  for (torch::Tensor& output : bucket.outputs) output = output.detach();  // autograd's records are spent
  bucket.forward = std::move(forward), bucket.backward = std::move(backward);
  return true;
}

// What one call passes besides the tensors autograd sees.
struct Call {
  const DecoderState* state;
  const EncodedSource* source;
  const DecoderPassFunction* pass;
  size_t inputs;  // how many of the tensors are inputs (gates, hidden, states, summary, keys); the rest weights
  bool training;
};

// The arena in autograd's context (an IValue capsule), with the pass and bucket its backward reads.
struct HeldArena : torch::CustomClassHolder {
  std::shared_ptr<Arena> arena;
  Arena::Key key;
  int64_t pass = 0;
  Sizes sizes{};
  size_t inputs = 0;
};
constexpr const char* kHeldKey = "arena";

struct RecordedPassFunction : public torch::autograd::Function<RecordedPassFunction> {
  // tensors: gates, hidden, states, summary, keys (if any), then the weights. Returns a_t and the
  // attention.
  static tensor_list forward(AutogradContext* context, at::TensorList tensors, const std::shared_ptr<Arena>& held,
                             const Call* call) {
    Arena& arena = *held;
    const torch::Tensor &gates = tensors[0], &hidden = tensors[1], &states = tensors[2], &summary = tensors[3];
    const torch::Tensor keys = call->inputs > 4 ? tensors[4] : torch::Tensor();
    const std::vector<torch::Tensor> weights(tensors.begin() + static_cast<int64_t>(call->inputs), tensors.end());
    const Sizes n = sizes_of(gates, hidden, states, keys, call->state->coverage);
    const bool dropout = call->training, bf16 = autocast_enabled(gates.device());
    arena.prepare(gates.device(), weights);
    Bucket& bucket = arena.bucket(n, dropout, bf16, gates.options());
    bucket.weights = weights;
    {
      const torch::NoGradGuard constants;
      fill_padded(bucket.gates, gates), fill_padded(bucket.hidden, hidden), fill_padded(bucket.states, states);
      fill_padded(bucket.summary, summary);
      if (keys.defined()) fill_padded(bucket.keys, keys);
      bucket.fed.zero_();
      if (bucket.coverage.defined()) bucket.coverage.zero_();
      fill_padded(bucket.mask, call->source->mask);
      bucket.mask.narrow(0, n.batch, n.rows - n.batch).select(1, 0).fill_(true);  // padded rows: one position
    }
    {
      const GpuSideStream side(*arena.stream);
      if (!bucket.forward && cuda_graphs_enabled(arena.device) && arena.warm && !arena.recording_failed) {
        arena.recording_failed = !record(arena, bucket, *call->pass);
      }
      if (bucket.forward) {
        bucket.forward->replay();
      } else {
        run_forward(bucket, *call->pass);
      }
    }

    auto kept = c10::make_intrusive<HeldArena>();
    kept->arena = held, kept->pass = ++arena.passes, kept->sizes = n, kept->inputs = call->inputs;
    kept->key = Arena::key_of(n, dropout, bf16);
    context->saved_data[kHeldKey] = c10::IValue::make_capsule(std::move(kept));
    tensor_list result{real_part(bucket.outputs[0].detach(), {n.batch, n.steps}).clone()};
    if (bucket.outputs.size() > 1) {
      result.push_back(real_part(bucket.outputs[1].detach(), {n.batch, n.steps, n.positions}).clone());
    }
    return result;
  }

  static tensor_list backward(AutogradContext* context, tensor_list grads) {
    const auto held = c10::static_intrusive_pointer_cast<HeldArena>(context->saved_data[kHeldKey].toCapsule());
    Arena& arena = *held->arena;
    TORCH_CHECK(held->pass == arena.passes,
                "the decoder's recorded GPU training pass ran another forward before this pass's backward: run "
                "each backward before the next forward");
    Bucket& bucket = *arena.buckets.at(held->key);
    const Sizes& n = held->sizes;
    {
      const torch::NoGradGuard constants;
      bucket.grad_attentional.zero_(), bucket.grad_attention.zero_();
      if (grads[0].defined()) fill_padded(bucket.grad_attentional, grads[0]);
      if (grads.size() > 1 && grads[1].defined()) fill_padded(bucket.grad_attention, grads[1]);
    }
    {
      const GpuSideStream side(*arena.stream);
      if (bucket.backward) {
        bucket.backward->replay();
      } else {
        run_backward(bucket);
        arena.warm = arena.device.is_cuda();
      }
    }
    // The gradients of the real rows and positions, and of the weights, as tensors of their own:
    // the next pass overwrites the bucket's.
    const std::vector<std::vector<int64_t>> real{
        {n.batch, n.steps}, {n.layers, n.batch}, {n.batch, n.positions}, {n.batch}, {n.batch, n.positions}};
    tensor_list result(bucket.grads.size() + 2);  // + the arena and the call, which have none
    for (size_t i = 0; i < bucket.grads.size(); ++i) {
      if (!bucket.grads[i].defined()) continue;
      result[i] = (i < held->inputs ? real_part(bucket.grads[i], real[i]) : bucket.grads[i]).clone();
    }
    return result;
  }
};

std::atomic<bool> forced{false};

}  // namespace
}  // namespace recorded_pass

RecordedDecoderPass::RecordedDecoderPass() : arena_(std::make_shared<recorded_pass::Arena>()) {}
RecordedDecoderPass::~RecordedDecoderPass() = default;

DecoderOutput RecordedDecoderPass::run(const torch::Tensor& token_gates, const DecoderState& state,
                                       const EncodedSource& source, const std::vector<torch::Tensor>& weights,
                                       bool training, const DecoderPassFunction& pass) {
  TORCH_CHECK(token_gates.dim() == 3 && state.hidden.dim() == 3 && token_gates.size(0) == state.hidden.size(1) &&
                  token_gates.size(1) > 0 && source.states.size(0) == token_gates.size(0) && source.summary.defined(),
              "recorded decoder pass: token gates [B, T, 3H], an initial state [L, B, H] and a source of B rows "
              "expected");
  const auto float32 = [](const torch::Tensor& tensor) { return tensor.to(torch::kFloat).contiguous(); };
  std::vector<torch::Tensor> tensors{float32(token_gates), float32(state.hidden), float32(source.states),
                                     float32(source.summary)};
  if (source.keys.defined()) tensors.push_back(float32(source.keys));
  const recorded_pass::Call call{&state, &source, &pass, tensors.size(), training};
  tensors.insert(tensors.end(), weights.begin(), weights.end());
  const torch::autograd::tensor_list outputs =
      recorded_pass::RecordedPassFunction::apply(at::TensorList(tensors), arena_, &call);
  return {outputs[0], outputs.size() > 1 ? outputs[1] : torch::Tensor()};
}

ScopedRecordedPassEverywhere::ScopedRecordedPassEverywhere() : previous_(recorded_pass::forced.exchange(true)) {}
ScopedRecordedPassEverywhere::~ScopedRecordedPassEverywhere() { recorded_pass::forced.store(previous_); }

namespace {
bool recorded_pass_forced() { return recorded_pass::forced.load(); }
}  // namespace

bool recorded_pass_device(const torch::Device& device) { return device.is_cuda() || recorded_pass_forced(); }

bool recorded_pass_takes_all(const torch::Device& device) {
  return recorded_pass_forced() || (device.is_cuda() && gpu_decoder_pass_recorded());
}

}  // namespace nmt
