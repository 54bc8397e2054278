// The command line as a user meets it: exit codes and one-line errors that name the problem.
#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include <pty.h>
#include <sys/ioctl.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <map>
#include <sstream>

#include "cli_helpers.h"
#include "eval/bleu.h"
#include "helpers.h"
#include "inference/checkpoint_format.h"
#include "inference/model.h"
#include "process_helpers.h"
#include "text/corpus.h"
#include "text/vocabulary.h"
#include "util/io.h"
#include "util/runtime.h"
#include "util/tensorboard.h"

using namespace nmt;
using namespace nmt::testing;
namespace fs = std::filesystem;

TEST_CASE("cli: a misspelt config key is an error naming the key", "[cli]") {
  const std::string config = write_config("typo.toml", "hiden-size = 12\n");
  CommandResult result = run_nmt("train --config " + config + " --dump-config");
  CHECK(result.status != 0);
  CHECK_THAT(result.output, Catch::Contains("hiden-size"));
}

TEST_CASE("cli: config file values, command-line overrides and --dump-config", "[cli]") {
  const std::string config = write_config("good.toml", "attention = \"dot\"\ndropout = 0.25\nvocab-size = 500\n");
  CommandResult result = run_nmt("train --config " + config + " --vocab-size 300 --byte-fallback false --dump-config");
  REQUIRE(result.status == 0);
  CHECK_THAT(result.output, Catch::Contains("attention = \"dot\"") && Catch::Contains("dropout = 0.25") &&
                                Catch::Contains("vocab-size = 300"));
}

TEST_CASE("cli: a bad choice lists the allowed values", "[cli]") {
  CommandResult result = run_nmt("train --attention luong --dump-config");
  CHECK(result.status != 0);
  CHECK_THAT(result.output, Catch::Contains("additive") && Catch::Contains("general") && Catch::Contains("none"));
  // Checked before any model is read: serve refuses at once.
  CommandResult batching = run_nmt("serve --model /nonexistent --batching streaming");
  CHECK(batching.status != 0);
  CHECK_THAT(batching.output, Catch::Contains("--batching") && Catch::Contains("{auto,continuous,static}"));
}

TEST_CASE("cli: missing files and devices give one-line errors", "[cli]") {
  CommandResult missing = run_nmt(
      "train --train-source /nope/a.src --train-target /nope/a.tgt --dev-source /nope/d.src "
      "--dev-target /nope/d.tgt --model-dir " +
      (work_directory() / "m0").string());
  CHECK(missing.status != 0);
  CHECK_THAT(missing.output, Catch::Contains("/nope/a.src"));

  CommandResult no_model = run_nmt("translate --model /nope/model --input /dev/null");
  CHECK(no_model.status != 0);
  CHECK_THAT(no_model.output, Catch::Contains("/nope/model"));

  const std::string hyp = (work_directory() / "hyp.txt").string();
  const std::string ref = (work_directory() / "ref.txt").string();
  write_file_atomic(hyp, "a b c\n");
  write_file_atomic(ref, "a b c\nd e f\n");
  CommandResult mismatch = run_nmt("evaluate --hyp " + hyp + " --ref " + ref);
  CHECK(mismatch.status != 0);
  // The counts after the paths' names (the paths hold this process's id, digits of their own).
  CHECK_THAT(mismatch.output, Catch::Contains(hyp + " has 1 lines but " + ref + " has 2"));
}

TEST_CASE("cli: two corpora, one tagged: translating needs no tag, and corpus mistakes name their key", "[cli]") {
  const std::string model_dir = (work_directory() / "tagged").string();
  const std::string two_corpora = " --train-source " + kToy + "/train.src," + kToy + "/dev.src --train-target " + kToy +
                                  "/train.tgt," + kToy + "/dev.tgt";
  CommandResult trained =
      run_nmt(tiny_train_arguments(model_dir, 4, 4) + two_corpora + " --train-weights 0.1,1 --train-tags ',<bt>'");
  INFO(trained.output);
  REQUIRE(trained.status == 0);
  CHECK_THAT(trained.output, Catch::Contains("epoch 1 trains on 600 of " + kToy + "/train.src (weight 0.1), ") &&
                                 Catch::Contains(" of " + kToy + "/dev.src (weight 1, tag <bt>)"));
  const std::string input = (work_directory() / "tagged_input.txt").string();
  write_file_atomic(input, "A frog sees the bridge .\nThe dog eats .\n");
  CommandResult translated =
      run_nmt("translate --model " + model_dir + " --input " + input + " --max-length 8 --quiet");
  INFO(translated.output);
  REQUIRE(translated.status == 0);
  CHECK(split_lines(translated.output).size() == 2);
  CHECK_THAT(translated.output, !Catch::Contains("<bt>"));
  // The tag is in the model's vocabulary as a control symbol, an id of its own that no text encodes
  // to (the model read it before every source sentence of the second corpus) and that translations
  // never write.
  const TranslationModel tagged = load_model_from_directory(model_dir, "best", torch::kCPU);
  const int64_t tag = tagged.source_vocabulary.tag_id("<bt>");
  CHECK(tag > kEosId);
  const std::vector<int64_t> literal = tagged.source_vocabulary.encode("<bt> The dog eats .");
  CHECK(std::find(literal.begin(), literal.end(), tag) == literal.end());
  CHECK(tagged.source_vocabulary.tag_id("<ft>") == -1);  // only the tags the run gave

  const std::string others = (work_directory() / "corpus_errors").string();
  CommandResult missing = run_nmt(tiny_train_arguments(others) + " --train-source " + kToy + "/train.src,/nope/bt.src" +
                                  " --train-target " + kToy + "/train.tgt," + kToy + "/dev.tgt");
  CHECK(missing.status != 0);
  CHECK_THAT(missing.output, Catch::Contains("/nope/bt.src: file not found"));
  CommandResult weight = run_nmt(tiny_train_arguments(others) + two_corpora + " --train-weights 1,0");
  CHECK(weight.status != 0);
  CHECK_THAT(weight.output, Catch::Contains("train-weights: '0' is not a weight"));
  CommandResult tags = run_nmt(tiny_train_arguments(others) + two_corpora + " --train-tags bt");
  CHECK(tags.status != 0);
  CHECK_THAT(tags.output, Catch::Contains("train-tags: 1 item for 2 corpora"));
  CHECK_FALSE(fs::exists(others));
}

TEST_CASE("cli: back-translation end to end: a reverse model, synthesize with sampling and noise, tagged training",
          "[cli]") {
  const fs::path dir = work_directory() / "back_translation";
  fs::create_directories(dir);
  // The reverse model: the toy corpus's target side to its source side.
  const std::string reverse = (dir / "reverse").string();
  CommandResult trained = run_nmt(
      "train --train-source " + kToy + "/train.tgt --train-target " + kToy + "/train.src --dev-source " + kToy +
      "/dev.tgt --dev-target " + kToy + "/dev.src --model-dir " + reverse +
      " --vocab-size 200 --embedding-size 16 --encoder-hidden-size 8 --decoder-hidden-size 16"
      " --attention-size 8 --max-steps 4 --validate-every 4 --batch-tokens 400 --threads 1 --byte-fallback false");
  INFO(trained.output);
  REQUIRE(trained.status == 0);

  // Target-language text (the dev set's targets, with an empty line) back-translated by sampling.
  const std::string mono = (dir / "mono.tgt").string();
  std::vector<std::string> mono_lines = read_lines(kToy + "/dev.tgt");
  mono_lines.resize(40);
  mono_lines[5].clear();
  std::string mono_text;
  for (const std::string& line : mono_lines) mono_text += line + "\n";
  write_file_atomic(mono, mono_text);
  const std::string bt_source = (dir / "bt.src").string(), bt_target = (dir / "bt.tgt").string();
  const std::string synthesize = "synthesize --model " + reverse + " --input " + mono + " --source-output " +
                                 bt_source + " --target-output " + bt_target + " --max-length 12 --threads 1";
  CommandResult made = run_nmt(synthesize + " --sampling-topk 10 --seed 3 --noise-delete 0.1 --noise-shift 3");
  INFO(made.output);
  REQUIRE(made.status == 0);
  const std::vector<std::string> sources = read_lines(bt_source), targets = read_lines(bt_target);
  const auto origin = nlohmann::json::parse(read_file(bt_source + ".origin.json"));
  const auto pairs = origin.at("pairs").get<size_t>();
  REQUIRE(sources.size() == pairs);
  REQUIRE(targets.size() == pairs);
  CHECK(pairs + origin.at("skipped").get<size_t>() == 40);
  CHECK(pairs >= 30);
  // The targets are the text's lines in order, the empty one (and any whose translation is empty) left out.
  const auto in_order = [&mono_lines](const std::vector<std::string>& lines) {
    size_t next = 0;
    for (const std::string& line : lines) {
      while (next < mono_lines.size() && mono_lines[next] != line) ++next;
      if (next == mono_lines.size() || line.empty()) return false;
      ++next;
    }
    return true;
  };
  CHECK(in_order(targets));
  for (const std::string& source : sources) CHECK_FALSE(source.empty());
  CHECK(origin.at("direction") == "back");
  CHECK(origin.at("search").at("topk") == 10);
  CHECK(origin.at("noise").at("max_shift") == 3);
  CHECK(origin.at("models").at(0).at("path").get<std::string>().find("best.ckpt") != std::string::npos);
  // The same seed draws the same corpus.
  const std::string first = read_file(bt_source);
  REQUIRE(run_nmt(synthesize + " --sampling-topk 10 --seed 3 --noise-delete 0.1 --noise-shift 3").status == 0);
  CHECK(read_file(bt_source) == first);

  // Forward: the input is the model's own source language, the translations become the targets.
  const std::string ft_source = (dir / "ft.src").string(), ft_target = (dir / "ft.tgt").string();
  CommandResult forward =
      run_nmt("synthesize --model " + reverse + " --input " + mono + " --direction forward" + " --source-output " +
              ft_source + " --target-output " + ft_target + " --beam-size 2 --max-length 12 --threads 1");
  REQUIRE(forward.status == 0);
  CHECK(in_order(read_lines(ft_source)));
  CHECK(read_lines(ft_source).size() == read_lines(ft_target).size());
  CHECK(nlohmann::json::parse(read_file(ft_source + ".origin.json")).at("search").at("beam_size") == 2);

  // Noise on translations made before: the bytes of a search with that noise and seed in one run.
  const std::string beam = "synthesize --model " + reverse + " --input " + mono + " --beam-size 2 --max-length 12";
  const std::string noise = " --seed 5 --noise-delete 0.2 --noise-blank 0.1 --noise-shift 2";
  const fs::path plain = dir / "plain", searched = dir / "searched", noised = dir / "noised";
  const auto outputs = [](const fs::path& stem) {
    return " --source-output " + stem.string() + ".src --target-output " + stem.string() + ".tgt";
  };
  REQUIRE(run_nmt(beam + outputs(plain)).status == 0);
  REQUIRE(run_nmt(beam + outputs(searched) + noise).status == 0);
  const std::string from_file =
      "synthesize --translations " + plain.string() + ".src --input " + plain.string() + ".tgt";
  CommandResult noisy_copy = run_nmt(from_file + outputs(noised) + noise);
  INFO(noisy_copy.output);
  REQUIRE(noisy_copy.status == 0);
  CHECK_THAT(noisy_copy.output, !Catch::Contains("does nothing with --translations"));  // --seed draws the noise
  // Every decoding option is said to do nothing without a model, whatever its name.
  CommandResult decoding = run_nmt(from_file + outputs(dir / "decoding") +
                                   " --max-output-length 20 --ban-unk --max-search-memory 512 --cut-sentences no");
  INFO(decoding.output);
  CHECK(decoding.status == 0);
  for (const char* option : {"--max-output-length", "--ban-unk", "--max-search-memory", "--cut-sentences"}) {
    CHECK_THAT(decoding.output,
               Catch::Contains(std::string("synthesize: ") + option + " does nothing with --translations"));
  }
  CHECK(read_file(noised.string() + ".src") == read_file(searched.string() + ".src"));
  CHECK(read_file(noised.string() + ".tgt") == read_file(plain.string() + ".tgt"));
  CHECK(read_file(noised.string() + ".src") != read_file(plain.string() + ".src"));
  const auto noised_origin = nlohmann::json::parse(read_file(noised.string() + ".src.origin.json"));
  CHECK(noised_origin.at("translations").at("path").get<std::string>() ==
        fs::absolute(plain.string() + ".src").lexically_normal().string());
  CHECK(noised_origin.at("translations_origin").at("search").at("beam_size") == 2);
  CHECK_FALSE(noised_origin.contains("models"));
  CommandResult both = run_nmt(from_file + " --model " + reverse + outputs(dir / "both"));
  CHECK(both.status != 0);
  CHECK_THAT(both.output, Catch::Contains("--translations"));
  CommandResult neither = run_nmt("synthesize --input " + mono + outputs(dir / "neither"));
  CHECK(neither.status != 0);
  CHECK_THAT(neither.output, Catch::Contains("--model: give the model"));
  CommandResult misaligned =
      run_nmt("synthesize --translations " + plain.string() + ".src --input " + mono + outputs(dir / "misaligned"));
  CHECK(misaligned.status != 0);
  CHECK_THAT(misaligned.output, Catch::Contains("lines and --input 40"));
  CHECK_FALSE(fs::exists(dir / "misaligned.src"));

  // The forward model trains on the real corpus and the tagged synthetic one.
  const std::string model_dir = (dir / "forward").string();
  CommandResult mixed =
      run_nmt(tiny_train_arguments(model_dir, 2, 2) + " --train-source " + kToy + "/train.src," + bt_source +
              " --train-target " + kToy + "/train.tgt," + bt_target + " --train-tags ',<bt>'");
  INFO(mixed.output);
  CHECK(mixed.status == 0);
  CHECK_THAT(mixed.output, Catch::Contains(std::to_string(pairs) + " of " + bt_source + " (weight 1, tag <bt>)"));

  // Mistakes: nothing written.
  fs::remove(bt_source);
  CommandResult nowhere = run_nmt("synthesize --model " + reverse + " --input " + mono + " --source-output " +
                                  (dir / "nope" / "bt.src").string() + " --target-output " + bt_target);
  CHECK(nowhere.status != 0);
  CHECK_THAT(nowhere.output, Catch::Contains("--source-output"));
  CommandResult onto_input = run_nmt("synthesize --model " + reverse + " --input " + mono + " --source-output " +
                                     bt_source + " --target-output " + mono);
  CHECK(onto_input.status != 0);
  CHECK_THAT(onto_input.output, Catch::Contains("--target-output: " + mono + " is the input"));
  CommandResult noisy = run_nmt(synthesize + " --noise-blank 1.5");
  CHECK(noisy.status != 0);
  CHECK_THAT(noisy.output, Catch::Contains("--noise-blank: must be in [0, 1)"));
  CHECK_FALSE(fs::exists(bt_source));
}

