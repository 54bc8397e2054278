// Scaled dot attention: score(s, h_j) = s^T h_j / sqrt(Q). Vaswani et al. 2017, eq. 1: for
// vectors of Q components of unit variance a dot product has variance Q, which pushes the softmax
// into its saturated regime as Q grows; dividing by sqrt(Q) keeps the scores' scale independent of
// the size. Keys as for dot (dot.h): the encoder states, mapped to size Q when the sizes differ.
#include <torch/torch.h>

#include <cmath>

#include "model/scorers/dot.h"
#include "model/scorers/registry.h"

namespace nmt {

ScorerEntry scaled_dot_scorer_entry() {
  return {"scaled-dot", "s^T h_j / sqrt(Q), Vaswani et al. 2017, eq. 1",
          [](const AttentionOptions& options) {
            return std::make_shared<DotScorerImpl>(options, 1.0 / std::sqrt(static_cast<double>(options.query_size)));
          },
          state_key_arithmetic};
}

}  // namespace nmt
