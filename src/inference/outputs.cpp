#include "inference/outputs.h"

#include <torch/torch.h>

#include <cmath>
#include <cstdio>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <sstream>

#include "util/io.h"

namespace nmt {
namespace {

// The SVG heatmap and JSON matrix of line `index` (0-based in the input) of the input `stem`,
// when options.attention_dir is set.
void write_attention_files(const AttentionMatrix& matrix, const std::string& line, const Translation& translation,
                           const std::string& stem, size_t index, const OutputOptions& options) {
  if (options.attention_dir.empty()) return;
  char number[32];
  std::snprintf(number, sizeof(number), "%05zu", index + 1);
  const std::string base = (std::filesystem::path(options.attention_dir) / (stem + "." + number)).string();
  write_file_atomic(base + ".svg", attention_svg(matrix, line + "  →  " + translation.texts[0]), Durability::kNoSync);
  write_file_atomic(base + ".json", attention_json(matrix), Durability::kNoSync);
}

}  // namespace

AttentionMatrix attention_matrix(const Translation& translation, const Hypothesis& hypothesis,
                                 const Vocabulary& target_vocabulary) {
  AttentionMatrix matrix;
  matrix.source_tokens = translation.source_pieces;
  matrix.source_tokens.push_back("</s>");
  for (int64_t id : hypothesis.tokens) matrix.target_tokens.push_back(target_vocabulary.piece(id));
  const int64_t rows = hypothesis.attention.size(0);
  if (rows > static_cast<int64_t>(hypothesis.tokens.size())) matrix.target_tokens.push_back("</s>");
  torch::Tensor weights = hypothesis.attention.to(torch::kFloat32).contiguous();
  for (int64_t row = 0; row < rows; ++row) {
    const float* data = weights[row].data_ptr<float>();
    matrix.weights.emplace_back(data, data + weights.size(1));
  }
  check_shape(matrix);
  return matrix;
}

std::string format_translations(const std::vector<std::string>& lines, const std::vector<Translation>& translations,
                                const Vocabulary& target_vocabulary, const std::string& stem, int n_best,
                                const OutputOptions& options, size_t first_line) {
  std::ostringstream text;
  for (size_t i = 0; i < translations.size(); ++i) {
    const Translation& translation = translations[i];
    if (n_best > 1) {
      for (size_t k = 0; k < translation.hypotheses.size(); ++k) {
        text << first_line + i << " ||| " << translation.texts[k] << " ||| " << translation.hypotheses[k].score << "\n";
      }
      if (translation.hypotheses.empty())
        text << first_line + i << " ||| "
             << " ||| 0\n";
      continue;
    }
    if (options.with_scores) text << (translation.hypotheses.empty() ? 0.0 : translation.hypotheses[0].score) << "\t";
    text << (translation.texts.empty() ? "" : translation.texts[0]) << "\n";
    if (!options.alignment && options.attention_dir.empty()) continue;
    if (translation.hypotheses.empty()) {
      if (options.alignment) text << "\n";
      continue;
    }
    const AttentionMatrix matrix = attention_matrix(translation, translation.hypotheses[0], target_vocabulary);
    if (options.alignment) text << hard_alignment(matrix) << "\n";
    write_attention_files(matrix, lines[i], translation, stem, first_line + i, options);
  }
  return text.str();
}

LineConfidence line_confidence(const Translation& translation, const TokenLogProbabilities& log_probabilities,
                               const Vocabulary& target_vocabulary) {
  LineConfidence result;
  if (translation.hypotheses.empty()) return result;
  const std::vector<int64_t>& tokens = translation.hypotheses[0].tokens;
  double sum = 0;
  size_t counted = 0, token = 0;
  for (size_t sentence = 0; sentence < translation.sentence_tokens.size(); ++sentence) {
    const std::vector<double>& own = log_probabilities[sentence];
    std::vector<int64_t> word;
    double word_log_probability = 0;
    const auto finish_word = [&] {
      if (word.empty()) return;
      result.words.emplace_back(target_vocabulary.decode(word), std::exp(word_log_probability));
      word.clear();
      word_log_probability = 0;
    };
    for (size_t k = 0; k < translation.sentence_tokens[sentence]; ++k, ++token) {
      if (target_vocabulary.piece(tokens[token]).rfind("\u2581", 0) == 0) finish_word();  // a word starts
      word.push_back(tokens[token]);
      word_log_probability += own[k];
    }
    finish_word();
    for (const double value : own) sum += value;  // the end of sentence too
    counted += own.size();
  }
  if (counted > 0) result.confidence = std::exp(sum / static_cast<double>(counted));
  return result;
}

std::string format_jsonl(const std::vector<std::string>& lines, const std::vector<Translation>& translations,
                         const std::vector<TokenLogProbabilities>& token_log_probabilities,
                         const Vocabulary& target_vocabulary, const std::string& stem, int n_best,
                         const OutputOptions& options, size_t first_line) {
  std::string text;
  for (size_t i = 0; i < translations.size(); ++i) {
    const Translation& translation = translations[i];
    const bool empty = translation.hypotheses.empty();
    nlohmann::ordered_json entry = {{"line", first_line + i + 1},
                                    {"text", empty ? "" : translation.texts[0]},
                                    {"score", empty ? 0.0 : translation.hypotheses[0].score}};
    const LineConfidence confidence = line_confidence(translation, token_log_probabilities[i], target_vocabulary);
    entry["confidence"] =
        confidence.defined() ? nlohmann::ordered_json(confidence.confidence) : nlohmann::ordered_json(nullptr);
    nlohmann::ordered_json words = nlohmann::ordered_json::array();
    for (const auto& [word, probability] : confidence.words)
      words.push_back({{"word", word}, {"probability", probability}});
    entry["words"] = std::move(words);
    entry["sentences"] = translation.sentences;
    entry["capped"] = translation.capped;
    entry["cut"] = translation.cut;
    if (!translation.markup_problem.empty()) entry["markup_problem"] = translation.markup_problem;
    if (!empty && (options.alignment || !options.attention_dir.empty())) {
      const AttentionMatrix matrix = attention_matrix(translation, translation.hypotheses[0], target_vocabulary);
      if (options.alignment) entry["alignment"] = hard_alignment(matrix);
      write_attention_files(matrix, lines[i], translation, stem, first_line + i, options);
    } else if (options.alignment) {
      entry["alignment"] = "";
    }
    if (n_best > 1) {
      nlohmann::ordered_json hypotheses = nlohmann::ordered_json::array();
      for (size_t k = 0; k < translation.hypotheses.size(); ++k) {
        hypotheses.push_back({{"text", translation.texts[k]}, {"score", translation.hypotheses[k].score}});
      }
      entry["n_best"] = std::move(hypotheses);
    }
    text += entry.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) + "\n";
  }
  return text;
}

}  // namespace nmt
