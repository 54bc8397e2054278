// nmt_bench: the measurements behind scripts/bench/run.sh. Each subcommand measures one thing in
// a fresh process (so that its peak resident memory is its own) and prints one Markdown table row:
//
//   | what | setting | sentences/s | target tokens/s | FLOP per target token | GFLOP/s | % of mm | peak RSS |
//
//   nmt_bench mm [--size N | --shape M,K,N] [--packed] [--mm-gflops R] float32 matrix multiply (LibTorch,
//                                      or with --packed the recurrent loops' LoopWeight on one thread)
//   nmt_bench --config FILE train [train keys] [--bench-steps N] [--bench-warmup N] [--mm-gflops R]
//             [--profile TRACE.json]
//   nmt_bench translate --model DIR --input FILE [--beam-size K] [--batch-size N] [--device cuda] [--mm-gflops R]
//             [--profile TRACE.json] [--continuous]
//   RANK=r WORLD_SIZE=n MASTER_PORT=p nmt_bench allreduce --bytes B   (every rank; rank 0 prints
//             | all-reduce | setting | ms per all-reduce | bus GB/s |)
//
// `train` times the training loop's own update (train_step: collate, forward, backward, clipping,
// Adam) on the config's corpus after warm-up; `translate` times the Translator on a whole file
// after translating its first lines once (--continuous: a continuous batch, search/continuous.h). FLOPs come from the
// model's shapes (bench/flops.h).
#include <spdlog/spdlog.h>
#include <torch/csrc/autograd/profiler_legacy.h>
#include <torch/torch.h>
#include <torch/version.h>
#if TORCH_VERSION_MAJOR >= 2
#include <torch/csrc/autograd/profiler_kineto.h>
#endif
#include <unistd.h>
#include <torch/csrc/distributed/c10d/ProcessGroup.hpp>

#include <CLI/CLI.hpp>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "bench/flops.h"
#include "config/train_config.h"
#include "config/translate_options.h"
#include "inference/model.h"
#include "model/linear/loop_weight.h"
#include "search/continuous.h"
#include "search/translator.h"
#include "text/batching.h"
#include "text/special_tokens.h"
#include "train/distributed.h"
#include "train/setup.h"
#include "util/blas_core.h"
#include "util/device_rules.h"
#include "util/io.h"
#include "util/runtime.h"

namespace fs = std::filesystem;
using namespace nmt;

namespace {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point start) { return std::chrono::duration<double>(Clock::now() - start).count(); }

// Where a row ran: "N threads" on the CPU, "GPU" on a GPU.
std::string runs_on(const torch::Device& device) {
  return queues_work(device) ? "GPU" : std::to_string(torch::get_num_threads()) + " threads";
}

// Waits for the GPU's queued work, so that the clock read next counts it (a CPU computes at once).
void finish_queued_work(const torch::Device& device) {
  if (queues_work(device)) torch::cuda::synchronize();
}

// Peak resident set size of this process in MiB (VmHWM).
double peak_rss_mib() {
  std::ifstream status("/proc/self/status");
  std::string line;
  while (std::getline(status, line)) {
    if (line.rfind("VmHWM:", 0) == 0) return std::stod(line.substr(6)) / 1024.0;  // kB
  }
  return 0;
}

struct Row {
  std::string what, setting;
  double sentences_per_second = -1, tokens_per_second = -1, flops_per_token = -1, gflops = -1, mm_gflops = 0;
};

void print_row(const Row& row) {
  auto number = [](double value, const char* format) {
    if (value < 0) return std::string("-");
    char buffer[64];
    std::snprintf(buffer, sizeof(buffer), format, value);
    return std::string(buffer);
  };
  const std::string percent =
      row.gflops >= 0 && row.mm_gflops > 0 ? number(100.0 * row.gflops / row.mm_gflops, "%.1f %%") : "-";
  std::printf("| %s | %s | %s | %s | %s | %s | %s | %.0f MiB |\n", row.what.c_str(), row.setting.c_str(),
              number(row.sentences_per_second, "%.1f").c_str(), number(row.tokens_per_second, "%.0f").c_str(),
              number(row.flops_per_token / 1e6, "%.2f M").c_str(), number(row.gflops, "%.1f").c_str(), percent.c_str(),
              peak_rss_mib());
  std::fflush(stdout);
}

