#include "train/loss.h"

#include <ATen/Parallel.h>
#include <torch/torch.h>

#include <algorithm>
#include <vector>

#include "kernels/dispatch.h"
#include "kernels/row_kernels.h"
#include "model/linear/bf16_products.h"
#include "text/special_tokens.h"
#include "util/device_rules.h"

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

// The output layer z = x W^T + b and the smoothed cross-entropy in one function, with the row
// kernels of kernels/row_kernels.h. Forward writes z once, turns it into softmax(z) in place and,
// while each block of rows is still in cache, into the gradient of the loss sum with respect to z
// (p - q, see smoothed_gradient_rows), adding up its columns for the bias gradient: one buffer
// [N, V] instead of logits plus log-probabilities (in bf16: the bfloat16 logits, and the gradient
// rounded to bfloat16 for the backward), and no pass over it left for the backward,
// which only multiplies it out, scaled by the incoming gradient (without autograd, e.g. for the
// validation loss, the forward stops at the loss). The loss of row r is
//   -(1 - eps) log p_r[y_r] - (eps / V) sum_v log p_rv,  log p_rv = z_rv - lse_r,
// so it needs only z_r[y_r] (read before the row is overwritten), lse_r and sum_v z_rv.
// The backward uses its saved buffer up, so it can run once (no retain_graph).
struct FusedOutputLoss : public torch::autograd::Function<FusedOutputLoss> {
  static torch::Tensor forward(AutogradContext* context, const torch::Tensor& hidden, const torch::Tensor& weight,
                               const torch::Tensor& bias, const torch::Tensor& targets, double epsilon,
                               bool backward_follows) {
    const int64_t rows = hidden.size(0), classes = weight.size(0);
    // [N, V]: the logits, then each row's gradient. In bf16 the logits stay bfloat16, and each thread
    // widens a few rows at a time (adding the bias), makes their gradient, and rounds it back for the
    // backward's products: the float32 rows never leave the cache.
    const bool bf16 = bf16_products();
    const torch::Tensor weight16 = bf16 ? to_bf16(weight) : torch::Tensor();
    const torch::Tensor logits16 = bf16 ? to_bf16(hidden).mm(weight16.t()) : torch::Tensor();
    const torch::Tensor gradient = bf16 ? torch::Tensor() : torch::addmm(bias, hidden, weight.t());
    torch::Tensor rounded = bf16 && backward_follows
                                ? torch::empty({rows, classes}, hidden.options().dtype(torch::kBFloat16))
                                : torch::Tensor();
    const torch::Tensor targets_cpu = targets.contiguous();
    const int64_t* target = targets_cpu.data_ptr<int64_t>();
    std::vector<float> target_logit(static_cast<size_t>(rows)), log_sum_exp(target_logit.size()),
        row_sum(target_logit.size());
    // Per thread, the column sums of its rows' gradients (none without a backward: validation).
    torch::Tensor column_sums = torch::zeros({backward_follows ? at::get_num_threads() : 0, classes}, hidden.options());
    constexpr int64_t kBf16Rows = 8;  // rows widened at a time
    at::parallel_for(0, rows, 16, [&](int64_t begin, int64_t end) {
      const torch::Tensor scratch =
          bf16 ? torch::empty({std::min(kBf16Rows, end - begin), classes}, hidden.options()) : torch::Tensor();
      for (int64_t first = begin; first < end; first += bf16 ? kBf16Rows : end - begin) {
        const int64_t count = bf16 ? std::min(kBf16Rows, end - first) : end - begin;
        if (bf16) to_float_into(logits16.narrow(0, first, count), bias, scratch.narrow(0, 0, count));
        float* z = bf16 ? scratch.data_ptr<float>() : gradient.data_ptr<float>() + first * classes;
        for (int64_t row = 0; row < count; ++row)
          target_logit[static_cast<size_t>(first + row)] = z[row * classes + target[first + row]];
        kernels::softmax_rows(z, count, classes, log_sum_exp.data() + first, row_sum.data() + first);
        if (!backward_follows) continue;
        kernels::smoothed_gradient_rows(z, count, classes, target + first, static_cast<float>(epsilon), 1.0f);
        kernels::add_column_sums(z, count, classes, column_sums.data_ptr<float>() + at::get_thread_num() * classes);
        if (bf16) to_bf16_into(scratch.narrow(0, 0, count), rounded.narrow(0, first, count));
      }
    });
    double loss = 0;  // summed in row order, whatever the thread count
    for (size_t row = 0; row < target_logit.size(); ++row) {
      const double lse = log_sum_exp[row];
      loss -= (1.0 - epsilon) * (target_logit[row] - lse);
      if (epsilon > 0)
        loss -= epsilon / static_cast<double>(classes) * (row_sum[row] - static_cast<double>(classes) * lse);
    }
    if (backward_follows) {
      context->save_for_backward({hidden, weight});
      context->saved_data["gradient"] = rounded.defined() ? rounded : gradient;
      context->saved_data["bias_gradient"] = column_sums.sum(0);
      context->saved_data["bf16"] = bf16;
      if (bf16) context->saved_data["weight16"] = weight16;
    }
    return torch::tensor(loss, hidden.options());
  }

