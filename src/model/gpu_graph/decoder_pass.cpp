// The decoder's training pass on a GPU (gpu_graph/decoder_pass.h): the buffers that keep their addresses,
// the step graphs, the forward and backward steps, and the autograd function around them.
#include "model/gpu_graph/decoder_pass.h"

#include <c10/util/accumulate.h>
#include <torch/torch.h>

#include <array>
#include <atomic>
#include <limits>
#include <map>
#include <tuple>
#include <vector>

#include "model/dropout.h"
#include "util/cuda_graph.h"
#include "util/device_rules.h"
#include "util/runtime.h"

namespace nmt {
namespace gpu_decoder {
namespace {

using torch::autograd::AutogradContext;
using torch::autograd::tensor_list;

// The buffers: what a forward step writes for the backward ([T, ...] records), the inputs the
// steps read, the carries from one position to the next, and the backward's per-position gradients.
enum Buffer : size_t {
  kGates,            // [T, B, 3H] G_t
  kWorkspace,        // [T, B, 5H] the GRU step's (r, z, n, h_{t-1}, W_hn h_{t-1} + b_hn)
  kActivations,      // [T, B, S, A] u_t
  kWeights,          // [T, B, S] w_t
  kJoined,           // [T, B, H + C] [h_t; c_t]
  kCombined,         // [T, B, H] tanh(W_c [h_t; c_t])
  kMasks,            // [T, B, H] m_t
  kAttentional,      // [T, B, H] a_t
  kStates,           // [B, S, C]
  kKeys,             // [B, S, A]
  kPadding,          // [B, S] bool, true at padded source positions
  kHidden,           // [B, H] the carry h_{t-1}
  kFed,              // [B, H] the carry a_{t-1}
  kGradAttentional,  // [T, B, H] dL/da_t, from the loss
  kGradAttention,    // [T, B, S] dL/dw_t, from the loss
  kGradCombined,     // [T, B, H] dL/d(W_c [h_t; c_t])
  kGradEnergies,     // [T, B, S] dL/d(u_t v)
  kGradQuery,        // [T, B, A] dL/d(W_q h_t)
  kGradInputGates,   // [T, B, 3H] dL/dgi_t
  kGradHiddenGates,  // [T, B, 3H] dL/d(W_h h_{t-1} + b_h)
  kGradStates,       // [B, S, C] summed over positions
  kGradKeys,         // [B, S, A] summed over positions
  kGradHidden,       // [B, H] the carry dL/dh_t
  kGradFed,          // [B, H] the carry dL/da_t from position t + 1
  kBufferCount
};

constexpr int64_t kGruWorkspace = 5;  // the GRU step's workspace, in multiples of H (as LibTorch's CUDA step)
constexpr size_t kMostGraphs = 512;   // per direction; beyond it the graphs start again

// The GRU step from its gates, with what its backward needs: LibTorch's fused CUDA kernel on a GPU,
// the same maths in LibTorch's operations elsewhere, both with the workspace layout of kWorkspace.
std::pair<torch::Tensor, torch::Tensor> gru_forward(const torch::Tensor& gi, const torch::Tensor& gh,
                                                    const torch::Tensor& h) {
  if (has_library_gru_kernels(gi.device())) {
    auto [next, workspace] = at::_thnn_fused_gru_cell(gi, gh, h);
    return {next, workspace};
  }
  const auto input = gi.chunk(3, 1), hidden = gh.chunk(3, 1);
  const torch::Tensor reset = torch::sigmoid(input[0] + hidden[0]);
  const torch::Tensor update = torch::sigmoid(input[1] + hidden[1]);
  const torch::Tensor candidate = torch::tanh(input[2] + reset * hidden[2]);
  return {candidate + update * (h - candidate), torch::cat({reset, update, candidate, h, hidden[2]}, 1)};
}

// Its backward: dL/dgi, dL/dgh and dL/dh_{t-1} from dL/dh_t.
std::tuple<torch::Tensor, torch::Tensor, torch::Tensor> gru_backward(const torch::Tensor& grad,
                                                                     const torch::Tensor& workspace) {
  if (has_library_gru_kernels(grad.device())) {
    auto [grad_input, grad_hidden, grad_previous, unused_input_bias, unused_hidden_bias] =
        at::_thnn_fused_gru_cell_backward(grad, workspace, /*has_bias=*/false);
    return {grad_input, grad_hidden, grad_previous};
  }
  const auto saved = workspace.chunk(kGruWorkspace, 1);  // r, z, n, h_{t-1}, W_hn h_{t-1} + b_hn
  const torch::Tensor &reset = saved[0], &update = saved[1], &candidate = saved[2];
  const torch::Tensor grad_candidate = grad * (1 - update) * (1 - candidate * candidate);
  const torch::Tensor grad_update = grad * (saved[3] - candidate) * update * (1 - update);
  const torch::Tensor grad_reset = grad_candidate * saved[4] * reset * (1 - reset);
  return {torch::cat({grad_reset, grad_update, grad_candidate}, 1),
          torch::cat({grad_reset, grad_update, grad_candidate * reset}, 1), grad * update};
}

// Row t of a [T, ...] buffer, t the counter on the device.
torch::Tensor at_position(const torch::Tensor& buffer, const torch::Tensor& position) {
  return buffer.index_select(0, position).squeeze(0);
}
void write_position(const torch::Tensor& buffer, const torch::Tensor& position, const torch::Tensor& value) {
  buffer.index_copy_(0, position, value.unsqueeze(0));
}

}  // namespace

// The buffers, the position counter and the graphs of one loop.
struct Arena {
  std::array<torch::Tensor, kBufferCount> flat;  // 1-D; each view of a buffer starts at its first element
  torch::Tensor position;                        // [1] int64, t
  int64_t moved = 0;                             // how often a buffer has moved (grown)
  int64_t passes = 0;                            // forwards run; the buffers hold the last one's records

