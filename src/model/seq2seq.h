// The encoder-decoder: encode() once per batch, then the decoder's step() or forward().
// Shapes: B batch, S source length, T target length, V target vocabulary.
#pragma once

#include <torch/nn/module.h>

#include "model/decoder.h"
#include "model/encoded_source.h"
#include "model/encoder.h"
#include "model/options.h"

namespace nmt {

class Seq2SeqImpl : public torch::nn::Module {
 public:
  Seq2SeqImpl(const ModelOptions& options, int64_t source_vocab_size, int64_t target_vocab_size);

  // source [B, S], lengths [B] -> states, attention keys, mask and summary.
  EncodedSource encode(const torch::Tensor& source, const torch::Tensor& lengths);

  // Teacher-forced pass: attentional vectors [B, T, H] and attention [B, T, S]; the logits are
  // decoder->output_logits(out.attentional).
  DecoderOutput forward(const torch::Tensor& source, const torch::Tensor& lengths, const torch::Tensor& target_input,
                        double teacher_forcing = 1.0);

  const ModelOptions& options() const { return options_; }

  Encoder encoder{nullptr};
  Decoder decoder{nullptr};

 private:
  ModelOptions options_;
};
TORCH_MODULE(Seq2Seq);

}  // namespace nmt
