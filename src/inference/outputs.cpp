#include "inference/outputs.h"

#include <torch/torch.h>

#include <cstdio>
#include <filesystem>
#include <sstream>

#include "util/io.h"

namespace nmt {

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
    if (!options.attention_dir.empty()) {
      char number[32];
      std::snprintf(number, sizeof(number), "%05zu", first_line + i + 1);
      const std::string base = (std::filesystem::path(options.attention_dir) / (stem + "." + number)).string();
      write_file_atomic(base + ".svg", attention_svg(matrix, lines[i] + "  →  " + translation.texts[0]),
                        Durability::kNoSync);
      write_file_atomic(base + ".json", attention_json(matrix), Durability::kNoSync);
    }
  }
  return text.str();
}

}  // namespace nmt
