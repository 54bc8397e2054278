#include "model/reference/decoder_steps.h"

#include <torch/torch.h>

#include <vector>

namespace nmt::reference {
namespace {

DecoderOutput stack_steps(const std::vector<torch::Tensor>& attentionals, const std::vector<torch::Tensor>& weights,
                          bool has_scorer) {
  return {torch::stack(attentionals, 1), has_scorer ? torch::stack(weights, 1) : torch::Tensor()};
}

}  // namespace

DecoderOutput teacher_forced_steps(const torch::Tensor& token_gates, DecoderState state, const DecoderStep& step,
                                   bool has_scorer) {
  // unbind, not select(1, t) per step: each select's backward would write a zero [B, T, 3H] tensor.
  const std::vector<torch::Tensor> all_gates = token_gates.unbind(1);  // T x [B, 3H]
  std::vector<torch::Tensor> attentionals, weights;
  attentionals.reserve(all_gates.size()), weights.reserve(all_gates.size());
  for (const torch::Tensor& gates : all_gates) {
    auto [attentional, step_weights] = step(gates, state);
    attentionals.push_back(attentional);
    weights.push_back(step_weights);
  }
  return stack_steps(attentionals, weights, has_scorer);
}

DecoderOutput scheduled_feeding_steps(const torch::Tensor& target_input, DecoderState state, double teacher_forcing,
                                      const std::function<torch::Tensor(const torch::Tensor&)>& token_gates,
                                      const std::function<torch::Tensor(const torch::Tensor&)>& logits,
                                      const DecoderStep& step, bool has_scorer) {
  const int64_t steps = target_input.size(1);
  std::vector<torch::Tensor> attentionals, weights;
  attentionals.reserve(steps), weights.reserve(steps);
  torch::Tensor previous = target_input.select(1, 0);
  for (int64_t t = 0; t < steps; ++t) {
    if (t > 0) {
      const bool use_reference = torch::rand({1}).item<double>() < teacher_forcing;
      if (use_reference) {
        previous = target_input.select(1, t);
      } else {
        torch::NoGradGuard no_grad;  // only the argmax is needed
        previous = logits(attentionals.back()).argmax(1);
      }
    }
    auto [attentional, step_weights] = step(token_gates(previous), state);
    attentionals.push_back(attentional);
    weights.push_back(step_weights);
  }
  return stack_steps(attentionals, weights, has_scorer);
}

}  // namespace nmt::reference
