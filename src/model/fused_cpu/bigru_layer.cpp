#include "model/fused_cpu/bigru_layer.h"

#include <torch/torch.h>

#include <algorithm>
#include <array>
#include <cstring>
#include <functional>

#include "kernels/dispatch.h"
#include "kernels/gru_kernels.h"
#include "model/bigru.h"
#include "model/gru_cell.h"
#include "model/linear/bf16_products.h"
#include "model/linear/loop_weight.h"
#include "util/team.h"

namespace nmt {
namespace {

using torch::autograd::AutogradContext;
using torch::autograd::tensor_list;

// What one direction's forward loop keeps for its backward loop.
struct DirectionRecord {
  torch::Tensor previous;  // [S, B, H]: h_{t-1} at each step t (the input of step t)
  torch::Tensor saved;     // [S, B, 4H]: the GRU kernel's (r, z, n, gh_n) at each step
};

// The step order of a direction: t = 0..S-1 forward, S-1..0 backward.
int64_t position(int64_t i, int64_t steps, bool reverse) { return reverse ? steps - 1 - i : i; }

// One direction's forward loop on the calling thread (no autograd: inputs are plain tensors).
// Fills states [S, B, H], final [B, H] and, unless it is null (inference), the record.
void run_forward(const torch::Tensor& gates, const torch::Tensor& weight, const torch::Tensor& bias,
                 const torch::Tensor& mask, int64_t first_padded, bool reverse, torch::Tensor& states,
                 torch::Tensor& final, DirectionRecord* record) {
  const int64_t steps = gates.size(0), batch = gates.size(1), size = weight.size(1);
  states = torch::empty({steps, batch, size}, gates.options());
  if (record != nullptr) {
    record->previous = torch::empty_like(states);
    record->saved = torch::empty({steps, batch, 4 * size}, gates.options());
  }
  torch::Tensor hidden = torch::zeros({batch, size}, gates.options());
  torch::Tensor hidden_gates = torch::empty({batch, 3 * size}, gates.options());
  const LoopWeight weight_t(weight.t());
  for (int64_t i = 0; i < steps; ++i) {
    const int64_t t = position(i, steps, reverse);
    if (record != nullptr) record->previous[t].copy_(hidden);
    weight_t.multiply(hidden, bias, hidden_gates);  // W_h h + b_h
    torch::Tensor next = torch::empty_like(hidden);
    kernels::gru_step(gates[t].data_ptr<float>(), hidden_gates.data_ptr<float>(), hidden.data_ptr<float>(), batch, size,
                      next.data_ptr<float>(), record != nullptr ? record->saved[t].data_ptr<float>() : nullptr);
    const bool padded = t >= first_padded;  // some sentences have ended: the padding rule of bigru.h
    hidden = padded ? keep_ended_rows(hidden, next, mask[t]) : next;
    states[t].copy_(padded ? output_at_step(hidden, mask[t], reverse) : hidden);
  }
  final = hidden;
}

// One direction's loop over a packed batch (PackedPositions): at position t only the first rows[t]
// sentences step. Forward, the ones that ended keep their last state (their final); backward, the
// ones that have not begun are still at h_0 = 0 when they do.
void run_packed(const torch::Tensor& gates, const HiddenGates& hidden_product, const PackedPositions& positions,
                bool reverse, torch::Tensor& states, torch::Tensor& final) {
  const auto steps = static_cast<int64_t>(positions.rows.size());
  const int64_t batch = positions.rows.front(), size = gates.size(1) / 3;
  states = torch::empty({positions.total, size}, gates.options());
  torch::Tensor hidden = torch::zeros({batch, size}, gates.options());
  const torch::Tensor hidden_gates = torch::empty({batch, 3 * size}, gates.options());
  float* h = hidden.data_ptr<float>();
  const bool kernel = kernels::use_kernel(kernels::Operation::kGruStep);
  for (int64_t i = 0; i < steps; ++i) {
    const auto t = static_cast<size_t>(position(i, steps, reverse));
    const int64_t rows = positions.rows[t], first = positions.offset[t];
    hidden_product(hidden.narrow(0, 0, rows), hidden_gates.narrow(0, 0, rows));  // W_h h + b_h
    if (kernel) {
      kernels::gru_step(gates.data_ptr<float>() + first * 3 * size, hidden_gates.data_ptr<float>(), h, rows, size, h,
                        nullptr);
    } else {  // int8 at kernel level off (BiGruImpl::quantize_int8): the step in LibTorch's ops
      const torch::Tensor running = hidden.narrow(0, 0, rows);
      running.copy_(GruCellImpl::from_gates(gates.narrow(0, first, rows), hidden_gates.narrow(0, 0, rows), running));
    }
    std::memcpy(states.data_ptr<float>() + first * size, h, static_cast<size_t>(rows * size) * sizeof(float));
  }
  final = hidden;
}

// One direction's backward loop: from dL/dstates [S, B, H] (or undefined) and dL/dfinal [B, H]
// (or undefined), the gradients of its input gates [S, B, 3H], weight_hh and bias_hh.
void run_backward(const torch::Tensor& grad_states, const torch::Tensor& grad_final, const torch::Tensor& weight,
                  const torch::Tensor& mask, int64_t first_padded, bool reverse, const DirectionRecord& record,
                  torch::Tensor& grad_gates, torch::Tensor& grad_weight, torch::Tensor& grad_bias) {
  const int64_t steps = record.saved.size(0), batch = record.saved.size(1), size = weight.size(1);
  grad_gates = torch::empty({steps, batch, 3 * size}, weight.options());
  torch::Tensor grad_hidden_gates = torch::empty_like(grad_gates);  // dL/d(W_h h + b_h) at each step
  torch::Tensor grad_hidden = grad_final.defined() ? grad_final.clone(torch::MemoryFormat::Contiguous)
                                                   : torch::zeros({batch, size}, weight.options());
  torch::Tensor grad_direct = torch::empty({batch, size}, weight.options());
  const LoopWeight loop_weight(weight);
  for (int64_t i = steps - 1; i >= 0; --i) {
    const int64_t t = position(i, steps, reverse);
    const bool padded = t >= first_padded;
    if (grad_states.defined()) grad_hidden += padded && !reverse ? grad_states[t] * mask[t] : grad_states[t];
    // The backward of keep_ended_rows and output_at_step (bigru.h), h_t = h_{t-1} + m (h'_t - h_{t-1}):
    // rows that ended pass their gradient straight to h_{t-1}.
    const torch::Tensor grad_next = padded ? (grad_hidden * mask[t]).contiguous() : grad_hidden;
    kernels::gru_step_backward(grad_next.data_ptr<float>(), record.saved[t].data_ptr<float>(),
                               record.previous[t].data_ptr<float>(), batch, size, grad_gates[t].data_ptr<float>(),
                               grad_hidden_gates[t].data_ptr<float>(), grad_direct.data_ptr<float>());
    torch::Tensor grad_previous = torch::empty_like(grad_direct);
    loop_weight.multiply(grad_hidden_gates[t], grad_direct, grad_previous);  // + dgh W_h
    if (padded) grad_previous += grad_hidden * (1 - mask[t]);
    grad_hidden = grad_previous;
  }
  // The weight's gradient over all steps in one product (as LoopLinear does).
  grad_weight = training_product(grad_hidden_gates.view({steps * batch, 3 * size}).t(),
                                 record.previous.view({steps * batch, size}));
  grad_bias = grad_hidden_gates.view({steps * batch, 3 * size}).sum(0);
}

// Runs task(0) and task(1), one per thread of a team (util/team.h): side by side when LibTorch has
// two threads or more (inside the team OpenBLAS and the packed products run single-threaded, so
// each direction has one core; threads past the second wait), one after the other with one.
void both_directions(const std::function<void(size_t)>& task) {
  run_as_team([&](Team& team) {
    team.phase([&] {
      const auto [first, last] = team.rows(0, 2);
      for (int64_t direction = first; direction < last; ++direction) task(static_cast<size_t>(direction));
    });
  });
}

struct FusedBiGruLayer : public torch::autograd::Function<FusedBiGruLayer> {
  static tensor_list forward(AutogradContext* context, const torch::Tensor& gates_forward,
                             const torch::Tensor& gates_backward, const torch::Tensor& weight_forward,
                             const torch::Tensor& bias_forward, const torch::Tensor& weight_backward,
                             const torch::Tensor& bias_backward, const torch::Tensor& mask, int64_t first_padded) {
    const std::array<torch::Tensor, 2> gates{gates_forward.contiguous(), gates_backward.contiguous()};
    const std::array<torch::Tensor, 2> weights{weight_forward, weight_backward};
    const std::array<torch::Tensor, 2> biases{bias_forward, bias_backward};
    std::array<torch::Tensor, 2> states, finals;
    std::array<DirectionRecord, 2> records;
    both_directions([&](size_t d) {
      run_forward(gates[d], weights[d], biases[d], mask, first_padded, d == 1, states[d], finals[d], &records[d]);
    });
    context->save_for_backward({weight_forward, weight_backward, mask, records[0].previous, records[0].saved,
                                records[1].previous, records[1].saved});
    context->saved_data["first_padded"] = first_padded;
    return {states[0], states[1], finals[0], finals[1]};
  }