#ifndef NMT_EXPECT_CUDA
TEST_CASE("cli: --device cuda without CUDA is a clear error", "[cli]") {
  CommandResult result = run_nmt(tiny_train_arguments((work_directory() / "cuda").string()) + " --device cuda");
  CHECK(result.status != 0);
  CHECK_THAT(result.output, Catch::Contains("--device cuda"));
  CommandResult second = run_nmt("translate --model " + (work_directory() / "none").string() + " --device cuda:1");
  CHECK(second.status != 0);
  CHECK_THAT(second.output, Catch::Contains("--device cuda:1: this LibTorch has no CUDA support"));
}
#endif

TEST_CASE("cli: --device takes cpu, cuda and cuda:N, and names any other", "[cli]") {
  for (const char* name : {"cpu", "cuda", "cuda:0", "cuda:7"}) {
    INFO(name);
    CHECK(nmt::device_name_problem(name).empty());
  }
  for (const char* name : {"gpu", "cuda:", "cuda:x", "cuda:-1", "cuda:1.5", "CUDA", "cuda:99999", "cpu:0"}) {
    INFO(name);
    CHECK_THAT(nmt::device_name_problem(name), Catch::Contains("is not one of cpu|cuda|cuda:N"));
    CHECK_THROWS_WITH(nmt::parse_device(name), Catch::Contains(std::string("--device: '") + name + "'"));
  }
  CommandResult training = run_nmt(tiny_train_arguments((work_directory() / "gpu").string()) + " --device gpu:1");
  CHECK(training.status != 0);
  CHECK_THAT(training.output, Catch::Contains("device: 'gpu:1' is not one of cpu|cuda|cuda:N"));
  CHECK_FALSE(fs::exists(work_directory() / "gpu" / "config.toml"));
}

TEST_CASE("cli: keep-checkpoints keeps the newest N, average writes a checkpoint translate can use", "[cli]") {
  const std::string model_dir = (work_directory() / "kept").string();
  CommandResult trained = run_nmt(tiny_train_arguments(model_dir, 6, 2) + " --keep-checkpoints 2");
  INFO(trained.output);
  REQUIRE(trained.status == 0);
  CHECK_FALSE(fs::exists(fs::path(model_dir) / "step-00000002.ckpt"));
  CHECK(fs::exists(fs::path(model_dir) / "step-00000004.ckpt"));
  CHECK(fs::exists(fs::path(model_dir) / "step-00000006.ckpt"));

  CommandResult averaged = run_nmt("average --model " + model_dir);
  INFO(averaged.output);
  REQUIRE(averaged.status == 0);
  CHECK_THAT(averaged.output, Catch::Contains("averaged 2 checkpoints"));
  // Every weight the mean of the two kept checkpoints' (summed in float64, then rounded to float32),
  // and the two differ, so that neither alone would pass for the mean.
  {
    const TranslationModel fourth = load_model(model_dir + "/step-00000004.ckpt", torch::kCPU);
    const TranslationModel sixth = load_model(model_dir + "/step-00000006.ckpt", torch::kCPU);
    const TranslationModel mean = load_model(model_dir + "/averaged.ckpt", torch::kCPU);
    const auto fourth_weights = fourth.network->named_parameters(), sixth_weights = sixth.network->named_parameters();
    const auto mean_weights = mean.network->named_parameters();
    REQUIRE(mean_weights.size() == sixth_weights.size());
    bool moved = false;
    for (const auto& item : mean_weights) {
      INFO(item.key());
      const torch::Tensor& a = fourth_weights[item.key()];
      const torch::Tensor& b = sixth_weights[item.key()];
      const torch::Tensor expected = ((a.to(torch::kFloat64) + b.to(torch::kFloat64)) / 2).to(torch::kFloat32);
      CHECK(torch::allclose(item.value(), expected, 1e-6, 1e-7));
      moved = moved || !torch::equal(a, b);
    }
    CHECK(moved);
  }
  const std::string input = (work_directory() / "average_input.txt").string();
  write_file_atomic(input, "A frog sees the bridge .\n");
  CommandResult translated = run_nmt("translate --model " + model_dir + " --checkpoint " + model_dir +
                                     "/averaged.ckpt --input " + input + " --max-length 8 --quiet");
  CHECK(translated.status == 0);
  CHECK(split_lines(translated.output).size() == 1);

  // Ensembles: a model with itself translates and scores exactly as the model alone; the kept
  // checkpoints of one run decode together.
  const std::string decode = " --input " + input + " --beam-size 3 --max-length 8 --with-scores --quiet";
  CommandResult single = run_nmt("translate --model " + model_dir + decode);
  CommandResult doubled = run_nmt("translate --model " + model_dir + " --model " + model_dir + decode);
  REQUIRE(single.status == 0);
  CHECK(doubled.output == single.output);
  const std::string fourth = model_dir + "/step-00000004.ckpt", sixth = model_dir + "/step-00000006.ckpt";
  CommandResult kept =
      run_nmt("translate --model " + model_dir + " --checkpoint " + fourth + " --checkpoint " + sixth + decode);
  CHECK(kept.status == 0);
  CHECK(split_lines(kept.output).size() == 1);
  // Both members count: the pair scores a translation at the mean of the two checkpoints'
  // log-probabilities (search/ensemble.h), which differ.
  const auto log_probability = [&](const std::string& checkpoints) {
    const std::string scores = (work_directory() / "ensemble_scores.txt").string();
    CommandResult scored = run_nmt("score --model " + model_dir + checkpoints + " --src " + input + " --tgt " + input +
                                   " --output " + scores);
    INFO(scored.output);
    REQUIRE(scored.status == 0);
    const std::vector<std::string> lines = read_lines(scores);
    REQUIRE(lines.size() == 1);
    std::istringstream fields(lines[0]);
    double score = 0, total = 0;
    REQUIRE(static_cast<bool>(fields >> score >> total));
    return total;
  };
  const double alone_fourth = log_probability(" --checkpoint " + fourth);
  const double alone_sixth = log_probability(" --checkpoint " + sixth);
  const double together = log_probability(" --checkpoint " + fourth + " --checkpoint " + sixth);
  CHECK(alone_fourth != alone_sixth);
  CHECK(together == Approx((alone_fourth + alone_sixth) / 2).epsilon(1e-4));
  const std::string score = " --src " + input + " --ref " + input + " --beam-size 2 --max-length 8 --json --quiet";
  CommandResult evaluated = run_nmt("evaluate --model " + model_dir + score);
  CommandResult evaluated_twice = run_nmt("evaluate --model " + model_dir + " --model " + model_dir + score);
  REQUIRE(evaluated.status == 0);
  CHECK(evaluated_twice.output == evaluated.output);
  CommandResult miscounted = run_nmt("translate --model " + model_dir + " --model " + model_dir + " --model " +
                                     model_dir + " --checkpoint best --checkpoint last" + decode);
  CHECK(miscounted.status != 0);
  CHECK_THAT(miscounted.output, Catch::Contains("--checkpoint"));

  // A run without kept checkpoints: a one-line error that says what to do.
  const std::string plain_dir = (work_directory() / "plain").string();
  REQUIRE(run_nmt(tiny_train_arguments(plain_dir)).status == 0);
  CommandResult nothing = run_nmt("average --model " + plain_dir);
  CHECK(nothing.status != 0);
  CHECK_THAT(nothing.output, Catch::Contains("keep-checkpoints"));
  // Models with other vocabularies cannot be an ensemble: refused before decoding, naming both.
  const std::string other_dir = (work_directory() / "other_vocabulary").string();
  REQUIRE(run_nmt(tiny_train_arguments(other_dir) + " --vocab-size 120").status == 0);
  CommandResult mixed = run_nmt("translate --model " + plain_dir + " --model " + other_dir + decode);
  CHECK(mixed.status != 0);
  CHECK_THAT(mixed.output, Catch::Contains("vocabulary") && Catch::Contains(other_dir) && Catch::Contains(plain_dir));
  // The trainer's own names are not overwritten with a weights-only average (--resume needs last.ckpt).
  CommandResult reserved = run_nmt("average --model " + model_dir + " --output " + model_dir + "/last.ckpt");
  CHECK(reserved.status != 0);
  CHECK_THAT(reserved.output, Catch::Contains("reserved"));
}