  static tensor_list backward(AutogradContext* context, tensor_list gradients) {
    TORCH_CHECK(context->saved_data.count("gradient") == 1,
                "output layer loss: backward a second time is not supported (its buffer was used up)");
    // dL/dz for an incoming gradient of 1 (in bfloat16 when the forward was)
    const torch::Tensor grad = context->saved_data["gradient"].toTensor();
    context->saved_data.erase("gradient");
    const auto saved = context->get_saved_variables();
    const torch::Tensor& hidden = saved[0];
    const torch::Tensor& weight = saved[1];
    const float scale = gradients[0].item<float>();
    // The incoming gradient scales the small factors, not the [N, V] buffer. bf16 as the forward was.
    const Bf16ProductsScope bf16(context->saved_data["bf16"].toBool());
    const torch::Tensor factor = bf16_products() ? context->saved_data["weight16"].toTensor() : weight;
    torch::Tensor grad_hidden =
        context->needs_input_grad(0) ? training_product(grad, factor).mul_(scale) : torch::Tensor();
    torch::Tensor grad_weight =
        context->needs_input_grad(1) ? training_product(grad.t(), hidden * scale) : torch::Tensor();
    torch::Tensor grad_bias =
        context->needs_input_grad(2) ? context->saved_data["bias_gradient"].toTensor() * scale : torch::Tensor();
    return {grad_hidden, grad_weight, grad_bias, torch::Tensor(), torch::Tensor(), torch::Tensor()};
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
  const torch::Tensor targets = target_output.flatten();  // [B * T]
  if (queues_work(targets.device())) {
    // On a GPU, every position with padding ignored: picking the real ones first (nonzero) would
    // make the host wait for the GPU to learn their number.
    const auto options =
        torch::nn::functional::CrossEntropyFuncOptions().ignore_index(kPadId).label_smoothing(epsilon).reduction(
            torch::kSum);
    return {torch::nn::functional::cross_entropy(decoder.output_logits(output.attentional.flatten(0, 1)), targets,
                                                 options)};
  }
  const torch::Tensor positions = targets.ne(kPadId).nonzero().squeeze(1);  // [N] real target tokens
  const torch::Tensor attentional = output.attentional.flatten(0, 1).index_select(0, positions);  // [N, H]
  return {output_layer_loss(attentional, decoder.output_weight, decoder.output_bias, targets.index_select(0, positions),
                            epsilon)};
}

torch::Tensor output_layer_loss(const torch::Tensor& hidden, const torch::Tensor& weight, const torch::Tensor& bias,
                                const torch::Tensor& targets, double epsilon) {
  TORCH_CHECK(hidden.dim() == 2 && weight.dim() == 2 && hidden.size(1) == weight.size(1) && targets.dim() == 1 &&
                  targets.size(0) == hidden.size(0) && (!bias.defined() || bias.size(0) == weight.size(0)),
              "output_layer_loss: hidden [N, H], weight [V, H], bias [V] or none, targets [N] expected");
  TORCH_CHECK(
      targets.numel() == 0 || (targets.min().item<int64_t>() >= 0 && targets.max().item<int64_t>() < weight.size(0)),
      "output_layer_loss: a target id is outside the vocabulary of ", weight.size(0));
  const bool fused = kernels::use_kernel(kernels::Operation::kOutputLayerLoss, {hidden, weight, bias},
                                         targets.scalar_type() == torch::kLong && hidden.size(0) > 0);
  if (!fused) {  // another device or type, or a CPU without AVX2: LibTorch's ops
    return smoothed_cross_entropy_sum(training_linear(hidden, weight, bias), targets, epsilon);
  }
  // An undefined tensor cannot be a custom function's input: no bias is a zero bias there.
  return FusedOutputLoss::apply(hidden, weight,
                                bias.defined() ? bias : torch::zeros({weight.size(0)}, weight.options()), targets,
                                epsilon, kernels::autograd_records({hidden, weight, bias}));
}

}  // namespace nmt
