// Word dropout (Sennrich, Haddow and Birch 2016, "Edinburgh Neural Machine Translation Systems
// for WMT 16"; after Gal and Ghahramani 2016): while training, each token position's embedding is
// dropped whole with probability p, the rest scaled by 1 / (1 - p). The model must then read a
// word from its context, a regulariser for small corpora. Positions, not word types, are dropped.
#pragma once

#include <torch/types.h>

namespace nmt {

// embedded [..., E]: one keep/drop draw per position (all leading dimensions), shared by its E values.
// Returns `embedded` unchanged when not training or p == 0.
torch::Tensor word_dropout(const torch::Tensor& embedded, double p, bool training);

}  // namespace nmt