TEST_CASE("cli: train, then translate keeps line order and empty lines, and evaluate scores it", "[cli]") {
  const std::string model_dir = (work_directory() / "model").string();
  CommandResult trained = run_nmt(tiny_train_arguments(model_dir));
  INFO(trained.output);
  REQUIRE(trained.status == 0);
  const std::string input = (work_directory() / "input.txt").string();
  write_file_atomic(input, "A frog sees the bridge .\n\nThe dog eats .\n");
  const std::string output = (work_directory() / "output.txt").string();
  CommandResult translated = run_nmt("translate --model " + model_dir + " --input " + input + " --output " + output +
                                     " --beam-size 3 --max-length 8 --quiet");
  INFO(translated.output);
  REQUIRE(translated.status == 0);
  std::vector<std::string> lines = read_lines(output);
  REQUIRE(lines.size() == 3);
  CHECK(lines[1].empty());

  const std::string attention_dir = (work_directory() / "attention").string();
  CommandResult aligned = run_nmt("translate --model " + model_dir + " --input " + input +
                                  " --alignment --attention-dir " + attention_dir + " --max-length 8 --quiet");
  REQUIRE(aligned.status == 0);
  CHECK(fs::exists(fs::path(attention_dir) / "input.txt.00001.svg"));
  CHECK(fs::exists(fs::path(attention_dir) / "input.txt.00003.json"));
  CHECK_FALSE(fs::exists(fs::path(attention_dir) / "input.txt.00002.svg"));

  // Standard input in, standard output out: the same three lines, the empty one kept.
  CommandResult piped = run_nmt("translate --model " + model_dir + " --beam-size 3 --max-length 8 --quiet < " + input);
  REQUIRE(piped.status == 0);
  CHECK(piped.output == read_file(output));
  // One sentence per batch: with two threads the batches are decoded side by side, and must give
  // exactly what one thread gives, in the same order.
  const std::string one_per_batch = "translate --model " + model_dir + " --input " + input +
                                    " --beam-size 3 --max-length 8 --with-scores --batch-size 1 --quiet";
  CommandResult one_thread = run_nmt(one_per_batch + " --threads 1");
  CommandResult two_threads = run_nmt(one_per_batch + " --threads 2");
  REQUIRE(one_thread.status == 0);
  CHECK(two_threads.output == one_thread.output);
  // The order itself: each line as that sentence translated alone, and the two differ (their
  // scores at least), so that the file's lines the other way round would not pass. (Around the
  // empty middle line, a reversed output has the same shape.)
  const auto alone = [&](const std::string& sentence) {
    const std::string single = (work_directory() / "alone.txt").string();
    write_file_atomic(single, sentence + "\n");
    CommandResult translated_alone = run_nmt("translate --model " + model_dir + " --input " + single +
                                             " --beam-size 3 --max-length 8 --with-scores --batch-size 1 --quiet"
                                             " --threads 1");
    REQUIRE(translated_alone.status == 0);
    return translated_alone.output;
  };
  const std::vector<std::string> in_order = split_lines(one_thread.output);
  REQUIRE(in_order.size() == 3);
  const std::string first_alone = alone("A frog sees the bridge ."), third_alone = alone("The dog eats .");
  REQUIRE(first_alone != third_alone);
  CHECK(in_order[0] + "\n" == first_alone);
  CHECK(in_order[2] + "\n" == third_alone);
  // n-best: 'i ||| text ||| score' lines, two per non-empty input line, none missing for the empty one.
  CommandResult n_best = run_nmt("translate --model " + model_dir + " --input " + input +
                                 " --beam-size 3 --n-best 2 --max-length 8 --quiet");
  REQUIRE(n_best.status == 0);
  CHECK_THAT(n_best.output, Catch::StartsWith("0 ||| ") && Catch::Contains("\n1 ||| ") && Catch::Contains("\n2 ||| "));
  // Invalid UTF-8 on standard input is an error naming the line.
  const std::string bad = (work_directory() / "bad.txt").string();
  write_file_atomic(bad, "A frog .\n\xff\xfe\n");
  CommandResult invalid = run_nmt("translate --model " + model_dir + " --quiet < " + bad);
  CHECK(invalid.status != 0);
  CHECK_THAT(invalid.output, Catch::Contains("standard input:2: invalid UTF-8"));
  // Two inputs with the same file name would overwrite each other's output: refused before decoding.
  fs::create_directories(work_directory() / "a");
  fs::create_directories(work_directory() / "b");
  write_file_atomic((work_directory() / "a" / "same.txt").string(), "The dog eats .\n");
  write_file_atomic((work_directory() / "b" / "same.txt").string(), "A frog sees the bridge .\n");
  const std::string out_dir = (work_directory() / "out").string();
  CommandResult clash =
      run_nmt("translate --model " + model_dir + " --input " + (work_directory() / "a" / "same.txt").string() + " " +
              (work_directory() / "b" / "same.txt").string() + " --output-dir " + out_dir + " --quiet");
  CHECK(clash.status != 0);
  CHECK_THAT(clash.output, Catch::Contains("same.txt"));
  CHECK_FALSE(fs::exists(fs::path(out_dir) / "same.txt.hyp"));
  // An output in a directory that does not exist is refused up front.
  CommandResult nowhere =
      run_nmt("translate --model " + model_dir + " --input " + input + " --output /nope/out.txt --quiet");
  CHECK(nowhere.status != 0);
  CHECK_THAT(nowhere.output, Catch::Contains("/nope"));

  const std::string perfect = (work_directory() / "perfect.txt").string();
  write_file_atomic(perfect, "The dog eats the red apple today .\nA frog sees the bridge .\n");
  CommandResult scored = run_nmt("evaluate --hyp " + perfect + " --ref " + perfect + " --json");
  REQUIRE(scored.status == 0);
  const nlohmann::json scores = nlohmann::json::parse(scored.output);  // one JSON object
  CHECK(scores.at("bleu").get<double>() == Approx(100.0).epsilon(1e-9));
  CHECK(scores.at("chrf").get<double>() == Approx(100.0).epsilon(1e-9));
  CHECK(scores.at("bleu_precisions").size() == 4);

  // Translate-then-score in one command, on the first lines of the toy dev set.
  const std::string dev_source = (work_directory() / "dev3.src").string();
  const std::string dev_target = (work_directory() / "dev3.tgt").string();
  std::vector<std::string> source_lines = read_lines(kToy + "/dev.src"), target_lines = read_lines(kToy + "/dev.tgt");
  write_file_atomic(dev_source, source_lines[0] + "\n" + source_lines[1] + "\n");
  write_file_atomic(dev_target, target_lines[0] + "\n" + target_lines[1] + "\n");
  CommandResult end_to_end = run_nmt("evaluate --model " + model_dir + " --src " + dev_source + " --ref " + dev_target +
                                     " --beam-size 2 --max-length 8");
  INFO(end_to_end.output);
  CHECK(end_to_end.status == 0);
  CHECK_THAT(end_to_end.output, Catch::Contains("BLEU = ") && Catch::Contains("tok:13a"));
  // A missing reference is reported (naming it) without translating first.
  CommandResult no_reference =
      run_nmt("evaluate --model " + model_dir + " --src " + dev_source + " --ref /nope/ref.txt");
  CHECK(no_reference.status != 0);
  CHECK_THAT(no_reference.output, Catch::Contains("/nope/ref.txt"));
}

TEST_CASE("cli: an unknown NMT_KERNELS value is a one-line error naming it", "[cli]") {
  CommandResult result = run_nmt("translate --model /nonexistent", "NMT_KERNELS=fast");
  CHECK(result.status != 0);
  CHECK_THAT(result.output, Catch::Contains("NMT_KERNELS=fast") && Catch::Contains("off|avx2|avx512"));
}

TEST_CASE("cli: an unknown NMT_GPU_DECODER_PASS value is a one-line error naming it", "[cli]") {
  CommandResult result = run_nmt("translate --model /nonexistent", "NMT_GPU_DECODER_PASS=fast");
  CHECK(result.status != 0);
  CHECK_THAT(result.output, Catch::Contains("NMT_GPU_DECODER_PASS=fast") && Catch::Contains("loop or recorded"));
  CHECK_THAT(result.output, !Catch::Contains("/nonexistent"));  // before any work
  CommandResult fine = run_nmt("translate --model /nonexistent", "NMT_GPU_DECODER_PASS=recorded");
  CHECK_THAT(fine.output, Catch::Contains("/nonexistent"));
}

TEST_CASE("cli: nmt prepare once, then training and --resume map the prepared corpus without encoding it again",
          "[cli]") {
  const fs::path corpus_dir = work_directory() / "prepared";
  const std::string model_dir = (work_directory() / "from_prepared").string();
  const std::string shared = " --corpus-dir " + corpus_dir.string();
  CommandResult prepared = run_nmt("prepare " + tiny_train_arguments(model_dir).substr(6) + shared);
  REQUIRE(prepared.status == 0);
  CHECK_THAT(prepared.output, Catch::Contains("preparing") && Catch::Contains("pairs read"));
  CHECK(fs::exists(corpus_dir / "train.corpus"));
  CHECK(fs::exists(corpus_dir / "vocab.joint.model"));
  CHECK_FALSE(fs::exists(fs::path(model_dir) / "last.ckpt"));  // prepare trains nothing
  // The configuration file's [train] section applies to prepare, with --config before or after it.
  const std::string config = write_config("prepare.toml", "vocab-size = 123\n");
  CHECK_THAT(run_nmt("--config " + config + " prepare --dump-config").output, Catch::Contains("vocab-size = 123"));
  CHECK_THAT(run_nmt("prepare --config " + config + " --dump-config").output, Catch::Contains("vocab-size = 123"));

  CommandResult trained = run_nmt(tiny_train_arguments(model_dir) + shared);
  REQUIRE(trained.status == 0);
  CHECK_THAT(trained.output, Catch::Contains("using the vocabularies and the prepared corpus"));
  CHECK_THAT(trained.output, !Catch::Contains("preparing") && !Catch::Contains("training a joint"));
  CHECK(fs::exists(fs::path(model_dir) / "vocab.joint.model"));  // the model directory is complete

  CommandResult resumed = run_nmt(tiny_train_arguments(model_dir, 4) + shared + " --resume");
  REQUIRE(resumed.status == 0);
  CHECK_THAT(resumed.output, !Catch::Contains("preparing"));

  // Another vocabulary setting makes a new vocabulary and a new prepared corpus, saying why.
  CommandResult other = run_nmt(tiny_train_arguments(model_dir) + shared + " --vocab-size 150 --overwrite");
  REQUIRE(other.status == 0);
  CHECK_THAT(other.output, Catch::Contains("training a joint") && Catch::Contains("the vocabulary changed"));
}

