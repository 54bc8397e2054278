#include "config/train_config.h"

#include <CLI/CLI.hpp>

#include <charconv>
#include <sstream>
#include <stdexcept>

namespace nmt {
namespace {

// The single list of configuration keys. `Visitor` is called as visitor(key, field, help).
template <typename Visitor, typename Config>
void visit_fields(Visitor& visit, Config& config) {
  visit("train-source", config.train_source, "training corpus, source side");
  visit("train-target", config.train_target, "training corpus, target side");
  visit("dev-source", config.dev_source, "development set, source side");
  visit("dev-target", config.dev_target, "development set, target side");
  visit("model-dir", config.model_dir, "directory for vocabularies, checkpoints and logs");

  visit("vocab-type", config.vocab_type, "sentencepiece model type");
  visit("vocab-size", config.vocab_size, "sentencepiece vocabulary size (upper bound)");
  visit("joint-vocab", config.joint_vocab, "one vocabulary for source and target");
  visit("max-length", config.max_length, "skip training pairs longer than this many subwords");

  visit("embedding-size", config.model.embedding_size, "source and target embedding size");
  visit("encoder-hidden-size", config.model.encoder_hidden_size, "encoder GRU size per direction");
  visit("encoder-layers", config.model.encoder_layers, "bidirectional encoder layers");
  visit("decoder-hidden-size", config.model.decoder_hidden_size, "decoder GRU size");
  visit("decoder-layers", config.model.decoder_layers, "decoder GRU layers");
  visit("attention", config.model.attention, "attention scorer");
  visit("attention-size", config.model.attention_size, "hidden size of the additive scorer");
  visit("cosine-sharpness", config.model.cosine_sharpness,
        "cosine scorer: fixed sharpness (> 0) or learned (0)");
  visit("dropout", config.model.dropout, "dropout on embeddings, between layers and on outputs");
  visit("word-dropout", config.model.word_dropout,
        "probability of dropping a whole source or target input token's embedding while training");
  visit("tie-embeddings", config.model.tie_embeddings,
        "share target embeddings and output projection (needs embedding-size == decoder-hidden-size)");

  visit("batch-tokens", config.batch_tokens, "padded source+target tokens per batch");
  visit("max-epochs", config.max_epochs, "stop after this many epochs");
  visit("max-steps", config.max_steps, "stop after this many updates (0 = no limit)");
  visit("max-minutes", config.max_minutes,
        "stop (after a last validation) once this run has trained this many minutes (0 = no limit)");
  visit("learning-rate", config.learning_rate, "Adam learning rate");
  visit("warmup-steps", config.warmup_steps, "linear learning-rate warm-up steps (0 = none)");
  visit("lr-decay-factor", config.lr_decay_factor, "learning-rate factor on a validation plateau");
  visit("lr-patience", config.lr_patience, "validations without improvement before a decay");
  visit("min-learning-rate", config.min_learning_rate, "the learning rate never decays below this");
  visit("clip-norm", config.clip_norm, "gradient-norm clipping threshold (0 = off)");
  visit("label-smoothing", config.label_smoothing, "label smoothing of the cross-entropy");
  visit("teacher-forcing", config.teacher_forcing,
        "probability of feeding the reference (not the predicted) previous token");

  visit("validate-every", config.validate_every, "validate every this many steps");
  visit("log-every", config.log_every, "log every this many steps");
  visit("best-metric", config.best_metric, "validation metric that picks the best checkpoint");
  visit("early-stopping-patience", config.early_stopping_patience,
        "stop after this many validations without improvement (0 = off)");
  visit("dev-max-decode-ratio", config.dev_max_decode_ratio,
        "dev decoding stops at ratio * source length + 10 tokens");
  visit("keep-checkpoints", config.keep_checkpoints,
        "keep the weights of the last N validations as step-NNNNNNNN.ckpt, for nmt average (0 = none)");

  visit("seed", config.seed, "random seed (training is reproducible for a seed and thread count)");
  visit("threads", config.threads, "CPU threads (0 = number of cores)");
  visit("device", config.device, "cpu or cuda");
}

const EnumNames<AttentionType>& names_for(const AttentionType&) { return attention_type_names(); }
const EnumNames<VocabType>& names_for(const VocabType&) { return vocab_type_names(); }
const EnumNames<Metric>& names_for(const Metric&) { return metric_names(); }

struct OptionAdder {
  CLI::App& app;