// [rows x inner] times [inner x columns], repeated for at least 3 s after warm-up. With `packed`,
// through LoopWeight (the weight packed once, model/linear/loop_weight.h), as the recurrent loops multiply.
Row bench_mm(int64_t rows, int64_t inner, int64_t columns, bool packed, double mm_gflops) {
  torch::NoGradGuard no_grad;
  torch::Tensor a = torch::randn({rows, inner}), b = torch::randn({inner, columns}), c = torch::empty({rows, columns});
  const LoopWeight weight = packed ? LoopWeight(b) : LoopWeight();
  const auto multiply = [&] {
    if (packed) {
      weight.multiply(a, torch::Tensor(), c);
    } else {
      torch::mm_out(c, a, b);
    }
  };
  for (int i = 0; i < 3; ++i) multiply();  // warm-up
  int64_t repeats = 0;
  const auto start = Clock::now();
  while (repeats < 5 || seconds_since(start) < 3.0) {
    multiply();
    ++repeats;
  }
  const double seconds = seconds_since(start);
  const std::string shape = rows == inner && inner == columns
                                ? std::to_string(rows) + "x" + std::to_string(rows)
                                : std::to_string(rows) + "x" + std::to_string(inner) + " by " + std::to_string(inner) +
                                      "x" + std::to_string(columns);
  Row row{"matrix multiply", "float32 " + shape + (packed ? ", packed weight" : "") + ", " +
                                 std::to_string(torch::get_num_threads()) + " threads"};
  row.gflops = 2.0 * static_cast<double>(rows * inner * columns) * static_cast<double>(repeats) / seconds / 1e9;
  row.mm_gflops = mm_gflops;
  return row;
}

// With --profile: a Chrome trace of the timed work, written when it ends. Every LibTorch operator;
// with LibTorch 2 (Kineto) on a GPU also the CUDA runtime's calls (launches, copies, waits, graph
// captures, allocations) and the kernels. scripts/bench/profile_summary.py sums one.
class Trace {
 public:
  Trace(const std::string& path, const torch::Device& device) : path_(path) {
    if (path.empty()) return;
#if TORCH_VERSION_MAJOR >= 2
    using torch::profiler::impl::ActivityType;
    const torch::profiler::impl::ProfilerConfig config(torch::profiler::impl::ProfilerState::KINETO);
    std::set<ActivityType> activities{ActivityType::CPU};
    if (queues_work(device)) activities.insert(ActivityType::CUDA);
    torch::autograd::profiler::prepareProfiler(config, activities);
    torch::autograd::profiler::enableProfiler(config, activities);
#else
    (void)device;
    legacy_ = std::make_unique<torch::autograd::profiler::RecordProfile>(path);
#endif
  }
  // Writes the trace.
  void end() {
    if (path_.empty()) return;
#if TORCH_VERSION_MAJOR >= 2
    torch::autograd::profiler::disableProfiler()->save(path_);
#else
    legacy_.reset();
#endif
    path_.clear();
  }
  ~Trace() {
    try {
      end();
    } catch (const std::exception&) {  // ended by an error already on its way
    }
  }

 private:
  std::string path_;
  std::unique_ptr<torch::autograd::profiler::RecordProfile> legacy_;
};

