#include "inference/commands.h"

#include <spdlog/spdlog.h>
#include <torch/torch.h>
#include <unistd.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <functional>
#include <iostream>
#include <set>
#include <sstream>

#include "eval/chrf.h"
#include "inference/model.h"
#include "search/forced_decoding.h"
#include "search/translator.h"
#include "text/corpus.h"
#include "text/line_stream.h"
#include "text/special_tokens.h"
#include "util/format.h"
#include "util/io.h"
#include "util/runtime.h"

namespace nmt {

namespace fs = std::filesystem;

std::function<void(size_t)> progress_reporter(size_t total, bool quiet) {
  if (quiet || !::isatty(STDERR_FILENO) || total < 50) return {};
  const auto start = std::chrono::steady_clock::now();
  return [start, total](size_t done) {
    const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    std::fprintf(stderr, "\r%zu/%zu sentences, %.1f sentences/s%s", done, total,
                 static_cast<double>(done) / std::max(seconds, 1e-9), done == total ? "\n" : "");
  };
}

namespace {

// Output files are named after their input: "stdin" or the input's file name.
std::string output_stem(const std::string& input) {
  return input == "-" ? "stdin" : fs::path(input).filename().string();
}

// Parallel files must match line by line.
void require_same_line_count(const std::string& name, size_t lines, const std::string& other_name, size_t other_lines) {
  if (lines != other_lines) {
    throw std::invalid_argument(name + " has " + std::to_string(lines) + " lines but " + other_name + " has " +
                                std::to_string(other_lines) + "; they must match line by line");
  }
}

TranslationModels load(const TranslateOptions& options) {
  set_threads(options.threads);
  return load_models(options, parse_device(options.device));
}

// A warning for each of the first lines of `input` (lines[0] being its line first_line + 1) whose
// `problem` is not "", then a count of the rest.
void warn_of_lines(const std::vector<Translation>& translations, const std::string& input, size_t first_line,
                   const std::function<std::string(const Translation&)>& problem, const std::string& rest) {
  constexpr size_t kNamed = 5;
  size_t lines = 0;
  for (size_t i = 0; i < translations.size(); ++i) {
    const std::string what = problem(translations[i]);
    if (what.empty() || ++lines > kNamed) continue;
    spdlog::warn("{}:{}: {}", input, first_line + i + 1, what);
  }
  if (lines > kNamed) spdlog::warn("{}: {} more lines {}", input, lines - kNamed, rest);
}

// Warns of the lines with a sentence whose search stopped at an output cap, and of those whose
// markup was read as text (text/markup.h). Not with --quiet.
void warn_of_problems(const std::vector<Translation>& translations, const std::string& input, size_t first_line,
                      const TranslateOptions& options) {
  if (options.quiet) return;
  const SearchOptions& search = options.search;
  const auto capped = [&](const Translation& translation) -> std::string {
    if (translation.capped.empty()) return "";
    const std::string which = translation.sentences.size() > 1
                                  ? std::to_string(translation.capped.size()) + " of its " +
                                        std::to_string(translation.sentences.size()) + " sentences were"
                                  : "its translation was";
    return which + " cut at the output cap (--max-length-ratio " + format_significant(search.max_length_ratio) +
           " x source subwords + 10, at most --max-output-length " + std::to_string(search.max_length) +
           ") before it ended: raise them to let it finish";
  };
  warn_of_lines(translations, input, first_line, capped, "were cut at the output cap");
  const auto cut = [&](const Translation& translation) -> std::string {
    if (translation.cut.empty()) return "";
    return std::to_string(translation.cut.size()) + " of its " + std::to_string(translation.sentences.size()) +
           " sentences are parts of a longer one, cut after commas, semicolons or colons (--cut-sentences " +
           options.text.cut_sentences + "; no: translate it whole)";
  };
  warn_of_lines(translations, input, first_line, cut, "had a long sentence translated in parts");
  const auto malformed = [](const Translation& translation) -> std::string {
    if (translation.markup_problem.empty()) return "";
    return "its markup was translated as text: " + translation.markup_problem;
  };
  warn_of_lines(translations, input, first_line, malformed, "had their markup translated as text");
}

// The output of `translations` of `lines` as options.outputs asks: text (format_translations) or
// JSON lines (format_jsonl).
std::string format_output(const std::vector<std::string>& lines, const std::vector<Translation>& translations,
                          const TranslationModels& models, const TranslateOptions& options,
                          const OutputOptions& outputs, const std::string& stem, size_t first_line) {
  if (!outputs.jsonl) {
    return format_translations(lines, translations, models.target_vocabulary(), stem, options.search.n_best, outputs,
                               first_line);
  }
  return format_jsonl(lines, translations, best_token_log_probabilities(models, options, translations),
                      models.target_vocabulary(), stem, options.search.n_best, outputs, first_line);
}

// `progress`: as TranslateJob's; empty, a progress line on a terminal.
std::vector<Translation> translate_lines(const TranslateOptions& options, const TranslationModels& models,
                                         const std::vector<std::string>& lines, const TargetGuides& guides = {},
                                         const std::function<void(size_t)>& progress = {}) {
  Translator translator(models.ensemble(), models.source_vocabulary(), models.target_vocabulary(), options.search,
                        options.batching, options.text, parse_device(options.device), models.shortlist);
  return translator.translate(lines, progress ? progress : progress_reporter(lines.size(), options.quiet), guides);
}

// Standard input that is a pipe or a terminal: each group of lines that has arrived is translated
// and written (and flushed) before the next is waited for, so that a pipeline gets each answer as
// soon as its line is in. Sorting by length then happens within each group.
void translate_stream(const TranslateOptions& options, const TranslationModels& models, const OutputOptions& outputs,
                      const TargetGuides& guides, std::ostream& out) {
  Translator translator(models.ensemble(), models.source_vocabulary(), models.target_vocabulary(), options.search,
                        options.batching, options.text, parse_device(options.device), models.shortlist);
  // At most enough lines for a few batches on every thread: a long piped file keeps its speed.
  const size_t most = static_cast<size_t>(options.batching.batch_in_tokens ? 64 : options.batching.batch_size) *
                      static_cast<size_t>(std::max(1, torch::get_num_threads())) * 4;
  LineStream stream(std::cin, "standard input");
  size_t done = 0;
  for (std::vector<std::string> lines = stream.take(most); !lines.empty(); lines = stream.take(most)) {
    TargetGuides group{{{}, guides.prefixes.name}, {{}, guides.constraints.name}};
    for (auto [all, part] : {std::pair{&guides.prefixes, &group.prefixes}, {&guides.constraints, &group.constraints}}) {
      if (all->lines.empty()) continue;
      if (done + lines.size() > all->lines.size()) {
        throw std::invalid_argument(all->name + " has " + std::to_string(all->lines.size()) +
                                    " lines, fewer than the input: give one per input line");
      }
      part->lines.assign(all->lines.begin() + static_cast<std::ptrdiff_t>(done),
                         all->lines.begin() + static_cast<std::ptrdiff_t>(done + lines.size()));
      part->first_line = done;
    }
    const std::vector<Translation> translations = translator.translate(lines, {}, group);
    warn_of_problems(translations, "standard input", done, options);
    out << format_output(lines, translations, models, options, outputs, "stdin", done);
    flush_standard_output(out);
    done += lines.size();
  }
  for (const LineGuide* guide : {&guides.prefixes, &guides.constraints}) {
    if (!guide->lines.empty() && done != guide->lines.size()) {
      throw std::invalid_argument(guide->name + " has " + std::to_string(guide->lines.size()) + " lines for " +
                                  std::to_string(done) + " input lines: give one per input line");
    }
  }
}

void write_output(const std::string& destination, const std::string& text, std::ostream& out) {
  if (destination == "-") {
    out << text;
    flush_standard_output(out);
  } else {
    write_file_atomic(destination, text);
  }
}

// The score lines of one block of pairs.
std::string score_block(const ScoreJob& job, const TranslationModels& models, const std::vector<std::string>& sources,
                        const std::vector<std::string>& targets) {
  std::ostringstream text;
  for (const ForcedScore& score : score_pairs(models, job.options, sources, targets)) {
    const double mean = score.tokens.empty() ? 0.0 : score.log_probability / static_cast<double>(score.tokens.size());
    text << score.score << "\t" << score.log_probability << "\t" << mean;
    if (job.per_token) {
      text << "\t";
      for (size_t t = 0; t < score.tokens.size(); ++t) text << (t == 0 ? "" : " ") << score.tokens[t];
    }
    text << "\n";
  }
  return text.str();
}

}  // namespace

std::vector<ForcedScore> score_pairs(const TranslationModels& models, const TranslateOptions& options,
                                     const std::vector<std::string>& sources, const std::vector<std::string>& targets) {
  if (sources.size() != targets.size()) {
    throw std::invalid_argument("score: " + std::to_string(sources.size()) + " sources but " +
                                std::to_string(targets.size()) + " targets; give one target per source");
  }
  // An empty source with an empty target is what translate makes of an empty line, with score 0:
  // it gets 0 here too. Every other pair goes through the model.
  std::vector<std::vector<int64_t>> source_ids, target_ids;
  std::vector<size_t> scored;
  const int64_t tag = target_language_tag(options.text.target_language, models.ensemble(), models.source_vocabulary());
  for (size_t i = 0; i < sources.size(); ++i) {
    std::vector<int64_t> source = models.source_vocabulary().encode(sources[i]);
    std::vector<int64_t> target = models.target_vocabulary().encode(targets[i]);
    if (source.empty() && target.empty()) continue;
    source.push_back(kEosId);
    if (tag >= 0) source.insert(source.begin(), tag);
    source_ids.push_back(std::move(source));
    target_ids.push_back(std::move(target));
    scored.push_back(i);
  }
  std::vector<ForcedScore> scores(sources.size());
  const std::vector<ForcedScore> forced =
      force_decode(models.ensemble(), source_ids, target_ids, options.search.length_penalty,
                   options.batching.batch_size, parse_device(options.device));
  for (size_t k = 0; k < scored.size(); ++k) scores[scored[k]] = forced[k];
  return scores;
}

std::vector<TokenLogProbabilities> best_token_log_probabilities(const TranslationModels& models,
                                                                const TranslateOptions& options,
                                                                const std::vector<Translation>& translations) {
  const bool backwards = models.members.front().options.reverse_target;  // forced in the model's order
  std::vector<std::vector<int64_t>> sources, targets;
  std::vector<std::pair<size_t, size_t>> owners;  // (line, sentence) of each pair
  std::vector<TokenLogProbabilities> result(translations.size());
  const int64_t tag = target_language_tag(options.text.target_language, models.ensemble(), models.source_vocabulary());
  for (size_t i = 0; i < translations.size(); ++i) {
    const Translation& translation = translations[i];
    if (translation.hypotheses.empty()) continue;
    result[i].resize(translation.sentence_tokens.size());
    const std::vector<int64_t>& tokens = translation.hypotheses[0].tokens;
    size_t offset = 0;
    for (size_t j = 0; j < translation.sentence_tokens.size(); ++j) {
      const auto begin = tokens.begin() + static_cast<std::ptrdiff_t>(offset);
      offset += translation.sentence_tokens[j];
      std::vector<int64_t> source = models.source_vocabulary().encode(translation.sentences[j]);
      if (source.empty()) continue;
      source.push_back(kEosId);
      if (tag >= 0) source.insert(source.begin(), tag);
      std::vector<int64_t> target(begin, tokens.begin() + static_cast<std::ptrdiff_t>(offset));
      if (backwards) std::reverse(target.begin(), target.end());
      sources.push_back(std::move(source));
      targets.push_back(std::move(target));
      owners.emplace_back(i, j);
    }
  }
  const int64_t batch_size = options.batching.batch_in_tokens ? 64 : options.batching.batch_size;
  std::vector<ForcedScore> forced = force_decode(models.ensemble(), sources, targets, options.search.length_penalty,
                                                 batch_size, parse_device(options.device));
  for (size_t k = 0; k < forced.size(); ++k) {
    std::vector<double>& values = forced[k].tokens;
    if (backwards) std::reverse(values.begin(), values.end() - 1);  // text order; the end stays last
    result[owners[k].first][owners[k].second] = std::move(values);
  }
  return result;
}

void score_files(const ScoreJob& job, std::ostream& out) {
  validate(job.options.search);
  validate(job.options.batching);
  if (job.options.batching.batch_in_tokens) throw std::invalid_argument("score: --batch-size counts sentences");
  for (const std::string& file : {job.source_file, job.target_file}) {
    if (!fs::exists(file)) throw FileNotFound(file + ": file not found (check the path)");
  }
  if (job.output != "-") {
    require_parent_directory(job.output, "--output");
    for (const std::string& file : {job.source_file, job.target_file}) {
      std::error_code error;
      if (fs::equivalent(file, job.output, error)) {
        throw std::invalid_argument("--output " + job.output + " is the input file " + file +
                                    "; the scores would replace it: choose another output");
      }
    }
  }
  const TranslationModels models = load(job.options);
  // A block at a time, so that memory stays bounded however long the files are.
  const auto run = [&](const std::function<void(const std::string&)>& write) {
    std::vector<std::string> sources, targets;
    const auto flush = [&] {
      if (sources.empty()) return;
      write(score_block(job, models, sources, targets));
      sources.clear(), targets.clear();
    };
    for_each_line_pair(job.source_file, job.target_file, [&](std::string& source, std::string& target) {
      sources.push_back(std::move(source));
      targets.push_back(std::move(target));
      if (sources.size() == kScoreBlock) flush();
    });
    flush();
  };
  if (job.output == "-") {
    run([&out](const std::string& text) {
      out << text;
      flush_standard_output(out);
    });
    return;
  }
  write_via_temporary(job.output, [&](const std::string& temporary) {
    OutputFile file(temporary, job.output);
    run([&file](const std::string& text) { file.write(text); });
    file.close();
  });
}

void check_translate_job(TranslateJob& job) {
  if (job.inputs.empty()) job.inputs = {"-"};
  TranslateOptions& options = job.options;
  const OutputOptions& outputs = job.outputs;
  validate(options.search);
  validate(options.batching);
  if (outputs.jsonl && outputs.with_scores) {
    throw std::invalid_argument("--output-format jsonl gives every line its score: leave out --with-scores");
  }
  if (!outputs.jsonl && options.search.n_best > 1 &&
      (outputs.alignment || outputs.with_scores || !outputs.attention_dir.empty())) {
    throw std::invalid_argument(
        "--n-best > 1 prints 'i ||| text ||| score' lines; it cannot be combined with "
        "--alignment, --attention-dir or --with-scores");
  }
  if (!job.output_dir.empty() && job.output != "-") throw std::invalid_argument("give either --output or --output-dir");
  for (const std::string& input : job.inputs) {
    if (input != "-" && !fs::exists(input)) throw FileNotFound(input + ": input file not found");
  }
  if (job.inputs.size() > 1 && job.output_dir.empty()) {
    throw std::invalid_argument("several --input files need --output-dir (one output file each)");
  }
  // Output (and attention) files are named after the input's file name: two inputs with the same
  // name would overwrite each other's results.
  std::set<std::string> stems;
  for (const std::string& input : job.inputs) {
    if (!stems.insert(output_stem(input)).second) {
      throw std::invalid_argument("--input: two inputs are named " + output_stem(input) +
                                  "; their outputs would overwrite each other (rename or translate them separately)");
    }
  }
  if (job.output != "-") require_parent_directory(job.output, "--output");
  for (auto [file, option] :
       {std::pair{&job.prefix_file, "--prefix"}, std::pair{&job.constraints_file, "--constraints"}}) {
    if (file->empty()) continue;
    if (job.inputs.size() > 1)
      throw std::invalid_argument(std::string(option) + " goes with one --input (a line per input line)");
    if (!fs::exists(*file)) throw FileNotFound(*file + ": " + option + " file not found");
  }
  // A translation never replaces the text it is made from.
  for (const std::string& input : job.inputs) {
    const std::string destination =
        !job.output_dir.empty() ? (fs::path(job.output_dir) / (output_stem(input) + ".hyp")).string() : job.output;
    std::error_code error;
    if (input != "-" && destination != "-" && fs::equivalent(input, destination, error)) {
      throw std::invalid_argument("--output " + destination + " is the input file " + input +
                                  "; its translation would replace it: choose another output");
    }
  }
  options.search.return_attention = !outputs.attention_dir.empty() || outputs.alignment;
}

void translate_inputs(const TranslateJob& job, const TranslationModels& models, std::ostream& out) {
  const TranslateOptions& options = job.options;
  const OutputOptions& outputs = job.outputs;
  TargetGuides guides{{{}, job.prefix_file}, {{}, job.constraints_file}};
  for (LineGuide* guide : {&guides.prefixes, &guides.constraints}) {
    if (!guide->name.empty()) guide->lines = read_lines(guide->name);
  }
  if (options.search.return_attention && !models.has_attention()) {
    throw std::invalid_argument("--attention-dir/--alignment: this model was trained with attention none");
  }
  if (!job.output_dir.empty()) fs::create_directories(job.output_dir);
  if (!outputs.attention_dir.empty()) fs::create_directories(outputs.attention_dir);

  for (const std::string& input : job.inputs) {
    if (input == "-" && job.output == "-" && job.output_dir.empty() && is_stream(STDIN_FILENO)) {
      translate_stream(options, models, outputs, guides, out);
      continue;
    }
    const std::vector<std::string> lines = input == "-" ? read_lines(std::cin, "standard input") : read_lines(input);
    const std::vector<Translation> translations = translate_lines(options, models, lines, guides, job.progress);
    warn_of_problems(translations, input == "-" ? "standard input" : input, 0, options);
    const std::string stem = output_stem(input);
    const std::string text = format_output(lines, translations, models, options, outputs, stem, 0);
    write_output(!job.output_dir.empty() ? (fs::path(job.output_dir) / (stem + ".hyp")).string() : job.output, text,
                 out);
  }
}

void translate_files(TranslateJob job, std::ostream& out) {
  if (job.list_languages) {
    const TranslationModels models = load(job.options);
    const ModelOptions& model = models.members.front().options;
    for (const std::string& language : model.target_languages) out << language << "\n";
    if (model.target_languages.empty()) {
      spdlog::info(
          "{} was trained without train-languages: it translates into its one target language{}, and "
          "--target-language stays empty",
          job.options.models.front(), model.target_language.empty() ? "" : " (" + model.target_language + ")");
    }
    return;
  }
  check_translate_job(job);
  translate_inputs(job, load(job.options), out);
}

void evaluate_files(EvaluateJob job, std::ostream& out) {
  if (job.reference_files.empty()) throw std::invalid_argument("evaluate: give at least one --ref FILE");
  job.bleu.tokenize = job.tokenize == "none" ? eval::BleuTokenize::kNone : eval::BleuTokenize::k13a;
  // References first: a wrong path is reported before any model is loaded or sentence translated.
  std::vector<std::vector<std::string>> references;
  for (const std::string& file : job.reference_files) references.push_back(read_lines(file));
  std::vector<std::string> hypotheses;
  std::string hypothesis_name;
  if (!job.translate.models.empty()) {
    if (job.source_file.empty()) throw std::invalid_argument("evaluate --model needs --src FILE to translate");
    if (!job.hypothesis_files.empty()) throw std::invalid_argument("evaluate: give either --hyp or --model/--src");
    if (!job.output.empty()) require_parent_directory(job.output, "--output");
    const std::vector<std::string> sources = read_lines(job.source_file);
    require_same_line_count(job.source_file, sources.size(), job.reference_files.front(), references.front().size());
    const TranslationModels models = load(job.translate);
    const std::vector<Translation> translations = translate_lines(job.translate, models, sources);
    warn_of_problems(translations, job.source_file, 0, job.translate);
    hypotheses = best_texts(translations);
    hypothesis_name = "translation of " + job.source_file;
    if (!job.output.empty()) {
      std::string text;
      for (const auto& line : hypotheses) text += line + "\n";
      write_file_atomic(job.output, text);
    }
  } else {
    if (job.hypothesis_files.size() != 1) {
      throw std::invalid_argument("evaluate: give one --hyp FILE (or --model and --src)");
    }
    hypotheses = read_lines(job.hypothesis_files[0]);
    hypothesis_name = job.hypothesis_files[0];
  }
  for (size_t i = 0; i < references.size(); ++i) {
    require_same_line_count(hypothesis_name, hypotheses.size(), job.reference_files[i], references[i].size());
  }
  // sacreBLEU drops empty references; a line left with none cannot be scored.
  for (size_t line = 0; line < hypotheses.size(); ++line) {
    if (std::all_of(references.begin(), references.end(),
                    [line](const auto& stream) { return stream[line].empty(); })) {
      std::string files;
      for (const auto& file : job.reference_files) files += (files.empty() ? "" : ", ") + file;
      throw std::invalid_argument(files + ":" + std::to_string(line + 1) +
                                  ": the reference line is empty; every line needs a reference to be scored");
    }
  }
  const eval::BleuScore bleu = eval::corpus_bleu(hypotheses, references, job.bleu);
  const eval::ChrfScore chrf = eval::corpus_chrf(hypotheses, references);
  if (job.json) {
    const nlohmann::ordered_json result = {{"bleu", bleu.score},
                                           {"bleu_signature", bleu.signature},
                                           {"bleu_precisions", bleu.precisions},
                                           {"brevity_penalty", bleu.brevity_penalty},
                                           {"hyp_length", bleu.hyp_length},
                                           {"ref_length", bleu.ref_length},
                                           {"chrf", chrf.score},
                                           {"chrf_signature", chrf.signature}};
    out << result.dump() << "\n";
  } else {
    out << bleu.signature << " = " << bleu.format() << "\n" << chrf.signature << " = " << chrf.format() << "\n";
  }
}

}  // namespace nmt
