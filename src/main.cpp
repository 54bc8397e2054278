// nmt: the command line. Parses options into the library's structs, runs train / translate /
// evaluate, and turns exceptions into one-line errors and a non-zero exit status.
#include <CLI/CLI.hpp>
#include <spdlog/spdlog.h>
#include <torch/torch.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <iostream>
#include <set>
#include <sstream>

#include "config/train_config.h"
#include "config/translate_options.h"
#include "eval/attention_export.h"
#include "eval/bleu.h"
#include "search/translator.h"
#include "text/corpus.h"
#include "train/average.h"
#include "train/checkpoint.h"
#include "train/trainer.h"
#include "util/io.h"
#include "util/runtime.h"

namespace fs = std::filesystem;
using namespace nmt;

namespace {

struct RunSettings {
  int threads = 0;
  std::string device = "cpu";
};

struct TranslateSettings {
  std::string model_dir;
  std::string checkpoint = "best";
  SearchOptions search;
  BatchingOptions batching;
  std::string batch_type = "sentences";
  RunSettings run;
  bool quiet = false;
};

void add_run_options(CLI::App& command, RunSettings& run) {
  command.add_option("--threads", run.threads, "CPU threads (0 = number of cores)")->capture_default_str();
  command.add_option("--device", run.device, "cpu or cuda")->check(CLI::IsMember({"cpu", "cuda"}))->capture_default_str();
}

void add_model_options(CLI::App& command, TranslateSettings& settings) {
  command.add_option("--checkpoint", settings.checkpoint, "best, last, or a checkpoint path")->capture_default_str();
  SearchOptions& search = settings.search;
  command.add_option("--beam-size", search.beam_size, "beam size (1 = greedy search)")->capture_default_str();
  command.add_option("--length-penalty", search.length_penalty, "GNMT length penalty alpha (0 = none)")
      ->capture_default_str();
  command.add_option("--max-length-ratio", search.max_length_ratio, "output stops at ratio * source length + 10")
      ->capture_default_str();
  command.add_option("--max-length", search.max_length, "absolute cap on output tokens")->capture_default_str();
  command.add_flag("--ban-unk", search.ban_unk, "never produce <unk>");
  command.add_option("--batch-size", settings.batching.batch_size, "sentences (or tokens) per batch")
      ->capture_default_str();
  command.add_option("--batch-type", settings.batch_type, "unit of --batch-size")
      ->check(CLI::IsMember({"sentences", "tokens"}))
      ->capture_default_str();
  command.add_flag("--quiet", settings.quiet, "no progress line on stderr");
  add_run_options(command, settings.run);
}

// Output files are named after their input: "stdin" or the input's file name.
std::string output_stem(const std::string& input) { return input == "-" ? "stdin" : fs::path(input).filename().string(); }

// Checked before any decoding, so that a typo does not cost a whole translation run.
void require_parent_directory(const std::string& path, const std::string& option) {
  const fs::path parent = fs::path(path).parent_path();
  if (!parent.empty() && !fs::is_directory(parent)) {
    throw std::invalid_argument(option + " " + path + ": directory " + parent.string() + " does not exist");
  }
}

// Parallel files must match line by line.
void require_same_line_count(const std::string& name, size_t lines, const std::string& other_name, size_t other_lines) {
  if (lines != other_lines) {
    throw std::invalid_argument(name + " has " + std::to_string(lines) + " lines but " + other_name + " has " +
                                std::to_string(other_lines) + "; they must match line by line");
  }
}

ModelBundle load_model(TranslateSettings& settings) {
  set_threads(settings.run.threads);
  const torch::Device device = parse_device(settings.run.device);
  if (!fs::is_directory(settings.model_dir)) {
    throw std::runtime_error(settings.model_dir + ": model directory not found (train one with nmt train)");
  }
  settings.batching.batch_in_tokens = settings.batch_type == "tokens";
  return load_checkpoint(resolve_checkpoint(settings.model_dir, settings.checkpoint), device);
}

// "\r1200/3000 sentences, 85.3 sentences/s" on stderr, only when stderr is a terminal.
std::function<void(size_t)> progress_reporter(size_t total, bool quiet) {
  if (quiet || !::isatty(STDERR_FILENO) || total < 50) return {};
  const auto start = std::chrono::steady_clock::now();
  return [start, total](size_t done) {
    const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    std::fprintf(stderr, "\r%zu/%zu sentences, %.1f sentences/s%s", done, total,
                 static_cast<double>(done) / std::max(seconds, 1e-9), done == total ? "\n" : "");
  };
}

std::vector<Translation> translate_lines(TranslateSettings& settings, ModelBundle& bundle,
                                         const std::vector<std::string>& lines) {
  Translator translator(bundle.model, bundle.source_vocabulary, bundle.target_vocabulary, settings.search,
                        settings.batching, parse_device(settings.run.device));
  return translator.translate(lines, progress_reporter(lines.size(), settings.quiet));
}

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

int run_translate(TranslateSettings& settings, std::vector<std::string> inputs, const std::string& output,
                  const std::string& output_dir, const std::string& attention_dir, bool alignment,
                  bool with_scores) {
  if (inputs.empty()) inputs = {"-"};
  validate(settings.search);
  validate(settings.batching);
  if (settings.search.n_best > 1 && (alignment || with_scores || !attention_dir.empty())) {
    throw std::invalid_argument("--n-best > 1 prints 'i ||| text ||| score' lines; it cannot be combined with "
                                "--alignment, --attention-dir or --with-scores");
  }
  if (!output_dir.empty() && output != "-") throw std::invalid_argument("give either --output or --output-dir");
  for (const std::string& input : inputs) {
    if (input != "-" && !fs::exists(input)) throw std::runtime_error(input + ": input file not found");
  }
  if (inputs.size() > 1 && output_dir.empty()) {
    throw std::invalid_argument("several --input files need --output-dir (one output file each)");
  }
  // Output (and attention) files are named after the input's file name: two inputs with the same
  // name would overwrite each other's results.
  std::set<std::string> stems;
  for (const std::string& input : inputs) {
    if (!stems.insert(output_stem(input)).second) {
      throw std::invalid_argument("--input: two inputs are named " + output_stem(input) +
                                  "; their outputs would overwrite each other (rename or translate them separately)");
    }
  }
  if (output != "-") require_parent_directory(output, "--output");
  settings.search.return_attention = !attention_dir.empty() || alignment;
  ModelBundle bundle = load_model(settings);
  if (settings.search.return_attention && bundle.config.model.attention == AttentionType::kNone) {
    throw std::invalid_argument("--attention-dir/--alignment: this model was trained with attention none");
  }
  if (!output_dir.empty()) fs::create_directories(output_dir);
  if (!attention_dir.empty()) fs::create_directories(attention_dir);

  for (const std::string& input : inputs) {
    const std::vector<std::string> lines = input == "-" ? read_lines(std::cin, "standard input") : read_lines(input);
    const std::vector<Translation> translations = translate_lines(settings, bundle, lines);
    const std::string stem = output_stem(input);

    std::ostringstream text;
    for (size_t i = 0; i < translations.size(); ++i) {
      const Translation& translation = translations[i];
      if (settings.search.n_best > 1) {
        for (size_t k = 0; k < translation.hypotheses.size(); ++k) {
          text << i << " ||| " << translation.texts[k] << " ||| " << translation.hypotheses[k].score << "\n";
        }
        if (translation.hypotheses.empty()) text << i << " ||| " << " ||| 0\n";
        continue;
      }
      if (with_scores) text << (translation.hypotheses.empty() ? 0.0 : translation.hypotheses[0].score) << "\t";
      text << (translation.texts.empty() ? "" : translation.texts[0]) << "\n";
      if (alignment || !attention_dir.empty()) {
        if (translation.hypotheses.empty()) {
          if (alignment) text << "\n";
          continue;
        }
        AttentionMatrix matrix = attention_matrix(translation, translation.hypotheses[0], bundle.target_vocabulary);
        if (alignment) text << hard_alignment(matrix) << "\n";
        if (!attention_dir.empty()) {
          char number[32];
          std::snprintf(number, sizeof(number), "%05zu", i + 1);
          const std::string base = (fs::path(attention_dir) / (stem + "." + number)).string();
          write_file_atomic(base + ".svg", attention_svg(matrix, lines[i] + "  →  " + translation.texts[0]),
                            Durability::kNoSync);
          write_file_atomic(base + ".json", attention_json(matrix), Durability::kNoSync);
        }
      }
    }
    const std::string destination = !output_dir.empty() ? (fs::path(output_dir) / (stem + ".hyp")).string() : output;
    if (destination == "-") {
      std::cout << text.str() << std::flush;
      if (!std::cout) throw std::runtime_error("standard output: write failed (disk full or pipe closed?)");
    } else {
      write_file_atomic(destination, text.str());
    }
  }
  return 0;
}

struct EvaluateSettings {
  std::vector<std::string> hypothesis_files;
  std::vector<std::string> reference_files;
  std::string source_file;
  eval::BleuOptions bleu;
  std::string tokenize = "13a";
  bool json = false;
  std::string output;
};

int run_evaluate(EvaluateSettings& settings, TranslateSettings& translate_settings) {
  if (settings.reference_files.empty()) throw std::invalid_argument("evaluate: give at least one --ref FILE");
  settings.bleu.tokenize = settings.tokenize == "none" ? eval::BleuTokenize::kNone : eval::BleuTokenize::k13a;
  // References first: a wrong path is reported before any model is loaded or sentence translated.
  std::vector<std::vector<std::string>> references;
  for (const std::string& file : settings.reference_files) references.push_back(read_lines(file));
  std::vector<std::string> hypotheses;
  std::string hypothesis_name;
  if (!translate_settings.model_dir.empty()) {
    if (settings.source_file.empty()) throw std::invalid_argument("evaluate --model needs --src FILE to translate");
    if (!settings.hypothesis_files.empty()) throw std::invalid_argument("evaluate: give either --hyp or --model/--src");
    if (!settings.output.empty()) require_parent_directory(settings.output, "--output");
    const std::vector<std::string> sources = read_lines(settings.source_file);
    require_same_line_count(settings.source_file, sources.size(), settings.reference_files.front(),
                            references.front().size());
    ModelBundle bundle = load_model(translate_settings);
    hypotheses = best_texts(translate_lines(translate_settings, bundle, sources));
    hypothesis_name = "translation of " + settings.source_file;
    if (!settings.output.empty()) {
      std::string text;
      for (const auto& line : hypotheses) text += line + "\n";
      write_file_atomic(settings.output, text);
    }
  } else {
    if (settings.hypothesis_files.size() != 1) throw std::invalid_argument("evaluate: give one --hyp FILE (or --model and --src)");
    hypotheses = read_lines(settings.hypothesis_files[0]);
    hypothesis_name = settings.hypothesis_files[0];
  }
  for (size_t i = 0; i < references.size(); ++i) {
    require_same_line_count(hypothesis_name, hypotheses.size(), settings.reference_files[i], references[i].size());
  }
  const eval::BleuScore bleu = eval::corpus_bleu(hypotheses, references, settings.bleu);
  const eval::ChrfScore chrf = eval::corpus_chrf(hypotheses, references);
  if (settings.json) {
    std::cout << "{\"bleu\": " << bleu.score << ", \"bleu_signature\": " << json_quote(bleu.signature)
              << ", \"bleu_precisions\": [" << bleu.precisions[0] << ", " << bleu.precisions[1] << ", "
              << bleu.precisions[2] << ", " << bleu.precisions[3] << "], \"brevity_penalty\": " << bleu.brevity_penalty
              << ", \"hyp_length\": " << bleu.hyp_length << ", \"ref_length\": " << bleu.ref_length
              << ", \"chrf\": " << chrf.score << ", \"chrf_signature\": " << json_quote(chrf.signature) << "}\n";
  } else {
    std::cout << bleu.signature << " = " << bleu.format() << "\n" << chrf.signature << " = " << chrf.format() << "\n";
  }
  return 0;
}

struct AverageSettings {
  std::string model_dir;
  int last = 0;
  std::vector<std::string> checkpoints;
  std::string output;
};

int run_average(AverageSettings& settings) {
  if (!fs::is_directory(settings.model_dir)) {
    throw std::runtime_error(settings.model_dir + ": model directory not found (train one with nmt train)");
  }
  std::vector<std::string> paths = settings.checkpoints;
  if (paths.empty()) {
    paths = step_checkpoints(settings.model_dir);
    if (paths.empty()) {
      throw std::runtime_error(settings.model_dir +
                               ": no step-*.ckpt checkpoints to average; train with keep-checkpoints = N");
    }
    if (settings.last > 0 && static_cast<size_t>(settings.last) < paths.size()) {
      paths.erase(paths.begin(), paths.end() - settings.last);
    }
  }
  if (settings.output.empty()) settings.output = (fs::path(settings.model_dir) / kAveragedCheckpoint).string();
  const std::string output_name = fs::path(settings.output).filename().string();
  if (output_name == kBestCheckpoint || output_name == kLastCheckpoint || step_of_checkpoint_name(output_name) >= 0) {
    throw std::invalid_argument("--output " + settings.output +
                                ": the trainer's own checkpoint names are reserved; choose another name");
  }
  require_parent_directory(settings.output, "--output");
  ModelBundle averaged = average_checkpoints(paths, torch::kCPU);
  save_checkpoint(settings.output, averaged, nullptr);
  std::cout << "averaged " << paths.size() << " checkpoints (" << fs::path(paths.front()).filename().string()
            << " .. " << fs::path(paths.back()).filename().string() << ") into " << settings.output << "\n";
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"nmt: attentional GRU neural machine translation (train, translate, evaluate)"};
  app.require_subcommand(1);
  app.set_config("--config", "", "TOML configuration file (a [train] section)");
  app.allow_config_extras(false);

