// The fused decoder loop's state in autograd's context (fused_cpu/decoder_state.h).
//
// LibTorch 1.13's AutogradContext keeps what a backward needs in two ways: save_for_backward, a
// list of tensors, and saved_data, a map from string keys to IValues. The function's inputs and
// outputs must take the first: it checks at the backward that no input was modified in place
// since, and it keeps an output without a reference to the output's own node (an output held in
// saved_data would keep alive the node that holds it: a reference cycle). So the inputs and the
// outputs go to save_for_backward at the positions that Slot names, and the rest of the state to
// saved_data as one capsule (an intrusive_ptr to a CustomClassHolder: the IValue that holds a C++
// object of our own) under one key. These two functions are the only code that knows either layout.
#include "model/fused_cpu/decoder_state.h"

#include <torch/torch.h>

#include <utility>

namespace nmt::fused_decoder {
namespace {

using torch::autograd::AutogradContext;

// The positions in save_for_backward's list: the inputs that are one tensor each (possibly
// undefined), the outputs, then the per-layer lists hidden and hidden_bias (L each), layer_gates and
// layer_bias (L - 1 each) from kPerLayer on.
enum Slot : size_t {
  kGates,
  kInitialHidden,
  kStates,
  kKeys,
  kMask,
  kFeed,
  kQuery,
  kEnergy,
  kCoverageWeight,
  kProjection,
  kCombine,
  kAttentional,
  kAttention,
  kPerLayer
};

// The rest of the state, in saved_data under kHeldKey.
struct HeldState : torch::CustomClassHolder {
  LoopRecord record;  // without attentional and attention, the outputs (in save_for_backward)
  RecordedAttention recorded;
  std::vector<int64_t> active;
  int64_t layers = 0;  // L, the per-layer lists' lengths
  int64_t heads = 1;   // LoopInputs::heads
};

constexpr const char* kHeldKey = "state";

}  // namespace

void save_state(AutogradContext* context, const LoopState& state) {
  const LoopInputs& in = state.in;
  std::vector<torch::Tensor> saved(kPerLayer);
  saved[kGates] = in.gates, saved[kInitialHidden] = in.initial_hidden;
  saved[kStates] = in.states, saved[kKeys] = in.keys, saved[kMask] = in.mask;
  saved[kFeed] = in.feed, saved[kQuery] = in.query, saved[kEnergy] = in.energy;
  saved[kCoverageWeight] = in.coverage_weight, saved[kProjection] = in.projection, saved[kCombine] = in.combine;
  saved[kAttentional] = state.record.attentional, saved[kAttention] = state.record.attention;
  for (const auto* list : {&in.hidden, &in.hidden_bias, &in.layer_gates, &in.layer_bias}) {
    saved.insert(saved.end(), list->begin(), list->end());
  }
  context->save_for_backward(saved);

  auto held = c10::make_intrusive<HeldState>();
  held->record = state.record;
  held->record.attentional = torch::Tensor();
  held->record.attention = torch::Tensor();
  held->recorded = state.recorded;
  held->active = state.active;
  held->layers = in.layers();
  held->heads = in.heads;
  context->saved_data[kHeldKey] = c10::IValue::make_capsule(std::move(held));
}

LoopState restore_state(AutogradContext* context) {
  const auto saved = context->get_saved_variables();
  const auto held = c10::static_intrusive_pointer_cast<HeldState>(context->saved_data[kHeldKey].toCapsule());
  auto next = saved.begin() + kPerLayer;
  const auto per_layer = [&](int64_t count) {
    std::vector<torch::Tensor> list(next, next + count);
    next += count;
    return list;
  };
  LoopState state;
  LoopInputs& in = state.in;
  in.gates = saved[kGates], in.initial_hidden = saved[kInitialHidden];
  in.states = saved[kStates], in.keys = saved[kKeys], in.mask = saved[kMask];
  in.feed = saved[kFeed], in.query = saved[kQuery], in.energy = saved[kEnergy];
  in.coverage_weight = saved[kCoverageWeight], in.projection = saved[kProjection], in.combine = saved[kCombine];
  in.hidden = per_layer(held->layers);
  in.hidden_bias = per_layer(held->layers);
  in.layer_gates = per_layer(held->layers - 1);
  in.layer_bias = per_layer(held->layers - 1);
  in.heads = held->heads;
  state.active = held->active;
  state.record = held->record;
  state.record.attentional = saved[kAttentional];
  state.record.attention = saved[kAttention];
  state.recorded = held->recorded;
  return state;
}

}  // namespace nmt::fused_decoder