  template <typename Field>
  void operator()(const std::string& key, Field& field, const std::string& help) {
    if constexpr (std::is_enum_v<Field>) {
      const auto& names = names_for(field);
      std::vector<std::string> allowed;
      for (const auto& entry : names) allowed.push_back(entry.first);
      app.add_option_function<std::string>(
             "--" + key, [&field, &names, key](const std::string& text) { field = parse_enum(names, key, text); },
             help + " (" + allowed_values(names) + ")")
          ->check(CLI::IsMember(allowed))
          ->default_str(to_string(field))
          ->multi_option_policy(CLI::MultiOptionPolicy::TakeLast);
    } else {
      // Given twice (a script's default, then the user's override), the last one counts.
      app.add_option("--" + key, field, help)->capture_default_str()->multi_option_policy(
          CLI::MultiOptionPolicy::TakeLast);
    }
  }
};

std::string format_double(double value) {
  char buffer[64];
  auto result = std::to_chars(buffer, buffer + sizeof(buffer), value);
  std::string text(buffer, result.ptr);
  // Keep doubles recognisable as floats in TOML ("1" -> "1.0").
  if (text.find_first_of(".en") == std::string::npos) text += ".0";
  return text;
}

struct EntryWriter {
  std::vector<std::pair<std::string, std::string>> entries;

  template <typename Field>
  void operator()(const std::string& key, const Field& field, const std::string&) {
    if constexpr (std::is_enum_v<Field>) {
      entries.emplace_back(key, to_string(field));
    } else if constexpr (std::is_same_v<Field, bool>) {
      entries.emplace_back(key, field ? "true" : "false");
    } else if constexpr (std::is_floating_point_v<Field>) {
      entries.emplace_back(key, format_double(field));
    } else if constexpr (std::is_integral_v<Field>) {
      entries.emplace_back(key, std::to_string(field));
    } else {
      entries.emplace_back(key, field);
    }
  }
};

struct TomlWriter {
  std::ostringstream out;