  // train
  TrainConfig train_config;
  TrainRunOptions train_run;
  bool dump_config = false;
  CLI::App* train_command = app.add_subcommand("train", "train a model from a configuration file and/or options");
  train_command->fallthrough();
  add_train_options(*train_command, train_config);
  CLI::Option* resume_flag =
      train_command->add_flag("--resume", train_run.resume, "continue the run in --model-dir from last.ckpt");
  train_command->add_flag("--overwrite", train_run.overwrite, "start again even if --model-dir holds a run")
      ->excludes(resume_flag);
  train_command->add_flag("--dump-config", dump_config, "print the effective configuration and exit");

  // translate
  TranslateSettings translate_settings;
  std::vector<std::string> inputs;
  std::string output = "-", output_dir, attention_dir;
  bool alignment = false, with_scores = false;
  CLI::App* translate_command = app.add_subcommand("translate", "translate text files with a trained model");
  translate_command->add_option("--model", translate_settings.model_dir, "model directory (from nmt train)")->required();
  translate_command->add_option("--input", inputs, "input files, or - for stdin (default)");
  translate_command->add_option("--output", output, "output file, or - for stdout")->capture_default_str();
  translate_command->add_option("--output-dir", output_dir, "with several inputs: one INPUT_NAME.hyp each here");
  translate_command->add_option("--n-best", translate_settings.search.n_best, "hypotheses per sentence (lines 'i ||| text ||| score')")
      ->capture_default_str();
  translate_command->add_flag("--with-scores", with_scores, "prefix each output line with its score and a tab");
  translate_command->add_option("--attention-dir", attention_dir, "write an SVG heatmap and a JSON matrix per sentence");
  translate_command->add_flag("--alignment", alignment, "print the hard alignment (i-j pairs) after each output line");
  add_model_options(*translate_command, translate_settings);

