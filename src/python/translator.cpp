#include "python/translator.h"

#include <pybind11/numpy.h>
#include <pybind11/stl.h>
#include <torch/torch.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <iterator>
#include <stdexcept>

#include "cli/command.h"
#include "inference/commands.h"
#include "inference/outputs.h"
#include "python/support.h"
#include "search/translator.h"
#include "util/runtime.h"

namespace nmt::python {

namespace {

// A path, or a list of paths (str or os.PathLike each).
std::vector<std::string> paths(const py::object& value, const std::string& name) {
  const py::object fspath = py::module_::import("os").attr("fspath");
  std::vector<std::string> result;
  if (py::isinstance<py::list>(value) || py::isinstance<py::tuple>(value)) {
    for (const py::handle item : value) result.push_back(fspath(item).cast<std::string>());
    if (result.empty()) throw py::value_error(name + ": give at least one");
  } else {
    result.push_back(fspath(value).cast<std::string>());
  }
  return result;
}

std::string optional_path(const py::object& value) {
  return value.is_none() ? "" : py::module_::import("os").attr("fspath")(value).cast<std::string>();
}

// The command's options that a call does not take: what the Translator fixes, and the progress line.
std::string translator_key(const std::string& key) {
  if (key == "threads" || key == "device" || key == "checkpoint" || key == "shortlist" || key == "compute_type") {
    return "is fixed when the Translator is made: give it to nmt.Translator(...)";
  }
  if (key == "quiet") return "is the command's: Python shows no progress line";
  return "";
}

// One line per sentence for a LineGuide. Prefixes: a str or None each. Constraints: a phrase, a
// list of phrases or None each, which the line holds separated by tabs.
std::vector<std::string> guide_lines(const py::object& value, size_t sentences, const std::string& name, bool phrases) {
  if (value.is_none()) return {};
  if (!py::isinstance<py::list>(value) && !py::isinstance<py::tuple>(value)) {
    throw py::type_error(name + ": give a list with one entry per sentence");
  }
  std::vector<std::string> lines;
  for (const py::handle item : value) {
    const bool many = phrases && (py::isinstance<py::list>(item) || py::isinstance<py::tuple>(item));
    if (!item.is_none() && !py::isinstance<py::str>(item) && !many) {
      throw py::type_error(name + ": each entry is " + (phrases ? "a str, a list of str or None" : "a str or None"));
    }
    py::list parts;
    if (many) {
      for (const py::handle phrase : item) parts.append(phrase);
    } else if (!item.is_none()) {
      parts.append(item);
    }
    std::string line;
    for (const py::handle part : parts) {
      if (!py::isinstance<py::str>(part)) throw py::type_error(name + ": each phrase is a str");
      const std::string text = part.cast<std::string>();
      if (phrases && text.find('\t') != std::string::npos) {
        throw py::value_error(name + " of sentence " + std::to_string(lines.size() + 1) +
                              ": a phrase holds a tab, which separates phrases");
      }
      line += (line.empty() ? "" : "\t") + text;
    }
    lines.push_back(std::move(line));
  }
  if (lines.size() != sentences) {
    throw py::value_error(name + ": " + std::to_string(lines.size()) + " entries for " + std::to_string(sentences) +
                          " sentences; give one per sentence");
  }
  return lines;
}

py::array_t<float> weights_array(const AttentionMatrix& matrix) {
  const auto rows = static_cast<py::ssize_t>(matrix.weights.size());
  const auto columns = static_cast<py::ssize_t>(matrix.source_tokens.size());
  py::array_t<float> array({rows, columns});
  float* data = array.mutable_data();
  for (const auto& row : matrix.weights) data = std::copy(row.begin(), row.end(), data);
  return array;
}

PyTranslation to_python(const Translation& translation, const Vocabulary& target_vocabulary, bool attention,
                        bool alignment) {
  PyTranslation result;
  result.source_tokens = translation.source_pieces;
  result.source_tokens.emplace_back("</s>");
  result.sentences = translation.sentences;
  result.capped = translation.capped;
  result.cut = translation.cut;
  result.markup_problem = translation.markup_problem;
  for (size_t k = 0; k < translation.hypotheses.size(); ++k) {
    const Hypothesis& hypothesis = translation.hypotheses[k];
    PyHypothesis entry;
    entry.text = translation.texts[k];
    entry.score = hypothesis.score;
    entry.log_probability = hypothesis.log_probability;
    for (const int64_t id : hypothesis.tokens) entry.tokens.push_back(target_vocabulary.piece(id));
    if (attention || alignment) {
      const AttentionMatrix matrix = attention_matrix(translation, hypothesis, target_vocabulary);
      if (attention) entry.attention = weights_array(matrix);
      if (alignment) entry.alignment = py::cast(alignment_pairs(matrix));
    }
    result.n_best.push_back(std::move(entry));
  }
  return result;
}

// An ostream that drops what it is given: translate_inputs writes files, and standard output only
// for "-", which the Python API does not take.
class NullBuffer : public std::streambuf {
 protected:
  int overflow(int c) override { return c; }
};

// `base` with a call's keyword search options, parsed by nmt translate's own declarations.
TranslateOptions with_search_keywords(const TranslateOptions& base, const py::kwargs& keywords,
                                      const std::string& function) {
  TranslateOptions options = base;
  CLI::App app;
  add_translate_options(app, options);
  parse_keywords(app, keywords, function, translator_key);
  return options;
}

}  // namespace

PyTranslator::PyTranslator(const py::object& model, const py::object& checkpoint, std::string device, int threads,
                           const std::string& compute_type, const py::object& shortlist) {
  options_.models = paths(model, "model");
  options_.shortlist = optional_path(shortlist);
  options_.checkpoints = paths(checkpoint, "checkpoint");
  options_.device = std::move(device);
  options_.threads = threads;
  options_.quiet = true;
  if (const std::string problem = device_name_problem(options_.device); !problem.empty()) {
    throw py::value_error("device: " + problem);
  }
  if (threads < 0) throw py::value_error("threads must be >= 0 (0 = number of cores)");
  if (compute_type != "default" && compute_type != "float32" && compute_type != "int8") {
    throw py::value_error("compute_type " + compute_type + ": default, float32 or int8");
  }
  options_.compute_type = compute_type;
  py::gil_scoped_release release;
  set_threads(options_.threads);
  models_ = load_models(options_, parse_device(options_.device));
}

std::vector<PyTranslation> PyTranslator::translate_batch(const std::vector<std::string>& sentences, int n_best,
                                                         bool return_attention, bool return_alignment,
                                                         bool return_confidence, const py::object& prefix,
                                                         const py::object& constraints, const py::kwargs& keywords) {
  TranslateOptions options = with_search_keywords(options_, keywords, "translate_batch");
  options.search.n_best = n_best;
  options.search.return_attention = return_attention || return_alignment;
  validate(options.search);
  validate(options.batching);
  if (options.search.return_attention && !models_.has_attention()) {
    throw py::value_error("return_attention/return_alignment: this model was trained with attention none");
  }
  TargetGuides guides;
  guides.prefixes.lines = guide_lines(prefix, sentences.size(), "prefix", false);
  guides.constraints.lines = guide_lines(constraints, sentences.size(), "constraints", true);

  Interruption interruption;
  std::vector<Translation> translations;
  run_interruptible(interruption, [&] {
    Translator translator(models_.ensemble(), models_.source_vocabulary(), models_.target_vocabulary(), options.search,
                          options.batching, options.text, parse_device(options.device), models_.shortlist);
    translations = translator.translate(
        sentences,
        [&interruption](size_t) {
          if (interruption.requested()) throw Stopped();
        },
        guides);
  });
  std::vector<TokenLogProbabilities> log_probabilities;
  if (return_confidence) {
    py::gil_scoped_release release;
    log_probabilities = best_token_log_probabilities(models_, options, translations);
  }
  std::vector<PyTranslation> results;
  results.reserve(translations.size());
  for (size_t i = 0; i < translations.size(); ++i) {
    results.push_back(to_python(translations[i], models_.target_vocabulary(), return_attention, return_alignment));
    if (!return_confidence) continue;
    const LineConfidence confidence =
        line_confidence(translations[i], log_probabilities[i], models_.target_vocabulary());
    results.back().confidence = confidence.defined() ? py::cast(confidence.confidence) : py::none();
    results.back().words = py::cast(confidence.words);
  }
  return results;
}

std::vector<PyScore> PyTranslator::score_batch(const std::vector<std::string>& sources,
                                               const std::vector<std::string>& targets, const py::kwargs& keywords) {
  TranslateOptions options = options_;
  CLI::App app;
  cli::add_forced_decoding_options(app, options);
  parse_keywords(app, keywords, "score_batch", translator_key);
  validate(options.search);
  validate(options.batching);
  if (sources.size() != targets.size()) {
    throw py::value_error("score_batch: " + std::to_string(sources.size()) + " sources but " +
                          std::to_string(targets.size()) + " targets; give one target per source");
  }
  // In nmt score's blocks, which give the same numbers, with a Ctrl-C check between them.
  Interruption interruption;
  std::vector<ForcedScore> scores;
  run_interruptible(interruption, [&] {
    for (size_t first = 0; first < sources.size(); first += kScoreBlock) {
      if (interruption.requested()) throw Stopped();
      const auto begin = static_cast<std::ptrdiff_t>(first);
      const auto end = static_cast<std::ptrdiff_t>(std::min(sources.size(), first + kScoreBlock));
      std::vector<ForcedScore> block = score_pairs(models_, options, {sources.begin() + begin, sources.begin() + end},
                                                   {targets.begin() + begin, targets.begin() + end});
      std::move(block.begin(), block.end(), std::back_inserter(scores));
    }
  });
  std::vector<PyScore> results;
  results.reserve(scores.size());
  for (ForcedScore& score : scores) results.push_back({score.score, score.log_probability, std::move(score.tokens)});
  return results;
}

void PyTranslator::translate_file(const py::object& input_path, const py::object& output_path, int n_best,
                                  bool with_scores, bool alignment, const py::object& attention_dir,
                                  const py::object& prefix_file, const py::object& constraints_file,
                                  const py::kwargs& keywords) {
  const std::string input = optional_path(input_path);
  const std::string output = optional_path(output_path);
  if (input.empty() || output.empty()) throw py::type_error("translate_file: give an input and an output path");
  if (input == "-" || output == "-") {
    throw py::value_error("translate_file reads and writes files; for standard input and output use nmt translate");
  }
  TranslateJob job;
  job.options = with_search_keywords(options_, keywords, "translate_file");
  job.options.search.n_best = n_best;
  job.inputs = {input};
  job.output = output;
  job.outputs.with_scores = with_scores;
  job.outputs.alignment = alignment;
  job.outputs.attention_dir = optional_path(attention_dir);
  job.prefix_file = optional_path(prefix_file);
  job.constraints_file = optional_path(constraints_file);
  check_translate_job(job);
  Interruption interruption;
  job.progress = [&interruption](size_t) {
    if (interruption.requested()) throw Stopped();
  };
  run_interruptible(interruption, [&] {
    NullBuffer buffer;
    std::ostream nowhere(&buffer);
    translate_inputs(job, models_, nowhere);
  });
}

std::vector<SearchOption> search_options() {
  TranslateOptions options;
  CLI::App app;
  add_translate_options(app, options);
  std::vector<SearchOption> result;
  for (const CLI::Option* option : app.get_options()) {
    std::string name = option->get_name();
    // Hidden options (an older name, such as --max-length) are not offered as keywords.
    if (name.rfind("--", 0) != 0 || name == "--help" || option->get_group().empty()) continue;
    name = name.substr(2);
    std::replace(name.begin(), name.end(), '-', '_');
    if (!translator_key(name).empty()) continue;
    result.push_back(
        {name, option->get_expected_min() == 0 ? "False" : option->get_default_str(), option->get_description()});
  }
  return result;
}

}  // namespace nmt::python
