#include "train/optimizer_state.h"

#include <torch/torch.h>

#include <memory>
#include <stdexcept>
#include <string>

#include "inference/checkpoint_format.h"
#include "train/fused_adam.h"

namespace nmt {
namespace {

constexpr const char* kGroupsKey = "optimizer.groups";

std::string group_key(size_t group, const char* field) { return "optimizer." + std::to_string(group) + "." + field; }

std::string state_key(size_t group, size_t param, const char* field) {
  return "optimizer." + std::to_string(group) + "." + std::to_string(param) + "." + field;
}

const char* kForAnotherModel = ": it was written for another model (train with the options it was trained with)";

}  // namespace

void write_adam_state(TensorFile& file, torch::optim::Adam& optimizer) {
  const auto& groups = optimizer.param_groups();
  set_metadata_number(file, kGroupsKey, static_cast<int64_t>(groups.size()));
  for (size_t g = 0; g < groups.size(); ++g) {
    const auto& options = static_cast<const torch::optim::AdamOptions&>(groups[g].options());
    set_metadata_number(file, group_key(g, "size"), static_cast<int64_t>(groups[g].params().size()));
    set_metadata_number(file, group_key(g, "lr"), options.lr());
    set_metadata_number(file, group_key(g, "beta1"), std::get<0>(options.betas()));
    set_metadata_number(file, group_key(g, "beta2"), std::get<1>(options.betas()));
    set_metadata_number(file, group_key(g, "eps"), options.eps());
    set_metadata_number(file, group_key(g, "weight_decay"), options.weight_decay());
    set_metadata_number(file, group_key(g, "amsgrad"), static_cast<int64_t>(options.amsgrad()));
    const std::vector<torch::Tensor>& params = groups[g].params();
    for (size_t j = 0; j < params.size(); ++j) {
      const auto found = optimizer.state().find(adam_state_key(params[j]));
      if (found == optimizer.state().end()) continue;  // no step taken yet
      const auto& state = static_cast<const torch::optim::AdamParamState&>(*found->second);
      set_metadata_number(file, state_key(g, j, "step"), state.step());
      file.add(state_key(g, j, "exp_avg"), state.exp_avg());
      file.add(state_key(g, j, "exp_avg_sq"), state.exp_avg_sq());
      if (state.max_exp_avg_sq().defined()) file.add(state_key(g, j, "max_exp_avg_sq"), state.max_exp_avg_sq());
    }
  }
}

bool has_adam_state(const TensorFile& file) { return file.has_metadata(kGroupsKey); }

void read_adam_state(const TensorFile& file, torch::optim::Adam& optimizer) {
  if (!has_adam_state(file)) throw std::runtime_error("it holds no optimizer state (only last.ckpt does)");
  auto& groups = optimizer.param_groups();
  const int64_t stored_groups = metadata_integer(file, kGroupsKey);
  if (stored_groups != static_cast<int64_t>(groups.size())) {
    throw std::runtime_error("the optimizer state has " + std::to_string(stored_groups) +
                             " parameter groups and the optimizer " + std::to_string(groups.size()) + kForAnotherModel);
  }
  optimizer.state().clear();
  for (size_t g = 0; g < groups.size(); ++g) {
    const std::vector<torch::Tensor>& params = groups[g].params();
    const int64_t size = metadata_integer(file, group_key(g, "size"));
    if (size != static_cast<int64_t>(params.size())) {
      throw std::runtime_error("the optimizer state's group " + std::to_string(g) + " has " + std::to_string(size) +
                               " parameters and the model's " + std::to_string(params.size()) + kForAnotherModel);
    }
    auto options = std::make_unique<torch::optim::AdamOptions>(metadata_real(file, group_key(g, "lr")));
    options->betas({metadata_real(file, group_key(g, "beta1")), metadata_real(file, group_key(g, "beta2"))});
    options->eps(metadata_real(file, group_key(g, "eps")));
    options->weight_decay(metadata_real(file, group_key(g, "weight_decay")));
    options->amsgrad(metadata_integer(file, group_key(g, "amsgrad")) != 0);
    groups[g].set_options(std::move(options));
    for (size_t j = 0; j < params.size(); ++j) {
      if (!file.has_metadata(state_key(g, j, "step"))) continue;  // no step taken yet
      // The moments must fit their parameter exactly: the fused kernel writes through them.
      const auto moment = [&](const char* field) {
        const torch::Tensor& stored = file.tensor(state_key(g, j, field));
        if (stored.sizes() != params[j].sizes() || stored.scalar_type() != params[j].scalar_type()) {
          throw std::runtime_error("the optimizer state " + state_key(g, j, field) + " does not fit its parameter" +
                                   kForAnotherModel);
        }
        return stored.to(params[j].device());
      };
      auto state = std::make_unique<torch::optim::AdamParamState>();
      state->step(metadata_integer(file, state_key(g, j, "step")));
      state->exp_avg(moment("exp_avg"));
      state->exp_avg_sq(moment("exp_avg_sq"));
      if (file.has(state_key(g, j, "max_exp_avg_sq"))) state->max_exp_avg_sq(moment("max_exp_avg_sq"));
      optimizer.state()[adam_state_key(params[j])] = std::move(state);
    }
  }
}

}  // namespace nmt