  // evaluate
  EvaluateSettings evaluate_settings;
  TranslateSettings evaluate_translate;
  CLI::App* evaluate_command = app.add_subcommand("evaluate", "corpus BLEU and chrF (sacreBLEU-compatible)");
  evaluate_command->add_option("--hyp", evaluate_settings.hypothesis_files, "hypothesis file (detokenized)");
  evaluate_command->add_option("--ref", evaluate_settings.reference_files, "reference file(s)");
  evaluate_command->add_flag("--lowercase", evaluate_settings.bleu.lowercase, "case-insensitive BLEU");
  evaluate_command->add_option("--tokenize", evaluate_settings.tokenize, "BLEU tokenizer")
      ->check(CLI::IsMember({"13a", "none"}))
      ->capture_default_str();
  evaluate_command->add_flag("--json", evaluate_settings.json, "machine-readable output");
  evaluate_command->add_option("--model", evaluate_translate.model_dir, "translate --src with this model, then score");
  evaluate_command->add_option("--src", evaluate_settings.source_file, "source file to translate (with --model)");
  evaluate_command->add_option("--output", evaluate_settings.output, "with --model: also write the translation here");
  add_model_options(*evaluate_command, evaluate_translate);

  // average
  AverageSettings average_settings;
  CLI::App* average_command =
      app.add_subcommand("average", "average the weights of the last checkpoints of a run (keep-checkpoints)");
  average_command->add_option("--model", average_settings.model_dir, "model directory (from nmt train)")->required();
  CLI::Option* last_option =
      average_command->add_option("--last", average_settings.last, "the newest N step-*.ckpt (0 = all kept)")
          ->check(CLI::NonNegativeNumber)
          ->capture_default_str();
  average_command->add_option("--checkpoints", average_settings.checkpoints, "these checkpoint files instead")
      ->excludes(last_option);
  average_command->add_option("--output", average_settings.output, "where to write (default MODEL/averaged.ckpt)");

  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& error) {
    if (error.get_exit_code() != 0) {
      std::cerr << "nmt: " << error.what() << " (see nmt " << (train_command->parsed() ? "train " : "") << "--help)\n";
      return error.get_exit_code();
    }
    return app.exit(error);
  }

  try {
    if (train_command->parsed()) {
      if (dump_config) {
        std::cout << to_toml(train_config);
        return 0;
      }
      train(train_config, train_run);
      return 0;
    }
    if (const std::string warning = slow_blas_warning(); !warning.empty()) spdlog::warn("{}", warning);
    if (translate_command->parsed()) {
      return run_translate(translate_settings, inputs, output, output_dir, attention_dir, alignment, with_scores);
    }
    if (evaluate_command->parsed()) return run_evaluate(evaluate_settings, evaluate_translate);
    if (average_command->parsed()) return run_average(average_settings);
  } catch (const c10::Error& error) {  // LibTorch errors carry a backtrace: keep the first line
    const std::string message = error.what_without_backtrace();
    spdlog::error("{}", message.substr(0, message.find('\n')));
    return 1;
  } catch (const std::exception& error) {
    spdlog::error("{}", error.what());
    return 1;
  }
  return 0;
}