TEST_CASE("cli: thread counts are checked the same way by every command", "[cli]") {
  for (const char* threads : {"-1", "10000", "500"}) {
    INFO(threads);
    CommandResult translate = run_nmt("translate --model /nonexistent --threads " + std::string(threads));
    CHECK(translate.status != 0);
    CHECK_THAT(translate.output, Catch::Contains("threads: " + std::string(threads) + " is out of range"));
    CommandResult train =
        run_nmt(tiny_train_arguments((work_directory() / "threads").string()) + " --threads " + threads);
    CHECK(train.status != 0);
    CHECK_THAT(train.output, Catch::Contains("threads: " + std::string(threads) + " is out of range"));
  }
}

TEST_CASE("cli: errors go to standard error, never into the translation on standard output", "[cli]") {
  const std::string command =
      "NMT_KERNELS=bogus " + std::string(NMT_BINARY) + " translate --model /nonexistent 2>/dev/null";
  FILE* pipe = ::popen(command.c_str(), "r");
  REQUIRE(pipe != nullptr);
  std::string standard_output;
  std::array<char, 256> buffer{};
  size_t count;
  while ((count = std::fread(buffer.data(), 1, buffer.size(), pipe)) > 0) standard_output.append(buffer.data(), count);
  CHECK(::pclose(pipe) != 0);
  CHECK(standard_output.empty());
}

TEST_CASE("cli: translate never replaces its input, average never replaces a run's other files", "[cli]") {
  const std::string input = (work_directory() / "same.txt").string();
  write_file_atomic(input, "keep me\n");
  CommandResult same = run_nmt("translate --model /nonexistent --input " + input + " --output " + input);
  CHECK(same.status != 0);
  CHECK_THAT(same.output, Catch::Contains("is the input file"));
  CHECK(read_file(input) == "keep me\n");

  const fs::path run = work_directory() / "average_guard";
  fs::create_directories(run);
  write_file_atomic((run / "config.toml").string(), "[train]\n");
  CommandResult average =
      run_nmt("average --model " + run.string() + " --checkpoints a.ckpt --output " + (run / "config.toml").string());
  CHECK(average.status != 0);
  CHECK_THAT(average.output, Catch::Contains("not a checkpoint"));
  CHECK(read_file((run / "config.toml").string()) == "[train]\n");
}

TEST_CASE("cli: non-finite numbers are refused for every numeric option", "[cli]") {
  for (const std::string option : {"--learning-rate", "--dropout", "--max-minutes"}) {
    for (const char* value : {"nan", "inf", "-inf"}) {
      INFO(option << "=" << value);
      CommandResult train = run_nmt("train " + option + "=" + value + " --dump-config");
      CHECK(train.status != 0);
      CHECK_THAT(train.output, Catch::Contains(option) && Catch::Contains("finite"));
    }
  }
  CommandResult translate = run_nmt("translate --model /nonexistent --length-penalty nan");
  CHECK(translate.status != 0);
  CHECK_THAT(translate.output, Catch::Contains("--length-penalty") && Catch::Contains("finite"));
}

TEST_CASE("cli: an empty reference line is named by file and line", "[cli]") {
  const std::string hypothesis = (work_directory() / "empty_ref.hyp").string();
  const std::string reference = (work_directory() / "empty_ref.ref").string();
  write_file_atomic(hypothesis, "a b\nc d\n");
  write_file_atomic(reference, "a b\n\n");
  CommandResult result = run_nmt("evaluate --hyp " + hypothesis + " --ref " + reference);
  CHECK(result.status != 0);
  CHECK_THAT(result.output, Catch::Contains(reference + ":2") && Catch::Contains("empty"));
}

TEST_CASE("cli: one run per model directory, and a new run never replaces files it did not write", "[cli]") {
  const fs::path dir = work_directory() / "guarded";
  fs::remove_all(dir);  // each section starts from an empty directory
  fs::create_directories(dir);
  SECTION("a folder with its own config.toml is refused, and the file kept") {
    write_file_atomic((dir / "config.toml").string(), "mine\n");
    CommandResult result = run_nmt(tiny_train_arguments(dir.string()));
    CHECK(result.status != 0);
    CHECK_THAT(result.output, Catch::Contains("already holds config.toml") && Catch::Contains("--overwrite"));
    CHECK(read_file((dir / "config.toml").string()) == "mine\n");
  }
  SECTION("a best.ckpt without last.ckpt is a run too") {
    write_file_atomic((dir / "best.ckpt").string(), "weights\n");
    CHECK_THAT(run_nmt(tiny_train_arguments(dir.string())).output, Catch::Contains("already holds best.ckpt"));
    CHECK(fs::exists(dir / "best.ckpt"));
  }
  SECTION("--overwrite with a mistyped corpus path removes nothing") {
    write_file_atomic((dir / "best.ckpt").string(), "weights\n");
    CommandResult result = run_nmt(tiny_train_arguments(dir.string()) + " --train-source /nope/train.src --overwrite");
    CHECK(result.status != 0);
    CHECK_THAT(result.output, Catch::Contains("/nope/train.src"));
    CHECK(fs::exists(dir / "best.ckpt"));
  }
  SECTION("a directory locked by another process is refused, naming it") {
    const DirectoryLock lock(dir.string());  // this test process holds it
    CommandResult result = run_nmt(tiny_train_arguments(dir.string()) + " --overwrite");
    CHECK(result.status != 0);
    CHECK_THAT(result.output, Catch::Contains("in use by another nmt process") &&
                                  Catch::Contains("pid " + std::to_string(::getpid())));
  }
}

TEST_CASE("cli: a config file with a key twice, an open quote or a run-destroying flag is refused", "[cli]") {
  const std::string twice = write_config("twice.toml", "dropout = 0.1\nvocab-size = 100\ndropout = 0.2\n");
  CommandResult result = run_nmt("train --config " + twice + " --dump-config");
  CHECK(result.status != 0);
  CHECK_THAT(result.output, Catch::Contains(twice + ":4") && Catch::Contains("dropout is given twice"));

  const std::string open_quote = write_config("open_quote.toml", "model-dir = \"models/x\n");
  result = run_nmt("train --config " + open_quote + " --dump-config");
  CHECK(result.status != 0);
  CHECK_THAT(result.output, Catch::Contains(open_quote + ":2") && Catch::Contains("closing"));

  for (const char* flag : {"overwrite", "resume"}) {
    const std::string shared = write_config(std::string(flag) + ".toml", std::string(flag) + " = true\n");
    result = run_nmt("train --config " + shared + " --dump-config");
    CHECK(result.status != 0);
    CHECK_THAT(result.output, Catch::Contains(flag));
  }
}

namespace {

// Runs nmt with `arguments` to the end: its exit status and its peak resident memory in MiB.
std::pair<int, double> run_measuring_memory(const std::vector<std::string>& arguments) {
  const Child child = spawn_nmt(arguments, (work_directory() / "memory.log").string(), false);
  int status = 0;
  rusage usage{};
  REQUIRE(::wait4(child.pid, &status, 0, &usage) == child.pid);
  return {WIFEXITED(status) ? WEXITSTATUS(status) : -1, static_cast<double>(usage.ru_maxrss) / 1024.0};
}

}  // namespace

TEST_CASE("cli: a beam the vocabulary cannot fill is refused, a batch of beams stays within --max-search-memory",
          "[cli]") {
  const std::string model_dir = (work_directory() / "memory_model").string();
  REQUIRE(run_nmt(tiny_train_arguments(model_dir)).status == 0);
  std::string lines;
  const std::vector<std::string> dev = read_lines(kToy + "/dev.src");
  for (size_t i = 0; i < 32; ++i) lines += dev[i] + "\n";
  const std::string input = (work_directory() / "memory_input.txt").string();
  write_file_atomic(input, lines);

  // 200 subwords less pad and BOS: a beam of 100000 is refused at once, by every command.
  for (const std::string& command : {"translate --model " + model_dir + " --input " + input,
                                     "evaluate --model " + model_dir + " --src " + input + " --ref " + input}) {
    const CommandResult refused = run_nmt(command + " --beam-size 100000 --quiet");
    INFO(refused.output);
    CHECK(refused.status == 1);
    CHECK_THAT(refused.output, Catch::Contains("--beam-size 100000") && Catch::Contains("use at most 198"));
  }

  // The largest beam, 32 sentences in one batch and a long length cap: without a bound its search
  // takes about 100 MiB; within 16 MiB the batch is cut, and the output is the same.
  const auto search = [&](const std::string& beam, const std::string& memory, const std::string& output) {
    return run_measuring_memory({"translate", "--model",
                                 model_dir,   "--input",
                                 input,       "--output",
                                 output,      "--beam-size",
                                 beam,        "--batch-size",
                                 "32",        "--max-length",
                                 "100",       "--max-length-ratio",
                                 "100",       "--threads",
                                 "1",         "--with-scores",
                                 "--quiet",   "--max-search-memory",
                                 memory});
  };
  const std::string bounded_output = (work_directory() / "bounded.txt").string();
  const std::string unbounded_output = (work_directory() / "unbounded.txt").string();
  const auto [greedy_status, greedy_mib] = search("1", "4096", (work_directory() / "greedy.txt").string());
  const auto [bounded_status, bounded_mib] = search("198", "16", bounded_output);
  const auto [unbounded_status, unbounded_mib] = search("198", "4096", unbounded_output);
  REQUIRE(greedy_status == 0);
  REQUIRE(bounded_status == 0);
  REQUIRE(unbounded_status == 0);
  CHECK(read_file(bounded_output) == read_file(unbounded_output));
  INFO("peak MiB: greedy " << greedy_mib << ", beam 198 within 16 MiB " << bounded_mib << ", unbounded "
                           << unbounded_mib);
#ifndef __SANITIZE_ADDRESS__  // AddressSanitizer's quarantine keeps freed memory resident
  CHECK(bounded_mib - greedy_mib < 16 + 16);
  CHECK(unbounded_mib - greedy_mib > 60);  // the measurement can tell a missing bound
#endif
  // Not even one sentence fits: an error naming the options, before anything is written.
  const CommandResult tiny = run_nmt("translate --model " + model_dir + " --input " + input +
                                     " --beam-size 198 --max-search-memory 1 --quiet");
  CHECK(tiny.status == 1);
  CHECK_THAT(tiny.output, Catch::Contains("--max-search-memory 1") && Catch::Contains("lower --beam-size"));
}

