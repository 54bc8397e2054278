#include "config/model_fields.h"

#include <CLI/CLI.hpp>

#include <algorithm>

#include "text/languages.h"
#include "text/sentences.h"

namespace nmt {

ModelOptions model_options_from_entries(const std::vector<std::pair<std::string, std::string>>& entries) {
  ModelOptions model;
  CLI::App app;
  OptionAdder adder{app};
  visit_model_fields(adder, model);
  std::vector<std::pair<std::string, std::string>> model_entries;
  for (const auto& entry : entries) {
    if (app.get_option_no_throw("--" + entry.first) != nullptr) model_entries.push_back(entry);
  }
  parse_entries(app, model_entries);
  for (const auto& [key, value] : entries) {
    if (key == "train-languages") model.target_languages = distinct_languages(value);
    if (key != "max-length") continue;
    try {
      model.trained_length = std::max<int64_t>(0, std::stoll(value));
    } catch (const std::exception&) {  // a checkpoint's own entry; unreadable: not known
      model.trained_length = 0;
    }
  }
  return model;
}

void validate(const ModelOptions& model) {
  if (model.attention != kNoAttention) find_scorer(model.attention);  // names the allowed values
  require(model.embedding_size >= 1, "embedding-size", "must be at least 1");
  require(model.encoder_hidden_size >= 1, "encoder-hidden-size", "must be at least 1");
  require(model.decoder_hidden_size >= 1, "decoder-hidden-size", "must be at least 1");
  require(model.encoder_layers >= 1, "encoder-layers", "must be at least 1");
  require(model.decoder_layers >= 1, "decoder-layers", "must be at least 1");
  require(model.attention_size >= 1, "attention-size", "must be at least 1");
  require(model.cosine_sharpness >= 0, "cosine-sharpness", "must be >= 0 (0 = learned)");
  require(model.attention_heads >= 1, "attention-heads", "must be at least 1");
  if (model.attention == "multi-head") {
    require(model.attention_size % model.attention_heads == 0, "attention-heads",
            "must divide attention-size (" + std::to_string(model.attention_size) + ")");
    require((2 * model.encoder_hidden_size) % model.attention_heads == 0, "attention-heads",
            "must divide the encoder states' size, 2 * encoder-hidden-size (" +
                std::to_string(2 * model.encoder_hidden_size) + ")");
  }
  require(!model.coverage || model.attention == "additive", "coverage",
          "is an option of attention additive (not " + model.attention + ")");
  find_scorer(model.local_scorer);
  require(model.local_window >= 1, "local-window", "must be at least 1");
  require(model.attention_positions >= 1, "attention-positions", "must be at least 1");
  require(model.dropout >= 0 && model.dropout < 1, "dropout", "must be in [0, 1)");
  require(model.word_dropout >= 0 && model.word_dropout < 1, "word-dropout", "must be in [0, 1)");
  for (const auto& [key, language] :
       {std::pair{"source-language", &model.source_language}, std::pair{"target-language", &model.target_language}}) {
    const std::string problem = language_problem(*language);
    require(problem.empty(), key, problem);
  }
  require(!model.tie_embeddings || model.embedding_size == model.decoder_hidden_size, "tie-embeddings",
          "needs embedding-size == decoder-hidden-size (" + std::to_string(model.embedding_size) + " vs " +
              std::to_string(model.decoder_hidden_size) + ")");
}

}  // namespace nmt