  // The graphs, by shape, and what they were recorded on: a buffer or a weight that has moved since
  // makes them stale.
  using Shape = std::tuple<int64_t, int64_t, bool, bool>;  // B, S, dropout, dL/dw_t given (backward)
  std::map<Shape, std::unique_ptr<StepGraph>> forward_graphs, backward_graphs;
  int64_t graphs_moved = -1;
  std::vector<const void*> graph_weights;
  GraphPool pool;                     // the graphs' temporaries: one pool, as they run one after another
  std::unique_ptr<GpuStream> stream;  // every step runs on it (cuda_graph.h)

  // Buffer `id` as [rows, row...] with rows >= `needed`: as many as its memory holds, so that a
  // graph recorded for one batch serves a longer one while the buffer stays put.
  torch::Tensor rows(Buffer id, int64_t needed, at::IntArrayRef row, const torch::TensorOptions& options) {
    const int64_t row_size = c10::multiply_integers(row);
    reserve(id, needed * row_size, options);
    std::vector<int64_t> shape{flat[id].numel() / row_size};
    shape.insert(shape.end(), row.begin(), row.end());
    return flat[id].narrow(0, 0, shape[0] * row_size).view(shape);
  }

  // Buffer `id` as exactly `shape`.
  torch::Tensor exact(Buffer id, at::IntArrayRef shape, const torch::TensorOptions& options) {
    const int64_t size = c10::multiply_integers(shape);
    reserve(id, size, options);
    return flat[id].narrow(0, 0, size).view(shape);
  }

  // The graphs for a step of `shape`, started again when they are stale or too many.
  StepGraph& graph(std::map<Shape, std::unique_ptr<StepGraph>>& graphs, const Shape& shape,
                   const torch::Device& device) {
    if (graphs.size() >= kMostGraphs) clear_graphs();
    auto& slot = graphs[shape];
    if (!slot) {
      const bool enabled = cuda_graphs_enabled(device);
      if (enabled && pool.first == 0 && pool.second == 0) pool = new_graph_pool();
      slot = std::make_unique<StepGraph>(enabled, pool);
    }
    return *slot;
  }

  // Before a forward: the graphs hold only while the buffers and the weights stay put.
  void check_graphs(const std::vector<const void*>& weights) {
    if (moved != graphs_moved || weights != graph_weights) clear_graphs();
    graphs_moved = moved, graph_weights = weights;
  }

  void clear_graphs() {
    forward_graphs.clear(), backward_graphs.clear();
    pool = GraphPool{};  // a new one with the next graph
  }