TEST_CASE("cli: score gives a translation its --with-scores score, bad files name file and line, --seed repeats",
          "[cli]") {
  const std::string model_dir = (work_directory() / "model").string();
  CommandResult trained =
      run_nmt(tiny_train_arguments(model_dir, /*steps=*/500, /*validate_every=*/500) + " --learning-rate 0.01");
  INFO(trained.output);
  REQUIRE(trained.status == 0);
  const std::vector<std::string> dev = read_lines(kToy + "/dev.src");
  const std::string input = (work_directory() / "input.txt").string();
  write_file_atomic(input, dev[0] + "\n" + dev[1] + "\n\n" + dev[2] + "\n" + dev[3] + "\n");
  const std::string hypotheses = (work_directory() / "hypotheses.txt").string();
  const std::string model = " --model " + model_dir + " --threads 1";
  // Forced decoding of beam search's output gives its --with-scores score wherever the search
  // ended with EOS and its subwords are the ones its text encodes to. (Sentencepiece may read a
  // text back in other pieces, and score scores those; a search stopped by the length limit has
  // no EOS, and score adds one.) The attention files name the search's subwords, EOS when made.
  // On the first 40 dev lines, most are read back as they were made.
  const std::string forty = (work_directory() / "forty.txt").string();
  const std::string searched_dir = (work_directory() / "searched").string();
  std::string forty_lines;
  for (size_t i = 0; i < 40; ++i) forty_lines += dev[i] + "\n";
  write_file_atomic(forty, forty_lines);
  const std::vector<std::string> searched =
      split_lines(run_nmt("translate" + model + " --input " + forty +
                          " --beam-size 5 --with-scores --quiet --attention-dir " + searched_dir)
                      .output);
  REQUIRE(searched.size() == 40);
  std::vector<std::string> texts;  // each line's text, after its score and a tab
  std::string searched_texts;
  for (const std::string& line : searched) {
    texts.push_back(line.substr(line.find('\t') + 1));
    searched_texts += texts.back() + "\n";
  }
  write_file_atomic(hypotheses, searched_texts);
  const std::string forced_scores = (work_directory() / "forced.txt").string();
  REQUIRE(
      run_nmt("score" + model + " --src " + forty + " --tgt " + hypotheses + " --per-token --output " + forced_scores)
          .status == 0);
  const std::vector<std::string> forced = read_lines(forced_scores);
  REQUIRE(forced.size() == 40);
  const Vocabulary vocabulary = Vocabulary::from_serialized(read_file(model_dir + "/vocab.joint.model"), model_dir);
  int read_back_alike = 0;
  for (size_t i = 0; i < searched.size(); ++i) {
    INFO("line " << i + 1 << ": " << searched[i] << " scored " << forced[i]);
    char name[48];
    std::snprintf(name, sizeof name, "forty.txt.%05zu.json", i + 1);
    const auto search_pieces = nlohmann::json::parse(read_file((fs::path(searched_dir) / name).string()))
                                   .at("target_tokens")
                                   .get<std::vector<std::string>>();
    std::vector<std::string> text_pieces;
    for (const int64_t id : vocabulary.encode(texts[i])) {
      text_pieces.push_back(vocabulary.piece(id));
    }
    text_pieces.emplace_back("</s>");
    std::istringstream fields(forced[i]);
    double score = 0, total = 0, mean = 0;
    fields >> score >> total >> mean;
    std::vector<double> tokens;
    for (double value; fields >> value;) tokens.push_back(value);
    CHECK(tokens.size() == text_pieces.size());  // score reads the text's own pieces
    if (text_pieces == search_pieces) {
      ++read_back_alike;
      CHECK(score == Approx(std::stod(searched[i])).epsilon(1e-5));
    }
  }
  CHECK(read_back_alike >= 20);

  // Every token's log-probability, their sum and mean; the empty line scores 0.
  CommandResult translated = run_nmt("translate" + model + " --input " + input + " --beam-size 5 --quiet");
  REQUIRE(translated.status == 0);
  write_file_atomic(hypotheses, translated.output);
  const std::string scores = (work_directory() / "scores.txt").string();
  CommandResult scored =
      run_nmt("score" + model + " --src " + input + " --tgt " + hypotheses + " --per-token --output " + scores);
  INFO(scored.output);
  REQUIRE(scored.status == 0);
  const std::vector<std::string> score_lines = read_lines(scores);
  REQUIRE(score_lines.size() == 5);
  for (size_t i = 0; i < score_lines.size(); ++i) {
    INFO("line " << i + 1 << ": " << score_lines[i]);
    std::istringstream fields(score_lines[i]);
    double score = 0, total = 0, mean = 0;
    fields >> score >> total >> mean;
    std::vector<double> tokens;
    for (double value; fields >> value;) tokens.push_back(value);
    double sum = 0;
    for (double value : tokens) sum += value;
    CHECK(sum == Approx(total).epsilon(1e-4));
    if (!tokens.empty()) CHECK(mean == Approx(total / static_cast<double>(tokens.size())).epsilon(1e-4));
  }
  CHECK(score_lines[2] == "0\t0\t0\t");  // the empty line: translate's empty output, score 0
  // An ensemble of the model with itself gives the model's scores.
  CommandResult twice = run_nmt("score" + model + " --model " + model_dir + " --src " + input + " --tgt " + hypotheses);
  REQUIRE(twice.status == 0);
  CommandResult once = run_nmt("score" + model + " --src " + input + " --tgt " + hypotheses);
  CHECK(twice.output == once.output);

  // Bad files: a clear error naming file and line, and the earlier output untouched.
  const std::string short_target = (work_directory() / "short.txt").string();
  write_file_atomic(short_target, "one line\n");
  CommandResult mismatch =
      run_nmt("score" + model + " --src " + input + " --tgt " + short_target + " --output " + scores);
  CHECK(mismatch.status != 0);
  CHECK_THAT(mismatch.output, Catch::Contains(input + " has 5 lines but " + short_target + " has 1"));
  CHECK(read_lines(scores) == score_lines);
  const std::string bad = (work_directory() / "bad.txt").string();
  write_file_atomic(bad, "a\nb\nc\n\xff\xfe\ne\n");
  CommandResult invalid = run_nmt("score" + model + " --src " + input + " --tgt " + bad + " --output " + scores);
  CHECK(invalid.status != 0);
  CHECK_THAT(invalid.output, Catch::Contains(bad + ":4: invalid UTF-8"));
  CHECK(read_lines(scores) == score_lines);
  CommandResult onto_input =
      run_nmt("score" + model + " --src " + input + " --tgt " + hypotheses + " --output " + input);
  CHECK(onto_input.status != 0);
  CHECK_THAT(onto_input.output, Catch::Contains("is the input file"));
  CommandResult missing = run_nmt("score" + model + " --src /nope/src.txt --tgt " + hypotheses);
  CHECK(missing.status != 0);
  CHECK_THAT(missing.output, Catch::Contains("/nope/src.txt"));

  // Sampling from the command line: the same --seed draws the same lines; n-best lists are beam search's.
  const std::string sample = "translate" + model + " --input " + input + " --sampling-topk 10 --quiet";
  CommandResult drawn = run_nmt(sample + " --seed 7");
  REQUIRE(drawn.status == 0);
  CHECK(run_nmt(sample + " --seed 7").output == drawn.output);
  CommandResult sampled_n_best = run_nmt(sample + " --n-best 2");
  CHECK(sampled_n_best.status != 0);
  CHECK_THAT(sampled_n_best.output, Catch::Contains("--n-best must be 1"));

  // Target prefixes: each output starts with its line's; an empty prefix line changes nothing.
  const std::vector<std::string> plain = read_lines(hypotheses);
  const std::string prefixes = (work_directory() / "prefixes.txt").string();
  write_file_atomic(prefixes, "a small\n\n\n" + plain[3].substr(0, plain[3].find(' ')) + "\n\n");
  const std::string prefixed_command = "translate" + model + " --input " + input + " --beam-size 5 --quiet --prefix ";
  CommandResult prefixed = run_nmt(prefixed_command + prefixes);
  INFO(prefixed.output);
  REQUIRE(prefixed.status == 0);
  const std::vector<std::string> outputs = split_lines(prefixed.output);
  REQUIRE(outputs.size() == 5);
  CHECK(outputs[0].rfind("a small", 0) == 0);
  CHECK(outputs[1] == plain[1]);
  CHECK(outputs[2].empty());
  CHECK(outputs[3].rfind(plain[3].substr(0, plain[3].find(' ')), 0) == 0);
  CHECK(outputs[4] == plain[4]);
  // Bad prefix files: the line count, a prefix past the output limit, invalid UTF-8.
  write_file_atomic(bad, "a\nb\n");
  CHECK_THAT(run_nmt(prefixed_command + bad).output, Catch::Contains(bad + " has 2 lines for 5 input lines"));
  std::string long_prefix;
  for (int i = 0; i < 300; ++i) long_prefix += "word ";
  write_file_atomic(bad, long_prefix + "\n\n\n\n\n");
  CommandResult too_long = run_nmt(prefixed_command + bad);
  CHECK(too_long.status != 0);
  CHECK_THAT(too_long.output, Catch::Contains(bad + ":1: the prefix has"));
  write_file_atomic(bad, "a\nb\nc\n\xff\xfe\ne\n");
  CHECK_THAT(run_nmt(prefixed_command + bad).output, Catch::Contains(bad + ":4: invalid UTF-8"));

  // Terminology constraints: each output contains its line's phrases, here words of the toy
  // references that the line's plain translation lacks (a word and two words on the first line);
  // a line without any translates as before.
  const std::vector<std::string> references = read_lines(kToy + "/dev.tgt");
  const auto absent = [&](const std::string& output, size_t words) {
    for (const std::string& reference : references) {
      std::istringstream in(reference);
      std::vector<std::string> tokens;
      for (std::string word; in >> word;) tokens.push_back(word);
      for (size_t i = 0; i + words <= tokens.size(); ++i) {
        std::string phrase = tokens[i];
        for (size_t k = 1; k < words; ++k) phrase += " " + tokens[i + k];
        if (tokens[i].size() >= 3 && output.find(phrase) == std::string::npos) return phrase;
      }
    }
    return std::string();
  };
  const std::string first = absent(plain[0], 1), second = absent(plain[0], 2), third = absent(plain[3], 1);
  REQUIRE((!first.empty() && !second.empty() && !third.empty()));
  const std::string constraints = (work_directory() / "constraints.txt").string();
  write_file_atomic(constraints, first + "\t" + second + "\n\n\n" + third + "\n\n");
  const std::string constrained_command =
      "translate" + model + " --input " + input + " --beam-size 5 --quiet --constraints ";
  CommandResult constrained = run_nmt(constrained_command + constraints);
  INFO(constrained.output);
  REQUIRE(constrained.status == 0);
  const std::vector<std::string> met = split_lines(constrained.output);
  REQUIRE(met.size() == 5);
  CHECK_THAT(met[0], Catch::Contains(first) && Catch::Contains(second));
  CHECK(met[1] == plain[1]);
  CHECK(met[2].empty());
  CHECK_THAT(met[3], Catch::Contains(third));
  CHECK(met[4] == plain[4]);
  // A file of empty lines gives none, and so goes with sampling.
  write_file_atomic(bad, "\n\n\n\n\n");
  CHECK(run_nmt(sample + " --constraints " + bad).status == 0);
  // Bad constraint files: the line count, phrases past the output limit, invalid UTF-8; sampling.
  write_file_atomic(bad, "a\nb\n");
  CHECK_THAT(run_nmt(constrained_command + bad).output, Catch::Contains(bad + " has 2 lines for 5 input lines"));
  write_file_atomic(bad, "\n" + long_prefix + "\n\n\n\n");
  CommandResult too_many = run_nmt(constrained_command + bad);
  CHECK(too_many.status != 0);
  CHECK_THAT(too_many.output, Catch::Contains(bad + ":2: the constraints have"));
  write_file_atomic(bad, "a\nb\nc\n\xff\xfe\ne\n");
  CHECK_THAT(run_nmt(constrained_command + bad).output, Catch::Contains(bad + ":4: invalid UTF-8"));
  write_file_atomic(bad, "\n\n\n" + first + "\t\u6f22\u5b57\n\n");  // characters the toy vocabulary lacks
  CHECK_THAT(run_nmt(constrained_command + bad).output,
             Catch::Contains(bad + ":4: \"\u6f22\u5b57\" has characters the model's target vocabulary lacks"));
  CommandResult sampled_constraints = run_nmt(sample + " --constraints " + constraints);
  CHECK(sampled_constraints.status != 0);
  CHECK_THAT(sampled_constraints.output, Catch::Contains(constraints + ": terminology constraints need beam search"));
}