Row bench_train(TrainConfig config, int steps, int warmup, double mm_gflops, const std::string& profile) {
  validate(config);
  spdlog::set_level(spdlog::level::warn);
  // The set-up of `nmt train`, with the vocabularies trained into a scratch directory removed after.
  const fs::path scratch = fs::temp_directory_path() / ("nmt_bench." + std::to_string(::getpid()));
  fs::create_directories(scratch);
  config.model_dir = scratch.string();
  TrainingSetup setup = set_up_training(config, /*resume=*/false, *spdlog::default_logger());
  fs::remove_all(scratch);
  const TokenCorpus& corpus = setup.train_corpus;
  const torch::Device device = setup.device;
  const auto batches = make_batches(corpus, setup.train_pairs, config.batch_tokens, /*shuffle=*/true,
                                    static_cast<uint64_t>(config.seed));
  if (static_cast<size_t>(warmup + steps) > batches.size()) {
    throw std::invalid_argument("--bench-steps + --bench-warmup exceed the " + std::to_string(batches.size()) +
                                " batches of one epoch");
  }
  Seq2Seq& model = setup.state.model.network;
  FusedAdam& optimizer = *setup.optimizer;
  model->train();
  for (int i = 0; i < warmup; ++i) {
    train_step(model, optimizer, collate(corpus, batches[i], config.model.reverse_target).to(device), config);
  }
  finish_queued_work(device);
  int64_t target_tokens = 0, source_tokens = 0, sentences = 0, target_cells = 0;
  Trace trace(profile, device);
  const auto start = Clock::now();
  for (int i = warmup; i < warmup + steps; ++i) {
    Batch batch = collate(corpus, batches[i], config.model.reverse_target).to(device);
    train_step(model, optimizer, batch, config);
    target_tokens += batch.target_tokens;
    source_tokens += batch.source_lengths.sum().item<int64_t>();
    sentences += batch.source.size(0);
    target_cells += batch.target_output.numel();
  }
  finish_queued_work(device);
  const double seconds = seconds_since(start);
  trace.end();

  FlopShapes shapes{setup.state.model.target_vocabulary.size(),
                    static_cast<double>(source_tokens) / static_cast<double>(sentences),
                    static_cast<double>(target_tokens) / static_cast<double>(sentences)};
  char padding[32];
  std::snprintf(padding, sizeof(padding), "%.0f%%", 100.0 * (1.0 - static_cast<double>(target_tokens) / target_cells));
  Row row{"training",
          std::to_string(steps) + " steps, " + std::to_string(sentences / steps) + " sentences/batch, " + padding +
              " target padding, " + config.model.attention + (config.model.coverage ? " with coverage" : "") +
              (config.model.decoder_layers > 1 ? ", " + std::to_string(config.model.decoder_layers) + " decoder layers"
                                               : "") +
              ", " + runs_on(device)};
  row.sentences_per_second = static_cast<double>(sentences) / seconds;
  row.tokens_per_second = static_cast<double>(target_tokens) / seconds;
  row.flops_per_token = training_flops_per_target_token(config.model, shapes);
  row.gflops = row.flops_per_token * row.tokens_per_second / 1e9;
  row.mm_gflops = mm_gflops;
  return row;
}

// The lines in their order through one continuous batch (search/continuous.h) of `capacity`
// sentences, all waiting from the start: a saturated server's decoding, without HTTP.
std::vector<Translation> translate_continuously(const TranslationModels& models, const std::vector<std::string>& lines,
                                                const SearchOptions& search, size_t capacity, int64_t language_tag) {
  torch::InferenceMode inference_mode;
  const Vocabulary& source_vocabulary = models.source_vocabulary();
  ContinuousGreedy running(models.ensemble(), search, models.shortlist);
  const JoinPolicy policy{capacity};
  std::vector<Translation> translations(lines.size());
  size_t next = 0;
  while (next < lines.size() || running.size() > 0) {
    const size_t fitting = std::min(lines.size() - next, capacity - running.size());
    if (policy.join(running.size(), fitting, 0)) {
      std::vector<std::vector<int64_t>> sources;
      std::vector<int64_t> tags;
      for (size_t taken = 0; next < lines.size() && taken < fitting; ++next, ++taken) {
        std::vector<int64_t> ids = source_ids(lines[next], source_vocabulary, translations[next], language_tag);
        if (ids.empty()) continue;
        sources.push_back(std::move(ids));
        tags.push_back(static_cast<int64_t>(next));
      }
      running.add(sources, tags);
    }
    for (ContinuousGreedy::Ended& ended : running.step()) {
      translations[static_cast<size_t>(ended.tag)].hypotheses.push_back(std::move(ended.hypothesis));
    }
  }
  const bool backwards = models.ensemble().members().front()->options().reverse_target;
  for (size_t i = 0; i < lines.size(); ++i) {
    finish_translation(translations[i], lines[i], models.target_vocabulary(), search, backwards);
  }
  return translations;
}

