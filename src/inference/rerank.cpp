#include "inference/rerank.h"

#include <torch/torch.h>

#include <filesystem>
#include <iomanip>
#include <ostream>
#include <sstream>
#include <stdexcept>

#include "eval/bleu.h"
#include "inference/model.h"
#include "search/forced_decoding.h"
#include "search/translator.h"
#include "text/corpus.h"
#include "text/special_tokens.h"
#include "util/io.h"
#include "util/runtime.h"

namespace nmt {

namespace fs = std::filesystem;

namespace {

// scores[m][i][k]: model m's score of hypothesis k of sentence i, as translate --with-scores gives it.
using Features = std::vector<std::vector<std::vector<double>>>;

// Each --model on its own (an ensemble of one).
std::vector<TranslationModels> load_each(const RerankJob& job) {
  std::vector<TranslationModels> models;
  for (const std::string& model_dir : job.options.models) {
    TranslateOptions one = job.options;
    one.models = {model_dir};
    one.checkpoints.clear();
    models.push_back(load_models(one, parse_device(job.options.device)));
  }
  return models;
}

Features score_lists(const RerankJob& job, const std::vector<TranslationModels>& models,
                     const std::vector<std::string>& sources, const std::vector<std::vector<std::string>>& lists) {
  Features features;
  const torch::Device device = parse_device(job.options.device);
  for (const TranslationModels& model : models) {
    std::vector<std::vector<int64_t>> source_ids, target_ids;
    // --target-language is for the multilingual models among them; the others take no token.
    const int64_t tag =
        model.members.front().options.target_languages.empty()
            ? -1
            : target_language_tag(job.options.text.target_language, model.ensemble(), model.source_vocabulary());
    for (size_t i = 0; i < lists.size(); ++i) {
      std::vector<int64_t> source = model.source_vocabulary().encode(sources[i]);
      source.push_back(kEosId);
      if (tag >= 0) source.insert(source.begin(), tag);
      for (const std::string& hypothesis : lists[i]) {
        source_ids.push_back(source);
        target_ids.push_back(model.target_vocabulary().encode(hypothesis));
      }
    }
    const std::vector<ForcedScore> scored =
        force_decode(model.ensemble(), source_ids, target_ids, job.options.search.length_penalty,
                     job.options.batching.batch_size, device);
    auto& per_sentence = features.emplace_back(lists.size());
    size_t next = 0;
    for (size_t i = 0; i < lists.size(); ++i) {
      for (size_t k = 0; k < lists[i].size(); ++k) per_sentence[i].push_back(scored[next++].score);
    }
  }
  return features;
}

// The hypothesis of each sentence with the largest weighted sum (the first of equals).
std::vector<std::string> choose(const Features& features, const std::vector<double>& weights,
                                const std::vector<std::vector<std::string>>& lists) {
  std::vector<std::string> chosen;
  for (size_t i = 0; i < lists.size(); ++i) {
    size_t best = 0;
    double best_sum = -std::numeric_limits<double>::infinity();
    for (size_t k = 0; k < lists[i].size(); ++k) {
      double sum = 0;
      for (size_t m = 0; m < weights.size(); ++m) sum += weights[m] * features[m][i][k];
      if (sum > best_sum) best_sum = sum, best = k;
    }
    chosen.push_back(lists[i].empty() ? "" : lists[i][best]);
  }
  return chosen;
}

// Coordinate ascent on a grid: each weight in turn takes the value of 0, 0.1, ..., 2 that gives
// the best corpus BLEU, three rounds; the first model's weight stays 1 (only ratios matter).
std::vector<double> tune(const Features& features, const std::vector<std::vector<std::string>>& lists,
                         const std::vector<std::string>& references, double& best_bleu) {
  std::vector<double> weights(features.size(), 1.0);
  std::vector<std::string> kept_references;  // sentences with a reference (an empty line has none)
  for (const std::string& reference : references) {
    if (!reference.empty()) kept_references.push_back(reference);
  }
  if (kept_references.empty()) throw std::invalid_argument("rerank: the tuning references are all empty");
  const auto bleu = [&](const std::vector<double>& candidate) {
    const std::vector<std::string> chosen = choose(features, candidate, lists);
    std::vector<std::string> kept;
    for (size_t i = 0; i < chosen.size(); ++i) {
      if (!references[i].empty()) kept.push_back(chosen[i]);
    }
    return eval::corpus_bleu(kept, {kept_references}).score;
  };
  best_bleu = bleu(weights);
  for (int round = 0; round < 3; ++round) {
    for (size_t m = 1; m < weights.size(); ++m) {
      for (int step = 0; step <= 20; ++step) {
        std::vector<double> candidate = weights;
        candidate[m] = 0.1 * step;
        if (const double value = bleu(candidate); value > best_bleu) best_bleu = value, weights = candidate;
      }
    }
  }
  return weights;
}

}  // namespace

std::vector<std::vector<std::string>> read_nbest(const std::string& path, size_t sentences) {
  std::vector<std::vector<std::string>> lists(sentences);
  const std::vector<std::string> lines = read_lines(path);
  size_t previous = 0;
  for (size_t n = 0; n < lines.size(); ++n) {
    const std::string where = path + ":" + std::to_string(n + 1) + ": ";
    const std::string& line = lines[n];
    const size_t first = line.find(" ||| "), second = line.rfind(" ||| ");
    size_t index = 0, digits = 0;
    try {
      index = std::stoul(line.substr(0, first), &digits);
    } catch (const std::exception&) {
      digits = std::string::npos;
    }
    if (first == std::string::npos || second == first || digits != first) {
      throw std::invalid_argument(where + "not an n-best line 'i ||| text ||| score' (nmt translate --n-best)");
    }
    if (index >= sentences || index < previous) {
      throw std::invalid_argument(where + "sentence " + std::to_string(index) + " is out of order or past the " +
                                  std::to_string(sentences) + " source lines");
    }
    previous = index;
    lists[index].push_back(line.substr(first + 5, second - first - 5));
  }
  return lists;
}

void rerank_files(const RerankJob& job, std::ostream& out, std::ostream& log) {
  validate(job.options.search);
  validate(job.options.batching);
  const bool tuning = !job.tune_source.empty() || !job.tune_nbest.empty() || !job.tune_reference.empty();
  if (tuning && (job.tune_source.empty() || job.tune_nbest.empty() || job.tune_reference.empty())) {
    throw std::invalid_argument("rerank: give --tune-src, --tune-nbest and --tune-ref together");
  }
  if (!job.weights.empty() && (tuning || job.weights.size() != job.options.models.size())) {
    throw std::invalid_argument("rerank: --weights needs one weight per --model (" +
                                std::to_string(job.options.models.size()) + "), and no tuning set");
  }
  for (const std::string& file :
       {job.source_file, job.nbest_file, job.tune_source, job.tune_nbest, job.tune_reference}) {
    if (!file.empty() && !fs::exists(file)) throw FileNotFound(file + ": file not found (check the path)");
  }
  if (job.output != "-") require_parent_directory(job.output, "--output");
  set_threads(job.options.threads);
  const std::vector<std::string> sources = read_lines(job.source_file);
  const std::vector<std::vector<std::string>> lists = read_nbest(job.nbest_file, sources.size());
  const std::vector<TranslationModels> models = load_each(job);
  std::vector<double> weights = job.weights;
  if (tuning) {
    const std::vector<std::string> tune_sources = read_lines(job.tune_source);
    const std::vector<std::string> references = read_lines(job.tune_reference);
    if (references.size() != tune_sources.size()) {
      throw std::invalid_argument(job.tune_reference + " has " + std::to_string(references.size()) + " lines but " +
                                  job.tune_source + " has " + std::to_string(tune_sources.size()));
    }
    const auto tune_lists = read_nbest(job.tune_nbest, tune_sources.size());
    double bleu = 0;
    weights = tune(score_lists(job, models, tune_sources, tune_lists), tune_lists, references, bleu);
    log << "rerank: weights";
    for (const double weight : weights) log << " " << weight;
    log << " (BLEU " << std::fixed << std::setprecision(2) << bleu << " on " << job.tune_reference << ")\n";
  }
  if (weights.empty()) weights.assign(job.options.models.size(), 1.0);
  std::ostringstream text;
  for (const std::string& line : choose(score_lists(job, models, sources, lists), weights, lists)) text << line << "\n";
  if (job.output == "-") {
    out << text.str();
    out.flush();
  } else {
    write_file_atomic(job.output, text.str());
  }
}

}  // namespace nmt
