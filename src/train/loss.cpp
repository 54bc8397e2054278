#include "train/loss.h"

#include <torch/torch.h>

#include "text/special_tokens.h"

namespace nmt {
namespace {

using torch::autograd::AutogradContext;
using torch::autograd::tensor_list;

// Forward keeps log softmax(z) [N, V]; backward makes softmax(z) - q from it in one new [N, V]
// tensor, where LibTorch's cross_entropy would make several passes (a zero one-hot scatter, the
// smoothing term's expand, log_softmax's own backward). The backward is not itself
// differentiable (no second derivatives), which training does not need.
struct SmoothedCrossEntropy : public torch::autograd::Function<SmoothedCrossEntropy> {
  static torch::Tensor forward(AutogradContext* context, const torch::Tensor& logits, const torch::Tensor& targets,
                               double epsilon) {
    const double classes = static_cast<double>(logits.size(1));
    torch::Tensor log_probs = torch::log_softmax(logits, 1);                     // [N, V]
    torch::Tensor target_log_probs = log_probs.gather(1, targets.unsqueeze(1));  // [N, 1]
    torch::Tensor loss = -(1.0 - epsilon) * target_log_probs.sum();
    if (epsilon > 0) loss = loss - (epsilon / classes) * log_probs.sum();
    context->save_for_backward({log_probs, targets});
    context->saved_data["epsilon"] = epsilon;
    return loss;
  }

  static tensor_list backward(AutogradContext* context, tensor_list gradients) {
    const auto saved = context->get_saved_variables();
    const torch::Tensor& log_probs = saved[0];
    const torch::Tensor& targets = saved[1];
    const double epsilon = context->saved_data["epsilon"].toDouble();
    const double classes = static_cast<double>(log_probs.size(1));
    const torch::Tensor& scale = gradients[0];  // scalar
    torch::Tensor grad = log_probs.exp();       // softmax [N, V]
    if (epsilon > 0) grad.sub_(epsilon / classes);
    grad.scatter_add_(1, targets.unsqueeze(1), torch::full({targets.size(0), 1}, epsilon - 1.0, grad.options()));
    grad.mul_(scale);
    return {grad, torch::Tensor(), torch::Tensor()};
  }
};

}  // namespace

torch::Tensor smoothed_cross_entropy_sum(const torch::Tensor& logits, const torch::Tensor& targets, double epsilon) {
  TORCH_CHECK(logits.dim() == 2 && targets.dim() == 1 && targets.size(0) == logits.size(0),
              "smoothed_cross_entropy_sum: logits [N, V] and targets [N] expected");
  return SmoothedCrossEntropy::apply(logits, targets, epsilon);
}

SequenceLoss sequence_loss(DecoderImpl& decoder, const DecoderOutput& output, const torch::Tensor& target_output,
                           double epsilon) {
  TORCH_CHECK(output.attentional.dim() == 3 && target_output.dim() == 2 &&
                  output.attentional.size(0) == target_output.size(0) &&
                  output.attentional.size(1) == target_output.size(1),
              "sequence_loss: attentional [B, T, H] and target_output [B, T] expected");
  const torch::Tensor targets = target_output.flatten();                 // [B * T]
  const torch::Tensor positions = targets.ne(kPadId).nonzero().squeeze(1);  // [N] real target tokens
  const torch::Tensor attentional = output.attentional.flatten(0, 1).index_select(0, positions);  // [N, H]
  const torch::Tensor logits = decoder.output_logits(attentional);        // [N, V]
  return {smoothed_cross_entropy_sum(logits, targets.index_select(0, positions), epsilon), positions.size(0)};
}

}  // namespace nmt