TEST_CASE("cli: a right-to-left model (reverse-target) writes text order, and decodes alone", "[cli]") {
  const std::string backwards = (work_directory() / "backwards").string();
  const std::string forwards = (work_directory() / "forwards").string();
  for (const auto& [dir, flag] : {std::pair{backwards, " --reverse-target true"}, std::pair{forwards, ""}}) {
    CommandResult trained = run_nmt(tiny_train_arguments(dir, 200, 200) + " --learning-rate 0.01" + flag);
    INFO(trained.output);
    REQUIRE(trained.status == 0);
  }
  const std::vector<std::string> dev = read_lines(kToy + "/dev.src");
  const std::string input = (work_directory() / "input.txt").string();
  write_file_atomic(input, dev[0] + "\n" + dev[1] + "\n" + dev[2] + "\n");
  const std::string model = " --model " + backwards + " --threads 1";
  // Every toy target ends with " ·", which a right-to-left model writes first: turned around, each
  // line ends with it.
  CommandResult translated = run_nmt("translate" + model + " --input " + input + " --beam-size 3 --quiet");
  REQUIRE(translated.status == 0);
  std::istringstream lines(translated.output);
  int count = 0;
  for (std::string line; std::getline(lines, line); ++count) {
    INFO(line);
    REQUIRE(line.size() > 3);
    CHECK(line.substr(line.size() - 3) == " \u00b7");
  }
  CHECK(count == 3);
  // The two directions do not decode together, and a prefix would be a right-to-left model's end.
  CommandResult mixed = run_nmt("translate" + model + " --model " + forwards + " --input " + input + " --quiet");
  CHECK(mixed.status != 0);
  CHECK_THAT(mixed.output, Catch::Contains("right-to-left model (reverse-target)"));
  CommandResult prefixed = run_nmt("translate" + model + " --input " + input + " --prefix " + input + " --quiet");
  CHECK(prefixed.status != 0);
  CHECK_THAT(prefixed.output, Catch::Contains("right to left (reverse-target)"));
  // Constraints are written back to front by such a model, and read in text order: a phrase of two
  // different words, which the model could meet the wrong way round.
  const std::string reference = read_lines(kToy + "/dev.tgt")[0];
  const std::string phrase = reference.substr(0, reference.find(' ', reference.find(' ') + 1));
  REQUIRE(phrase.substr(0, phrase.find(' ')) != phrase.substr(phrase.find(' ') + 1));
  const std::string constraints = (work_directory() / "backwards_constraints.txt").string();
  write_file_atomic(constraints, phrase + "\n\n\n");
  CommandResult constrained =
      run_nmt("translate" + model + " --input " + input + " --beam-size 3 --quiet --constraints " + constraints);
  INFO(constrained.output);
  REQUIRE(constrained.status == 0);
  CHECK_THAT(split_lines(constrained.output).at(0), Catch::Contains(phrase));
}

TEST_CASE("cli: rerank with the model that wrote the n-best list keeps its first hypotheses, tuning, bad lists",
          "[cli]") {
  const std::string model_dir = (work_directory() / "rerank_model").string();
  CommandResult trained =
      run_nmt(tiny_train_arguments(model_dir, /*steps=*/500, /*validate_every=*/500) + " --learning-rate 0.01");
  REQUIRE(trained.status == 0);
  const std::vector<std::string> dev = read_lines(kToy + "/dev.src");
  const std::vector<std::string> dev_references = read_lines(kToy + "/dev.tgt");
  const std::string input = (work_directory() / "rerank_input.txt").string();
  const std::string references = (work_directory() / "rerank_references.txt").string();
  write_file_atomic(input, dev[0] + "\n" + dev[1] + "\n\n" + dev[2] + "\n");
  write_file_atomic(references, dev_references[0] + "\n" + dev_references[1] + "\n\n" + dev_references[2] + "\n");
  const std::string model = " --model " + model_dir + " --threads 1";
  CommandResult best = run_nmt("translate" + model + " --input " + input + " --beam-size 3 --quiet");
  CommandResult listed = run_nmt("translate" + model + " --input " + input + " --beam-size 3 --n-best 3 --quiet");
  REQUIRE(best.status == 0);
  REQUIRE(listed.status == 0);
  const std::string nbest = (work_directory() / "rerank.nbest").string();
  write_file_atomic(nbest, listed.output);
  // A line that ended with EOS gets from forced decoding the score the search gave it, so the
  // model's own scores rank its list as the search did. One cut at its length cap has no EOS, which
  // forced decoding scores (how this tiny model's lines end depends on the CPU's arithmetic).
  CommandResult reranked = run_nmt("rerank" + model + " --src " + input + " --nbest " + nbest);
  INFO(reranked.output);
  REQUIRE(reranked.status == 0);
  const std::string best_file = (work_directory() / "rerank_best.txt").string();
  write_file_atomic(best_file, best.output);
  CommandResult searched = run_nmt("translate" + model + " --input " + input + " --beam-size 3 --with-scores --quiet");
  CommandResult forced = run_nmt("score" + model + " --src " + input + " --tgt " + best_file);
  REQUIRE(searched.status == 0);
  REQUIRE(forced.status == 0);
  const std::vector<std::string> best_lines = split_lines(best.output), reranked_lines = split_lines(reranked.output);
  const std::vector<std::string> searched_lines = split_lines(searched.output),
                                 forced_lines = split_lines(forced.output);
  REQUIRE(reranked_lines.size() == best_lines.size());
  size_t ended = 0;
  for (size_t i = 0; i < best_lines.size(); ++i) {
    const double search_score = std::stod(searched_lines.at(i)), forced_score = std::stod(forced_lines.at(i));
    if (std::abs(search_score - forced_score) > 1e-4) continue;  // cut at the cap
    ++ended;
    CHECK(reranked_lines[i] == best_lines[i]);
  }
  CHECK(ended >= 3);  // the empty line and at least two sentences
  // Weights tuned on a set (here the same sentences and list): printed with the BLEU they reach,
  // which is the BLEU of what rerank then chooses, and the output still one line per source line.
  // Tuning starts from 1 each and keeps a change only for a better BLEU; with the model given twice,
  // every weighting ranks each list as the model alone, so the weights stay 1 and 1 and the choice
  // is the one of the model alone.
  const std::string tuned_file = (work_directory() / "rerank_tuned.txt").string();
  CommandResult tuned =
      run_nmt("rerank" + model + " --model " + model_dir + " --src " + input + " --nbest " + nbest + " --tune-src " +
              input + " --tune-nbest " + nbest + " --tune-ref " + references + " --output " + tuned_file);
  INFO(tuned.output);
  REQUIRE(tuned.status == 0);
  const size_t printed_at = tuned.output.find("rerank: weights ");
  REQUIRE(printed_at != std::string::npos);
  std::istringstream printed(tuned.output.substr(printed_at + 16));
  std::vector<double> tuned_weights;
  for (std::string word; printed >> word && word != "(BLEU";) tuned_weights.push_back(std::stod(word));
  double tuned_bleu = -1;
  printed >> tuned_bleu;
  CHECK(tuned_weights == std::vector<double>{1.0, 1.0});
  const std::vector<std::string> tuned_lines = read_lines(tuned_file), reference_lines = read_lines(references);
  REQUIRE(tuned_lines.size() == reference_lines.size());
  CHECK(tuned_lines == reranked_lines);
  std::vector<std::string> scored_lines, scored_references;  // a line without a reference is not scored
  for (size_t i = 0; i < tuned_lines.size(); ++i) {
    if (reference_lines[i].empty()) continue;
    scored_lines.push_back(tuned_lines[i]);
    scored_references.push_back(reference_lines[i]);
  }
  CHECK(tuned_bleu == Approx(eval::corpus_bleu(scored_lines, {scored_references}).score).margin(0.006));
  // Bad input: a weight count that does not fit, a line that is not an n-best line.
  CommandResult weights = run_nmt("rerank" + model + " --src " + input + " --nbest " + nbest + " --weights 1,2");
  CHECK(weights.status != 0);
  CHECK_THAT(weights.output, Catch::Contains("one weight per --model (1)"));
  const std::string bad = (work_directory() / "bad.nbest").string();
  write_file_atomic(bad, "0 ||| a ||| -1\nnot a line\n");
  CommandResult malformed = run_nmt("rerank" + model + " --src " + input + " --nbest " + bad);
  CHECK(malformed.status != 0);
  CHECK_THAT(malformed.output, Catch::Contains(bad + ":2: not an n-best line"));
}

