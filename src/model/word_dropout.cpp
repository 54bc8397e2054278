#include "model/word_dropout.h"

#include <torch/torch.h>

namespace nmt {

torch::Tensor word_dropout(const torch::Tensor& embedded, double p, bool training) {
  if (!training || p <= 0) return embedded;
  TORCH_CHECK(p < 1, "word-dropout must be in [0, 1), not ", p);
  std::vector<int64_t> mask_shape = embedded.sizes().vec();
  mask_shape.back() = 1;
  const torch::Tensor keep = torch::empty(mask_shape, embedded.options()).bernoulli_(1.0 - p).div_(1.0 - p);
  return embedded * keep;
}

}  // namespace nmt
