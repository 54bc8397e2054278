// Bidirectional GRU encoder (Bahdanau et al. 2015, section 3.2).
// Shapes: B batch, S source length, E embedding size, H hidden size per direction.
#pragma once

#include <torch/nn/module.h>
#include <torch/nn/modules/embedding.h>

#include "model/bigru.h"
#include "model/options.h"

namespace nmt {

struct EncoderOutput {
  torch::Tensor states;   // [B, S, 2H], exactly 0 at padded positions
  torch::Tensor summary;  // [B, 2H] last layer: forward state at the sentence end, backward at its start
};

class EncoderImpl : public torch::nn::Module {
 public:
  explicit EncoderImpl(const EncoderOptions& options);

  // source [B, S] int64 (kPadId after each sentence), lengths [B] int64 on the CPU.
  // Padded positions never influence real ones (bigru.h).
  EncoderOutput forward(const torch::Tensor& source, const torch::Tensor& lengths);

  int64_t output_size() const { return 2 * options_.hidden_size; }
  // Translation on the CPU: the recurrent network's weights packed once, in float32 or in int8
  // (BiGruImpl).
  void pack_float32() { rnn->pack_float32(); }
  void quantize_int8() { rnn->quantize_int8(); }

  torch::nn::Embedding embedding{nullptr};
  BiGru rnn{nullptr};

 private:
  EncoderOptions options_;
};
TORCH_MODULE(Encoder);

}  // namespace nmt