  static tensor_list backward(AutogradContext* context, tensor_list gradients) {
    const auto saved = context->get_saved_variables();
    const std::array<torch::Tensor, 2> weights{saved[0], saved[1]};
    const torch::Tensor& mask = saved[2];
    const std::array<DirectionRecord, 2> records{DirectionRecord{saved[3], saved[4]},
                                                 DirectionRecord{saved[5], saved[6]}};
    const int64_t first_padded = context->saved_data["first_padded"].toInt();
    std::array<torch::Tensor, 2> grad_gates, grad_weights, grad_biases;
    both_directions([&](size_t d) {
      const torch::Tensor& grad_states = gradients[d];
      const torch::Tensor& grad_final = gradients[2 + d];
      run_backward(grad_states.defined() ? grad_states.contiguous() : grad_states, grad_final, weights[d], mask,
                   first_padded, d == 1, records[d], grad_gates[d], grad_weights[d], grad_biases[d]);
    });
    return {grad_gates[0],   grad_gates[1],  grad_weights[0], grad_biases[0],
            grad_weights[1], grad_biases[1], torch::Tensor(), torch::Tensor()};
  }
};

}  // namespace

std::array<torch::Tensor, 4> fused_bigru_layer(const std::array<torch::Tensor, 2>& input_gates,
                                               const std::array<torch::Tensor, 2>& weight_hh,
                                               const std::array<torch::Tensor, 2>& bias_hh, const torch::Tensor& mask,
                                               int64_t first_padded) {
  const bool records =
      kernels::autograd_records({input_gates[0], input_gates[1], weight_hh[0], bias_hh[0], weight_hh[1], bias_hh[1]});
  if (!records) {  // inference: the forward loops alone, nothing kept
    std::array<torch::Tensor, 2> states, finals;
    both_directions([&](size_t d) {
      run_forward(input_gates[d].contiguous(), weight_hh[d], bias_hh[d], mask, first_padded, d == 1, states[d],
                  finals[d], nullptr);
    });
    return {states[0], states[1], finals[0], finals[1]};
  }
  const tensor_list out = FusedBiGruLayer::apply(input_gates[0], input_gates[1], weight_hh[0], bias_hh[0], weight_hh[1],
                                                 bias_hh[1], mask, first_padded);
  return {out[0], out[1], out[2], out[3]};
}

std::array<torch::Tensor, 4> packed_bigru_layer(const std::array<torch::Tensor, 2>& input_gates,
                                                const std::array<HiddenGates, 2>& hidden_gates,
                                                const PackedPositions& positions) {
  std::array<torch::Tensor, 2> states, finals;
  both_directions([&](size_t d) {
    run_packed(input_gates[d].contiguous(), hidden_gates[d], positions, d == 1, states[d], finals[d]);
  });
  return {states[0], states[1], finals[0], finals[1]};
}

}  // namespace nmt