Row bench_translate(const TranslateOptions& options, const std::string& input, double mm_gflops,
                    const std::string& profile, bool continuous) {
  set_threads(options.threads);
  const SearchOptions& search = options.search;
  const BatchingOptions& batching = options.batching;
  const torch::Device device = parse_device(options.device);
  const TranslationModels models = load_models(options, device);
  const TranslationModel& model = models.members.front();
  const std::vector<std::string> lines = read_lines(input);
  Translator translator(models.ensemble(), model.source_vocabulary, model.target_vocabulary, search, batching,
                        options.text, device, models.shortlist);
  if (continuous && (!ContinuousGreedy::supports(models.ensemble(), search, device) || batching.batch_in_tokens)) {
    throw std::invalid_argument(
        "--continuous takes greedy search without attention weights, on the CPU, with --batch-size in sentences");
  }
  const auto capacity = static_cast<size_t>(batching.batch_size);
  const int64_t language_tag =
      target_language_tag(options.text.target_language, models.ensemble(), model.source_vocabulary);
  // Continuous: as nmt serve --workers N with N threads, one batch per thread, the lines dealt out.
  const auto workers = static_cast<size_t>(torch::get_num_threads());
  const auto translate = [&](const std::vector<std::string>& some) {
    if (!continuous) return translator.translate(some);
    std::vector<Translation> translations(some.size());
    run_in_parallel(workers, workers, [&](size_t worker) {
      std::vector<std::string> own;
      for (size_t i = worker; i < some.size(); i += workers) own.push_back(some[i]);
      std::vector<Translation> done = translate_continuously(models, own, search, capacity, language_tag);
      for (size_t k = 0; k < done.size(); ++k) translations[worker + k * workers] = std::move(done[k]);
    });
    return translations;
  };
  translate({lines.begin(), lines.begin() + static_cast<std::ptrdiff_t>(std::min<size_t>(lines.size(), 100))});

  Trace trace(profile, device);
  const auto start = Clock::now();
  const std::vector<Translation> translations = translate(lines);
  const double seconds = seconds_since(start);
  trace.end();
  int64_t target_tokens = 0, source_tokens = 0, sentences = 0;
  for (const auto& translation : translations) {
    if (translation.hypotheses.empty()) continue;
    target_tokens += static_cast<int64_t>(translation.hypotheses[0].tokens.size()) + 1;  // + EOS
    source_tokens += static_cast<int64_t>(translation.source_pieces.size()) + 1;
    ++sentences;
  }
  FlopShapes shapes{model.target_vocabulary.size(), static_cast<double>(source_tokens) / static_cast<double>(sentences),
                    static_cast<double>(target_tokens) / static_cast<double>(sentences)};
  FlopCount count;  // an ensemble runs every member
  for (const TranslationModel& member : models.members) {
    const FlopCount one = count_flops(member.options, shapes);
    count.encoder += one.encoder, count.decoder += one.decoder, count.per_sentence += one.per_sentence;
  }
  // Beam search runs K decoder rows per output position (fewer once hypotheses finish).
  const double beam_decoder = static_cast<double>(search.beam_size) * count.decoder;
  const std::string members = models.members.size() > 1 ? std::to_string(models.members.size()) + " models, " : "";
  Row row{members +
              (search.beam_size == 1 ? "translation, greedy" : "translation, beam " + std::to_string(search.beam_size)),
          std::to_string(lines.size()) + " sentences, " + (continuous ? "continuous batch of " : "batch ") +
              std::to_string(batching.batch_size) + (batching.batch_in_tokens ? " tokens" : " sentences") +
              (models.shortlist ? ", shortlist (FLOPs of the whole output layer)" : "") +
              (models.compute_type == "int8" ? ", int8" : "") + ", " + runs_on(device)};
  row.sentences_per_second = static_cast<double>(lines.size()) / seconds;
  row.tokens_per_second = static_cast<double>(target_tokens) / seconds;
  row.flops_per_token = count.forward_per_target_token(shapes) - count.decoder + beam_decoder;
  row.gflops = row.flops_per_token * row.tokens_per_second / 1e9;
  row.mm_gflops = mm_gflops;
  return row;
}

// The all-reduce of one update's gradients alone, as GradientReducer does it (buckets of
// `bucket_bytes` started back to back, then all waited for), on a process group of the ranks of
// the environment (RANK, WORLD_SIZE, MASTER_PORT...): milliseconds per all-reduce and the ring's bus
// bandwidth, 2 (N - 1) / N x bytes / time. Rank 0 prints the line; the others print nothing.
void bench_allreduce(DistributedOptions options, int64_t bytes, int64_t bucket_bytes, int repeats) {
  resolve_distributed_options(options);
  if (!options.enabled()) throw std::invalid_argument("allreduce: set RANK and WORLD_SIZE (two ranks or more)");
  Distributed distributed(options, torch::kCPU);
  std::vector<torch::Tensor> buckets;
  for (int64_t left = bytes / 4; left > 0; left -= bucket_bytes / 4) {
    buckets.push_back(torch::ones({std::min(left, bucket_bytes / 4)}));
  }
  auto all_reduce = [&] {
    std::vector<c10::intrusive_ptr<c10d::Work>> works;
    for (torch::Tensor& bucket : buckets) {
      std::vector<torch::Tensor> tensors = {bucket};
      works.push_back(distributed.group().allreduce(tensors));
    }
    for (auto& work : works) distributed.wait(*work, "the all-reduce");
  };
  for (int i = 0; i < 3; ++i) all_reduce();  // warm-up
  const auto start = Clock::now();
  for (int i = 0; i < repeats; ++i) all_reduce();
  const double seconds = seconds_since(start) / repeats;
  distributed.finish();
  if (!distributed.is_master()) return;
  const int ranks = distributed.world_size();
  std::printf("| all-reduce | %.1f MB in %zu buckets, %d ranks, %s | %.1f ms | %.2f GB/s |\n",
              static_cast<double>(bytes) / 1e6, buckets.size(), ranks, distributed.backend().c_str(), seconds * 1e3,
              2.0 * (ranks - 1) / ranks * static_cast<double>(bytes) / seconds / 1e9);
}

}  // namespace

