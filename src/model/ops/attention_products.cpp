#include "model/ops/attention_products.h"

#include <ATen/Parallel.h>
#include <torch/torch.h>

#include "kernels/attention_kernels.h"
#include "kernels/dispatch.h"
#include "util/device_rules.h"

namespace nmt {
namespace {

using torch::autograd::AutogradContext;
using torch::autograd::tensor_list;

// Rows of the batch per thread: a row is S x A or S x C floats (about 14 x 512 here).
constexpr int64_t kGrain = 4;

// keys, query, v contiguous float; activations [B, S, A] or undefined (inference); mask [B, S]
// contiguous bool or undefined (every position). Scores [B, S, heads].
torch::Tensor additive_energy_forward(const torch::Tensor& keys, const torch::Tensor& query, const torch::Tensor& v,
                                      int64_t heads, const torch::Tensor& activations, const torch::Tensor& mask = {}) {
  const int64_t positions = keys.size(1), size = keys.size(2);
  torch::Tensor scores = torch::empty({keys.size(0), positions, heads}, keys.options());
  float* t = activations.defined() ? activations.data_ptr<float>() : nullptr;
  const bool* real = mask.defined() ? mask.data_ptr<bool>() : nullptr;
  at::parallel_for(0, keys.size(0), kGrain, [&](int64_t begin, int64_t end) {
    kernels::additive_energy(
        keys.data_ptr<float>() + begin * positions * size, query.data_ptr<float>() + begin * size, v.data_ptr<float>(),
        end - begin, positions, size, heads, real != nullptr ? real + begin * positions : nullptr,
        scores.data_ptr<float>() + begin * positions * heads, t != nullptr ? t + begin * positions * size : nullptr);
  });
  return scores;
}

struct AdditiveEnergy : public torch::autograd::Function<AdditiveEnergy> {
  static torch::Tensor forward(AutogradContext* context, const torch::Tensor& keys, const torch::Tensor& query,
                               const torch::Tensor& v, int64_t heads) {
    torch::Tensor activations = torch::empty_like(keys);  // tanh(keys + query), kept for backward
    torch::Tensor scores = additive_energy_forward(keys, query, v, heads, activations);
    context->save_for_backward({activations, v});
    context->saved_data["heads"] = heads;
    return scores;
  }

  static tensor_list backward(AutogradContext* context, tensor_list gradients) {
    const auto saved = context->get_saved_variables();
    const torch::Tensor& activations = saved[0];  // [B, S, A]
    const torch::Tensor& v = saved[1];
    const int64_t heads = context->saved_data["heads"].toInt();
    const torch::Tensor grad_scores = gradients[0].contiguous();  // [B, S, heads]
    const int64_t batch = activations.size(0), positions = activations.size(1), size = activations.size(2);
    torch::Tensor grad_keys = torch::empty_like(activations);
    torch::Tensor grad_query = torch::empty({batch, size}, activations.options());
    at::parallel_for(0, batch, kGrain, [&](int64_t begin, int64_t end) {
      kernels::additive_energy_backward(activations.data_ptr<float>() + begin * positions * size, v.data_ptr<float>(),
                                        grad_scores.data_ptr<float>() + begin * positions * heads, end - begin,
                                        positions, size, heads, grad_keys.data_ptr<float>() + begin * positions * size,
                                        grad_query.data_ptr<float>() + begin * size, /*accumulate_keys=*/false);
    });
    // dL/dv[a] = sum over (b, s) of grad_scores[b, s, head of a] * t[b, s, a]: with one head, one
    // matrix-vector product.
    torch::Tensor grad_v;
    if (context->needs_input_grad(2)) {
      const torch::Tensor rows = activations.view({batch * positions, heads, size / heads});
      grad_v = heads == 1 ? rows.view({-1, size}).t().mv(grad_scores.view(-1))
                          : (rows * grad_scores.view({-1, heads, 1})).sum(0).view({size});
    }
    return {grad_keys, grad_query, grad_v, torch::Tensor()};
  }
};

torch::Tensor weighted_sum_forward(const torch::Tensor& weights, const torch::Tensor& states) {
  const int64_t positions = states.size(1), size = states.size(2);
  torch::Tensor result = torch::empty({states.size(0), size}, states.options());
  at::parallel_for(0, states.size(0), kGrain, [&](int64_t begin, int64_t end) {
    kernels::weighted_sum(weights.data_ptr<float>() + begin * positions,
                          states.data_ptr<float>() + begin * positions * size, end - begin, positions, size,
                          result.data_ptr<float>() + begin * size);
  });
  return result;
}

struct WeightedSum : public torch::autograd::Function<WeightedSum> {
  static torch::Tensor forward(AutogradContext* context, const torch::Tensor& weights, const torch::Tensor& states) {
    context->save_for_backward({weights, states});
    return weighted_sum_forward(weights, states);
  }

