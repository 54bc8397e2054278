// nmt: the command line. Parses options into the library's structs, calls train / translate /
// evaluate / average, and turns exceptions into one-line errors and a non-zero exit status.
#include <spdlog/sinks/stdout_color_sinks.h>
#include <spdlog/spdlog.h>
#include <torch/torch.h>
#include <CLI/CLI.hpp>

#include <algorithm>
#include <iostream>
#include <string>
#include <vector>

#include "config/train_config.h"
#include "config/translate_options.h"
#include "inference/commands.h"
#include "kernels/dispatch.h"
#include "serve/server.h"
#include "train/average.h"
#include "train/launcher.h"
#include "train/trainer.h"
#include "util/runtime.h"

using namespace nmt;

int main(int argc, char** argv) {
  guard_standard_streams();
  // Diagnostics go to standard error, always: standard output carries translations and scores.
  spdlog::set_default_logger(
      std::make_shared<spdlog::logger>("", std::make_shared<spdlog::sinks::stderr_color_sink_mt>()));
  CLI::App app{"nmt: attentional GRU neural machine translation (train, prepare, translate, evaluate, average, serve)",
               "nmt"};
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
      train_command->add_flag("--resume", train_run.resume, "continue the run in --model-dir from last.ckpt")
          ->configurable(false);  // what to do with a run: the command line's choice, never a shared file's
  train_command->add_flag("--overwrite", train_run.overwrite, "start again even if --model-dir holds a run")
      ->excludes(resume_flag)
      ->configurable(false);
  train_command->add_flag("--dump-config", dump_config, "print the effective configuration and exit")
      ->configurable(false);
  // Several processes (train/distributed.h): started by nmt itself, or by torchrun, SLURM or any
  // launcher through the environment (RANK, WORLD_SIZE, LOCAL_RANK, MASTER_ADDR, MASTER_PORT).
  int nproc = 0;
  DistributedOptions& distributed = train_run.distributed;
  const std::string group = "Distributed (environment: RANK, WORLD_SIZE, LOCAL_RANK, MASTER_ADDR, MASTER_PORT)";
  train_command->add_option("--nproc", nproc, "start this many ranks on this machine and supervise them")
      ->check(CLI::Range(1, 1024))
      ->group(group)
      ->configurable(false);
  train_command->add_option("--rank", distributed.rank, "this process's rank (RANK)")
      ->group(group)
      ->configurable(false);
  train_command->add_option("--world-size", distributed.world_size, "number of ranks (WORLD_SIZE)")
      ->group(group)
      ->configurable(false);
  train_command->add_option("--local-rank", distributed.local_rank, "rank among this machine's (LOCAL_RANK)")
      ->group(group)
      ->configurable(false);
  train_command->add_option("--master-addr", distributed.master_addr, "rank 0's address (MASTER_ADDR; 127.0.0.1)")
      ->group(group)
      ->configurable(false);
  train_command->add_option("--master-port", distributed.master_port, "rank 0's port (MASTER_PORT; 29500)")
      ->check(CLI::Range(1, 65535))
      ->group(group)
      ->configurable(false);
  train_command
      ->add_option("--dist-timeout", distributed.timeout_seconds,
                   "seconds a rank waits for a silent peer before the run stops")
      ->capture_default_str()
      ->group(group)
      ->configurable(false);
  train_command
      ->add_option("--check-replicas", distributed.check_replicas,
                   "compare the ranks' weights every N updates (0: at validations only)")
      ->group(group)
      ->configurable(false);

  // prepare: the train command with --prepare-only (so that it reads the [train] section of a
  // configuration file); listed here for the help text, and renamed before parsing below.
  bool prepare_only = false;
  train_command->add_flag("--prepare-only", prepare_only, "only prepare the corpus (nmt prepare)")
      ->group("")
      ->configurable(false);
  app.add_subcommand("prepare",
                     "encode the training corpus once into corpus-dir (train.corpus and its vocabularies), "
                     "for training runs to reuse; takes the options of train");
  std::vector<std::string> arguments(argv + 1, argv + argc);
  size_t command = 0;  // the subcommand's position: after the top-level --config FILE, if any
  while (command < arguments.size() &&
         (arguments[command] == "--config" || arguments[command].rfind("--config=", 0) == 0)) {
    command += arguments[command] == "--config" ? 2 : 1;
  }
  for (size_t i = 0; i < arguments.size(); ++i) {  // what CLI11's reader lets pass: duplicates, open quotes
    const bool separate = arguments[i] == "--config" && i + 1 < arguments.size();
    if (separate || arguments[i].rfind("--config=", 0) == 0) {
      try {
        check_config_file(separate ? arguments[i + 1] : arguments[i].substr(9));
      } catch (const std::exception& error) {
        std::cerr << "nmt: " << error.what() << "\n";
        return 2;
      }
    }
  }
  if (command < arguments.size() && arguments[command] == "prepare") {
    arguments[command] = "train";
    arguments.insert(arguments.begin() + static_cast<std::ptrdiff_t>(command) + 1, "--prepare-only");
  }
  const std::vector<std::string> given = arguments;  // as typed, for the ranks that --nproc starts
  std::reverse(arguments.begin(), arguments.end());  // CLI11 takes them last first

  // translate
  TranslateJob translate_job;
  CLI::App* translate_command = app.add_subcommand("translate", "translate text files with a trained model");
  translate_command
      ->add_option("--model", translate_job.options.models,
                   "model directory (from nmt train); several decode as an ensemble")
      ->required();
  translate_command->add_option("--input", translate_job.inputs, "input files, or - for stdin (default)");
  translate_command->add_option("--output", translate_job.output, "output file, or - for stdout")
      ->capture_default_str();
  translate_command->add_option("--output-dir", translate_job.output_dir,
                                "with several inputs: one INPUT_NAME.hyp each here");
  translate_command
      ->add_option("--n-best", translate_job.options.search.n_best,
                   "hypotheses per sentence (lines 'i ||| text ||| score')")
      ->capture_default_str();
  translate_command->add_flag("--with-scores", translate_job.outputs.with_scores,
                              "prefix each output line with its score and a tab");
  translate_command->add_option("--attention-dir", translate_job.outputs.attention_dir,
                                "write an SVG heatmap and a JSON matrix per sentence");
  translate_command->add_flag("--alignment", translate_job.outputs.alignment,
                              "print the hard alignment (i-j pairs) after each output line");
  add_translate_options(*translate_command, translate_job.options);

  // evaluate
  EvaluateJob evaluate_job;
  CLI::App* evaluate_command = app.add_subcommand("evaluate", "corpus BLEU and chrF (sacreBLEU-compatible)");
  evaluate_command->add_option("--hyp", evaluate_job.hypothesis_files, "hypothesis file (detokenized)");
  evaluate_command->add_option("--ref", evaluate_job.reference_files, "reference file(s)");
  evaluate_command->add_flag("--lowercase", evaluate_job.bleu.lowercase, "case-insensitive BLEU");
  evaluate_command->add_option("--tokenize", evaluate_job.tokenize, "BLEU tokenizer")
      ->check(CLI::IsMember({"13a", "none"}))
      ->capture_default_str();
  evaluate_command->add_flag("--json", evaluate_job.json, "machine-readable output");
  evaluate_command->add_option("--model", evaluate_job.translate.models,
                               "translate --src with this model (several: an ensemble), then score");
  evaluate_command->add_option("--src", evaluate_job.source_file, "source file to translate (with --model)");
  evaluate_command->add_option("--output", evaluate_job.output, "with --model: also write the translation here");
  add_translate_options(*evaluate_command, evaluate_job.translate);

  // serve
  serve::ServeOptions serve_options;
  CLI::App* serve_command =
      app.add_subcommand("serve", "translate over HTTP: POST /translate (JSON), GET /health, GET / (a page)");
  serve_command
      ->add_option("--model", serve_options.translate.models,
                   "model directory (from nmt train); several decode as an ensemble")
      ->required();
  serve_command->add_option("--host", serve_options.host, "address to listen on (0.0.0.0: every interface)")
      ->capture_default_str();
  serve_command->add_option("--port", serve_options.port, "port to listen on (0: any free port)")
      ->capture_default_str();
  serve_command->add_option("--max-batch", serve_options.max_batch, "sentences translated together, across requests")
      ->capture_default_str();
  serve_command
      ->add_option("--max-wait-ms", serve_options.max_wait_ms,
                   "how long a request may wait for others to share its batch")
      ->capture_default_str();
  serve_command->add_option("--workers", serve_options.workers, "batches translated at once (several: one thread each)")
      ->capture_default_str();
  serve_command->add_option("--connections", serve_options.connections, "connections served at once")
      ->capture_default_str();
  serve_command->add_option("--max-body-bytes", serve_options.limits.max_body_bytes, "largest request body")
      ->capture_default_str();
  serve_command->add_option("--max-sentences", serve_options.limits.max_sentences, "most sentences in one request")
      ->capture_default_str();
  serve_command->add_option("--max-sentence-bytes", serve_options.limits.max_sentence_bytes, "longest sentence")
      ->capture_default_str();
  serve_command
      ->add_option("--max-beam-size", serve_options.limits.max_beam_size, "largest beam_size a request may ask")
      ->capture_default_str();
  add_translate_options(*serve_command, serve_options.translate);

  // average
  AverageJob average_job;
  CLI::App* average_command =
      app.add_subcommand("average", "average the weights of the last checkpoints of a run (keep-checkpoints)");
  average_command->add_option("--model", average_job.model_dir, "model directory (from nmt train)")->required();
  CLI::Option* last_option =
      average_command->add_option("--last", average_job.last, "the newest N step-*.ckpt (0 = all kept)")
          ->check(CLI::NonNegativeNumber)
          ->capture_default_str();
  average_command->add_option("--checkpoints", average_job.checkpoints, "these checkpoint files instead")
      ->excludes(last_option);
  average_command->add_option("--output", average_job.output, "where to write (default MODEL/averaged.ckpt)");

  try {
    app.parse(arguments);
  } catch (const CLI::ParseError& error) {
    if (error.get_exit_code() != 0) {
      std::cerr << "nmt: " << error.what() << " (see nmt " << (train_command->parsed() ? "train " : "") << "--help)\n";
      return error.get_exit_code();
    }
    return app.exit(error);
  }

  try {
    kernels::kernel_level();  // an unknown NMT_KERNELS is an error before any work
    if (train_command->parsed() && dump_config) {
      std::cout << to_toml(train_config);
    } else if (train_command->parsed() && prepare_only) {
      if (train_run.resume || train_run.overwrite) {
        throw std::invalid_argument("prepare takes no --resume or --overwrite (it never touches a training run)");
      }
      prepare(train_config);
    } else if (train_command->parsed() && nproc > 1) {
      return launch_workers(argv[0], without_nproc(given), nproc, distributed.master_addr, distributed.master_port);
    } else if (train_command->parsed()) {
      train(train_config, train_run);
    } else {
      if (const std::string warning = slow_blas_warning(); !warning.empty()) spdlog::warn("{}", warning);
      if (translate_command->parsed()) translate_files(translate_job, std::cout);
      if (evaluate_command->parsed()) evaluate_files(evaluate_job, std::cout);
      if (average_command->parsed()) run_average(average_job, std::cout);
      if (serve_command->parsed()) serve::serve(serve_options);
    }
    flush_standard_output(std::cout);  // a closed or full standard output: the exit status says so
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
