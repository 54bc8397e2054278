#include "cli/program.h"

#include <spdlog/cfg/env.h>
#include <spdlog/spdlog.h>
#include <torch/torch.h>

#include <algorithm>
#include <iostream>
#include <memory>
#include <utility>

#include "config/train_config.h"
#include "kernels/dispatch.h"
#include "util/cuda_graph.h"
#include "util/log.h"
#include "util/runtime.h"

namespace nmt::cli {

namespace {

// The TOML reader of --config. A configuration file has one [train] section; `nmt prepare` takes
// the options of train, so when prepare is the command chosen, that section is read as prepare's.
// The file is read after the command line, so the choice is known by then.
class TrainSectionReader : public CLI::ConfigTOML {
 public:
  explicit TrainSectionReader(const CLI::App& prepare) : prepare_(prepare) {}

  std::vector<CLI::ConfigItem> from_config(std::istream& input) const override {
    std::vector<CLI::ConfigItem> items = CLI::ConfigTOML::from_config(input);
    if (prepare_.parsed()) {
      for (CLI::ConfigItem& item : items) {
        if (!item.parents.empty() && item.parents.front() == "train") item.parents.front() = prepare_.get_name();
      }
    }
    return items;
  }

 private:
  const CLI::App& prepare_;
};

}  // namespace

Program::Program(Invocation arguments)
    : invocation(std::move(arguments)),
      app("nmt: attentional GRU neural machine translation (train, prepare, translate, evaluate, score, rerank, "
          "synthesize, average, shortlist, export, convert, serve)",
          "nmt") {
  commands = {
      add_train(app, invocation, train),
      add_prepare(app),
      add_translate(app),
      add_evaluate(app),
      add_serve(app),
      add_average(app),
      add_shortlist(app),
      add_export(app),
      add_convert(app),
      add_score(app),
      add_rerank(app),
      add_synthesize(app),
  };
  configure_program(app, *commands[1].app);
}

void warn_if_slow_blas() {
  if (const std::string warning = slow_blas_warning(); !warning.empty()) spdlog::warn("{}", warning);
}

void set_up_process() {
  guard_standard_streams();
  spdlog::set_default_logger(std::make_shared<spdlog::logger>("", console_sink()));
  spdlog::cfg::load_env_levels();  // SPDLOG_LEVEL=debug shows, for one, which kernel each operation runs
}

void configure_program(CLI::App& program, const CLI::App& prepare) {
  program.require_subcommand(1);
  program.set_config("--config", "", "TOML configuration file (a [train] section)");
  program.config_formatter(std::make_shared<TrainSectionReader>(prepare));
  program.allow_config_extras(false);
}

bool config_files_valid(const std::vector<std::string>& arguments) {
  for (size_t i = 0; i < arguments.size(); ++i) {
    const bool separate = arguments[i] == "--config" && i + 1 < arguments.size();
    if (!separate && arguments[i].rfind("--config=", 0) != 0) continue;
    try {
      check_config_file(separate ? arguments[i + 1] : arguments[i].substr(9));
    } catch (const std::exception& error) {
      std::cerr << "nmt: " << error.what() << "\n";
      return false;
    }
  }
  return true;
}

int parse(CLI::App& program, std::vector<std::string> arguments) {
  std::reverse(arguments.begin(), arguments.end());  // CLI11 takes them last first
  try {
    program.parse(arguments);
  } catch (const CLI::ParseError& error) {
    if (error.get_exit_code() == 0) return program.exit(error);  // --help
    const std::vector<CLI::App*> chosen = program.get_subcommands();
    std::cerr << "nmt: " << error.what() << " (see nmt " << (chosen.empty() ? "" : chosen.front()->get_name() + " ")
              << "--help)\n";
    return error.get_exit_code();
  }
  return -1;
}

int run(const std::vector<Command>& commands) {
  try {
    kernels::kernel_level();      // an unknown NMT_KERNELS is an error before any work
    gpu_decoder_pass_recorded();  // the same for NMT_GPU_DECODER_PASS
    int status = 0;
    for (const Command& command : commands) {
      if (command.app->parsed()) status = command.run();
    }
    flush_standard_output(std::cout);  // a closed or full standard output: the exit status says so
    return status;
  } catch (const c10::Error& error) {  // LibTorch errors carry a backtrace: keep the first line
    const std::string message = error.what_without_backtrace();
    spdlog::error("{}", message.substr(0, message.find('\n')));
    return 1;
  } catch (const std::exception& error) {
    spdlog::error("{}", error.what());
    return 1;
  }
}

}  // namespace nmt::cli
