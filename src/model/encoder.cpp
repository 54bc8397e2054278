#include "model/encoder.h"

#include <torch/torch.h>

#include "model/dropout.h"
#include "model/word_dropout.h"
#include "text/special_tokens.h"

namespace nmt {

EncoderImpl::EncoderImpl(const EncoderOptions& options) : options_(options) {
  embedding = register_module(
      "embedding", torch::nn::Embedding(
                       torch::nn::EmbeddingOptions(options.vocab_size, options.embedding_size).padding_idx(kPadId)));
  rnn = register_module("rnn", BiGru(options.embedding_size, options.hidden_size, options.num_layers,
                                     options.num_layers > 1 ? options.dropout : 0.0));
}

EncoderOutput EncoderImpl::forward(const torch::Tensor& source, const torch::Tensor& lengths) {
  TORCH_CHECK(source.dim() == 2 && lengths.dim() == 1 && source.size(0) == lengths.size(0),
              "encoder: source [B, S] and lengths [B] expected");
  const int64_t batch_size = source.size(0);
  torch::Tensor embedded =
      apply_dropout(word_dropout(embedding(source), options_.word_dropout, is_training()), options_.dropout,
                    is_training());  // [B, S, E]
  BiGruImpl::Output output = rnn(embedded, lengths);
  // output.final [layers * 2, B, H]; the last two rows are the top layer's forward and backward
  // directions.
  torch::Tensor summary = output.final
                              .narrow(0, output.final.size(0) - 2, 2)  // [2, B, H]
                              .transpose(0, 1)
                              .reshape({batch_size, 2 * options_.hidden_size});  // [B, 2H]
  return {output.states, summary};
}

}  // namespace nmt
