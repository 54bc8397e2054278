#include "model/seq2seq.h"

#include <torch/torch.h>

#include "text/special_tokens.h"

namespace nmt {

Seq2SeqImpl::Seq2SeqImpl(const ModelOptions& options, int64_t source_vocab_size, int64_t target_vocab_size)
    : options_(options) {
  encoder = register_module("encoder", Encoder(options.encoder(source_vocab_size)));
  decoder = register_module("decoder", Decoder(options.decoder(target_vocab_size), encoder->output_size()));
  // Small uniform embeddings (as Luong et al. 2015, section 4.1) instead of LibTorch's N(0, 1);
  // the padding row stays 0.
  torch::NoGradGuard no_grad;
  for (auto* table : {&encoder->embedding->weight, &decoder->embedding->weight}) {
    table->uniform_(-0.1, 0.1);
    (*table)[kPadId].zero_();
  }
}

EncodedSource Seq2SeqImpl::encode(const torch::Tensor& source, const torch::Tensor& lengths) {
  EncoderOutput encoded = encoder(source, lengths);
  EncodedSource result;
  result.states = encoded.states;
  result.summary = encoded.summary;
  result.mask = make_source_mask(lengths, source.size(1), source.device());
  result.keys = decoder->project_keys(encoded.states);
  return result;
}

DecoderOutput Seq2SeqImpl::forward(const torch::Tensor& source, const torch::Tensor& lengths,
                                   const torch::Tensor& target_input, double teacher_forcing) {
  return decoder(target_input, encode(source, lengths), teacher_forcing);
}

}  // namespace nmt
