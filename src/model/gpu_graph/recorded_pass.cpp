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
#include "util/device_rules.h"
#include "util/runtime.h"

namespace nmt {

int64_t bucket_size(int64_t size, int64_t multiple) { return (size + multiple - 1) / multiple * multiple; }

namespace recorded_pass {
namespace {

using torch::autograd::AutogradContext;
using torch::autograd::tensor_list;

constexpr int64_t kRowMultiple = 8;       // B's bucket
constexpr int64_t kPositionMultiple = 4;  // T's and S's
constexpr size_t kMostBuckets = 256;      // beyond it the one used longest ago goes

std::atomic<int64_t> replays{0};  // recorded_pass_replays()

// The buffers the buckets' inputs and results are views of: every bucket reads and writes from the
// start of the same memory, so that the memory is that of the largest bucket, not of all of them.
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
  kAttentional,      // [B, T, H] a_t, the forward's result
  kAttention,        // [B, T, S] w_t
  kGradGates,        // the backward's results: the gradients of the inputs, as kGates ... kKeys
  kGradHidden,
  kGradStates,
  kGradSummary,
  kGradKeys,
  kGradWeights,  // every weight's gradient, one after another
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

// One bucket: views of the arena's buffers, what its forward leaves for its backward, and its
// recordings.
struct Bucket {
  // The inputs. Those autograd differentiates (gates, hidden, states, summary, keys) are leaves
  // that require gradients; the rest are constants of the pass.
  torch::Tensor gates, hidden, fed, coverage, states, summary, keys, mask;
  torch::Tensor grad_attentional, grad_attention;  // the outputs' gradients
  torch::Tensor attentional, attention;            // the results: a_t, w_t (with a scorer)
  std::vector<torch::Tensor> grad_inputs;          // as differentiable()
  std::vector<torch::Tensor> grad_weights;         // as weights
  std::vector<bool> has_grad;                      // per input, then per weight: whether any gradient reaches it
  bool has_attention = false;
  std::vector<torch::Tensor> weights;  // the decoder's, as the pass reads them
  std::vector<torch::Tensor> outputs;  // between a forward and its backward: the pass's outputs, with
                                       // autograd's records (during a recording, the recording's)
  AccumulatorSet accumulators;         // of a forward run as it is on a GPU, for its backward (util/cuda_graph.h)
  std::unique_ptr<RecordedGraph> forward, backward;  // null: the pass runs as it is
  uint64_t used = 0;                                 // when it last ran (Arena::clock)

  std::vector<torch::Tensor> differentiable() const {
    std::vector<torch::Tensor> inputs{gates, hidden, states, summary};
    if (keys.defined()) inputs.push_back(keys);
    return inputs;
  }
};

struct Arena {
  // The bucket's B, T, S, dropout on or off, and bf16 products (autocast) or float32 (L, H, C, K and
  // coverage are the decoder's own: the same for every pass).
  using Key = std::tuple<int64_t, int64_t, int64_t, bool, bool>;
  std::array<torch::Tensor, kBufferCount> flat;  // 1-D; each bucket's views start at the first element
  std::map<Key, std::unique_ptr<Bucket>> buckets;
  uint64_t clock = 0;
  std::vector<const void*> weights_seen;  // the weights the recordings read
  GraphPool pool;                         // the recordings' memory: one pool, as they run one after another
  std::unique_ptr<GpuStream> stream;      // every pass runs on it (util/cuda_graph.h)
  torch::Device device{torch::kCPU};
  bool warm = false;   // a pass ran as it is, forward and backward: the handles are set up
  int64_t passes = 0;  // forwards run; the buckets hold the last one's values

  // Before a pass: the stream of `device`, and recordings that hold only while the weights stay put.
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

  static Key key_of(const Sizes& n, bool dropout, bool bf16) {
    return Key{n.rows, n.padded_steps, n.padded_positions, dropout, bf16};
  }