int main(int argc, char** argv) {
  nmt::restart_for_blas(argv);  // OpenBLAS's kernels for this CPU (util/blas_core.h)
  CLI::App app{"nmt_bench: measurements for scripts/bench/run.sh (one Markdown table row per run)"};
  app.require_subcommand(1);
  app.set_config("--config", "", "TOML configuration file ([train] section)");
  double mm_gflops = 0;
  int threads = 0;

  CLI::App* mm = app.add_subcommand("mm", "float32 matrix-multiply rate");
  int64_t size = 2048;
  std::vector<int64_t> shape;
  CLI::Option* size_option = mm->add_option("--size", size, "square matrices of this size")->capture_default_str();
  mm->add_option("--shape", shape, "M,K,N: [M x K] times [K x N] instead")
      ->delimiter(',')
      ->expected(3)
      ->excludes(size_option);
  mm->add_option("--threads", threads, "threads (0 = cores)");
  bool packed = false;
  mm->add_flag("--packed", packed,
               "multiply as the recurrent loops do (LoopWeight: the packed kernel of the level in force)");
  mm->add_option("--mm-gflops", mm_gflops, "matrix-multiply rate for the % column");

  CLI::App* train = app.add_subcommand("train", "training throughput at a configuration's settings");
  TrainConfig config;
  add_train_options(*train, config);
  int steps = 100, warmup = 20;
  train->add_option("--bench-steps", steps, "timed steps")->capture_default_str();
  train->add_option("--bench-warmup", warmup, "untimed steps first")->capture_default_str();
  train->add_option("--mm-gflops", mm_gflops, "matrix-multiply rate for the % column");
  std::string profile;
  train->add_option("--profile", profile, "also write a Chrome trace of the timed steps to this file (slows them)");

  CLI::App* translate = app.add_subcommand("translate", "translation speed of a trained model");
  TranslateOptions translate_options;
  std::string input;
  translate->add_option("--model", translate_options.models, "model directory; several: an ensemble")->required();
  translate->add_option("--input", input, "source text")->required();
  add_translate_options(*translate, translate_options);
  translate->add_option("--mm-gflops", mm_gflops, "matrix-multiply rate for the % column");
  translate->add_option("--profile", profile, "also write a Chrome trace of the timed translation to this file");
  bool continuous = false;
  translate->add_flag("--continuous", continuous,
                      "the lines in their order through one continuous batch of --batch-size sentences (greedy), "
                      "as nmt serve runs greedy requests");

  CLI::App* allreduce = app.add_subcommand("allreduce", "one update's gradient all-reduce alone (ranks from RANK...)");
  DistributedOptions distributed_options;
  int64_t allreduce_bytes = 0, bucket_bytes = int64_t{4} << 20;
  int repeats = 20;
  allreduce->add_option("--bytes", allreduce_bytes, "bytes per all-reduce (nmt train logs its own)")->required();
  allreduce->add_option("--bucket-bytes", bucket_bytes, "bucket size")->capture_default_str();
  allreduce->add_option("--repeats", repeats, "timed all-reduces")->capture_default_str();
  allreduce->add_option("--threads", threads, "threads (0 = cores)");

  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& error) {
    return app.exit(error);
  }
  try {
    if (mm->parsed()) {
      set_threads(threads);
      print_row(shape.empty() ? bench_mm(size, size, size, packed, mm_gflops)
                              : bench_mm(shape[0], shape[1], shape[2], packed, mm_gflops));
    } else if (train->parsed()) {
      print_row(bench_train(config, steps, warmup, mm_gflops, profile));
    } else if (allreduce->parsed()) {
      set_threads(threads);
      bench_allreduce(distributed_options, allreduce_bytes, bucket_bytes, repeats);
    } else {
      print_row(bench_translate(translate_options, input, mm_gflops, profile, continuous));
    }
  } catch (const std::exception& error) {
    std::fprintf(stderr, "nmt_bench: %s\n", error.what());
    return 1;
  }
  return 0;
}
