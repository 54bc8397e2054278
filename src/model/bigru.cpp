#include "model/bigru.h"

#include <torch/nn/utils/rnn.h>
#include <torch/torch.h>

#include <algorithm>
#include <array>
#include <cmath>

#include "kernels/dispatch.h"
#include "model/dropout.h"
#include "model/encoded_source.h"
#include "model/fused_cpu/bigru_layer.h"
#include "model/gru_cell.h"
#include "model/linear/bf16_products.h"
#include "model/linear/int8_linear.h"
#include "model/linear/loop_linear.h"
#include "model/linear/loop_weight.h"
#include "model/linear/packed_linear.h"
#include "util/device_rules.h"
#include "util/runtime.h"

namespace nmt {

BiGruImpl::BiGruImpl(int64_t input_size, int64_t hidden_size, int64_t num_layers, double dropout_between_layers)
    : hidden_size_(hidden_size), dropout_(dropout_between_layers) {
  TORCH_CHECK(input_size > 0 && hidden_size > 0 && num_layers > 0, "BiGru: sizes and layers must be positive");
  const double bound = 1.0 / std::sqrt(static_cast<double>(hidden_size));  // as torch::nn::GRU
  auto parameter = [&](const std::string& name, std::vector<int64_t> shape) {
    return register_parameter(name, torch::empty(shape).uniform_(-bound, bound));
  };
  for (int64_t layer = 0; layer < num_layers; ++layer) {
    const int64_t layer_input = layer == 0 ? input_size : 2 * hidden_size;
    for (const std::string suffix : {"", "_reverse"}) {
      const std::string tag = "_l" + std::to_string(layer) + suffix;
      Direction direction;
      direction.weight_ih = parameter("weight_ih" + tag, {3 * hidden_size, layer_input});
      direction.weight_hh = parameter("weight_hh" + tag, {3 * hidden_size, hidden_size});
      direction.bias_ih = parameter("bias_ih" + tag, {3 * hidden_size});
      direction.bias_hh = parameter("bias_hh" + tag, {3 * hidden_size});
      directions_.push_back(direction);
    }
  }
}

torch::Tensor BiGruImpl::run(const Direction& direction, const torch::Tensor& input_gates, const torch::Tensor& mask,
                             int64_t first_padded, bool reverse, torch::Tensor& final) {
  const int64_t steps = input_gates.size(0);
  const std::vector<torch::Tensor> gates = input_gates.unbind(0);  // S x [B, 3H]
  const LoopLinear hidden_gates(direction.weight_hh, direction.bias_hh);
  torch::Tensor hidden = torch::zeros({input_gates.size(1), hidden_size_}, input_gates.options());  // h_0 [B, H]
  std::vector<torch::Tensor> states(static_cast<size_t>(steps));
  for (int64_t i = 0; i < steps; ++i) {
    const int64_t t = reverse ? steps - 1 - i : i;
    const auto position = static_cast<size_t>(t);
    torch::Tensor next = GruCellImpl::from_gates(gates[position], hidden_gates(hidden), hidden);
    if (t < first_padded) {
      hidden = next;  // every sentence is still running
      states[position] = hidden;
    } else {
      hidden = keep_ended_rows(hidden, next, mask[t]);
      states[position] = output_at_step(hidden, mask[t], reverse);
    }
  }
  final = hidden;
  return torch::stack(states, 0);  // [S, B, H]
}

torch::Tensor keep_ended_rows(const torch::Tensor& hidden, const torch::Tensor& next, const torch::Tensor& mask) {
  return hidden + mask * (next - hidden);
}

torch::Tensor output_at_step(const torch::Tensor& hidden, const torch::Tensor& mask, bool reverse) {
  return reverse ? hidden : hidden * mask;
}

// cuDNN reads the weights of all layers and directions from one buffer; LibTorch copies them into
// a new one at every call (and warns) unless the parameters already are views into such a buffer.
// _cudnn_rnn_flatten_weight makes the buffer and points the parameters at it, keeping them the same
// tensors (the optimizer's and autograd's references stay valid); moving the module to another
// device or loading weights with set_data undoes it, so every call checks where they are.
std::vector<torch::Tensor> BiGruImpl::all_weights() const {
  std::vector<torch::Tensor> weights;
  for (const Direction& direction : directions_) {
    weights.insert(weights.end(), {direction.weight_ih, direction.weight_hh, direction.bias_ih, direction.bias_hh});
  }
  return weights;
}

void BiGruImpl::flatten_for_cudnn(const std::vector<torch::Tensor>& weights, int64_t input_size) {
  std::vector<const void*> addresses;
  for (const torch::Tensor& weight : weights) addresses.push_back(weight.data_ptr());
  if (addresses == flat_addresses_ && flat_weights_.device() == weights.front().device()) return;
  c10::InferenceMode not_inference(false);  // translation runs in inference mode; the parameters are not
  torch::NoGradGuard no_grad;
  constexpr int64_t kCudnnGru = 3;  // cudnnRNNMode_t CUDNN_GRU
  flat_weights_ = at::_cudnn_rnn_flatten_weight(weights, /*weight_stride0=*/4, input_size, kCudnnGru, hidden_size_,
                                                /*proj_size=*/0, static_cast<int64_t>(directions_.size() / 2),
                                                /*batch_first=*/false, /*bidirectional=*/true);
  flat_addresses_.clear();  // the weights now live in the flat buffer: their new addresses
  for (const torch::Tensor& weight : weights) flat_addresses_.push_back(weight.data_ptr());
}

// On a GPU: cuDNN's GRU over the packed batch, all layers, directions and positions in one call.
// Packing gives the padding rule of bigru.h (padded outputs 0, final states at each sentence's own
// end), so the result equals the loop's.
BiGruImpl::Output BiGruImpl::forward_cudnn(const torch::Tensor& input, const torch::Tensor& lengths_cpu) {
  namespace rnn = torch::nn::utils::rnn;
  const AutocastScope float32(input.device(), false);  // bf16 training: the encoder stays in float32
  const std::vector<torch::Tensor> weights = all_weights();
  flatten_for_cudnn(weights, input.size(2));
  const auto layers = static_cast<int64_t>(directions_.size() / 2);
  const rnn::PackedSequence packed =
      rnn::pack_padded_sequence(input, lengths_cpu, /*batch_first=*/true, /*enforce_sorted=*/false);
  const torch::Tensor h0 = torch::zeros({2 * layers, input.size(0), hidden_size_}, input.options());
  auto [output, final] = at::gru(packed.data(), packed.batch_sizes(), h0, weights, /*has_biases=*/true, layers,
                                 dropout_, is_training(), /*bidirectional=*/true);
  const rnn::PackedSequence packed_output(output, packed.batch_sizes(), packed.sorted_indices(),
                                          packed.unsorted_indices());
  torch::Tensor states = std::get<0>(rnn::pad_packed_sequence(packed_output, /*batch_first=*/true,
                                                              /*padding_value=*/0.0, input.size(1)));
  return {states, final.index_select(1, packed.unsorted_indices())};
}

void BiGruImpl::pack_float32() {
  packed_.clear();
  int8_ = false;
  const torch::Tensor& any = directions_.front().weight_hh;
  if (!kernels::on_cpu({any}) || any.scalar_type() != torch::kFloat32) return;  // forward_packed() runs on none other
  std::vector<PackedDirection> packed;                                          // whole, or (an exception) none
  for (const Direction& direction : directions_) {
    auto input = std::make_shared<const PackedLinear>(direction.weight_ih, direction.bias_ih);
    auto hidden = std::make_shared<const LoopWeight>(direction.weight_hh.detach().t().contiguous());
    const torch::Tensor bias = direction.bias_hh.detach().clone();
    packed.push_back(
        {[input](const torch::Tensor& x) { return (*input)(x); },
         [hidden, bias](const torch::Tensor& h, const torch::Tensor& out) { hidden->multiply(h, bias, out); }});
  }
  packed_ = std::move(packed);
}

void BiGruImpl::quantize_int8() {
  packed_.clear();
  int8_ = false;
  const torch::Tensor& any = directions_.front().weight_hh;
  TORCH_CHECK(kernels::on_cpu({any}), "BiGru::quantize_int8: int8 runs on the CPU");
  std::vector<PackedDirection> packed;  // whole, or (an exception) none
  for (const Direction& direction : directions_) {
    auto input = std::make_shared<const Int8Linear>(direction.weight_ih, direction.bias_ih);
    auto hidden = std::make_shared<const Int8Linear>(direction.weight_hh, direction.bias_hh);
    packed.push_back({[input](const torch::Tensor& x) { return (*input)(x); },
                      [hidden](const torch::Tensor& h, const torch::Tensor& out) { (*hidden)(h, out); }});
  }
  packed_ = std::move(packed);
  int8_ = true;
}

bool BiGruImpl::takes_packed_path(const torch::Tensor& input) const {
  const bool int8 = int8_ && kernels::on_cpu({input}) && input.scalar_type() == torch::kFloat32;
  const bool kernels =
      int8 || kernels::use_kernel(kernels::Operation::kBiGruLayer, {input, directions_.front().weight_hh});
  if (is_training() || !kernels) return false;
  const auto records = [](const Direction& direction) {
    return kernels::autograd_records({direction.weight_ih, direction.weight_hh, direction.bias_ih, direction.bias_hh});
  };
  return !kernels::autograd_records({input}) && std::none_of(directions_.begin(), directions_.end(), records);
}

BiGruImpl::Output BiGruImpl::forward_packed(const torch::Tensor& input, const torch::Tensor& lengths_cpu) {
  const int64_t batch = input.size(0), positions = input.size(1);
  const torch::Tensor order = std::get<1>(lengths_cpu.sort(/*stable=*/true, /*dim=*/0, /*descending=*/true));
  const torch::Tensor sorted_lengths = lengths_cpu.to(torch::kInt64).index_select(0, order);
  const auto* sentence = order.data_ptr<int64_t>();
  const auto* length = sorted_lengths.data_ptr<int64_t>();
  PackedPositions packed;
  std::vector<int64_t> where;  // packed row -> its row in input [B * S, I]
  int64_t running = batch;
  for (int64_t t = 0; t < length[0]; ++t) {
    while (length[running - 1] <= t) --running;
    packed.rows.push_back(running);
    packed.offset.push_back(static_cast<int64_t>(where.size()));
    for (int64_t j = 0; j < running; ++j) where.push_back(sentence[j] * positions + t);
  }
  packed.total = static_cast<int64_t>(where.size());
  const torch::Tensor index = torch::tensor(where, torch::kInt64);

  torch::Tensor layer_input = input.reshape({batch * positions, input.size(2)}).index_select(0, index);  // [N, I]
  std::vector<torch::Tensor> finals;
  for (size_t layer = 0; layer * 2 < directions_.size(); ++layer) {
    std::array<torch::Tensor, 2> gates;
    std::array<LoopWeight, 2> made;  // the loops' weights packed for this batch, without pack_float32()
    std::array<HiddenGates, 2> loops;
    for (size_t d = 0; d < 2; ++d) {
      const size_t i = 2 * layer + d;
      if (packed_.empty()) {
        const Direction& direction = directions_[i];
        gates[d] = training_linear(layer_input, direction.weight_ih, direction.bias_ih);
        made[d] = LoopWeight(direction.weight_hh.t());
        loops[d] = [&made, &direction, d](const torch::Tensor& h, const torch::Tensor& out) {
          made[d].multiply(h, direction.bias_hh, out);
        };
      } else {
        gates[d] = packed_[i].input(layer_input);
        loops[d] = packed_[i].hidden;
      }
    }
    auto [states_forward, states_backward, final_forward, final_backward] = packed_bigru_layer(gates, loops, packed);
    for (const torch::Tensor& final : {final_forward, final_backward}) {  // back to the batch's order
      finals.push_back(torch::empty_like(final).index_copy_(0, order, final));
    }
    layer_input = torch::cat({states_forward, states_backward}, 1);  // [N, 2H]
  }
  const torch::Tensor states = torch::zeros({batch * positions, layer_input.size(1)}, layer_input.options());
  return {states.index_copy_(0, index, layer_input).view({batch, positions, layer_input.size(1)}),
          torch::stack(finals, 0)};
}

BiGruImpl::Output BiGruImpl::forward(const torch::Tensor& input, const torch::Tensor& lengths) {
  TORCH_CHECK(input.dim() == 3 && lengths.dim() == 1 && lengths.size(0) == input.size(0) && input.size(0) > 0,
              "BiGru: input [B, S, I] and lengths [B] expected, B > 0");
  const int64_t positions = input.size(1);
  const torch::Tensor lengths_cpu = lengths.to(torch::kCPU);
  const int64_t shortest = lengths_cpu.min().item<int64_t>();
  TORCH_CHECK(shortest >= 1 && lengths_cpu.max().item<int64_t>() <= positions,
              "BiGru: lengths must be between 1 and the padded length");
  if (has_library_gru_kernels(input.device()) && input.scalar_type() == directions_.front().weight_ih.scalar_type()) {
    return forward_cudnn(input, lengths_cpu);
  }
  if (takes_packed_path(input)) return forward_packed(input, lengths_cpu);
  const torch::Tensor mask =  // [S, B, 1], 1 at real positions
      make_source_mask(lengths_cpu, positions, input.device()).t().unsqueeze(2).to(input.scalar_type());

  torch::Tensor layer_input = input.transpose(0, 1);  // time-major [S, B, I]
  std::vector<torch::Tensor> finals;
  for (size_t layer = 0; layer * 2 < directions_.size(); ++layer) {
    if (layer > 0) layer_input = apply_dropout(layer_input, dropout_, is_training());
    // All positions' input gates in one product per direction: [S, B, I] -> [S, B, 3H].
    std::array<torch::Tensor, 2> input_gates;
    for (size_t d = 0; d < 2; ++d) {
      const Direction& direction = directions_[2 * layer + d];
      input_gates[d] = training_linear(layer_input, direction.weight_ih, direction.bias_ih);
    }
    const Direction& forward = directions_[2 * layer];
    const Direction& backward = directions_[2 * layer + 1];
    std::vector<torch::Tensor> halves(2);
    if (kernels::use_kernel(kernels::Operation::kBiGruLayer, {layer_input, forward.weight_hh, backward.weight_hh})) {
      // Both directions at once (fused_cpu/bigru_layer.h).
      auto [states_forward, states_backward, final_forward, final_backward] = fused_bigru_layer(
          input_gates, {forward.weight_hh, backward.weight_hh}, {forward.bias_hh, backward.bias_hh}, mask, shortest);
      halves = {states_forward, states_backward};
      finals.push_back(final_forward);
      finals.push_back(final_backward);
    } else {
      for (size_t d = 0; d < 2; ++d) {
        torch::Tensor final;
        halves[d] = run(d == 0 ? forward : backward, input_gates[d], mask, shortest, /*reverse=*/d == 1, final);
        finals.push_back(final);
      }
    }
    layer_input = torch::cat(halves, 2);  // [S, B, 2H]
  }
  return {layer_input.transpose(0, 1).contiguous(), torch::stack(finals, 0)};
}

}  // namespace nmt
