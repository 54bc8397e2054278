#include "model/seq2seq.h"

#include <torch/torch.h>

#include "kernels/dispatch.h"
#include "text/special_tokens.h"
#include "util/device_rules.h"

namespace nmt {
namespace {

// The scorer's keys of `states` [B, S, C]. In inference on the CPU, those of the real positions of
// `mask` [B, S] alone, 0 at padding, which attention never reads (each position's key is made
// from its own state: ScorerImpl::project_keys): a batch of mixed lengths, as continuous batching
// encodes the sentences that join, pays for its real positions only.
torch::Tensor project_real_keys(DecoderImpl& decoder, const torch::Tensor& states, const torch::Tensor& mask) {
  if (queues_work(states.device()) || kernels::autograd_records({states}) || mask.all().item<bool>()) {
    return decoder.project_keys(states);
  }
  const int64_t batch = states.size(0), positions = states.size(1);
  const torch::Tensor real = mask.reshape(-1).nonzero().squeeze(1);  // [N] of B * S
  const torch::Tensor keys =
      decoder.project_keys(states.reshape({batch * positions, -1}).index_select(0, real).unsqueeze(0));
  if (!keys.defined()) return keys;  // attention none
  const torch::Tensor all = torch::zeros({batch * positions, keys.size(2)}, keys.options());
  return all.index_copy_(0, real, keys.squeeze(0)).view({batch, positions, keys.size(2)});
}

}  // namespace

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
  result.keys = project_real_keys(*decoder, encoded.states, result.mask);
  return result;
}

DecoderOutput Seq2SeqImpl::forward(const torch::Tensor& source, const torch::Tensor& lengths,
                                   const torch::Tensor& target_input, double teacher_forcing) {
  return decoder(target_input, encode(source, lengths), teacher_forcing);
}

}  // namespace nmt
