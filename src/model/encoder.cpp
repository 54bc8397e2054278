#include "model/encoder.h"

#include <torch/torch.h>

#include "model/word_dropout.h"
#include "text/special_tokens.h"

namespace nmt {

namespace rnn_utils = torch::nn::utils::rnn;

EncoderImpl::EncoderImpl(const EncoderOptions& options) : options_(options) {
  embedding = register_module(
      "embedding", torch::nn::Embedding(torch::nn::EmbeddingOptions(options.vocab_size, options.embedding_size)
                                            .padding_idx(kPadId)));
  dropout = register_module("dropout", torch::nn::Dropout(options.dropout));
  rnn = register_module("rnn", torch::nn::GRU(torch::nn::GRUOptions(options.embedding_size, options.hidden_size)
                                                  .num_layers(options.num_layers)
                                                  .bidirectional(true)
                                                  .batch_first(true)
                                                  .dropout(options.num_layers > 1 ? options.dropout : 0.0)));
}

EncoderOutput EncoderImpl::forward(const torch::Tensor& source, const torch::Tensor& lengths) {
  TORCH_CHECK(source.dim() == 2 && lengths.dim() == 1 && source.size(0) == lengths.size(0),
              "encoder: source [B, S] and lengths [B] expected");
  const int64_t batch_size = source.size(0);
  const int64_t source_length = source.size(1);
  torch::Tensor embedded =
      dropout(word_dropout(embedding(source), options_.word_dropout, is_training()));  // [B, S, E]
  auto packed = rnn_utils::pack_padded_sequence(embedded, lengths.cpu(), /*batch_first=*/true,
                                                /*enforce_sorted=*/false);
  auto [packed_states, final_states] = rnn->forward_with_packed_input(packed);
  torch::Tensor states = std::get<0>(rnn_utils::pad_packed_sequence(
      packed_states, /*batch_first=*/true, /*padding_value=*/0.0, /*total_length=*/source_length));  // [B, S, 2H]
  // final_states [layers * 2, B, H], already in the input's batch order; the last two rows are
  // the top layer's forward and backward directions.
  torch::Tensor summary = final_states.narrow(0, final_states.size(0) - 2, 2)  // [2, B, H]
                              .transpose(0, 1)
                              .reshape({batch_size, 2 * options_.hidden_size});  // [B, 2H]
  return {states, summary};
}

}  // namespace nmt
