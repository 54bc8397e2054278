#include "bench/flops.h"

#include "model/scorers/registry.h"

namespace nmt {

namespace {

// A product of a [rows, in] matrix with an `in` vector: `in` multiply-adds per output.
double matvec(double in, double out) { return 2.0 * in * out; }

}  // namespace

FlopCount count_flops(const ModelOptions& options, const FlopShapes& shapes) {
  const auto E = static_cast<double>(options.embedding_size);
  const auto He = static_cast<double>(options.encoder_hidden_size);
  const auto C = 2.0 * He;  // encoder state size
  const auto H = static_cast<double>(options.decoder_hidden_size);
  const auto V = static_cast<double>(shapes.target_vocab_size);
  const double S = shapes.source_length;

  FlopCount count;
  // Encoder, per source token: each layer runs two directions, each with input and hidden gates.
  for (int64_t layer = 0; layer < options.encoder_layers; ++layer) {
    const double input = layer == 0 ? E : C;
    count.encoder += 2.0 * (matvec(input, 3 * He) + matvec(He, 3 * He));
  }
  // Attention keys, once per source token (the scorer's project_keys), and the scorer's arithmetic
  // per decoder step.
  ScorerArithmetic scorer;
  if (options.attention != kNoAttention) {
    scorer = find_scorer(options.attention).arithmetic(options.decoder(shapes.target_vocab_size).attention);
  }
  count.encoder += 2.0 * scorer.per_key;

  // Decoder, per target token: first layer's input gates from y_{t-1} and from a_{t-1}, the
  // recurrent gates of every layer, the input gates of upper layers.
  count.decoder = matvec(E, 3 * H) + matvec(H, 3 * H);
  for (int64_t layer = 0; layer < options.decoder_layers; ++layer) {
    count.decoder += matvec(H, 3 * H) + (layer > 0 ? matvec(H, 3 * H) : 0.0);
  }
  // Scores against S keys, then the context as a weighted sum of S states of size C.
  if (options.attention != kNoAttention) {
    count.decoder += 2.0 * (scorer.per_query + S * scorer.per_position) + S * 2.0 * C;
  }
  count.decoder += matvec(H + C, H);  // attentional vector tanh(W_c [h; c])
  count.decoder += matvec(H, V);      // output layer
  count.per_sentence = matvec(C, static_cast<double>(options.decoder_layers) * H);  // bridge
  return count;
}

double FlopCount::forward_per_target_token(const FlopShapes& shapes) const {
  return decoder + encoder * shapes.source_length / shapes.target_length + per_sentence / shapes.target_length;
}

double training_flops_per_target_token(const ModelOptions& options, const FlopShapes& shapes) {
  return 3.0 * count_flops(options, shapes).forward_per_target_token(shapes);
}

}  // namespace nmt
