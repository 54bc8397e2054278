// Plain option structs for the model's modules. No LibTorch here, so configuration code can
// include this cheaply. Each module's constructor takes only its own struct.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace nmt {

// The `attention` value of a model without a scorer: a fixed context (model/attention.h).
inline constexpr const char* kNoAttention = "none";

// The module structs below hold no defaults of their own: ModelOptions (last in this file) holds
// every default once, and encoder() / decoder() fill these field by field.
struct EncoderOptions {
  int64_t vocab_size{};      // source vocabulary size
  int64_t embedding_size{};  // source embedding size E
  int64_t hidden_size{};     // GRU size per direction; encoder states are 2 * hidden_size
  int64_t num_layers{};      // stacked bidirectional layers
  double dropout{};          // on embeddings and between layers
  double word_dropout{};     // whole source positions dropped (training only)
};

struct AttentionOptions {
  std::string scorer;         // a name of model/scorers/registry.h, or kNoAttention
  int64_t query_size{};       // decoder hidden size
  int64_t key_size{};         // encoder state size (2 * encoder hidden size)
  int64_t attention_size{};   // hidden size of the additive scorer's MLP
  double cosine_sharpness{};  // cosine: fixed sharpness if > 0, learned if 0
  int64_t heads{};            // multi-head: heads (dividing attention_size and key_size)
  bool coverage{};            // additive: a coverage vector fed to the scorer (Tu et al. 2016)
  std::string local_scorer;   // local-p, local-m: the content scorer inside the window
  int64_t local_window{};     // local-p, local-m: D, the window is [p_t - D, p_t + D]
  int64_t positions{};        // location: source positions scored (later ones share the last)
};

struct DecoderOptions {
  int64_t vocab_size{};      // target vocabulary size V
  int64_t embedding_size{};  // target embedding size E
  int64_t hidden_size{};     // GRU size H (also the attentional vector's size)
  int64_t num_layers{};      // stacked GRU layers
  double dropout{};          // on embeddings, between layers and on the attentional vector
  double word_dropout{};     // whole target input positions dropped (training only)
  bool tie_embeddings{};     // share target embeddings with the output projection (E == H)
  AttentionOptions attention;
};

// Everything a Seq2Seq needs, as stored in the configuration and the checkpoint, with the model's
// defaults (the configuration keys of the same names: config/model_fields.h).
struct ModelOptions {
  int64_t embedding_size = 256;       // source and target embedding size
  int64_t encoder_hidden_size = 256;  // per direction
  int64_t encoder_layers = 1;
  int64_t decoder_hidden_size = 256;
  int64_t decoder_layers = 1;
  std::string attention = "additive";    // a scorer of model/scorers/registry.h, or kNoAttention
  int64_t attention_size = 256;          // additive scorer only
  double cosine_sharpness = 0.0;         // cosine scorer only: 0 = learned
  int64_t attention_heads = 4;           // multi-head scorer only
  bool coverage = false;                 // additive scorer only: coverage vector (Tu et al. 2016)
  std::string local_scorer = "general";  // local-p and local-m only: content scorer in the window
  int64_t local_window = 10;             // local-p and local-m only: half-width D of the window
  int64_t attention_positions = 100;     // location scorer only: source positions it scores
  double dropout = 0.3;
  double word_dropout = 0.0;  // source and target input positions (model/word_dropout.h)
  bool tie_embeddings = false;
  bool reverse_target = false;  // a right-to-left model: trained on, and writing, the target backwards
  // ISO 639 codes of the languages (text/sentences.h splits the source by the source's rules); ""
  // when not known, as in models trained before these keys.
  std::string source_language;
  std::string target_language;
  // The training key max-length (subwords) the model was trained within, read from the checkpoint's
  // configuration; 0 when not known. Not a model key: fixed by training, not by the network.
  int64_t trained_length = 0;
  // The target languages of a multilingual model (train-languages, each once; text/languages.h):
  // translation puts the token of one of them in front of each source sentence. Empty for a model
  // of one target language. Not a model key either.
  std::vector<std::string> target_languages;

  EncoderOptions encoder(int64_t source_vocab_size) const {
    EncoderOptions options;
    options.vocab_size = source_vocab_size;
    options.embedding_size = embedding_size;
    options.hidden_size = encoder_hidden_size;
    options.num_layers = encoder_layers;
    options.dropout = dropout;
    options.word_dropout = word_dropout;
    return options;
  }

  AttentionOptions attention_options() const {
    AttentionOptions options;
    options.scorer = attention;
    options.query_size = decoder_hidden_size;
    options.key_size = 2 * encoder_hidden_size;
    options.attention_size = attention_size;
    options.cosine_sharpness = cosine_sharpness;
    options.heads = attention_heads;
    options.coverage = coverage;
    options.local_scorer = local_scorer;
    options.local_window = local_window;
    options.positions = attention_positions;
    return options;
  }

  DecoderOptions decoder(int64_t target_vocab_size) const {
    DecoderOptions options;
    options.vocab_size = target_vocab_size;
    options.embedding_size = embedding_size;
    options.hidden_size = decoder_hidden_size;
    options.num_layers = decoder_layers;
    options.dropout = dropout;
    options.word_dropout = word_dropout;
    options.tie_embeddings = tie_embeddings;
    options.attention = attention_options();
    return options;
  }
};

}  // namespace nmt