 private:
  void reserve(Buffer id, int64_t size, const torch::TensorOptions& options) {
    torch::Tensor& buffer = flat[id];
    if (buffer.defined() && buffer.numel() >= size && buffer.device() == options.device() &&
        buffer.scalar_type() == options.dtype().toScalarType()) {
      return;
    }
    buffer = torch::empty({size + size / 2}, options);  // room to grow: each move re-records the graphs
    ++moved;
  }
};

namespace {

// The views of one pass: the buffers shaped for its batch, the counter and the weights.
struct Views {
  torch::Tensor gates, workspace, activations, weights, joined, combined, masks, attentional;
  torch::Tensor states, keys, padding, hidden, fed;
  torch::Tensor grad_attentional, grad_attention, grad_combined, grad_energies, grad_query, grad_input_gates,
      grad_hidden_gates, grad_states, grad_keys, grad_hidden, grad_fed;
  torch::Tensor position;
  torch::Tensor feed, hidden_weight, hidden_bias, query, energy, combine;
};

struct Sizes {
  int64_t steps, batch, positions, size, key_size, state_size;
};

Views forward_views(Arena& arena, const Sizes& n, bool dropout, const torch::TensorOptions& options) {
  const int64_t T = n.steps, B = n.batch, S = n.positions, H = n.size, A = n.key_size, C = n.state_size;
  Views v;
  v.gates = arena.rows(kGates, T, {B, 3 * H}, options);
  v.workspace = arena.rows(kWorkspace, T, {B, kGruWorkspace * H}, options);
  v.activations = arena.rows(kActivations, T, {B, S, A}, options);
  v.weights = arena.rows(kWeights, T, {B, S}, options);
  v.joined = arena.rows(kJoined, T, {B, H + C}, options);
  v.combined = arena.rows(kCombined, T, {B, H}, options);
  if (dropout) v.masks = arena.rows(kMasks, T, {B, H}, options);
  v.attentional = arena.rows(kAttentional, T, {B, H}, options);
  v.states = arena.exact(kStates, {B, S, C}, options);
  v.keys = arena.exact(kKeys, {B, S, A}, options);
  v.padding = arena.exact(kPadding, {B, S}, options.dtype(torch::kBool));
  v.hidden = arena.exact(kHidden, {B, H}, options);
  v.fed = arena.exact(kFed, {B, H}, options);
  return v;
}

// The backward's own views, added to the forward's.
void add_backward_views(Arena& arena, const Sizes& n, bool grad_attention, const torch::TensorOptions& options,
                        Views& v) {
  const int64_t T = n.steps, B = n.batch, S = n.positions, H = n.size, A = n.key_size, C = n.state_size;
  v.grad_attentional = arena.rows(kGradAttentional, T, {B, H}, options);
  if (grad_attention) v.grad_attention = arena.rows(kGradAttention, T, {B, S}, options);
  v.grad_combined = arena.rows(kGradCombined, T, {B, H}, options);
  v.grad_energies = arena.rows(kGradEnergies, T, {B, S}, options);
  v.grad_query = arena.rows(kGradQuery, T, {B, A}, options);
  v.grad_input_gates = arena.rows(kGradInputGates, T, {B, 3 * H}, options);
  v.grad_hidden_gates = arena.rows(kGradHiddenGates, T, {B, 3 * H}, options);
  v.grad_states = arena.exact(kGradStates, {B, S, C}, options);
  v.grad_keys = arena.exact(kGradKeys, {B, S, A}, options);
  v.grad_hidden = arena.exact(kGradHidden, {B, H}, options);
  v.grad_fed = arena.exact(kGradFed, {B, H}, options);
}

// Position t forward (gpu_graph/decoder_pass.h has the maths); then t + 1.
void forward_step(const Views& v) {
  const torch::Tensor& t = v.position;
  const torch::Tensor input_gates = torch::addmm(at_position(v.gates, t), v.fed, v.feed.t());
  const torch::Tensor hidden_gates = torch::addmm(v.hidden_bias, v.hidden, v.hidden_weight.t());
  auto [hidden, workspace] = gru_forward(input_gates, hidden_gates, v.hidden);
  write_position(v.workspace, t, workspace);
  v.hidden.copy_(hidden);
  const torch::Tensor activations = torch::tanh(v.keys + torch::mm(hidden, v.query.t()).unsqueeze(1));  // [B, S, A]
  write_position(v.activations, t, activations);
  const torch::Tensor energies = torch::matmul(activations, v.energy);  // [B, S]
  energies.masked_fill_(v.padding, -std::numeric_limits<float>::infinity());
  const torch::Tensor weights = torch::softmax(energies, 1);
  write_position(v.weights, t, weights);
  const torch::Tensor context = torch::bmm(weights.unsqueeze(1), v.states).squeeze(1);  // [B, C]
  const torch::Tensor joined = torch::cat({hidden, context}, 1);
  write_position(v.joined, t, joined);
  const torch::Tensor combined = torch::tanh(torch::mm(joined, v.combine.t()));
  write_position(v.combined, t, combined);
  const torch::Tensor attentional = v.masks.defined() ? combined * at_position(v.masks, t) : combined;
  write_position(v.attentional, t, attentional);
  v.fed.copy_(attentional);
  t.add_(1);
}

// Position t backward, from dL/da_t and the carries of position t + 1; then t - 1.
void backward_step(const Views& v) {
  const torch::Tensor& t = v.position;
  const int64_t H = v.hidden.size(1), C = v.states.size(2);
  torch::Tensor grad = at_position(v.grad_attentional, t) + v.grad_fed;  // dL/da_t
  if (v.masks.defined()) grad = grad * at_position(v.masks, t);
  const torch::Tensor grad_combined = torch::tanh_backward(grad, at_position(v.combined, t));
  write_position(v.grad_combined, t, grad_combined);
  const torch::Tensor grad_joined = torch::mm(grad_combined, v.combine);  // [B, H + C]
  const torch::Tensor grad_context = grad_joined.narrow(1, H, C);
  const torch::Tensor weights = at_position(v.weights, t);  // [B, S]
  torch::Tensor grad_weights = torch::bmm(v.states, grad_context.unsqueeze(2)).squeeze(2);
  if (v.grad_attention.defined()) grad_weights = grad_weights + at_position(v.grad_attention, t);
  v.grad_states.baddbmm_(weights.unsqueeze(2), grad_context.unsqueeze(1));
  const torch::Tensor grad_energies = torch::_softmax_backward_data(grad_weights, weights, 1, torch::kFloat);
  write_position(v.grad_energies, t, grad_energies);
  const torch::Tensor grad_activations =  // dL/d(K + W_q h_t) [B, S, A]
      torch::tanh_backward(grad_energies.unsqueeze(2) * v.energy, at_position(v.activations, t));
  v.grad_keys.add_(grad_activations);
  const torch::Tensor grad_query = grad_activations.sum(1);
  write_position(v.grad_query, t, grad_query);
  v.grad_hidden.add_(grad_joined.narrow(1, 0, H)).addmm_(grad_query, v.query);  // dL/dh_t
  auto [grad_input_gates, grad_hidden_gates, grad_previous] = gru_backward(v.grad_hidden, at_position(v.workspace, t));
  write_position(v.grad_input_gates, t, grad_input_gates);
  write_position(v.grad_hidden_gates, t, grad_hidden_gates);
  v.grad_hidden.copy_(torch::addmm(grad_previous, grad_hidden_gates, v.hidden_weight));
  torch::Tensor grad_fed = v.grad_fed;  // dL/da_{t-1}
  torch::mm_out(grad_fed, grad_input_gates, v.feed);
  t.sub_(1);
}

// The arena in autograd's context (an IValue capsule), with the pass whose records it must hold.
struct HeldArena : torch::CustomClassHolder {
  std::shared_ptr<Arena> arena;
  int64_t pass = 0;
  Sizes sizes{};
  double dropout = 0;
};
constexpr const char* kHeldKey = "arena";

struct DecoderLoopGpu : public torch::autograd::Function<DecoderLoopGpu> {
  // gates [B, T, 3H]; returns a_t [B, T, H] and w_t [B, T, S].
  static tensor_list forward(AutogradContext* context, const torch::Tensor& gates, const torch::Tensor& initial_hidden,
                             const torch::Tensor& states, const torch::Tensor& keys, const torch::Tensor& mask,
                             const torch::Tensor& feed, const torch::Tensor& hidden_weight,
                             const torch::Tensor& hidden_bias, const torch::Tensor& query, const torch::Tensor& energy,
                             const torch::Tensor& combine, const std::shared_ptr<Arena>& arena, double dropout) {
    const AutocastScope float32(gates.device(), false);  // the loop's products in float32
    const Sizes n{gates.size(1), gates.size(0), states.size(1), initial_hidden.size(1), keys.size(2), states.size(2)};
    const torch::TensorOptions options = gates.options();
    Views v = forward_views(*arena, n, dropout > 0, options);
    // Sized before the graphs are looked up: a buffer that moves makes them stale.
    arena->check_graphs({feed.data_ptr(), hidden_weight.data_ptr(), hidden_bias.data_ptr(), query.data_ptr(),
                         energy.data_ptr(), combine.data_ptr()});
    v.gates.narrow(0, 0, n.steps).copy_(gates.transpose(0, 1));
    if (v.masks.defined())
      v.masks.narrow(0, 0, n.steps).copy_(dropout_mask({n.steps, n.batch, n.size}, dropout, options));
    v.states.copy_(states), v.keys.copy_(keys), v.padding.copy_(mask.logical_not());
    v.hidden.copy_(initial_hidden), v.fed.zero_();
    if (!arena->position.defined() || arena->position.device() != gates.device()) {
      arena->position = torch::zeros({1}, options.dtype(torch::kInt64));
      arena->stream = std::make_unique<GpuStream>(gates.device());
      arena->clear_graphs();
    }
    arena->position.zero_();
    v.position = arena->position;
    v.feed = feed, v.hidden_weight = hidden_weight, v.hidden_bias = hidden_bias;
    v.query = query, v.energy = energy, v.combine = combine;

    StepGraph& graph =
        arena->graph(arena->forward_graphs, Arena::Shape{n.batch, n.positions, dropout > 0, false}, gates.device());
    {
      const GpuSideStream side(*arena->stream);
      for (int64_t t = 0; t < n.steps; ++t) graph.run([&] { forward_step(v); });
    }
    torch::Tensor attentional = v.attentional.narrow(0, 0, n.steps).transpose(0, 1).contiguous();
    torch::Tensor attention = v.weights.narrow(0, 0, n.steps).transpose(0, 1).contiguous();

    context->save_for_backward({initial_hidden, feed, hidden_weight, hidden_bias, query, energy, combine});
    auto held = c10::make_intrusive<HeldArena>();
    held->arena = arena, held->pass = ++arena->passes, held->sizes = n, held->dropout = dropout;
    context->saved_data[kHeldKey] = c10::IValue::make_capsule(std::move(held));
    return {attentional, attention};
  }

