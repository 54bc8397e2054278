#include "train/fused_adam.h"

#include <ATen/Parallel.h>
#include <torch/torch.h>

#include <cmath>
#include <map>
#include <memory>
#include <sstream>
#include <stdexcept>
#include <string>

#include "kernels/adam_kernel.h"
#include "kernels/dispatch.h"
#include "util/device_rules.h"

namespace nmt {
namespace {

template <typename Key>
Key state_key_of(c10::TensorImpl* impl) {
  if constexpr (std::is_same_v<Key, std::string>) {
    std::ostringstream text;  // as LibTorch 1.13's c10::guts::to_string prints it
    text << impl;
    return text.str();
  } else {
    return impl;
  }
}

}  // namespace

AdamStateKey adam_state_key(const torch::Tensor& param) {
  return state_key_of<AdamStateKey>(param.unsafeGetTensorImpl());
}

// Whether the kernel can update this parameter: float32, contiguous, on the CPU, and its state
// (when it has one, from earlier steps or a restored checkpoint) of the same size and kind.
bool FusedAdam::fits_kernel(const torch::Tensor& param) const {
  const torch::Tensor& grad = param.grad();
  const auto plain = [](const torch::Tensor& t) {
    return kernels::on_cpu({t}) && t.scalar_type() == torch::kFloat && t.is_contiguous() &&
           t.layout() == torch::kStrided;
  };
  if (!plain(param) || !plain(grad) || grad.numel() != param.numel()) return false;
  const auto found = state_.find(adam_state_key(param));
  if (found == state_.end()) return true;
  const auto& state = static_cast<const torch::optim::AdamParamState&>(*found->second);
  return state.exp_avg().defined() && state.exp_avg_sq().defined() && plain(state.exp_avg()) &&
         plain(state.exp_avg_sq()) && state.exp_avg().numel() == param.numel() &&
         state.exp_avg_sq().numel() == param.numel();
}

// The state of `param`, made as Adam makes it (torch/csrc/api/src/optim/adam.cpp) on its first step.
torch::optim::AdamParamState& FusedAdam::state_of(const torch::Tensor& param) {
  const AdamStateKey key = adam_state_key(param);
  auto found = state_.find(key);
  if (found == state_.end()) {
    auto state = std::make_unique<torch::optim::AdamParamState>();
    state->step(0);
    state->exp_avg(torch::zeros_like(param, torch::MemoryFormat::Preserve));
    state->exp_avg_sq(torch::zeros_like(param, torch::MemoryFormat::Preserve));
    found = state_.emplace(key, std::move(state)).first;
  }
  return static_cast<torch::optim::AdamParamState&>(*found->second);
}

bool FusedAdam::step_on_gpu() {
  for (const auto& group : param_groups_) {
    const auto& options = static_cast<const torch::optim::AdamOptions&>(group.options());
    if (options.weight_decay() != 0 || options.amsgrad()) return false;
    for (const auto& param : group.params()) {
      if (!param.grad().defined()) continue;
      const torch::Tensor& grad = param.grad();
      // The kernel's own rule: the same type, device and layout for a parameter and its gradient.
      if (!has_library_fused_adam(param.device()) || param.scalar_type() != torch::kFloat ||
          grad.scalar_type() != torch::kFloat || grad.device() != param.device() || grad.strides() != param.strides() ||
          !param.is_non_overlapping_and_dense()) {
        return false;
      }
    }
  }
  torch::NoGradGuard no_grad;
  for (auto& group : param_groups_) {
    const auto& options = static_cast<const torch::optim::AdamOptions&>(group.options());
    struct Lists {
      std::vector<torch::Tensor> params, grads, exp_avgs, exp_avg_sqs;
    };
    std::map<int64_t, Lists> by_step;  // the kernel takes one step count per call (parameters' usually agree)
    for (auto& param : group.params()) {
      if (!param.grad().defined()) continue;
      torch::optim::AdamParamState& state = state_of(param);
      state.step(state.step() + 1);
      Lists& lists = by_step[state.step()];
      lists.params.push_back(param);
      lists.grads.push_back(param.grad());
      lists.exp_avgs.push_back(state.exp_avg());
      lists.exp_avg_sqs.push_back(state.exp_avg_sq());
    }
    for (auto& [step, lists] : by_step) {
      // The kernel reads the step count from the GPU; the host's count stays the one saved.
      const torch::Tensor count = torch::full({}, static_cast<double>(step), lists.params.front().options());
      const std::vector<torch::Tensor> counts(lists.params.size(), count);
      at::_fused_adam_(lists.params, lists.grads, lists.exp_avgs, lists.exp_avg_sqs, /*max_exp_avg_sqs=*/{}, counts,
                       options.lr(), std::get<0>(options.betas()), std::get<1>(options.betas()),
                       /*weight_decay=*/0.0, options.eps(), /*amsgrad=*/false, /*maximize=*/false);
    }
  }
  return true;
}

torch::Tensor FusedAdam::step(LossClosure closure) {
  torch::Tensor loss;
  if (closure != nullptr) {  // first, so that the gradients it makes are the ones checked
    torch::AutoGradMode enable_grad(true);
    loss = closure();
  }
  if (step_on_gpu()) return loss;
  bool fits = true;  // every group's options and every parameter with a gradient
  for (const auto& group : param_groups_) {
    const auto& options = static_cast<const torch::optim::AdamOptions&>(group.options());
    fits = fits && options.weight_decay() == 0 && !options.amsgrad();
    for (const auto& param : group.params()) {
      if (param.grad().defined()) fits = fits && fits_kernel(param);
    }
  }
  if (!kernels::use_kernel(kernels::Operation::kAdam, {}, fits)) {
    torch::optim::Adam::step();  // its own checks and messages, for whatever the kernel does not take
    return loss;
  }

  torch::NoGradGuard no_grad;
  for (auto& group : param_groups_) {
    const auto& options = static_cast<const torch::optim::AdamOptions&>(group.options());
    const double beta1 = std::get<0>(options.betas()), beta2 = std::get<1>(options.betas());  // captured below
    for (auto& param : group.params()) {
      if (!param.grad().defined()) continue;
      torch::optim::AdamParamState& state = state_of(param);
      state.step(state.step() + 1);
      const double correction1 = 1 - std::pow(beta1, static_cast<double>(state.step()));
      const double correction2 = 1 - std::pow(beta2, static_cast<double>(state.step()));
      const auto step_size = static_cast<float>(options.lr() / correction1);
      const auto inverse_sqrt_correction2 = static_cast<float>(1 / std::sqrt(correction2));
      float* values = param.data_ptr<float>();
      const float* grad = param.grad().data_ptr<float>();
      float* exp_avg = state.exp_avg().data_ptr<float>();
      float* exp_avg_sq = state.exp_avg_sq().data_ptr<float>();
      at::parallel_for(0, param.numel(), 1 << 15, [&](int64_t begin, int64_t end) {
        kernels::adam_update(values + begin, grad + begin, exp_avg + begin, exp_avg_sq + begin, end - begin,
                             static_cast<float>(beta1), static_cast<float>(beta2), static_cast<float>(1 - beta1),
                             static_cast<float>(1 - beta2), step_size, inverse_sqrt_correction2,
                             static_cast<float>(options.eps()));
      });
    }
  }
  return loss;
}

}  // namespace nmt
