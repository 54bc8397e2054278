// nmt_checkpoint_bench: what a model file costs in the current format (version 2, safetensors) and
// in the format before (version 1, a LibTorch archive), for scripts/bench/checkpoint.sh. From one
// run's last.ckpt it writes both formats of the model alone (as best.ckpt holds it) and of the
// whole training state (as last.ckpt holds it), then loads the model from each, alternating, for
// --rounds rounds. A load is what translate does: read the file, check it, build the model; for
// version 1, the zip check and LibTorch's archive reader that nmt used. Prints a Markdown table:
//
//   | file | format | MB | load ms (median) | load ms (min) |
#include <torch/torch.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <string>
#include <vector>

#include "bench/version1_format.h"
#include "config/model_fields.h"
#include "inference/checkpoint_format.h"
#include "inference/model.h"
#include "train/checkpoint.h"
#include "train/fused_adam.h"
#include "train/optimizer_state.h"
#include "util/io.h"
#include "util/runtime.h"
#include "util/zip_reader.h"

namespace fs = std::filesystem;
using namespace nmt;

namespace {

using Clock = std::chrono::steady_clock;

double milliseconds_of(const std::function<void()>& work) {
  const auto start = Clock::now();
  work();
  return std::chrono::duration<double, std::milli>(Clock::now() - start).count();
}

double median(std::vector<double> values) {
  std::sort(values.begin(), values.end());
  return values[values.size() / 2];
}

// Version 1's load: the zip check over every entry, then LibTorch's reader.
void load_version1(const std::string& path, const ModelOptions& options) {
  const std::string bytes = read_file(path);
  ZipLimits limits;
  limits.may_deflate = [](const std::string& name) { return name.find("/code/") != std::string::npos; };
  read_zip_directory(bytes, limits);
  bench::load_version1_model(bytes, options);
}

}  // namespace

int main(int argc, char** argv) {
  std::string checkpoint, scratch = (fs::temp_directory_path() / "nmt_checkpoint_bench").string();
  int rounds = 9;
  CLI::App app("nmt_checkpoint_bench: loading and storing a model in checkpoint formats 2 and 1");
  app.add_option("--checkpoint", checkpoint, "a run's last.ckpt (with its optimizer state)")->required();
  app.add_option("--rounds", rounds, "alternating loads of each file")->capture_default_str();
  app.add_option("--scratch", scratch, "where the files are written")->capture_default_str();
  CLI11_PARSE(app, argc, argv);
  set_threads(1);
  fs::create_directories(scratch);

  TrainingCheckpoint state = load_training_checkpoint(checkpoint, torch::kCPU);
  FusedAdam optimizer(state.model.network->parameters(), torch::optim::AdamOptions(state.progress.learning_rate));
  restore_optimizer(state, checkpoint, optimizer);
  struct File {
    std::string name, format, path;
  };
  std::vector<File> files;
  for (const bool training : {false, true}) {
    const std::string name = training ? "model and training state (last.ckpt)" : "model (best.ckpt)";
    const std::string stem = (fs::path(scratch) / (training ? "last" : "best")).string();
    save_checkpoint(stem + ".v2.ckpt", state, training ? &optimizer : nullptr);
    write_file_atomic(stem + ".v1.ckpt", bench::version1_checkpoint(state, training ? &optimizer : nullptr));
    files.push_back({name, "2 (safetensors)", stem + ".v2.ckpt"});
    files.push_back({name, "1 (LibTorch archive)", stem + ".v1.ckpt"});
  }
  const ModelOptions& options = state.config.model;
  std::vector<std::vector<double>> times(files.size());
  for (int round = 0; round < rounds + 1; ++round) {  // round 0 warms the page cache and the allocator
    for (size_t i = 0; i < files.size(); ++i) {
      const File& file = files[i];
      const bool v2 = file.format[0] == '2';
      const double ms =
          milliseconds_of([&] { v2 ? (void)load_model(file.path, torch::kCPU) : load_version1(file.path, options); });
      if (round > 0) times[i].push_back(ms);
    }
  }
  std::printf("| file | format | MB | load ms (median of %d) | load ms (min) |\n| --- | --- | ---: | ---: | ---: |\n",
              rounds);
  for (size_t i = 0; i < files.size(); ++i) {
    std::printf("| %s | %s | %.2f | %.1f | %.1f |\n", files[i].name.c_str(), files[i].format.c_str(),
                static_cast<double>(fs::file_size(files[i].path)) / 1e6, median(times[i]),
                *std::min_element(times[i].begin(), times[i].end()));
  }
  return 0;
}
