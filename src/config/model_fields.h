// The model's configuration keys, declared once: `nmt train` offers them (inside visit_fields,
// train_config.cpp), checkpoints store them, and a model loads from them without the training
// configuration (inference/model.h).
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "config/fields.h"
#include "model/options.h"
#include "model/scorers/registry.h"

namespace nmt {

// Calls visit(key, field, help, on_resume) for every model key. All of them fix the network's
// shapes, except the dropout rates.
template <typename Visitor, typename Options>
void visit_model_fields(Visitor& visit, Options& model) {
  constexpr OnResume fixed = OnResume::kFixed;
  visit("embedding-size", model.embedding_size, "source and target embedding size", fixed);
  visit("encoder-hidden-size", model.encoder_hidden_size, "encoder GRU size per direction", fixed);
  visit("encoder-layers", model.encoder_layers, "bidirectional encoder layers", fixed);
  visit("decoder-hidden-size", model.decoder_hidden_size, "decoder GRU size", fixed);
  visit("decoder-layers", model.decoder_layers, "decoder GRU layers", fixed);
  visit("attention", Choice<std::remove_reference_t<decltype((model.attention))>>{model.attention, attention_names()},
        "attention scorer", fixed);
  visit("attention-size", model.attention_size, "hidden size of the additive scorer", fixed);
  visit("cosine-sharpness", model.cosine_sharpness, "cosine scorer: fixed sharpness (> 0) or learned (0)", fixed);
  visit("attention-heads", model.attention_heads, "multi-head scorer: heads over slices of the keys and states", fixed);
  visit("coverage", model.coverage, "additive scorer: feed it the coverage vector, the sum of earlier weights", fixed);
  visit("local-scorer",
        Choice<std::remove_reference_t<decltype((model.local_scorer))>>{model.local_scorer, content_scorer_names()},
        "local-p and local-m: the content scorer inside the window", fixed);
  visit("local-window", model.local_window, "local-p and local-m: half-width D of the window [p_t - D, p_t + D]",
        fixed);
  visit("attention-positions", model.attention_positions,
        "location scorer: source positions it scores (later ones share the last one's score)", fixed);
  visit("dropout", model.dropout, "dropout on embeddings, between layers and on outputs");
  visit("word-dropout", model.word_dropout,
        "probability of dropping a whole source or target input token's embedding while training");
  visit("tie-embeddings", model.tie_embeddings,
        "share target embeddings and output projection (needs embedding-size == decoder-hidden-size)", fixed);
  visit("reverse-target", model.reverse_target,
        "a right-to-left model: trained on the target read backwards, its outputs turned around (for reranking)",
        fixed);
  visit("source-language", model.source_language,
        "ISO 639 code of the source language (de, en, ...): translate splits lines into sentences by its rules; "
        "\"\": the training source's file extension when it is one (train.de: de)");
  visit("target-language", model.target_language,
        "ISO 639 code of the target language; \"\": the training target's file extension when it is one");
}

// The model options among stored configuration entries (other keys are ignored); throws
// std::runtime_error when a model key's value does not parse.
ModelOptions model_options_from_entries(const std::vector<std::pair<std::string, std::string>>& entries);

// Checks ranges and combinations; throws std::invalid_argument naming the key.
void validate(const ModelOptions& model);

}  // namespace nmt