  // The bucket of `n`, its views made (every recording dropped when a buffer had to move, the one
  // used longest ago when there are too many).
  Bucket& bucket(const Sizes& n, bool dropout, bool bf16, const std::vector<torch::Tensor>& weights,
                 const torch::TensorOptions& options) {
    const int64_t B = n.rows, T = n.padded_steps, S = n.padded_positions;
    const int64_t L = n.layers, H = n.size, C = n.state_size, K = n.key_size;
    int64_t weight_size = 0;
    for (const torch::Tensor& weight : weights) weight_size += weight.numel();
    const std::vector<std::pair<Buffer, int64_t>> sizes{{kGates, B * T * 3 * H},
                                                        {kHidden, L * B * H},
                                                        {kFed, B * H},
                                                        {kCoverage, n.coverage ? B * S : 0},
                                                        {kStates, B * S * C},
                                                        {kSummary, B * C},
                                                        {kKeys, B * S * K},
                                                        {kMask, B * S},
                                                        {kGradAttentional, B * T * H},
                                                        {kGradAttention, B * T * S},
                                                        {kAttentional, B * T * H},
                                                        {kAttention, B * T * S},
                                                        {kGradGates, B * T * 3 * H},
                                                        {kGradHidden, L * B * H},
                                                        {kGradStates, B * S * C},
                                                        {kGradSummary, B * C},
                                                        {kGradKeys, B * S * K},
                                                        {kGradWeights, weight_size}};
    bool moved = false;
    for (const auto& [id, size] : sizes) {
      moved |= reserve(id, size, id == kMask ? options.dtype(torch::kBool) : options);
    }
    if (moved) clear();

    const Key key = key_of(n, dropout, bf16);
    std::unique_ptr<Bucket>& slot = buckets[key];
    if (!slot) {
      if (buckets.size() > kMostBuckets) evict_oldest(key);
      slot = std::make_unique<Bucket>();
      Bucket& b = *slot;
      const auto leaf = [](const torch::Tensor& view) { return view.detach().requires_grad_(true); };
      b.gates = leaf(view(kGates, {B, T, 3 * H}));
      b.hidden = leaf(view(kHidden, {L, B, H}));
      b.fed = view(kFed, {B, H});
      if (n.coverage) b.coverage = view(kCoverage, {B, S});
      b.states = leaf(view(kStates, {B, S, C}));
      b.summary = leaf(view(kSummary, {B, C}));
      if (K > 0) b.keys = leaf(view(kKeys, {B, S, K}));
      b.mask = view(kMask, {B, S});
      b.grad_attentional = view(kGradAttentional, {B, T, H});
      b.grad_attention = view(kGradAttention, {B, T, S});
      b.attentional = view(kAttentional, {B, T, H});
      b.attention = view(kAttention, {B, T, S});
      b.grad_inputs = {view(kGradGates, {B, T, 3 * H}), view(kGradHidden, {L, B, H}), view(kGradStates, {B, S, C}),
                       view(kGradSummary, {B, C})};
      if (K > 0) b.grad_inputs.push_back(view(kGradKeys, {B, S, K}));
      int64_t offset = 0;
      for (const torch::Tensor& weight : weights) {
        b.grad_weights.push_back(flat[kGradWeights].narrow(0, offset, weight.numel()).view(weight.sizes()));
        offset += weight.numel();
      }
    }
    slot->used = ++clock;
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

  void evict_oldest(const Key& keep) {
    auto oldest = buckets.end();
    for (auto it = buckets.begin(); it != buckets.end(); ++it) {
      if (it->first != keep && it->second && (oldest == buckets.end() || it->second->used < oldest->second->used)) {
        oldest = it;
      }
    }
    if (oldest != buckets.end()) buckets.erase(oldest);
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

// The pass on the bucket's inputs, with autograd recording: its outputs, kept for the backward,
// and their values in float32 in the bucket's results. Its products are in bf16 where the caller
// trains in bf16 (autocast), else in float32.
void run_forward(Bucket& bucket, const DecoderPassFunction& pass) {
  const torch::AutoGradMode records(true);
  EncodedSource source;
  source.states = bucket.states, source.keys = bucket.keys, source.mask = bucket.mask;
  source.summary = bucket.summary;  // the context of a decoder without attention
  const DecoderOutput output = pass(bucket.gates, DecoderState{bucket.hidden, bucket.fed, bucket.coverage, 0}, source);
  bucket.outputs = {output.attentional};
  if (output.attention.defined()) bucket.outputs.push_back(output.attention);
  bucket.has_attention = output.attention.defined();
  const torch::NoGradGuard results;
  bucket.attentional.copy_(output.attentional);
  if (bucket.has_attention) bucket.attention.copy_(output.attention);
}

// Its backward, from the bucket's output gradients, into the bucket's results; autograd's records
// of the forward are spent.
void run_backward(Bucket& bucket) {
  const AutocastScope float32(bucket.gates.device(), false);  // as loss.backward() outside autocast
  std::vector<torch::Tensor> inputs = bucket.differentiable();
  inputs.insert(inputs.end(), bucket.weights.begin(), bucket.weights.end());
  std::vector<torch::Tensor> outputs, grads;
  const torch::Tensor* given[] = {&bucket.grad_attentional, &bucket.grad_attention};
  for (size_t i = 0; i < bucket.outputs.size(); ++i) {
    if (!bucket.outputs[i].requires_grad()) continue;
    outputs.push_back(bucket.outputs[i]);
    grads.push_back(*given[i]);
  }
  const std::vector<torch::Tensor> computed = torch::autograd::grad(outputs, inputs, grads, /*retain_graph=*/false,
                                                                    /*create_graph=*/false, /*allow_unused=*/true);
  bucket.outputs.clear();
  const torch::NoGradGuard results;
  bucket.has_grad.assign(computed.size(), false);
  for (size_t i = 0; i < computed.size(); ++i) {
    if (!computed[i].defined()) continue;
    const size_t inputs_count = bucket.grad_inputs.size();
    (i < inputs_count ? bucket.grad_inputs[i] : bucket.grad_weights[i - inputs_count]).copy_(computed[i]);
    bucket.has_grad[i] = true;
  }
}

// Records the bucket's forward and backward, on the arena's stream and in its pool. Where
// something in the pass cannot be recorded, it throws, saying so.
void record(Arena& arena, Bucket& bucket, const DecoderPassFunction& pass) {
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
  } catch (...) {
    bucket.outputs.clear();
    at::autocast::set_autocast_cache_enabled(cache);
    throw;
  }
  at::autocast::set_autocast_cache_enabled(cache);
  bucket.forward = std::move(forward), bucket.backward = std::move(backward);
}

// What one call passes besides the tensors autograd sees.
struct Call {
  const DecoderState* state;
  const EncodedSource* source;
  const DecoderPassFunction* pass;
  size_t inputs;  // how many of the tensors are inputs (gates, hidden, states, summary, keys); the rest weights
  bool training;
};

// What a forward leaves in autograd's context (an IValue capsule) for its backward: the arena, the
// bucket, and which forward it was.
struct ForwardRecord : torch::CustomClassHolder {
  std::shared_ptr<Arena> arena;
  Arena::Key key;
  int64_t number = 0;  // Arena::passes after it
  bool backward_ran = false;
  Sizes sizes{};
};
constexpr const char* kForwardKey = "forward";

struct RecordedPassFunction : public torch::autograd::Function<RecordedPassFunction> {
  // tensors: gates, hidden, states, summary, keys (if any), then the weights. Returns a_t and the
  // attention.
  static tensor_list forward(AutogradContext* context, at::TensorList tensors, const std::shared_ptr<Arena>& arenas,
                             const Call* call) {
    Arena& arena = *arenas;
    const int64_t number = ++arena.passes;  // from here on, an earlier pass's values are gone
    const torch::Tensor &gates = tensors[0], &hidden = tensors[1], &states = tensors[2], &summary = tensors[3];
    const torch::Tensor keys = call->inputs > 4 ? tensors[4] : torch::Tensor();
    const std::vector<torch::Tensor> weights(tensors.begin() + static_cast<int64_t>(call->inputs), tensors.end());
    const Sizes n = sizes_of(gates, hidden, states, keys, call->state->coverage);
    const bool dropout = call->training, bf16 = autocast_enabled(gates.device());
    Bucket& bucket = arena.bucket(n, dropout, bf16, weights, gates.options());
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
      // The pass's operations hand the weights' gradients to accumulators on this stream.
      const AccumulatorsOnStream accumulators(*arena.stream, weights);
      if (!bucket.forward && arena.warm && cuda_graphs_enabled(arena.device)) record(arena, bucket, *call->pass);
      if (bucket.forward) {
        bucket.forward->replay();
        ++replays;
      } else {
        run_forward(bucket, *call->pass);
        bucket.accumulators = accumulators.own();  // for its backward, which runs as it is too
      }
    }

    auto forward_record = c10::make_intrusive<ForwardRecord>();
    forward_record->arena = arenas, forward_record->number = number, forward_record->sizes = n;
    forward_record->key = Arena::key_of(n, dropout, bf16);
    context->saved_data[kForwardKey] = c10::IValue::make_capsule(std::move(forward_record));
    tensor_list result{real_part(bucket.attentional, {n.batch, n.steps}).clone()};
    if (bucket.has_attention) result.push_back(real_part(bucket.attention, {n.batch, n.steps, n.positions}).clone());
    return result;
  }

  static tensor_list backward(AutogradContext* context, tensor_list grads) {
    const auto forward_record =
        c10::static_intrusive_pointer_cast<ForwardRecord>(context->saved_data[kForwardKey].toCapsule());
    Arena& arena = *forward_record->arena;
    TORCH_CHECK(forward_record->number == arena.passes && arena.buckets.count(forward_record->key) > 0,
                "the decoder's recorded GPU training pass ran another forward before this pass's backward: run "
                "each backward before the next forward");
    TORCH_CHECK(!forward_record->backward_ran,
                "the decoder's recorded GPU training pass runs one backward per forward (no retain_graph)");
    forward_record->backward_ran = true;
    Bucket& bucket = *arena.buckets.at(forward_record->key);
    const Sizes& n = forward_record->sizes;
    {
      const torch::NoGradGuard constants;
      const torch::Tensor* outputs[] = {&bucket.grad_attentional, &bucket.grad_attention};
      for (size_t i = 0; i < 2; ++i) {
        if (i < grads.size() && grads[i].defined()) {
          fill_padded(*outputs[i], grads[i]);  // zeros where the batch does not reach
        } else {
          outputs[i]->zero_();
        }
      }
    }
    {
      const GpuSideStream side(*arena.stream);
      if (bucket.backward) {
        bucket.backward->replay();
      } else {
        {
          // The accumulators the forward's operations point to, where autograd looks for the weights.
          const AccumulatorsOnStream again(std::move(bucket.accumulators));
          run_backward(bucket);
        }
        bucket.accumulators = {};
        // A whole pass ran as it is on the stream, backward on autograd's GPU thread included: the
        // libraries' handles are set up, and a recording makes no first calls of theirs (where
        // there are graphs to record: cuda_graphs_enabled).
        arena.warm = true;
      }
    }
    // The gradients of the real rows and positions, and of the weights, as tensors of their own:
    // the next pass overwrites the bucket's. `real`: the real sizes of each input's gradient, in the
    // order of Bucket::differentiable() (gates, hidden, states, summary, keys).
    const std::vector<std::vector<int64_t>> real{
        {n.batch, n.steps}, {n.layers, n.batch}, {n.batch, n.positions}, {n.batch}, {n.batch, n.positions}};
    const size_t inputs = bucket.grad_inputs.size();
    tensor_list result(inputs + bucket.grad_weights.size() + 2);  // + the arena and the call, which have none
    for (size_t i = 0; i < inputs + bucket.grad_weights.size(); ++i) {
      if (!bucket.has_grad[i]) continue;
      result[i] = (i < inputs ? real_part(bucket.grad_inputs[i], real[i]) : bucket.grad_weights[i - inputs]).clone();
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
  // A hook on a weight's gradient (data parallel's all-reduce) would also see the gradients the
  // backward computes inside this pass: the pass runs as it is, outside it.
  for (const torch::Tensor& weight : weights) {
    if (!torch::autograd::impl::hooks(weight).empty()) {
      static std::once_flag logged;
      std::call_once(logged, [] {
        spdlog::debug("decoder: the weights' gradients have hooks (data parallel); the training pass is not recorded");
      });
      return pass(token_gates, state, source);
    }
  }
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
  arena_->prepare(token_gates.device(), weights);
  const torch::autograd::tensor_list outputs =
      recorded_pass::RecordedPassFunction::apply(at::TensorList(tensors), arena_, &call);
  return {outputs[0], outputs.size() > 1 ? outputs[1] : torch::Tensor()};
}

ScopedRecordedPassEverywhere::ScopedRecordedPassEverywhere() : previous_(recorded_pass::forced.exchange(true)) {}
ScopedRecordedPassEverywhere::~ScopedRecordedPassEverywhere() { recorded_pass::forced.store(previous_); }

namespace {
bool recorded_pass_forced() { return recorded_pass::forced.load(); }
}  // namespace

bool recorded_pass_device(const torch::Device& device) { return queues_work(device) || recorded_pass_forced(); }

int64_t recorded_pass_replays() { return recorded_pass::replays.load(); }

bool recorded_pass_takes_all(const torch::Device& device) {
  return recorded_pass_forced() || (queues_work(device) && gpu_decoder_pass_recorded());
}

}  // namespace nmt