  static tensor_list backward(AutogradContext* context, tensor_list gradients) {
    const auto saved = context->get_saved_variables();
    const torch::Tensor& weights = saved[0];
    const torch::Tensor& states = saved[1];
    const torch::Tensor grad_context = gradients[0].contiguous();  // [B, C]
    const int64_t batch = states.size(0), positions = states.size(1), size = states.size(2);
    torch::Tensor grad_weights = torch::empty_like(weights);
    torch::Tensor grad_states = torch::empty_like(states);
    at::parallel_for(0, batch, kGrain, [&](int64_t begin, int64_t end) {
      kernels::weighted_sum_backward(
          weights.data_ptr<float>() + begin * positions, states.data_ptr<float>() + begin * positions * size,
          grad_context.data_ptr<float>() + begin * size, end - begin, positions, size,
          grad_weights.data_ptr<float>() + begin * positions, grad_states.data_ptr<float>() + begin * positions * size,
          /*accumulate_states=*/false);
    });
    return {grad_weights, grad_states};
  }
};

}  // namespace

torch::Tensor additive_energy(const torch::Tensor& keys, const torch::Tensor& query, const torch::Tensor& v,
                              int64_t heads, const torch::Tensor& mask) {
  TORCH_CHECK(keys.dim() == 3 && query.dim() == 2 && v.dim() == 1 && query.size(0) == keys.size(0) &&
                  query.size(1) == keys.size(2) && v.size(0) == keys.size(2) && heads >= 1 && keys.size(2) % heads == 0,
              "additive_energy: keys [B, S, A], query [B, A], v [A] and heads dividing A expected");
  torch::Tensor scores;  // [B, S, heads]
  if (!kernels::use_kernel(kernels::Operation::kAdditiveEnergy, {keys, query, v})) {
    if (heads == 1) return torch::matmul(torch::tanh(keys + query.unsqueeze(1)), v);
    const torch::Tensor energies = torch::tanh(keys + query.unsqueeze(1)) * v;  // [B, S, A]
    return energies.view({keys.size(0), keys.size(1), heads, -1}).sum(3);
  }
  if (!kernels::autograd_records({keys, query, v})) {
    const bool skips = mask.defined() && mask.scalar_type() == torch::kBool && kernels::on_cpu({mask}) &&
                       mask.sizes() == keys.sizes().slice(0, 2);
    scores = additive_energy_forward(keys.contiguous(), query.contiguous(), v.contiguous(), heads, torch::Tensor(),
                                     skips ? mask.contiguous() : torch::Tensor());
  } else {
    scores = AdditiveEnergy::apply(keys.contiguous(), query.contiguous(), v.contiguous(), heads);
  }
  return heads == 1 ? scores.squeeze(2) : scores;
}

torch::Tensor weighted_sum(const torch::Tensor& weights, const torch::Tensor& states) {
  TORCH_CHECK(
      weights.dim() == 2 && states.dim() == 3 && weights.size(0) == states.size(0) && weights.size(1) == states.size(1),
      "weighted_sum: weights [B, S] and states [B, S, C] expected");
  if (queues_work(weights.device())) return torch::bmm(weights.unsqueeze(1), states).squeeze(1);  // one kernel each way
  if (!kernels::use_kernel(kernels::Operation::kWeightedSum, {weights, states}))
    return (weights.unsqueeze(2) * states).sum(1);
  if (!kernels::autograd_records({weights, states})) {
    return weighted_sum_forward(weights.contiguous(), states.contiguous());
  }
  return WeightedSum::apply(weights.contiguous(), states.contiguous());
}

}  // namespace nmt
