#include "inference/synthesize.h"

#include <sys/stat.h>

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cmath>
#include <ctime>
#include <filesystem>
#include <stdexcept>
#include <utility>

#include "inference/commands.h"
#include "inference/model.h"
#include "search/translator.h"
#include "text/corpus.h"
#include "text/words.h"
#include "util/io.h"
#include "util/runtime.h"

namespace nmt {

namespace fs = std::filesystem;

namespace {

// "2026-11-29T07:09:05Z"
std::string utc_time(std::time_t time) {
  std::tm parts{};
  gmtime_r(&time, &parts);
  char text[32];
  std::strftime(text, sizeof text, "%Y-%m-%dT%H:%M:%SZ", &parts);
  return text;
}

nlohmann::json file_record(const std::string& path) {
  struct stat status {};
  if (::stat(path.c_str(), &status) != 0) throw std::runtime_error(path + ": cannot read its size and time");
  return {{"path", fs::absolute(path).lexically_normal().string()},
          {"size", static_cast<int64_t>(status.st_size)},
          {"modified", utc_time(status.st_mtime)}};
}

nlohmann::json origin_record(const SynthesizeJob& job, const SynthesizeSummary& summary) {
  const SearchOptions& search = job.options.search;
  nlohmann::json record = {{"made_by", "nmt synthesize"},
                           {"made_at", utc_time(std::time(nullptr))},
                           {"direction", job.direction},
                           {"input", file_record(job.input)}};
  if (job.translations.empty()) {
    nlohmann::json models = nlohmann::json::array();
    for (const auto& [model, checkpoint] : model_checkpoints(job.options)) {
      models.push_back(file_record(fs::is_directory(model) ? resolve_checkpoint(model, checkpoint) : model));
    }
    record["models"] = models;
    record["compute_type"] = job.options.compute_type;
    record["shortlist"] = job.options.shortlist;
    record["search"] = search.samples()
                           ? nlohmann::json{{"sampling", true},
                                            {"topk", search.sampling_topk},
                                            {"topp", search.sampling_topp},
                                            {"temperature", search.sampling_temperature},
                                            {"seed", search.seed}}
                           : nlohmann::json{{"beam_size", search.beam_size}, {"length_penalty", search.length_penalty}};
  } else {
    record["translations"] = file_record(job.translations);
    // What made the translations, when a synthesize run did: the chain stays on record.
    const std::string made = job.translations + ".origin.json";
    if (fs::exists(made)) {
      nlohmann::json origin = nlohmann::json::parse(read_file(made), nullptr, false);
      if (!origin.is_discarded()) record["translations_origin"] = std::move(origin);
    }
  }
  record["noise"] = {{"delete", job.noise.delete_probability},
                     {"blank", job.noise.blank_probability},
                     {"blank_token", job.noise.blank},
                     {"max_shift", job.noise.max_shift},
                     {"seed", search.seed}};
  record["lines"] = summary.lines;
  record["pairs"] = summary.pairs;
  record["skipped"] = summary.skipped;
  record["source_output"] = fs::absolute(job.source_output).lexically_normal().string();
  record["target_output"] = fs::absolute(job.target_output).lexically_normal().string();
  return record;
}

// The first translation of each line ("" where the search gave none).
std::vector<std::string> translate(const SynthesizeJob& job, const std::vector<std::string>& lines) {
  set_threads(job.options.threads);
  const torch::Device device = parse_device(job.options.device);
  const TranslationModels models = load_models(job.options, device);
  Translator translator(models.ensemble(), models.source_vocabulary(), models.target_vocabulary(), job.options.search,
                        job.options.batching, job.options.text, device, models.shortlist);
  std::vector<std::string> firsts;
  for (Translation& translation : translator.translate(lines, progress_reporter(lines.size(), job.options.quiet))) {
    firsts.push_back(translation.texts.empty() ? "" : std::move(translation.texts.front()));
  }
  return firsts;
}

}  // namespace

void validate(const NoiseOptions& noise) {
  const auto probability = [](double value, const std::string& option) {
    if (!(value >= 0 && value < 1)) throw std::invalid_argument(option + ": must be in [0, 1)");
  };
  probability(noise.delete_probability, "--noise-delete");
  probability(noise.blank_probability, "--noise-blank");
  if (noise.max_shift < 0) throw std::invalid_argument("--noise-shift: must be >= 0 (0 = word order kept)");
  if (noise.blank.empty() || noise.blank.find_first_of(" \t\n\r") != std::string::npos) {
    throw std::invalid_argument("--noise-filler: must be one word (no spaces)");
  }
}

std::string add_noise(const std::string& line, const NoiseOptions& noise, std::mt19937_64& generator) {
  const std::vector<std::string> words = words_of(line);
  if (words.empty() || !noise.any()) return line;
  std::uniform_real_distribution<double> uniform(0.0, 1.0);
  // Lample et al.'s shuffle: each word's position plus a uniform draw from [0, max_shift + 1), then
  // sorted (stably): a word moves at most max_shift places.
  std::vector<std::pair<double, size_t>> keys;
  for (size_t i = 0; i < words.size(); ++i) {
    keys.emplace_back(static_cast<double>(i) + uniform(generator) * (noise.max_shift + 1), i);
  }
  if (noise.max_shift > 0) std::stable_sort(keys.begin(), keys.end());
  std::string noisy;
  for (const auto& [key, index] : keys) {
    const double draw = uniform(generator);
    if (draw < noise.delete_probability) continue;
    const std::string& word = draw < noise.delete_probability + noise.blank_probability ? noise.blank : words[index];
    noisy += (noisy.empty() ? "" : " ") + word;
  }
  return noisy.empty() ? words[keys.front().second] : noisy;
}

void check_synthesize_job(const SynthesizeJob& job) {
  validate(job.options.search);
  validate(job.options.batching);
  validate(job.noise);
  if (job.direction != "back" && job.direction != "forward") {
    throw std::invalid_argument("--direction: '" + job.direction + "' is not one of back|forward");
  }
  if (job.options.search.n_best != 1) throw std::invalid_argument("--n-best: synthesize writes one translation a line");
  if (!fs::exists(job.input)) throw FileNotFound(job.input + ": --input file not found");
  if (job.translations.empty() && job.options.models.empty()) {
    throw std::invalid_argument("--model: give the model that translates --input (or --translations, made before)");
  }
  if (!job.translations.empty()) {
    if (!job.options.models.empty()) {
      throw std::invalid_argument("--translations and --model: give one (translations made before, or a model)");
    }
    if (!fs::exists(job.translations)) throw FileNotFound(job.translations + ": --translations file not found");
  }
  for (const auto& [path, option] :
       {std::pair{job.source_output, "--source-output"}, std::pair{job.target_output, "--target-output"}}) {
    if (path.empty()) throw std::invalid_argument(std::string(option) + ": give the file to write");
    require_parent_directory(path, option);
    std::error_code error;
    if (fs::equivalent(job.input, path, error)) {
      throw std::invalid_argument(std::string(option) + ": " + path + " is the input; write the corpus elsewhere");
    }
  }
  if (fs::absolute(job.source_output).lexically_normal() == fs::absolute(job.target_output).lexically_normal()) {
    throw std::invalid_argument("--source-output and --target-output are the same file; give two");
  }
}

SynthesizeSummary synthesize(const SynthesizeJob& job) {
  check_synthesize_job(job);
  const std::vector<std::string> lines = read_lines(job.input);
  const std::vector<std::string> translations =
      job.translations.empty() ? translate(job, lines) : read_lines(job.translations);
  if (translations.size() != lines.size()) {
    throw std::invalid_argument("--translations: " + job.translations + " has " + std::to_string(translations.size()) +
                                " lines and --input " + std::to_string(lines.size()) +
                                "; give the input's translations, one a line");
  }

  SynthesizeSummary summary;
  summary.lines = static_cast<int64_t>(lines.size());
  std::string source_text, target_text;
  std::mt19937_64 generator(static_cast<uint64_t>(job.options.search.seed));
  for (size_t i = 0; i < lines.size(); ++i) {
    const std::string& translation = translations[i];
    const bool back = job.direction == "back";
    const std::string& source = back ? translation : lines[i];
    const std::string& target = back ? lines[i] : translation;
    if (words_of(source).empty() || words_of(target).empty()) {
      ++summary.skipped;
      continue;
    }
    source_text += add_noise(source, job.noise, generator) + "\n";
    target_text += target + "\n";
    ++summary.pairs;
  }
  write_file_atomic(job.target_output, target_text);
  write_file_atomic(job.source_output, source_text);
  write_file_atomic(job.source_output + ".origin.json", origin_record(job, summary).dump(2) + "\n");
  return summary;
}

}  // namespace nmt