TEST_CASE("cli: shortlist writes a model's list for translate and another model's or a damaged one is refused",
          "[cli]") {
  const std::string model_dir = (work_directory() / "shortlisted").string();
  const std::string other_dir = (work_directory() / "shortlisted_other").string();
  REQUIRE(run_nmt(tiny_train_arguments(model_dir) + " --shortlist true").status == 0);
  REQUIRE(run_nmt(tiny_train_arguments(other_dir) + " --vocab-size 150").status == 0);
  const std::string shortlist = model_dir + "/shortlist.bin";
  REQUIRE(fs::exists(shortlist));
  CHECK_FALSE(fs::exists(other_dir + "/shortlist.bin"));
  // The command counts the same corpus with the same sizes: the file the run wrote, byte for byte.
  const std::string again = (work_directory() / "shortlist_again.bin").string();
  CommandResult built = run_nmt("shortlist --model " + model_dir + " --output " + again);
  INFO(built.output);
  REQUIRE(built.status == 0);
  CHECK_THAT(built.output, Catch::Contains(again));
  CHECK(read_file(again) == read_file(shortlist));
  REQUIRE(run_nmt("shortlist --model " + model_dir + " --output " + again + " --translations 3").status == 0);
  CHECK(read_file(again) != read_file(shortlist));

  const std::string input = (work_directory() / "shortlist_input.txt").string();
  write_file_atomic(input, "A frog sees the bridge .\n\nThe dog eats .\n");
  CommandResult translated = run_nmt("translate --model " + model_dir + " --input " + input + " --shortlist " +
                                     shortlist + " --beam-size 3 --max-length 8 --quiet");
  INFO(translated.output);
  REQUIRE(translated.status == 0);
  const std::vector<std::string> lines = split_lines(translated.output);
  REQUIRE(lines.size() == 3);
  CHECK(lines[1].empty());
  // int8 with the shortlist: the shortlist cuts the vocabulary in that run too (its debug line, with
  // room for the beam: fewer and the search would take the whole vocabulary), the products are
  // int8's (the scores are not float32's), and the translations stay near float32's: the empty line
  // kept, and where a line's text is float32's, its score within 5%.
  const std::string scored = " --input " + input + " --shortlist " + shortlist +
                             " --beam-size 3 --max-length 8 --with-scores --quiet --threads 1";
  CommandResult float32 = run_nmt("translate --model " + model_dir + scored);
  CommandResult quantized =
      run_nmt("translate --model " + model_dir + scored + " --compute-type int8", "SPDLOG_LEVEL=debug");
  INFO(float32.output);
  INFO(quantized.output);
  REQUIRE(float32.status == 0);
  REQUIRE(quantized.status == 0);
  std::vector<std::string> quantized_lines;
  size_t restricted = 0;
  for (const std::string& line : split_lines(quantized.output)) {
    if (line.rfind("[", 0) != 0) {
      quantized_lines.push_back(line);
      continue;
    }
    const size_t at = line.find("shortlist: ");
    long subwords = 0, vocabulary = 0;
    if (at != std::string::npos &&
        std::sscanf(line.c_str() + at, "shortlist: %ld of %ld", &subwords, &vocabulary) == 2 && subwords < vocabulary &&
        subwords >= kEosId + 1 + 2 * 3) {
      ++restricted;
    }
  }
  CHECK(restricted > 0);
  const std::vector<std::string> float32_lines = split_lines(float32.output);
  REQUIRE(float32_lines.size() == 3);
  REQUIRE(quantized_lines.size() == 3);
  CHECK(quantized_lines[1] == float32_lines[1]);  // the empty line: no search, score 0
  bool differs = false;
  for (const size_t i : {size_t{0}, size_t{2}}) {
    INFO("line " << i + 1);
    const size_t tab = float32_lines[i].find('\t'), quantized_tab = quantized_lines[i].find('\t');
    REQUIRE(tab != std::string::npos);
    REQUIRE(quantized_tab != std::string::npos);
    const double float32_score = std::stod(float32_lines[i].substr(0, tab));
    const double quantized_score = std::stod(quantized_lines[i].substr(0, quantized_tab));
    differs = differs || quantized_score != float32_score;
    if (quantized_lines[i].substr(quantized_tab + 1) == float32_lines[i].substr(tab + 1)) {
      CHECK(quantized_score == Approx(float32_score).epsilon(0.05));
    }
  }
  CHECK(differs);
  // On the CPU a batch holds at most the shortlist's batch_sentences sentences, whatever --batch-size
  // says; 0 leaves --batch-size alone. Seven lines of one length: one batch, or pieces of 2.
  const std::string seven = (work_directory() / "shortlist_seven.txt").string();
  write_file_atomic(seven,
                    "the dog eats .\nthe cat eats .\na frog sees .\nthe dog sees .\na cat eats .\n"
                    "the frog eats .\na dog sees .\n");
  const std::string capped = (work_directory() / "shortlist_capped.bin").string();
  const std::string uncapped = (work_directory() / "shortlist_uncapped.bin").string();
  REQUIRE(run_nmt("shortlist --model " + model_dir + " --output " + capped + " --batch-sentences 2").status == 0);
  REQUIRE(run_nmt("shortlist --model " + model_dir + " --output " + uncapped + " --batch-sentences 0").status == 0);
  const auto batches = [&](const std::string& list, int batch_size) {
    CommandResult run = run_nmt("translate --model " + model_dir + " --input " + seven + " --shortlist " + list +
                                    " --beam-size 2 --max-length 8 --quiet --batch-size " + std::to_string(batch_size),
                                "SPDLOG_LEVEL=debug");
    INFO(run.output);
    REQUIRE(run.status == 0);
    std::vector<std::string> sizes, texts;
    for (const std::string& line : split_lines(run.output)) {
      const size_t at = line.find("for a batch of ");
      if (at != std::string::npos)
        sizes.push_back(line.substr(at));
      else if (line.find("shortlist:") == std::string::npos && line.find('[') == std::string::npos)
        texts.push_back(line);
    }
    std::sort(sizes.begin(), sizes.end());
    return std::make_pair(sizes, texts);
  };
  const auto [capped_sizes, capped_texts] = batches(capped, 64);
  CHECK(capped_sizes == std::vector<std::string>{"for a batch of 1 sentences", "for a batch of 2 sentences",
                                                 "for a batch of 2 sentences", "for a batch of 2 sentences"});
  CHECK(batches(uncapped, 64).first == std::vector<std::string>{"for a batch of 7 sentences"});
  const auto [pairs_sizes, pairs_texts] = batches(uncapped, 2);
  CHECK(pairs_sizes == capped_sizes);
  CHECK(capped_texts.size() == 7);
  CHECK(pairs_texts == capped_texts);  // the same batches search the same lists

  CommandResult int16 = run_nmt("translate --model " + model_dir + " --input " + input + " --compute-type int16");
  CHECK(int16.status != 0);
  CHECK_THAT(int16.output, Catch::Contains("--compute-type") && Catch::Contains("int16"));

  // Another model's vocabularies: refused before translating, naming the file and both models.
  CommandResult foreign = run_nmt("translate --model " + other_dir + " --input " + input + " --shortlist " + shortlist);
  CHECK(foreign.status != 0);
  CHECK_THAT(foreign.output, Catch::Contains(shortlist) && Catch::Contains(model_dir) && Catch::Contains(other_dir));
  const std::string damaged = (work_directory() / "damaged_shortlist.bin").string();
  write_file_atomic(damaged, read_file(shortlist).substr(0, 100));
  CommandResult cut = run_nmt("translate --model " + model_dir + " --input " + input + " --shortlist " + damaged);
  CHECK(cut.status != 0);
  CHECK_THAT(cut.output, Catch::Contains(damaged) && Catch::Contains("make it again"));
  CommandResult missing = run_nmt("translate --model " + model_dir + " --input " + input + " --shortlist /nope/list");
  CHECK(missing.status != 0);
  CHECK_THAT(missing.output, Catch::Contains("/nope/list"));
  // The training text is where the run left it; elsewhere the message names the key to give.
  CommandResult no_text =
      run_nmt("shortlist --model " + model_dir + " --train-source /nope/train.src --output " + damaged);
  CHECK(no_text.status != 0);
  CHECK_THAT(no_text.output, Catch::Contains("/nope/train.src"));
  CHECK(read_file(damaged).size() == 100);  // a failed run leaves the file named by --output as it was
}

// An int8 export holds the int8 rows the decoder multiplies by, so it translates exactly as its
// checkpoint does with --compute-type int8, and is a fraction of the checkpoint's size.
TEST_CASE("cli: export writes an int8 model that translates exactly as its checkpoint in int8", "[cli]") {
  const std::string model_dir = (work_directory() / "exported").string();
  REQUIRE(run_nmt(tiny_train_arguments(model_dir) + " --vocab-size 400 --decoder-hidden-size 64").status == 0);
  const std::string int8 = (work_directory() / "exported.int8").string();
  const std::string float32 = (work_directory() / "exported.float32").string();
  CommandResult exported = run_nmt("export --model " + model_dir + " --output " + int8);
  INFO(exported.output);
  REQUIRE(exported.status == 0);
  CHECK_THAT(exported.output, Catch::Contains(int8) && Catch::Contains("int8"));
  REQUIRE(run_nmt("export --model " + model_dir + " --compute-type float32 --output " + float32).status == 0);
  // int8 saves three of every four bytes of the weights (less a scale per row); the vocabularies stay.
  double weight_bytes = 0;
  for (const torch::Tensor& parameter : load_model(model_dir + "/best.ckpt", torch::kCPU).network->parameters()) {
    weight_bytes += 4.0 * static_cast<double>(parameter.numel());
  }
  const auto saved = static_cast<double>(fs::file_size(float32)) - static_cast<double>(fs::file_size(int8));
  CHECK(saved > 0.7 * weight_bytes);

  const std::string input = (work_directory() / "export_input.txt").string();
  write_file_atomic(input, "A frog sees the bridge .\nThe dog eats .\nTwo men ride a bike in the park .\n");
  const std::string decode = " --input " + input + " --beam-size 3 --max-length 10 --with-scores --quiet";
  CommandResult from_checkpoint = run_nmt("translate --model " + model_dir + " --compute-type int8" + decode);
  CommandResult from_export = run_nmt("translate --model " + int8 + decode);  // int8 by default
  REQUIRE(from_checkpoint.status == 0);
  CHECK(split_lines(from_checkpoint.output).size() == 3);
  CHECK(from_export.output == from_checkpoint.output);
  CommandResult from_float32_export = run_nmt("translate --model " + float32 + decode);
  CHECK(from_float32_export.output == run_nmt("translate --model " + model_dir + decode).output);

  // Files that are not what they claim: one-line errors naming them; the output file is never lost.
  CommandResult again = run_nmt("export --model " + model_dir + " --output " + int8);
  CHECK(again.status != 0);
  CHECK_THAT(again.output, Catch::Contains(int8) && Catch::Contains("--force"));
  CommandResult reserved = run_nmt("export --model " + model_dir + " --output " + model_dir + "/last.ckpt");
  CHECK(reserved.status != 0);
  CHECK_THAT(reserved.output, Catch::Contains("reserved"));
  CommandResult no_training_state = run_nmt("average --model " + model_dir + " --checkpoints " + int8 + " " + int8 +
                                            " --output " + (work_directory() / "averaged_exports.ckpt").string());
  CHECK(no_training_state.status != 0);
  CHECK_THAT(no_training_state.output, Catch::Contains(int8) && Catch::Contains("no training state"));
  const std::string cut = (work_directory() / "cut.int8").string();
  write_file_atomic(cut, read_file(int8).substr(0, read_file(int8).size() / 2));
  CommandResult truncated = run_nmt("translate --model " + cut + decode);
  CHECK(truncated.status != 0);
  CHECK_THAT(truncated.output, Catch::Contains(cut));
  // An export whose configuration says another size than its weights have.
  TensorFile changed = TensorFile::parse(read_file(int8));
  std::string config = changed.bytes(kConfigRecord);
  const size_t at = config.find("decoder-hidden-size\t64");
  REQUIRE(at != std::string::npos);
  TensorFile rewritten;
  for (const auto& [name, tensor] : changed.tensors()) {
    if (name != kConfigRecord) rewritten.add(name, tensor);
  }
  rewritten.add_bytes(kConfigRecord, config.replace(at, 22, "decoder-hidden-size\t32"));
  for (const char* key : {"format", "version", "compute_type"}) rewritten.set_metadata(key, changed.metadata(key));
  const std::string mismatched = (work_directory() / "mismatched.int8").string();
  write_file_atomic(mismatched, rewritten.serialize());
  CommandResult misfit = run_nmt("translate --model " + mismatched + decode);
  CHECK(misfit.status != 0);
  CHECK_THAT(misfit.output, Catch::Contains(mismatched) && Catch::Contains("export it again"));
}