  template <typename Field>
  void operator()(const std::string& key, const Field& field, const std::string& help) {
    EntryWriter single;
    single(key, field, help);
    const std::string& value = single.entries.front().second;
    out << "# " << help << "\n" << key << " = ";
    if constexpr (std::is_enum_v<Field> || std::is_same_v<Field, std::string>) {
      out << '"';
      for (char c : value) {
        if (c == '"' || c == '\\') out << '\\';
        out << c;
      }
      out << '"';
    } else {
      out << value;
    }
    out << "\n";
  }
};

void require(bool condition, const std::string& key, const std::string& message) {
  if (!condition) throw std::invalid_argument(key + ": " + message);
}

}  // namespace

void add_train_options(CLI::App& app, TrainConfig& config) {
  OptionAdder adder{app};
  visit_fields(adder, config);
}

std::vector<std::pair<std::string, std::string>> config_entries(const TrainConfig& config) {
  EntryWriter writer;
  visit_fields(writer, config);
  return writer.entries;
}

std::string to_toml(const TrainConfig& config) {
  TomlWriter writer;
  writer.out << "# nmt training configuration (written by nmt; readable by nmt train --config)\n[train]\n";
  visit_fields(writer, config);
  return writer.out.str();
}

TrainConfig config_from_entries(const std::vector<std::pair<std::string, std::string>>& entries) {
  TrainConfig config;
  CLI::App app;
  add_train_options(app, config);
  std::vector<std::string> args;
  for (auto it = entries.rbegin(); it != entries.rend(); ++it) {  // CLI11 reads a reversed vector
    args.push_back(it->second);
    args.push_back("--" + it->first);
  }
  try {
    app.parse(args);
  } catch (const CLI::ParseError& error) {
    throw std::runtime_error(std::string("stored configuration is invalid: ") + error.what());
  }
  return config;
}

void validate(const TrainConfig& config) {
  const std::string unset = "is not set: give it in the config file or on the command line";
  require(!config.train_source.empty(), "train-source", unset);
  require(!config.train_target.empty(), "train-target", unset);
  require(!config.dev_source.empty(), "dev-source", unset);
  require(!config.dev_target.empty(), "dev-target", unset);
  require(!config.model_dir.empty(), "model-dir", unset);
  require(config.vocab_size >= 8, "vocab-size", "must be at least 8");
  require(config.max_length >= 1, "max-length", "must be at least 1");
  const ModelOptions& model = config.model;
  require(model.embedding_size >= 1, "embedding-size", "must be at least 1");
  require(model.encoder_hidden_size >= 1, "encoder-hidden-size", "must be at least 1");
  require(model.decoder_hidden_size >= 1, "decoder-hidden-size", "must be at least 1");
  require(model.encoder_layers >= 1, "encoder-layers", "must be at least 1");
  require(model.decoder_layers >= 1, "decoder-layers", "must be at least 1");
  require(model.attention_size >= 1, "attention-size", "must be at least 1");
  require(model.cosine_sharpness >= 0, "cosine-sharpness", "must be >= 0 (0 = learned)");
  require(model.dropout >= 0 && model.dropout < 1, "dropout", "must be in [0, 1)");
  require(model.word_dropout >= 0 && model.word_dropout < 1, "word-dropout", "must be in [0, 1)");
  require(!model.tie_embeddings || model.embedding_size == model.decoder_hidden_size, "tie-embeddings",
          "needs embedding-size == decoder-hidden-size (" + std::to_string(model.embedding_size) +
              " vs " + std::to_string(model.decoder_hidden_size) + ")");
  require(config.batch_tokens >= 2, "batch-tokens", "must be at least 2");
  require(config.max_epochs >= 1, "max-epochs", "must be at least 1");
  require(config.max_steps >= 0, "max-steps", "must be >= 0 (0 = no limit)");
  require(config.max_minutes >= 0, "max-minutes", "must be >= 0 (0 = no limit)");
  require(config.learning_rate > 0, "learning-rate", "must be > 0");
  require(config.warmup_steps >= 0, "warmup-steps", "must be >= 0");
  require(config.lr_decay_factor > 0 && config.lr_decay_factor <= 1, "lr-decay-factor", "must be in (0, 1]");
  require(config.lr_patience >= 0, "lr-patience", "must be >= 0");
  require(config.min_learning_rate >= 0, "min-learning-rate", "must be >= 0");
  require(config.clip_norm >= 0, "clip-norm", "must be >= 0 (0 = off)");
  require(config.label_smoothing >= 0 && config.label_smoothing < 1, "label-smoothing", "must be in [0, 1)");
  require(config.teacher_forcing >= 0 && config.teacher_forcing <= 1, "teacher-forcing", "must be in [0, 1]");
  require(config.validate_every >= 1, "validate-every", "must be at least 1");
  require(config.log_every >= 1, "log-every", "must be at least 1");
  require(config.early_stopping_patience >= 0, "early-stopping-patience", "must be >= 0 (0 = off)");
  require(config.keep_checkpoints >= 0, "keep-checkpoints", "must be >= 0 (0 = none)");
  require(config.dev_max_decode_ratio >= 1, "dev-max-decode-ratio", "must be at least 1");
  require(config.threads >= 0, "threads", "must be >= 0 (0 = number of cores)");
  require(config.device == "cpu" || config.device == "cuda", "device", "'" + config.device + "' is not one of cpu|cuda");
}

}  // namespace nmt
