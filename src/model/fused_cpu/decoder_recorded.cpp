// The recorded attention step of the fused decoder loop (fused_cpu/decoder_recorded.h).
#include "model/fused_cpu/decoder_recorded.h"

#include <torch/torch.h>

#include "model/encoded_source.h"

namespace nmt::fused_decoder {

void attend_block(const LoopInputs& in, const RecordedAttention& recorded, int64_t t, int64_t first, int64_t count,
                  const LoopRecord& record, RecordedBlock& block) {
  if (count == 0) return;
  const int64_t size = in.size(), state_size = in.states.size(2);
  const auto rows = [&](const torch::Tensor& tensor) { return tensor.narrow(0, first, count); };
  block.first = first, block.count = count;
  // Leaves of their own: h_t and W h_t copied (the loop writes on), keys and states detached
  // from the outer graph, whose gradients this function returns itself.
  block.query = rows(record.joined[t]).narrow(1, 0, size).clone().requires_grad_();
  block.keys = rows(in.keys).detach().requires_grad_();
  block.states = rows(in.states).detach().requires_grad_();
  if (record.projected.defined()) block.projected = rows(record.projected[t]).clone().requires_grad_();
  EncodedSource source;
  source.states = block.states, source.keys = block.keys, source.mask = rows(in.mask);
  {
    torch::AutoGradMode recording(true);
    const AttentionResult result = recorded.attention->forward(
        block.query, source, AttentionStep{t, torch::Tensor(), block.projected, torch::Tensor()});
    block.context = result.context, block.weights = result.weights;
  }
  rows(record.attention[t]).copy_(block.weights);
  rows(record.joined[t]).narrow(1, size, state_size).copy_(block.context);
}

void attend_block_backward(const RecordedBlock& block, const RecordedAttention& recorded, int64_t t,
                           const torch::Tensor& grad_joined, const torch::Tensor& grad_attention,
                           const LoopGradients& grads, std::vector<torch::Tensor>& parameter_gradients) {
  if (block.count == 0) return;
  const auto rows = [&](const torch::Tensor& tensor) { return tensor.narrow(0, block.first, block.count); };
  const int64_t size = block.query.size(1);
  const torch::Tensor grad_weights =
      grad_attention.defined() ? rows(grad_attention[t]) : torch::zeros_like(block.weights);
  std::vector<torch::Tensor> inputs = {block.query, block.keys, block.states};
  if (block.projected.defined()) inputs.push_back(block.projected);
  const size_t first_parameter = inputs.size();
  inputs.insert(inputs.end(), recorded.parameters.begin(), recorded.parameters.end());
  // retain_graph: the outer graph may be walked again (backward with retain_graph); the recorded
  // steps go when the function's node does.
  const std::vector<torch::Tensor> gradients = torch::autograd::grad(
      {block.context, block.weights}, inputs, {rows(grad_joined).narrow(1, size, block.states.size(2)), grad_weights},
      /*retain_graph=*/true, /*create_graph=*/false, /*allow_unused=*/true);
  const auto add = [](const torch::Tensor& to, const torch::Tensor& gradient) {
    if (gradient.defined()) to.add_(gradient);
  };
  rows(grads.query[t]).copy_(gradients[0].defined() ? gradients[0] : torch::zeros_like(block.query));
  add(rows(grads.keys), gradients[1]);
  add(rows(grads.states), gradients[2]);
  if (block.projected.defined()) {
    const torch::Tensor& gradient = gradients[3];
    rows(grads.projected[t]).copy_(gradient.defined() ? gradient : torch::zeros_like(block.projected));
  }
  for (size_t i = first_parameter; i < gradients.size(); ++i) {
    torch::Tensor& sum = parameter_gradients[i - first_parameter];
    if (gradients[i].defined()) sum = sum.defined() ? sum.add_(gradients[i]) : gradients[i].clone();
  }
}

}  // namespace nmt::fused_decoder