namespace {

using nlohmann::json;

// metrics.jsonl's lines of `event` ("train", "validation"), in order.
std::vector<json> metrics_lines(const std::string& model_dir, const std::string& event) {
  std::vector<json> lines;
  std::istringstream text(read_file((fs::path(model_dir) / "metrics.jsonl").string()));
  for (std::string line; std::getline(text, line);) {
    const json parsed = json::parse(line);
    if (parsed["event"] == event) lines.push_back(parsed);
  }
  return lines;
}

// Every event of every file of `directory`, the files in name order (as TensorBoard reads them).
std::vector<EventRecord> all_events(const fs::path& directory) {
  std::vector<fs::path> files;
  for (const auto& entry : fs::directory_iterator(directory)) files.push_back(entry.path());
  std::sort(files.begin(), files.end());
  std::vector<EventRecord> events;
  for (const fs::path& file : files) {
    for (EventRecord& record : read_events(file)) events.push_back(std::move(record));
  }
  return events;
}

// tag -> step -> value, of the scalars; a step logged twice fails.
std::map<std::string, std::map<int64_t, double>> scalars(const std::vector<EventRecord>& events) {
  std::map<std::string, std::map<int64_t, double>> by_tag;
  for (const EventRecord& event : events) {
    if (event.kind != "scalar") continue;
    INFO(event.tag << " at step " << event.step);
    CHECK(by_tag[event.tag].emplace(event.step, event.value).second);
  }
  return by_tag;
}

}  // namespace

TEST_CASE("cli: train writes TensorBoard events with metrics.jsonl's values and a resume writes none twice", "[cli]") {
  const std::string dir = (work_directory() / "tensorboard_run").string();
  fs::remove_all(dir);
  CommandResult first = run_nmt(tiny_train_arguments(dir, 40, 20) + " --log-every 10");
  INFO(first.output);
  REQUIRE(first.status == 0);
  const fs::path events_dir = fs::path(dir) / "tensorboard";
  // What a run killed after step 40 had logged past its last checkpoint: written again on resume.
  {
    EventWriter orphans(events_dir);
    orphans.scalar("train/loss", 50, 123.0);
    orphans.scalar("dev/bleu", 40 - 10, 77.0);  // before the checkpoint's step: kept
  }
  CommandResult resumed = run_nmt(tiny_train_arguments(dir, 60, 20) + " --log-every 10 --resume");
  INFO(resumed.output);
  REQUIRE(resumed.status == 0);
  CHECK_THAT(resumed.output, Catch::Contains("removed 1 events after step 40"));

  const std::vector<EventRecord> events = all_events(events_dir);
  std::map<std::string, std::map<int64_t, double>> by_tag = scalars(events);
  CHECK(by_tag["dev/bleu"].at(30) == 77.0);
  by_tag["dev/bleu"].erase(30);
  const std::vector<std::pair<std::string, std::string>> train_tags = {
      {"train/loss", "loss"},
      {"train/learning_rate", "learning_rate"},
      {"train/target_tokens_per_second", "target_tokens_per_second"},
      {"train/gradient_norm", "gradient_norm"}};
  const std::vector<json> train = metrics_lines(dir, "train");
  REQUIRE(train.size() == 6);
  for (const auto& [tag, key] : train_tags) {
    INFO(tag);
    REQUIRE(by_tag[tag].size() == train.size());
    for (const json& line : train) {
      CHECK(by_tag[tag].at(line["step"].get<int64_t>()) == Approx(line[key].get<double>()).epsilon(1e-6));
    }
  }
  const std::vector<json> validations = metrics_lines(dir, "validation");
  REQUIRE(validations.size() == 3);
  for (const auto& [tag, key] : std::vector<std::pair<std::string, std::string>>{
           {"dev/loss", "dev_loss"}, {"dev/perplexity", "dev_perplexity"}, {"dev/chrf", "dev_chrf"}}) {
    INFO(tag);
    REQUIRE(by_tag[tag].size() == validations.size());
    for (const json& line : validations) {
      CHECK(by_tag[tag].at(line["step"].get<int64_t>()) == Approx(line[key].get<double>()).epsilon(1e-6).margin(1e-6));
    }
  }
  // The attention of four dev sentences as PNG images, their translations as text, at each validation.
  std::map<std::string, std::vector<int64_t>> shown;
  for (const EventRecord& event : events) {
    if (event.kind == "image") CHECK(event.data.rfind("\x89PNG", 0) == 0);
    if (event.kind == "text") CHECK_THAT(event.data, Catch::Contains("**translation:**"));
    if (event.kind == "image" || event.kind == "text") shown[event.tag].push_back(event.step);
  }
  CHECK(shown.size() == 8);
  for (const auto& [tag, steps] : shown) {
    INFO(tag);
    CHECK(steps == std::vector<int64_t>{20, 40, 60});
  }
  CHECK(shown.count("attention/dev_sentence_4") == 1);
  CHECK(shown.count("translation/dev_sentence_1") == 1);
}

TEST_CASE("cli: train --tensorboard no writes no events and an unwritable directory is a warning", "[cli]") {
  const std::string dir = (work_directory() / "tensorboard_none").string();
  fs::remove_all(dir);
  CommandResult none = run_nmt(tiny_train_arguments(dir, 4, 2) + " --tensorboard no");
  REQUIRE(none.status == 0);
  CHECK_FALSE(fs::exists(fs::path(dir) / "tensorboard"));

  const std::string blocked = (work_directory() / "tensorboard_blocked").string();
  write_file_atomic(blocked, "a file where the directory would go\n");
  const std::string second = (work_directory() / "tensorboard_unwritable").string();
  fs::remove_all(second);
  CommandResult warned = run_nmt(tiny_train_arguments(second, 4, 2) + " --tensorboard " + blocked + "/events");
  INFO(warned.output);
  CHECK(warned.status == 0);  // the run goes on without events
  CHECK_THAT(warned.output, Catch::Contains("TensorBoard: ") && Catch::Contains(blocked + "/events") &&
                                Catch::Contains("the run goes on without events"));
  CHECK(fs::exists(fs::path(second) / "best.ckpt"));

  // A new run's directory is left as it is: only --resume removes what comes after its step.
  const fs::path shared = work_directory() / "tensorboard_shared";
  fs::remove_all(shared);
  { EventWriter(shared).scalar("train/loss", 50, 1.0); }
  const std::string third = (work_directory() / "tensorboard_fresh").string();
  fs::remove_all(third);
  REQUIRE(run_nmt(tiny_train_arguments(third, 4, 2) + " --tensorboard " + shared.string()).status == 0);
  const std::vector<EventRecord> kept = all_events(shared);
  CHECK(std::any_of(kept.begin(), kept.end(), [](const EventRecord& event) { return event.step == 50; }));
}

TEST_CASE("cli: --resume may change early stopping and says so and the metrics' counts go on", "[cli]") {
  const std::string dir = (work_directory() / "early_stopping_resume").string();
  fs::remove_all(dir);
  CommandResult first = run_nmt(tiny_train_arguments(dir, 4, 2) + " --early-stopping-patience 0");
  INFO(first.output);
  REQUIRE(first.status == 0);
  // No gain of 1000 BLEU points can come, so the first validation after the resume stalls, and
  // patience 1 stops the run there, on both metrics it now watches.
  CommandResult resumed =
      run_nmt(tiny_train_arguments(dir, 40, 2) +
              " --resume --early-stopping-patience 1 --min-improvement 1000 --early-stopping-metrics bleu,loss "
              "--early-stopping-on all");
  INFO(resumed.output);
  REQUIRE(resumed.status == 0);
  CHECK_THAT(resumed.output, Catch::Contains("--resume: early-stopping-patience = 1 replaces the run's 0"));
  CHECK_THAT(resumed.output, Catch::Contains("--resume: early-stopping-on = all replaces the run's first"));
  CHECK_THAT(resumed.output, Catch::Contains("--resume: min-improvement = 1000.0 replaces the run's 0.0"));
  CHECK_THAT(
      resumed.output,
      Catch::Contains("early stopping: 1 validations without improvement of bleu, loss (early-stopping-on all)"));
  CHECK(metrics_lines(dir, "validation").back()["step"] == 6);
  CommandResult refused = run_nmt(tiny_train_arguments(dir, 40, 2) + " --resume --early-stopping-on most");
  CHECK(refused.status != 0);
  CHECK_THAT(refused.output, Catch::Contains("early-stopping-on") && Catch::Contains("first, all or any"));
}

namespace {

// `nmt ARGUMENTS` with its standard output and error on a new pseudo-terminal of 120 columns, as
// in a terminal window: everything it wrote there, once it has exited, and its exit status.
std::pair<std::string, int> run_on_terminal(const std::string& arguments) {
  winsize size{};
  size.ws_col = 120;
  size.ws_row = 40;
  int terminal = -1;
  const pid_t child = ::forkpty(&terminal, nullptr, nullptr, &size);
  REQUIRE(child >= 0);
  if (child == 0) {
    ::setenv("TERM", "xterm", 1);
    ::execl("/bin/sh", "sh", "-c", (std::string(NMT_BINARY) + " " + arguments).c_str(), static_cast<char*>(nullptr));
    ::_exit(127);
  }
  std::string output;
  char buffer[4096];
  while (true) {
    const ssize_t count = ::read(terminal, buffer, sizeof(buffer));
    if (count > 0) {
      output.append(buffer, static_cast<size_t>(count));
    } else if (!(count < 0 && errno == EINTR)) {
      break;  // EIO: the child's side closed
    }
  }
  ::close(terminal);
  int status = 0;
  ::waitpid(child, &status, 0);
  return {output, WIFEXITED(status) ? WEXITSTATUS(status) : -1};
}

}  // namespace

TEST_CASE("cli: train draws a progress line on a terminal and plain lines elsewhere", "[cli]") {
  const std::string dir = (work_directory() / "progress_line").string();
  fs::remove_all(dir);
  // Enough steps for several draws a quarter of a second apart.
  const std::string arguments = tiny_train_arguments(dir, 400, 200) + " --log-every 100";
  const auto [shown, status] = run_on_terminal(arguments);
  INFO(shown);
  REQUIRE(status == 0);
  const size_t drawn = shown.find("\rstep ");
  REQUIRE(drawn != std::string::npos);
  const std::string line = shown.substr(drawn + 1, shown.find('\x1b', drawn) - drawn - 1);
  CHECK_THAT(line, Catch::Matches(R"(step \d+/400 \| epoch \d+ \d+% \| \d+ target tok/s \| loss [0-9.]+ \| left <= )"
                                  R"(\d+:\d\d:\d\d \(max-steps\)( \| early stopping in >= \d+:\d\d:\d\d)?)"));
  CHECK(line.size() < 120);
  // Cleared before the summary: the last line is the summary alone.
  const size_t done = shown.rfind("done: max-steps reached");
  REQUIRE(done != std::string::npos);
  CHECK(shown.find("\rstep ", done) == std::string::npos);
  CHECK(shown.rfind("\r\x1b[K", done) != std::string::npos);

  fs::remove_all(dir);
  CommandResult piped = run_nmt(arguments);  // output to a pipe: no progress line
  REQUIRE(piped.status == 0);
  CHECK(piped.output.find('\r') == std::string::npos);
  CHECK_THAT(piped.output, Catch::Contains("done: max-steps reached"));
}