  static tensor_list backward(AutogradContext* context, tensor_list grads) {
    const auto saved = context->get_saved_variables();
    const torch::Tensor &initial_hidden = saved[0], &feed = saved[1], &hidden_weight = saved[2];
    const torch::Tensor &query = saved[4], &energy = saved[5], &combine = saved[6];
    const auto held = c10::static_intrusive_pointer_cast<HeldArena>(context->saved_data[kHeldKey].toCapsule());
    Arena& arena = *held->arena;
    TORCH_CHECK(held->pass == arena.passes,
                "the decoder's GPU training loop ran another forward before this pass's backward: run each "
                "backward before the next forward");
    const Sizes& n = held->sizes;
    const int64_t T = n.steps, B = n.batch, S = n.positions, H = n.size, A = n.key_size;
    const torch::TensorOptions options = initial_hidden.options();
    const bool grad_attention = grads[1].defined();
    const int64_t moved = arena.moved;
    Views v = forward_views(arena, n, held->dropout > 0, options);
    add_backward_views(arena, n, grad_attention, options, v);
    if (arena.moved != moved) arena.clear_graphs();  // a backward buffer grew
    if (grads[0].defined()) {
      v.grad_attentional.narrow(0, 0, T).copy_(grads[0].transpose(0, 1));
    } else {
      v.grad_attentional.narrow(0, 0, T).zero_();
    }
    if (grad_attention) v.grad_attention.narrow(0, 0, T).copy_(grads[1].transpose(0, 1));
    v.grad_states.zero_(), v.grad_keys.zero_(), v.grad_hidden.zero_(), v.grad_fed.zero_();
    arena.position.fill_(T - 1);
    v.position = arena.position;
    v.feed = feed, v.hidden_weight = hidden_weight, v.query = query, v.energy = energy, v.combine = combine;

    StepGraph& graph = arena.graph(arena.backward_graphs, Arena::Shape{B, S, held->dropout > 0, grad_attention},
                                   initial_hidden.device());
    {
      const GpuSideStream side(*arena.stream);
      for (int64_t t = T - 1; t >= 0; --t) graph.run([&] { backward_step(v); });
    }

    // Each weight's gradient, one product over all positions.
    const auto all = [T](const torch::Tensor& buffer) { return buffer.narrow(0, 0, T); };
    const auto flat = [](const torch::Tensor& tensor) { return tensor.reshape({-1, tensor.size(-1)}); };
    const torch::Tensor hidden_states = all(v.joined).narrow(2, 0, H);  // [T, B, H] h_t
    const torch::Tensor previous_hidden =
        T == 1 ? initial_hidden.unsqueeze(0)
               : torch::cat({initial_hidden.unsqueeze(0), hidden_states.narrow(0, 0, T - 1)});
    const torch::Tensor previous_fed =
        torch::cat({torch::zeros({1, B, H}, options), all(v.attentional).narrow(0, 0, T - 1)});
    const torch::Tensor grad_input_gates = all(v.grad_input_gates), grad_hidden_gates = all(v.grad_hidden_gates);
    tensor_list result(13);
    result[0] = grad_input_gates.transpose(0, 1).contiguous();
    result[1] = v.grad_hidden.clone();
    result[2] = v.grad_states.clone();
    result[3] = v.grad_keys.clone();
    result[5] = flat(grad_input_gates).t().mm(flat(previous_fed));
    result[6] = flat(grad_hidden_gates).t().mm(flat(previous_hidden));
    result[7] = grad_hidden_gates.sum(std::vector<int64_t>{0, 1});
    result[8] = flat(all(v.grad_query)).t().mm(flat(hidden_states));
    result[9] = all(v.activations).reshape({T * B * S, A}).t().mv(all(v.grad_energies).reshape({T * B * S}));
    result[10] = flat(all(v.grad_combined)).t().mm(flat(all(v.joined)));
    return result;
  }
};

std::atomic<bool> everywhere{false};

}  // namespace
}  // namespace gpu_decoder

GpuDecoderLoop::GpuDecoderLoop() : arena_(std::make_shared<gpu_decoder::Arena>()) {}
GpuDecoderLoop::~GpuDecoderLoop() = default;

std::pair<torch::Tensor, torch::Tensor> GpuDecoderLoop::run(const torch::Tensor& token_gates,
                                                            const torch::Tensor& initial_hidden,
                                                            const EncodedSource& source, const GpuLoopWeights& weights,
                                                            double dropout) {
  TORCH_CHECK(token_gates.dim() == 3 && initial_hidden.dim() == 2 && token_gates.size(0) == initial_hidden.size(0) &&
                  token_gates.size(2) == 3 * initial_hidden.size(1) && token_gates.size(1) > 0,
              "GPU decoder loop: token gates [B, T, 3H] and an initial state [B, H] expected");
  const auto float32 = [](const torch::Tensor& tensor) { return tensor.to(torch::kFloat).contiguous(); };
  torch::autograd::tensor_list outputs = gpu_decoder::DecoderLoopGpu::apply(
      float32(token_gates), float32(initial_hidden), float32(source.states), float32(source.keys), source.mask,
      weights.feed, weights.hidden, weights.hidden_bias, weights.query, weights.energy, weights.combine, arena_,
      dropout);
  return {outputs[0], outputs[1]};
}

ScopedGpuLoopEverywhere::ScopedGpuLoopEverywhere() : previous_(gpu_decoder::everywhere.exchange(true)) {}
ScopedGpuLoopEverywhere::~ScopedGpuLoopEverywhere() { gpu_decoder::everywhere.store(previous_); }

bool gpu_loop_device(const torch::Device& device) { return queues_work(device) || gpu_decoder::everywhere.load(); }

}  // namespace nmt
