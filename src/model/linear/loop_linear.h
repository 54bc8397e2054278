// A linear map y = x W^T + b applied at every step of a recurrent loop, whose weight gradient is
// computed once, after the loop, instead of once per step.
//
// Autograd would compute dW += dy_t^T x_t at every step: a small product whose inner dimension is
// the batch (about 60 rows), plus an addition into the running sum. Here each step's backward only
// computes dx_t = dy_t W and keeps dy_t; when all steps are done, dW = [dy_1..dy_T]^T [x_1..x_T]
// is one product with T * B rows (and db the sum of all dy_t). Same gradient, fewer and larger
// products. Without gradients (inference, or a frozen weight) it is a plain linear map.
// Limit: a backward pass that reaches some steps but not the weight (autograd::grad with respect
// to other inputs only) leaves those steps' dy_t behind for the next pass that does.
#pragma once

#include <ATen/core/ivalue.h>
#include <torch/types.h>

#include <vector>

namespace nmt {

// What a LoopLinear keeps of its steps until the weight gradient is computed.
struct LoopLinearRecord : public torch::CustomClassHolder {
  torch::Tensor weight;                     // [out, in], detached
  uint32_t weight_version = 0;              // its version counter at forward, checked at backward
  torch::Tensor bias;                       // [out], detached; undefined for none
  std::vector<torch::Tensor> inputs;        // x_t [B, in], detached (no reference back into the graph)
  std::vector<torch::Tensor> output_grads;  // dL/dy_t [B, out], filled in by the steps' backward
};

class LoopLinear {
 public:
  LoopLinear() = default;
  // weight [out, in]; bias [out] or undefined. One LoopLinear per pass over the loop.
  LoopLinear(torch::Tensor weight, torch::Tensor bias);

  torch::Tensor operator()(const torch::Tensor& input) const;  // [B, in] -> [B, out]

 private:
  torch::Tensor weight_;
  torch::Tensor bias_;
  torch::Tensor anchor_;  // graph node that receives the weight gradient; undefined when not deferring
  c10::intrusive_ptr<LoopLinearRecord> record_;
};

}  // namespace nmt
