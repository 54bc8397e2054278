// libFuzzer target: the configuration reader. Any bytes as a config file, read as `nmt train
// --config FILE` reads it (our checks, then CLI11's reader, then validation): it may be refused
// with an exception, never crash.
#include <CLI/CLI.hpp>

#include <cstddef>
#include <cstdint>
#include <string>

#include "config/train_config.h"
#include "fuzz_file.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string path = nmt::fuzz::write_input("config.toml", data, size);
  try {
    nmt::check_config_file(path);
    nmt::TrainConfig config;
    CLI::App app;
    app.set_config("--config");
    app.allow_config_extras(false);
    CLI::App* train = app.add_subcommand("train");
    train->fallthrough();
    nmt::add_train_options(*train, config);
    app.parse(std::vector<std::string>{"train", path, "--config"});  // CLI11 takes them last first
    nmt::validate(config);
    nmt::config_from_entries(nmt::config_entries(config));  // what a checkpoint stores reads back
  } catch (const std::exception&) {
  }
  return 0;
}
