// `nmt shortlist` as a library function: a model's lexical shortlist (search/shortlist.h) counted
// from the training corpus its run was trained on, prepared (or reused) as training prepares it.
#pragma once

#include <string>

#include "search/shortlist.h"

namespace spdlog {
class logger;
}

namespace nmt {

inline constexpr const char* kShortlistFile = "shortlist.bin";

struct ShortlistJob {
  std::string model_dir;
  std::string checkpoint = "best";  // whose vocabularies and training configuration: best, last or a path
  std::string output;               // empty: model_dir/shortlist.bin
  std::string train_source;         // the text to count, instead of the run's train-source ...
  std::string train_target;         // ... and train-target
  ShortlistSizes sizes;
  int threads = 0;  // for preparing the corpus (0 = all cores)
};

// Builds the shortlist of `job` and writes it; returns where. Missing files and a model directory
// without the checkpoint are errors naming them.
std::string make_shortlist(const ShortlistJob& job, spdlog::logger& log);

struct TrainingSetup;
// The end of a run with the `shortlist` key: model_dir/shortlist.bin from the run's corpus, with the
// default sizes.
void write_shortlist(const TrainingSetup& setup, spdlog::logger& log);

}  // namespace nmt
