#include "model/linear/loop_linear.h"

#include <torch/torch.h>

#include <algorithm>
#include <vector>

#include "util/runtime.h"

namespace nmt {

namespace {

using torch::autograd::AutogradContext;
using torch::autograd::tensor_list;
using Record = c10::intrusive_ptr<LoopLinearRecord>;

Record record_of(AutogradContext* context) {
  return c10::static_intrusive_pointer_cast<LoopLinearRecord>(context->saved_data["record"].toCapsule());
}

// The node the weight (and bias) gradient flows through. Its output, the anchor, is an input of
// every step, so autograd runs this backward only after every step's backward has run.
struct GatherWeightGradient : public torch::autograd::Function<GatherWeightGradient> {
  static torch::Tensor forward(AutogradContext* context, const torch::Tensor& weight,
                               const torch::Tensor& /*bias, or an empty placeholder*/, Record record) {
    context->saved_data["record"] = c10::IValue::make_capsule(record);
    return torch::zeros({}, weight.options());
  }

  static tensor_list backward(AutogradContext* context, tensor_list /*anchor_gradient*/) {
    Record record = record_of(context);
    TORCH_CHECK(record->weight._version() == record->weight_version,
                "LoopLinear: the weight was modified in place between forward and backward");
    std::vector<torch::Tensor> inputs, output_grads;
    for (size_t step = 0; step < record->inputs.size(); ++step) {
      if (!record->output_grads[step].defined()) continue;  // a step the loss does not depend on
      inputs.push_back(record->inputs[step]);
      output_grads.push_back(record->output_grads[step]);
    }
    // Ready for another backward pass over the same graph (retain_graph); the inputs stay as long
    // as the graph does, like any tensor autograd saves.
    std::fill(record->output_grads.begin(), record->output_grads.end(), torch::Tensor());
    if (inputs.empty()) return {torch::Tensor(), torch::Tensor(), torch::Tensor()};
    const torch::Tensor x = torch::cat(inputs, 0);         // [T * B, in]
    const torch::Tensor dy = torch::cat(output_grads, 0);  // [T * B, out]
    return {dy.t().mm(x), record->bias.defined() ? dy.sum(0) : torch::Tensor(), torch::Tensor()};
  }
};

// One step: y = x W^T + b; backward gives dx and keeps dy for GatherWeightGradient.
struct LoopStep : public torch::autograd::Function<LoopStep> {
  static torch::Tensor forward(AutogradContext* context, const torch::Tensor& input, const torch::Tensor& /*anchor*/,
                               Record record) {
    context->saved_data["record"] = c10::IValue::make_capsule(record);
    context->saved_data["step"] = static_cast<int64_t>(record->inputs.size());
    record->inputs.push_back(input.detach());
    record->output_grads.emplace_back();
    return record->bias.defined() ? torch::addmm(record->bias, input, record->weight.t())
                                  : input.mm(record->weight.t());
  }

  static tensor_list backward(AutogradContext* context, tensor_list gradients) {
    TORCH_CHECK(!torch::GradMode::is_enabled(), "LoopLinear: no second derivatives (create_graph)");
    Record record = record_of(context);
    const auto step = static_cast<size_t>(context->saved_data["step"].toInt());
    const torch::Tensor& dy = gradients[0];
    record->output_grads[step] = dy;
    return {dy.mm(record->weight), torch::Tensor(), torch::Tensor()};
  }
};

}  // namespace

LoopLinear::LoopLinear(torch::Tensor weight, torch::Tensor bias) : weight_(std::move(weight)), bias_(std::move(bias)) {
  TORCH_CHECK(weight_.dim() == 2 && (!bias_.defined() || (bias_.dim() == 1 && bias_.size(0) == weight_.size(0))),
              "LoopLinear: weight [out, in] and bias [out] expected");
  // Under autocast (bf16 on a GPU) the steps' products change type, which the deferred gradient
  // does not follow: autograd's own linear map then.
  const bool deferred = torch::GradMode::is_enabled() && weight_.requires_grad() &&
                        (!bias_.defined() || bias_.requires_grad()) && !autocast_enabled(weight_.device());
  if (!deferred) return;
  record_ = c10::make_intrusive<LoopLinearRecord>();
  record_->weight = weight_.detach();
  record_->weight_version = weight_._version();
  if (bias_.defined()) record_->bias = bias_.detach();
  // LibTorch 1.13's custom functions take no undefined tensors: no bias is an empty placeholder.
  anchor_ =
      GatherWeightGradient::apply(weight_, bias_.defined() ? bias_ : torch::empty({0}, weight_.options()), record_);
}

torch::Tensor LoopLinear::operator()(const torch::Tensor& input) const {
  if (!anchor_.defined()) return torch::nn::functional::linear(input, weight_, bias_);
  return LoopStep::apply(input, anchor_, record_);
}

}  // namespace nmt
