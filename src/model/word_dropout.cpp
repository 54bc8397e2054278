#include "model/word_dropout.h"

#include <torch/torch.h>

#include "model/dropout.h"

namespace nmt {

torch::Tensor word_dropout(const torch::Tensor& embedded, double p, bool training) {
  if (!training || p <= 0) return embedded;
  TORCH_CHECK(p < 1, "word-dropout must be in [0, 1), not ", p);
  std::vector<int64_t> mask_shape = embedded.sizes().vec();
  mask_shape.back() = 1;  // one draw per position, shared by its E values
  return embedded * dropout_mask(mask_shape, p, embedded.options().requires_grad(false));
}

}  // namespace nmt
