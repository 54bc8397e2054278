#include <spdlog/spdlog.h>
#include <torch/torch.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <catch2/catch.hpp>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <limits>
#include <sstream>

#include "config/train_config.h"
#include "helpers.h"
#include "inference/model.h"
#include "kernels/dispatch.h"
#include "kernels/row_kernels.h"
#include "model/dropout.h"
#include "model/linear/bf16_products.h"
#include "model/word_dropout.h"
#include "text/batching.h"
#include "text/corpus.h"
#include "text/special_tokens.h"
#include "text/token_corpus.h"
#include "train/average.h"
#include "train/checkpoint.h"
#include "train/fused_adam.h"
#include "train/loss.h"
#include "train/optimizer_state.h"
#include "train/schedule.h"
#include "train/setup.h"
#include "train/stop_rules.h"
#include "train/trainer.h"
#include "training_helpers.h"
#include "util/io.h"

using namespace nmt;
using namespace nmt::testing;
namespace fs = std::filesystem;

TEST_CASE("loss falls when a tiny batch is overfitted", "[training]") {
  for (const std::string& type : all_attention_types()) {
    DYNAMIC_SECTION(type) {
      torch::manual_seed(51);
      Seq2Seq model(tiny_model_options(type), 20, 20);
      model->train();
      auto [source, lengths] = random_source({6, 4, 5}, 20, 52);
      torch::Tensor target_output = torch::randint(4, 20, {3, 5}, torch::kInt64);
      torch::Tensor target_input =
          torch::cat({torch::full({3, 1}, kBosId, torch::kInt64), target_output.narrow(1, 0, 4)}, 1);
      torch::optim::Adam optimizer(model->parameters(), torch::optim::AdamOptions(0.03));
      double first = 0, last = 0;
      for (int step = 0; step < 100; ++step) {
        DecoderOutput out = model(source, lengths, target_input);
        torch::Tensor loss = torch::nn::functional::cross_entropy(
            model->decoder->output_logits(out.attentional).flatten(0, 1), target_output.flatten());
        optimizer.zero_grad();
        loss.backward();
        optimizer.step();
        (step == 0 ? first : last) = loss.item<double>();
      }
      // From ~log(20) = 3.0 to a fraction of it: the model memorises the three pairs.
      CHECK(last < 0.3 * first);
    }
  }
}

TEST_CASE("fused label-smoothed loss: same value and gradient as LibTorch's cross_entropy", "[training]") {
  torch::manual_seed(53);
  for (double epsilon : {0.0, 0.1, 0.4}) {
    INFO("epsilon " << epsilon);
    torch::Tensor logits = (3 * torch::randn({7, 11}, torch::kFloat64)).requires_grad_();
    torch::Tensor targets = torch::randint(0, 11, {7}, torch::kInt64);
    torch::Tensor ours = smoothed_cross_entropy_sum(logits, targets, epsilon);
    torch::Tensor weight = torch::randn({}, torch::kFloat64);  // a non-unit upstream gradient
    torch::Tensor our_gradient = torch::autograd::grad({ours * weight}, {logits})[0];
    auto options = torch::nn::functional::CrossEntropyFuncOptions().label_smoothing(epsilon).reduction(torch::kSum);
    torch::Tensor reference = torch::nn::functional::cross_entropy(logits, targets, options);
    torch::Tensor reference_gradient = torch::autograd::grad({reference * weight}, {logits})[0];
    CHECK(ours.item<double>() == Approx(reference.item<double>()).epsilon(1e-12));
    CHECK(torch::allclose(our_gradient, reference_gradient, 1e-10, 1e-12));
  }
}

TEST_CASE("the AVX2 and AVX-512 kernels are built, and used exactly when the CPU has the instructions", "[training]") {
#if defined(__x86_64__)
  CHECK(kernels::avx2_kernels_available() == (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")));
  CHECK(kernels::avx512_kernels_available() == static_cast<bool>(__builtin_cpu_supports("avx512f")));
#else
  CHECK_FALSE(kernels::avx2_kernels_available());
  CHECK_FALSE(kernels::avx512_kernels_available());
#endif
}

TEST_CASE("row kernels: softmax, log-sum-exp and row sums as LibTorch computes them", "[training]") {
  if (!kernels::avx2_kernels_available()) return skip_case("no AVX2 on this CPU: the loss uses LibTorch's ops");
  torch::manual_seed(56);
  // 37 columns: four groups of eight lanes and a tail of five. Rows of growing spread, up to a
  // gap of 2000 between the largest and smallest logit (those probabilities are below e^-87: 0).
  torch::Tensor logits = torch::randn({6, 37}) * torch::tensor({0.1, 1.0, 5.0, 20.0, 80.0, 1000.0}).unsqueeze(1) +
                         torch::tensor({0.0, -50.0, 50.0, 0.0, 3.0, 0.0}).unsqueeze(1);
  logits = logits.to(torch::kFloat);
  torch::Tensor z = logits.clone();
  std::vector<float> log_sum_exp(6), row_sum(6);
  kernels::softmax_rows(z.data_ptr<float>(), 6, 37, log_sum_exp.data(), row_sum.data());
  // The reference starts from the same float differences z - max(z) as the kernel (their rounding
  // is the input's, not the kernel's), then works in double.
  const torch::Tensor reference = torch::softmax((logits - std::get<0>(logits.max(1, true))).to(torch::kDouble), 1);
  // Relative error of every probability above e^-86; below that, at most e^-86 (the kernel
  // flushes what is below e^-87 to 0). The test draws both kinds.
  const torch::Tensor ours = z.to(torch::kDouble);
  const torch::Tensor normal = reference > std::exp(-86.0);
  REQUIRE(normal.logical_not().any().item<bool>());
  CHECK(((ours - reference).abs() / reference).masked_select(normal).max().item<double>() < 2e-6);
  CHECK(ours.masked_select(normal.logical_not()).max().item<double>() <= std::exp(-86.0));
  const torch::Tensor lse = torch::logsumexp(logits.to(torch::kDouble), 1);
  const torch::Tensor sums = logits.to(torch::kDouble).sum(1);
  for (int64_t row = 0; row < 6; ++row) {
    INFO("row " << row);
    CHECK(log_sum_exp[row] == Approx(lse[row].item<double>()).epsilon(1e-6));
    CHECK(row_sum[row] == Approx(sums[row].item<double>()).epsilon(1e-5).margin(1e-3));
  }
  // The gradient rows: scale * (p - q).
  torch::Tensor targets = torch::tensor({0, 36, 5, 8, 31, 2}, torch::kInt64);
  torch::Tensor grad = z.clone();
  kernels::smoothed_gradient_rows(grad.data_ptr<float>(), 6, 37, targets.data_ptr<int64_t>(), 0.2f, 0.5f);
  torch::Tensor q = torch::full({6, 37}, 0.2 / 37).scatter_add(1, targets.unsqueeze(1), torch::full({6, 1}, 0.8));
  CHECK(torch::allclose(grad, 0.5 * (z - q), 1e-6, 1e-7));
}

TEST_CASE("output layer loss: same value and gradients as the output layer then the loss", "[training]") {
  torch::manual_seed(57);
  torch::set_num_threads(2);  // 40 rows: split between two threads (16 rows or more each)
  for (double epsilon : {0.0, 0.1}) {
    for (bool with_bias : {true, false}) {
      INFO("epsilon " << epsilon << ", bias " << with_bias);
      torch::Tensor hidden = torch::randn({40, 6}).requires_grad_();
      torch::Tensor weight = (3 * torch::randn({29, 6})).requires_grad_();
      torch::Tensor bias = with_bias ? torch::randn({29}).requires_grad_() : torch::Tensor();
      torch::Tensor targets = torch::randint(0, 29, {40}, torch::kInt64);
      std::vector<torch::Tensor> inputs{hidden, weight};
      if (with_bias) inputs.push_back(bias);
      torch::Tensor ours = output_layer_loss(hidden, weight, bias, targets, epsilon);
      std::vector<torch::Tensor> our_grads = torch::autograd::grad({ours * 0.37}, inputs);
      torch::Tensor reference = smoothed_cross_entropy_sum(
          torch::nn::functional::linear(hidden, weight, bias).to(torch::kDouble), targets, epsilon);
      std::vector<torch::Tensor> reference_grads = torch::autograd::grad({reference * 0.37}, inputs);
      CHECK(ours.item<double>() == Approx(reference.item<double>()).epsilon(1e-5));
      for (size_t i = 0; i < inputs.size(); ++i) {
        INFO("input " << i);
        CHECK(torch::allclose(our_grads[i], reference_grads[i], 1e-4, 1e-5));
      }
    }
  }
  torch::Tensor hidden = torch::randn({2, 3}).requires_grad_();
  torch::Tensor weight = torch::randn({4, 3});
  CHECK_THROWS_WITH(output_layer_loss(hidden, weight, {}, torch::tensor({1, 4}, torch::kInt64), 0.1),
                    Catch::Contains("outside the vocabulary"));
  if (kernels::avx2_kernels_available()) {  // the fused backward uses its buffer up: a second one is refused
    const kernels::ScopedKernelLevel kernels_on(std::max(kernels::kernel_level(), kernels::KernelLevel::kAvx2));
    torch::Tensor loss = output_layer_loss(hidden, weight, {}, torch::tensor({1, 3}, torch::kInt64), 0.1);
    loss.backward({}, /*retain_graph=*/true);
    CHECK_THROWS_WITH(loss.backward(), Catch::Contains("second time"));
  }
}

TEST_CASE("FusedAdam takes the same steps as torch::optim::Adam and saves the same state", "[training]") {
  torch::manual_seed(58);
  torch::set_num_threads(2);
  // 70001 values: split between two threads (32768 or more each), whole groups of eight lanes and
  // a tail; a second parameter that gets no gradient.
  const int64_t count = 70001;
  torch::Tensor start = torch::randn({count});
  torch::Tensor ours = start.clone().requires_grad_(), theirs = start.clone().requires_grad_();
  torch::Tensor idle = torch::randn({3}).requires_grad_();
  FusedAdam fused({ours, idle}, torch::optim::AdamOptions(0.01));
  torch::optim::Adam reference({theirs}, torch::optim::AdamOptions(0.01));
  for (int step = 0; step < 5; ++step) {
    torch::Tensor grad = torch::randn({count}) * (step + 1);
    ours.mutable_grad() = grad.clone();
    theirs.mutable_grad() = grad.clone();
    fused.step();
    reference.step();
  }
  CHECK(torch::allclose(ours, theirs, 1e-6, 1e-7));
  CHECK_FALSE(torch::equal(ours, start));
  // The state Adam would save: the same step count and moments, under the parameter's key.
  const auto& our_state = static_cast<const torch::optim::AdamParamState&>(*fused.state().at(adam_state_key(ours)));
  const auto& their_state =
      static_cast<const torch::optim::AdamParamState&>(*reference.state().at(adam_state_key(theirs)));
  CHECK(our_state.step() == 5);
  // The first moment sums terms of opposite signs (gradients up to about 20): an absolute tolerance
  // of a few float roundings of those terms (fused multiply-adds round once, LibTorch twice).
  CHECK(torch::allclose(our_state.exp_avg(), their_state.exp_avg(), 1e-6, 1e-5));
  CHECK(torch::allclose(our_state.exp_avg_sq(), their_state.exp_avg_sq(), 1e-6, 1e-7));
  CHECK(fused.state().size() == 1);  // no state for the parameter without a gradient

  // Saved by FusedAdam, loaded by torch::optim::Adam (and the other way): the same state.
  TensorFile saved;
  write_adam_state(saved, fused);
  torch::optim::Adam loaded({ours, idle}, torch::optim::AdamOptions(0.01));
  read_adam_state(TensorFile::parse(saved.serialize()), loaded);
  const auto& loaded_state = static_cast<const torch::optim::AdamParamState&>(*loaded.state().at(adam_state_key(ours)));
  CHECK(loaded_state.step() == 5);
  CHECK(torch::equal(loaded_state.exp_avg_sq(), our_state.exp_avg_sq()));
}

TEST_CASE("sequence loss skips padded positions and matches cross_entropy with ignore_index", "[training]") {
  torch::manual_seed(54);
  Seq2Seq model(tiny_model_options("general"), 20, 20);
  model->eval();
  auto [source, lengths] = random_source({5, 3}, 20, 55);
  torch::Tensor target_output = torch::randint(4, 20, {2, 4}, torch::kInt64);
  target_output[1][2] = kPadId;
  target_output[1][3] = kPadId;
  torch::Tensor target_input =
      torch::cat({torch::full({2, 1}, kBosId, torch::kInt64), target_output.narrow(1, 0, 3)}, 1);
  DecoderOutput out = model(source, lengths, target_input);
  SequenceLoss loss = sequence_loss(*model->decoder, out, target_output, 0.1);
  auto options =
      torch::nn::functional::CrossEntropyFuncOptions().ignore_index(kPadId).label_smoothing(0.1).reduction(torch::kSum);
  torch::Tensor reference = torch::nn::functional::cross_entropy(
      model->decoder->output_logits(out.attentional).flatten(0, 1), target_output.flatten(), options);
  CHECK(loss.sum.item<double>() == Approx(reference.item<double>()).epsilon(1e-5));
  // The same gradient reaches the parameters.
  const torch::Tensor& weight = model->decoder->combine->weight;
  torch::Tensor ours = torch::autograd::grad({loss.sum}, {weight}, {}, /*retain_graph=*/true)[0];
  torch::Tensor theirs = torch::autograd::grad({reference}, {weight})[0];
  CHECK(torch::allclose(ours, theirs, 1e-4, 1e-6));
}

TEST_CASE("checkpoint averaging is the element-wise mean of one run's weights", "[training]") {
  const fs::path dir = fresh_directory("average");
  TrainConfig config = tiny_config(dir);
  config.max_steps = 8;
  config.validate_every = 2;
  config.keep_checkpoints = 3;
  train(config, {});
  const std::vector<std::string> kept = step_checkpoints(config.model_dir);
  REQUIRE(kept.size() == 3);  // steps 4, 6, 8; step 2 was pruned
  CHECK(fs::path(kept.front()).filename() == "step-00000004.ckpt");
  CHECK(step_of_checkpoint_name("step-123456789.ckpt") == 123456789);  // past eight digits
  CHECK(step_of_checkpoint_name("step-abc.ckpt") == -1);
  CHECK(step_of_checkpoint_name("best.ckpt") == -1);
  CHECK(fs::path(kept.back()).filename() == "step-00000008.ckpt");

  TrainingCheckpoint averaged = average_checkpoints(kept, torch::kCPU);
  std::vector<TrainingCheckpoint> bundles;
  for (const auto& path : kept) bundles.push_back(load_training_checkpoint(path, torch::kCPU));
  CHECK(averaged.progress.step == 8);
  for (const auto& named : averaged.model.network->named_parameters()) {
    INFO(named.key());
    torch::Tensor mean = torch::zeros_like(named.value());
    for (auto& bundle : bundles) mean += bundle.model.network->named_parameters()[named.key()] / 3.0;
    CHECK(torch::allclose(named.value(), mean, 1e-6, 1e-7));
  }
  // The weights did change between the checkpoints, so the mean is not just one of them.
  CHECK_FALSE(torch::equal(bundles.front().model.network->decoder->combine->weight,
                           bundles.back().model.network->decoder->combine->weight));

  // A kept step ahead of last.ckpt (from a continuation that died before writing last.ckpt) is
  // removed on --resume; the resumed run keeps its own.
  fs::copy_file(kept.back(), fs::path(config.model_dir) / "step-00000010.ckpt");
  config.max_steps = 9;
  train(config, {/*resume=*/true, false, {}, {}});
  std::vector<std::string> after_resume;
  for (const auto& path : step_checkpoints(config.model_dir))
    after_resume.push_back(fs::path(path).filename().string());
  CHECK(after_resume == std::vector<std::string>{"step-00000006.ckpt", "step-00000008.ckpt", "step-00000009.ckpt"});
  // --overwrite starts a new run: none of the old run's steps survive to be averaged with it.
  config.max_steps = 2;
  train(config, {false, /*overwrite=*/true, {}, {}});
  REQUIRE(step_checkpoints(config.model_dir).size() == 1);
  CHECK(fs::path(step_checkpoints(config.model_dir).front()).filename() == "step-00000002.ckpt");

  // Checkpoints of a different model are refused, naming the file.
  TrainConfig other = tiny_config(fresh_directory("average_other"));
  other.model.decoder_hidden_size = 10;
  other.max_steps = 2;
  other.validate_every = 2;
  other.keep_checkpoints = 1;
  train(other, {});
  const std::string odd = step_checkpoints(other.model_dir).front();
  CHECK_THROWS_WITH(average_checkpoints({odd, step_checkpoints(config.model_dir).front()}, torch::kCPU),
                    Catch::Contains(odd));
}

TEST_CASE("dropout zeroes a fraction p, scales the rest, and repeats for a seed", "[training]") {
  const double p = 0.3;
  torch::Tensor input = torch::rand({401, 501}, torch::kFloat64) + 0.5;  // odd size, no zeros of its own
  torch::manual_seed(58);
  torch::Tensor dropped = apply_dropout(input, p, /*training=*/true);
  torch::Tensor zeros = dropped == 0;
  const double fraction = zeros.to(torch::kFloat64).mean().item<double>();
  CHECK(fraction == Approx(p).margin(0.005));  // 200k draws: the standard error is 0.001
  // Neighbouring elements hash neighbouring counters: their decisions must still be independent
  // (both dropped with probability p^2).
  torch::Tensor flat = zeros.flatten();
  const int64_t pairs = flat.size(0) - 1;
  const double both = (flat.narrow(0, 0, pairs) & flat.narrow(0, 1, pairs)).to(torch::kFloat64).mean().item<double>();
  CHECK(both == Approx(p * p).margin(0.005));
  CHECK(torch::allclose(dropped.masked_select(~zeros), input.masked_select(~zeros) / (1 - p)));
  // Every element is drawn, the last one included: over 64 calls it is sometimes dropped, sometimes kept.
  int last_dropped = 0;
  for (int call = 0; call < 64; ++call) {
    last_dropped += apply_dropout(torch::ones({1001}), 0.5, true)[1000].item<float>() == 0 ? 1 : 0;
  }
  CHECK(last_dropped > 0);
  CHECK(last_dropped < 64);

  // Same seed, same mask; the next call draws a new one.
  torch::manual_seed(58);
  torch::Tensor again = apply_dropout(input, p, true);
  torch::Tensor next = apply_dropout(input, p, true);
  CHECK(torch::equal(again, dropped));
  CHECK_FALSE(torch::equal(next, dropped));

  // The gradient is the mask: 0 where dropped, 1 / (1 - p) where kept.
  torch::Tensor leaf = input.clone().requires_grad_();
  torch::Tensor out = apply_dropout(leaf, p, true);
  torch::Tensor gradient = torch::autograd::grad({out.sum()}, {leaf})[0];
  CHECK(torch::allclose(gradient, (out != 0).to(torch::kFloat64) / (1 - p)));

  CHECK(torch::equal(apply_dropout(input, p, /*training=*/false), input));
  CHECK(torch::equal(apply_dropout(input, 0.0, true), input));
  CHECK_THROWS_WITH(apply_dropout(input, 1.0, true), Catch::Contains("[0, 1)"));
}

TEST_CASE("word dropout drops whole positions while training and nothing in evaluation", "[training]") {
  torch::manual_seed(57);
  torch::Tensor embedded = torch::rand({40, 50, 6}) + 0.5;  // no zeros of its own
  torch::Tensor dropped = word_dropout(embedded, 0.25, /*training=*/true);
  torch::Tensor zero_rows = (dropped == 0).all(-1);  // [40, 50]
  torch::Tensor any_zero = (dropped == 0).any(-1);
  CHECK(torch::equal(zero_rows, any_zero));  // a position is dropped whole or not at all
  const double fraction = zero_rows.to(torch::kFloat64).mean().item<double>();
  CHECK(fraction > 0.2);
  CHECK(fraction < 0.3);
  torch::Tensor kept = dropped.masked_select(~zero_rows.unsqueeze(-1).expand_as(dropped));
  torch::Tensor original = embedded.masked_select(~zero_rows.unsqueeze(-1).expand_as(dropped));
  CHECK(torch::allclose(kept, original / 0.75));  // survivors scaled by 1 / (1 - p)
  CHECK(torch::equal(word_dropout(embedded, 0.25, /*training=*/false), embedded));

  TrainConfig config = tiny_config(fresh_directory("word_dropout"));
  config.model.word_dropout = 1.0;
  CHECK_THROWS_WITH(validate(config), Catch::Contains("word-dropout"));
}

TEST_CASE("learning-rate schedule: warm-up, then decay after patience", "[training]") {
  LearningRateSchedule schedule({/*warmup*/ 4, /*factor*/ 0.5, /*patience*/ 2, /*min*/ 0.1});
  CHECK(schedule.rate(0, 1.0) == Approx(0.25));
  CHECK(schedule.rate(3, 1.0) == Approx(1.0));
  CHECK(schedule.rate(10, 1.0) == Approx(1.0));
  int64_t plateau = 0;
  double rate = 1.0;
  rate = schedule.after_validation(false, plateau, rate);
  rate = schedule.after_validation(false, plateau, rate);
  CHECK(rate == 1.0);
  rate = schedule.after_validation(false, plateau, rate);
  CHECK(rate == 0.5);
  rate = schedule.after_validation(true, plateau, rate);
  CHECK(plateau == 0);
  for (int i = 0; i < 20; ++i) rate = schedule.after_validation(false, plateau, rate);
  CHECK(rate == Approx(0.1));
}

TEST_CASE("training writes checkpoints that reload to identical outputs and resume at the same step", "[training]") {
  const fs::path dir = fresh_directory("train");
  TrainConfig config = tiny_config(dir);
  TrainSummary first = train(config, {});
  CHECK(first.steps == 6);
  for (const char* name :
       {"best.ckpt", "last.ckpt", "config.toml", "train.log", "metrics.jsonl", "vocab.joint.model"}) {
    INFO(name);
    CHECK(fs::exists(fs::path(config.model_dir) / name));
  }
  // No temporary files are left behind.
  for (const auto& entry : fs::directory_iterator(config.model_dir)) {
    CHECK(entry.path().string().find(".tmp") == std::string::npos);
  }

  TrainingCheckpoint loaded = load_training_checkpoint(resolve_checkpoint(config.model_dir, "last"), torch::kCPU);
  CHECK(loaded.progress.step == 6);
  CHECK(config_entries(loaded.config) == config_entries(config));

  // Save again and reload: identical outputs.
  const std::string copy = (dir / "copy.ckpt").string();
  save_checkpoint(copy, loaded, nullptr);
  TrainingCheckpoint reloaded = load_training_checkpoint(copy, torch::kCPU);
  loaded.model.network->eval();
  reloaded.model.network->eval();
  auto [source, lengths] = random_source({5, 3}, loaded.model.source_vocabulary.size(), 61);
  torch::Tensor target = torch::randint(4, loaded.model.target_vocabulary.size(), {2, 4}, torch::kInt64);
  auto logits = [&](TrainingCheckpoint& bundle) {
    return bundle.model.network->decoder->output_logits(bundle.model.network(source, lengths, target).attentional);
  };
  CHECK(torch::equal(logits(loaded), logits(reloaded)));
  CHECK(reloaded.model.source_vocabulary.encode("A frog sees the bridge .") ==
        loaded.model.source_vocabulary.encode("A frog sees the bridge ."));

  // Without --resume or --overwrite the run is protected.
  CHECK_THROWS_WITH(train(config, {}), Catch::Contains("--resume"));
  // Resuming continues from step 6, not from 0.
  config.max_steps = 9;
  TrainSummary resumed = train(config, {/*resume=*/true, false, {}, {}});
  CHECK(resumed.steps == 9);
  CHECK(load_training_checkpoint(resolve_checkpoint(config.model_dir, "last"), torch::kCPU).progress.step == 9);
  // Changing the architecture on resume is refused, naming the key.
  config.model.attention = "dot";
  CHECK_THROWS_WITH(train(config, {true, false, {}, {}}), Catch::Contains("attention"));
  fs::remove_all(dir);
}

TEST_CASE("init-from fine-tunes a trained model: its weights and vocabularies, from step 0", "[training]") {
  const fs::path dir = fresh_directory("init_from");
  TrainConfig base = tiny_config(dir);
  train(base, {});
  const TranslationModel trained = load_model(resolve_checkpoint(base.model_dir, "best"), torch::kCPU);
  // Loaded for translation: no dropout, and translators that share it never switch it.
  CHECK_FALSE(trained.network->is_training());

  TrainConfig config = tiny_config(dir);
  config.model_dir = (dir / "fine").string();
  config.init_from = base.model_dir;  // a model directory: its best.ckpt
  config.vocab_size = 90;             // ignored: the vocabularies are the trained model's
  config.model.dropout = 0.3;         // the dropout rates may change
  {
    fs::create_directories(config.model_dir);
    TrainingSetup setup = set_up_training(config, /*resume=*/false, *spdlog::default_logger());
    CHECK(setup.state.progress.step == 0);
    CHECK(setup.state.model.source_vocabulary.serialized() == trained.source_vocabulary.serialized());
    const auto start = setup.state.model.network->named_parameters();
    const auto weights = trained.network->named_parameters();
    REQUIRE(start.size() == weights.size());
    for (const auto& parameter : weights) {
      INFO(parameter.key());
      CHECK(torch::equal(start[parameter.key()], parameter.value()));
    }
  }
  config.max_steps = 2;
  train(config, {false, /*overwrite=*/true, {}, {}});
  CHECK(load_training_checkpoint(resolve_checkpoint(config.model_dir, "last"), torch::kCPU).progress.step == 2);
  CHECK(read_file(fs::path(config.model_dir) / "vocab.joint.model") ==
        read_file(fs::path(base.model_dir) / "vocab.joint.model"));

  // A key that fixes the network's shapes must be the trained model's; a missing checkpoint is named.
  config.model.attention = "dot";
  CHECK_THROWS_WITH(train(config, {false, true, {}, {}}), Catch::Contains("init-from: attention is dot"));
  config.model.attention = "additive";
  config.init_from = (dir / "none.ckpt").string();
  CHECK_THROWS_WITH(train(config, {false, true, {}, {}}), Catch::Contains("none.ckpt: no such checkpoint"));
  fs::remove_all(dir);
}

TEST_CASE("training is reproducible for a seed", "[training]") {
  const fs::path dir = fresh_directory("seed");
  TrainConfig config = tiny_config(dir);
  config.max_steps = 3;
  config.model.dropout = 0.2;
  train(config, {});
  TrainingCheckpoint a = load_training_checkpoint(resolve_checkpoint(config.model_dir, "last"), torch::kCPU);
  train(config, {false, /*overwrite=*/true, {}, {}});
  TrainingCheckpoint b = load_training_checkpoint(resolve_checkpoint(config.model_dir, "last"), torch::kCPU);
  check_same_parameters(a.model.network, b.model.network);
  fs::remove_all(dir);
}

TEST_CASE("with dropout, a run stopped and resumed ends with the weights of an uninterrupted one", "[training]") {
  const fs::path dir = fresh_directory("resume_dropout");
  TrainConfig config = tiny_config(dir);
  config.model.dropout = 0.3;
  config.model.word_dropout = 0.1;
  config.max_steps = 8;
  config.model_dir = (dir / "whole").string();
  train(config, {});
  TrainingCheckpoint whole = load_training_checkpoint(resolve_checkpoint(config.model_dir, "last"), torch::kCPU);
  config.model_dir = (dir / "stopped").string();
  config.max_steps = 4;  // a validation and checkpoint at step 4, then the stop
  train(config, {});
  config.max_steps = 8;
  train(config, {/*resume=*/true, false, {}, {}});
  TrainingCheckpoint resumed = load_training_checkpoint(resolve_checkpoint(config.model_dir, "last"), torch::kCPU);
  CHECK(resumed.progress.step == 8);
  CHECK(resumed.progress.best_score == whole.progress.best_score);
  check_same_parameters(whole.model.network, resumed.model.network);
  fs::remove_all(dir);
}

TEST_CASE("two corpora, weighted and tagged: a run stopped and resumed ends as an uninterrupted one", "[training]") {
  const fs::path dir = fresh_directory("two_corpora");
  TrainConfig config = tiny_config(dir);
  // 30 real pairs, and 60 more of which each epoch takes a new half, tagged: epochs of about ten
  // batches, so that the run crosses epochs and their draws.
  config.train_source = head_of("train.src", 30, dir);
  config.train_target = head_of("train.tgt", 30, dir);
  const std::vector<std::string> sources = read_lines(source_path("data/toy/train.src"));
  const std::vector<std::string> targets = read_lines(source_path("data/toy/train.tgt"));
  std::string bt_source, bt_target;
  for (size_t i = 30; i < 90; ++i) bt_source += sources[i] + "\n", bt_target += targets[i] + "\n";
  write_file_atomic((dir / "bt.src").string(), bt_source);
  write_file_atomic((dir / "bt.tgt").string(), bt_target);
  config.train_source += "," + (dir / "bt.src").string();
  config.train_target += "," + (dir / "bt.tgt").string();
  config.train_weights = "1,0.5";
  config.train_tags = ",<bt>";
  config.max_steps = 16;
  config.model_dir = (dir / "whole").string();
  train(config, {});
  TrainingCheckpoint whole = load_training_checkpoint(resolve_checkpoint(config.model_dir, "last"), torch::kCPU);
  REQUIRE(whole.progress.epoch >= 1);  // the run crossed into a second epoch
  CHECK(whole.model.source_vocabulary.tag_id("<bt>") > kEosId);
  const std::string log = read_file((fs::path(config.model_dir) / "train.log").string());
  for (const char* epoch : {"epoch 1 trains on 30 of ", "epoch 2 trains on 30 of "}) {
    INFO(epoch);
    CHECK(log.find(std::string(epoch) + config.train_source.substr(0, config.train_source.find(',')) +
                   " (weight 1), 30 of " + (dir / "bt.src").string() + " (weight 0.5, tag <bt>)") != std::string::npos);
  }

  config.model_dir = (dir / "stopped").string();
  config.max_steps = 4;
  train(config, {});
  config.max_steps = 16;
  train(config, {/*resume=*/true, false, {}, {}});
  TrainingCheckpoint resumed = load_training_checkpoint(resolve_checkpoint(config.model_dir, "last"), torch::kCPU);
  CHECK(resumed.progress.step == 16);
  check_same_parameters(whole.model.network, resumed.model.network);

  // A resumed run keeps its corpora's weights and tags.
  config.train_weights = "1,1";
  CHECK_THROWS_WITH(train(config, {true, false, {}, {}}), Catch::StartsWith("train-weights: is 1,1 but"));
  // Fine-tuning can tag with what the first run reserved, and nothing else.
  config.init_from = (dir / "whole").string();
  config.model_dir = (dir / "fine_tuned").string();
  config.max_steps = 1;
  config.train_tags = ",<ft>";
  CHECK_THROWS_WITH(train(config, {}), Catch::StartsWith("init-from: train-tags gives <ft>, which the vocabulary of"));
  config.train_tags = ",<bt>";
  CHECK(train(config, {false, /*overwrite=*/true, {}, {}}).steps == 1);  // the refused run left its train.log
  fs::remove_all(dir);
}

TEST_CASE("two languages at a temperature, subwords sampled: validated per dev set, a stopped run resumes exactly",
          "[training]") {
  const fs::path dir = fresh_directory("two_languages");
  TrainConfig config = tiny_config(dir);
  // 60 pairs into the toy language and 20 back into English: temperature 2 gives the small corpus
  // about sqrt(20) / (sqrt(60) + sqrt(20)) of each epoch. Epochs of a few batches: the run crosses
  // epochs and their draws.
  const std::string toy = head_of("train.src", 60, dir), english = head_of("train.tgt", 60, dir);
  fs::create_directories(dir / "back");
  config.train_source = toy + "," + head_of("train.tgt", 20, dir / "back");
  config.train_target = english + "," + head_of("train.src", 20, dir / "back");
  config.train_languages = "eo,en";
  config.train_temperature = 2;
  config.dev_source = config.dev_source + "," + config.dev_target;
  config.dev_target = config.dev_target + "," + config.dev_source.substr(0, config.dev_source.find(','));
  config.dev_languages = "eo,en";
  config.subword_alpha = 0.3;  // each epoch its own segmentations, drawn again on --resume
  config.max_steps = 24;
  config.model_dir = (dir / "whole").string();
  train(config, {});
  TrainingCheckpoint whole = load_training_checkpoint(resolve_checkpoint(config.model_dir, "last"), torch::kCPU);
  REQUIRE(whole.progress.epoch >= 1);  // the run crossed into a second epoch
  CHECK(whole.model.options.target_languages == std::vector<std::string>{"eo", "en"});
  const int64_t eo = whole.model.source_vocabulary.tag_id("<2eo>"), en = whole.model.source_vocabulary.tag_id("<2en>");
  CHECK(eo > kEosId);
  CHECK(en > kEosId);
  const std::string log = read_file((fs::path(config.model_dir) / "train.log").string());
  INFO(log);
  CHECK_THAT(log, Catch::Contains("corpus " + toy + ": ") && Catch::Contains(", into eo") &&
                      Catch::Contains(", into en") && !Catch::Contains("weight 1, into") &&
                      Catch::Contains("  dev1: loss ") && Catch::Contains("  dev2: loss "));

  config.model_dir = (dir / "stopped").string();
  config.max_steps = 4;
  train(config, {});
  config.max_steps = 24;
  train(config, {/*resume=*/true, false, {}, {}});
  TrainingCheckpoint resumed = load_training_checkpoint(resolve_checkpoint(config.model_dir, "last"), torch::kCPU);
  CHECK(resumed.progress.step == 24);
  CHECK(resumed.progress.best_score == whole.progress.best_score);
  check_same_parameters(whole.model.network, resumed.model.network);

  // The languages stay; best-pair names a dev set, and picks by its numbers alone.
  config.train_languages = "en,eo";
  CHECK_THROWS_WITH(train(config, {true, false, {}, {}}), Catch::StartsWith("train-languages: is en,eo but"));
  config.train_languages = "eo,en";
  config.best_pair = "dev3";
  CHECK_THROWS_WITH(train(config, {}), Catch::StartsWith("best-pair: 'dev3' is not a dev set; they are dev1, dev2"));
  config.best_pair = "dev2";
  config.max_steps = 4;
  config.model_dir = (dir / "best_pair").string();
  train(config, {});
  const std::string metrics = read_file((fs::path(config.model_dir) / "metrics.jsonl").string());
  const size_t validation = metrics.find("\"event\":\"validation\"");
  REQUIRE(validation != std::string::npos);
  const nlohmann::json line = nlohmann::json::parse(metrics.substr(
      metrics.rfind('\n', validation) + 1, metrics.find('\n', validation) - metrics.rfind('\n', validation) - 1));
  CHECK(line.at("dev_bleu") == line.at("dev_sets").at("dev2").at("bleu"));
  CHECK(line.at("dev_loss") == line.at("dev_sets").at("dev2").at("loss"));
  fs::remove_all(dir);
}

TEST_CASE("train-temperature: the vocabulary's sample gives a small corpus its tempered share", "[training]") {
  const fs::path dir = fresh_directory("tempered_vocabulary");
  TrainConfig config = tiny_config(dir);  // 200 pairs
  // A small corpus of 10 pairs whose words are the toy's spelt backwards: pieces of its own.
  const std::vector<std::string> sources = read_lines(source_path("data/toy/train.src"));
  const std::vector<std::string> targets = read_lines(source_path("data/toy/train.tgt"));
  const auto backwards = [](const std::string& line) {
    std::string words, word;
    std::istringstream in(line);
    while (in >> word) {
      std::vector<std::string> characters;  // UTF-8: a character starts at each byte that continues none
      for (const char byte : word) {
        if ((static_cast<unsigned char>(byte) & 0xC0) != 0x80 || characters.empty()) characters.emplace_back();
        characters.back() += byte;
      }
      words += words.empty() ? "" : " ";
      for (auto character = characters.rbegin(); character != characters.rend(); ++character) words += *character;
    }
    return words;
  };
  std::string small_source, small_target, big_text;
  for (size_t i = 0; i < 10; ++i) {
    small_source += backwards(sources[300 + i]) + "\n";
    small_target += backwards(targets[300 + i]) + "\n";
  }
  for (size_t i = 0; i < 200; ++i) big_text += sources[i] + "\n" + targets[i] + "\n";
  write_file_atomic((dir / "small.src").string(), small_source);
  write_file_atomic((dir / "small.tgt").string(), small_target);
  config.train_source += "," + (dir / "small.src").string();
  config.train_target += "," + (dir / "small.tgt").string();
  // The vocabulary's pieces of three or more letters that only the small corpus holds.
  const auto small_pieces = [&](double temperature, const std::string& name) {
    config.train_temperature = temperature;
    config.model_dir = (dir / name).string();
    const TrainingData data = prepare_training_data(config, *spdlog::default_logger());
    int count = 0;
    for (int64_t id = 0; id < data.vocabularies.source.size(); ++id) {
      std::string piece = data.vocabularies.source.piece(id);
      if (piece.rfind("\u2581", 0) == 0) piece = piece.substr(3);  // the word-start mark
      if (piece.size() < 3) continue;
      const bool small = (small_source + small_target).find(piece) != std::string::npos;
      if (small && big_text.find(piece) == std::string::npos) ++count;
    }
    return count;
  };
  const int as_they_are = small_pieces(0, "uniform");   // 10 of 210 pairs
  const int tempered = small_pieces(1000, "tempered");  // about half of the sample
  INFO("pieces of the small corpus: " << as_they_are << " as the corpora are, " << tempered << " tempered");
  CHECK(tempered > as_they_are);
  fs::remove_all(dir);
}

TEST_CASE("a truncated checkpoint gives an error naming the file", "[training]") {
  const fs::path dir = fresh_directory("truncated");
  TrainConfig config = tiny_config(dir);
  config.max_steps = 2;
  train(config, {});
  const std::string last = resolve_checkpoint(config.model_dir, "last");
  std::string bytes = read_file(last);
  const std::string truncated = (dir / "truncated.ckpt").string();
  write_file_atomic(truncated, bytes.substr(0, bytes.size() / 2));
  CHECK_THROWS_WITH(load_model(truncated, torch::kCPU), Catch::Contains(truncated));
  CHECK_THROWS_WITH(load_model((dir / "missing.ckpt").string(), torch::kCPU), Catch::Contains("missing.ckpt"));
  fs::remove_all(dir);
}

TEST_CASE("max-minutes stops the run after a last validation", "[training]") {
  const fs::path dir = fresh_directory("minutes");
  TrainConfig config = tiny_config(dir);
  config.max_steps = 0;
  config.max_epochs = 1000;      // would run for many minutes
  config.validate_every = 1000;  // no regular validation before the limit
  config.max_minutes = 1e-6;     // spent after the first update
  TrainSummary summary = train(config, {});
  CHECK(summary.stop_reason == "max-minutes reached");
  CHECK(summary.steps == 1);
  // The end of the budget validates, so best.ckpt exists.
  CHECK(fs::exists(fs::path(config.model_dir) / "best.ckpt"));
  fs::remove_all(dir);
}

namespace {

// Two models of 20-subword vocabularies with the same weights.
std::pair<Seq2Seq, Seq2Seq> twin_models(const ModelOptions& options) {
  Seq2Seq first(options, 20, 20);
  Seq2Seq second(options, 20, 20);
  torch::NoGradGuard no_grad;
  const auto from = first->named_parameters();
  for (auto& item : second->named_parameters()) item.value().copy_(from[item.key()]);
  return {first, second};
}

}  // namespace

TEST_CASE("train_step clips and steps exactly as clip_grad_norm_ and the optimizer do, and skips a diverged loss",
          "[training]") {
  const std::vector<Example> examples = {{{5, 6, 7, 8}, {9, 10, 11}}, {{12, 5}, {13, 14, 15, 16}}, {{7}, {8, 9}}};
  const Batch batch = collate(corpus_in_memory(examples, 2), {0, 1, 2});
  TrainConfig config;
  config.model = tiny_model_options("additive");
  config.model.dropout = 0;
  config.label_smoothing = 0.1;
  for (const double clip_norm : {0.05, 0.0}) {  // the first clips, the second only measures
    DYNAMIC_SECTION("clip-norm " << clip_norm) {
      config.clip_norm = clip_norm;
      torch::manual_seed(131);
      auto [ours, reference] = twin_models(config.model);
      torch::optim::SGD our_optimizer(ours->parameters(), torch::optim::SGDOptions(0.5));
      torch::optim::SGD reference_optimizer(reference->parameters(), torch::optim::SGDOptions(0.5));
      const StepResult result = train_step(ours, our_optimizer, batch, config);
      CHECK(result.skipped.empty());

      DecoderOutput out = reference(batch.source, batch.source_lengths, batch.target_input);
      const SequenceLoss loss = sequence_loss(*reference->decoder, out, batch.target_output, 0.1);
      CHECK(result.loss_sum == Approx(loss.sum.item<double>()).epsilon(1e-12));
      (loss.sum / static_cast<double>(batch.target_tokens)).backward();
      const double norm = torch::nn::utils::clip_grad_norm_(
          reference->parameters(), clip_norm > 0 ? clip_norm : std::numeric_limits<double>::infinity());
      if (clip_norm > 0) REQUIRE(norm > clip_norm);  // so the case clips
      reference_optimizer.step();
      const auto expected = reference->named_parameters();
      for (const auto& item : ours->named_parameters()) {
        INFO(item.key());
        CHECK(torch::equal(item.value(), expected[item.key()]));
      }
    }
  }
  SECTION("a loss over the bound skips the update, with no gradients left") {
    torch::manual_seed(132);
    Seq2Seq model(config.model, 20, 20);
    {
      torch::NoGradGuard no_grad;
      // Every target (EOS, 8-16) made all but impossible: a loss of about 1e6 nats a token.
      model->decoder->output_bias.fill_(-1e6).narrow(0, 0, 3).fill_(0);
      model->decoder->output_bias.narrow(0, 17, 3).fill_(0);
    }
    const torch::Tensor before = model->decoder->combine->weight.clone();
    torch::optim::SGD optimizer(model->parameters(), torch::optim::SGDOptions(0.5));
    const StepResult result = train_step(model, optimizer, batch, config);
    CHECK_THAT(result.skipped, Catch::StartsWith("loss "));
    CHECK(torch::equal(model->decoder->combine->weight, before));
    for (const auto& parameter : model->parameters()) CHECK_FALSE(parameter.grad().defined());
  }
}

TEST_CASE("bf16 training on a CPU without bf16 dot products is refused, saying what to use", "[training]") {
  if (kernels::cpu_has_bf16()) return skip_case("this CPU has bf16 dot products: precision bf16 runs");
  TrainConfig config;
  config.model = tiny_model_options("additive");
  config.precision = "bf16";
  CHECK_THROWS_WITH(check_precision(config, torch::kCPU), Catch::Contains("precision bf16") &&
                                                              Catch::Contains("AVX512_BF16") &&
                                                              Catch::Contains("precision fp32"));
  config.precision = "fp32";
  CHECK_NOTHROW(check_precision(config, torch::kCPU));
}

TEST_CASE("bf16 training on a CPU: the first steps' losses within 1% of fp32's", "[training]") {
  if (!kernels::cpu_has_bf16()) return skip_case("no bf16 dot products on this CPU: precision bf16 is refused");
  TrainConfig config;
  config.model = tiny_model_options("additive");
  config.model.dropout = 0;
  config.label_smoothing = 0.1;
  config.precision = "bf16";
  check_precision(config, torch::kCPU);
  const std::vector<Example> examples = {{{5, 6, 7, 8}, {9, 10, 11}}, {{12, 5}, {13, 14, 15, 16}}, {{7}, {8, 9}}};
  const Batch batch = collate(corpus_in_memory(examples, 2), {0, 1, 2});
  torch::manual_seed(133);
  auto [fp32, bf16] = twin_models(config.model);
  torch::optim::Adam fp32_optimizer(fp32->parameters(), torch::optim::AdamOptions(0.01));
  torch::optim::Adam bf16_optimizer(bf16->parameters(), torch::optim::AdamOptions(0.01));
  TrainConfig fp32_config = config;
  fp32_config.precision = "fp32";
  bool differs = false;
  double first = 0, last = 0;
  for (int step = 0; step < 8; ++step) {
    const double expected = train_step(fp32, fp32_optimizer, batch, fp32_config).loss_sum;
    const double got = train_step(bf16, bf16_optimizer, batch, config).loss_sum;
    INFO("step " << step);
    CHECK(got == Approx(expected).epsilon(0.01));
    differs = differs || got != expected;  // the products did run in bf16
    (step == 0 ? first : last) = got;
  }
  CHECK(differs);
  CHECK(last < first);           // and it learns
  CHECK_FALSE(bf16_products());  // the step's scope ended
}

TEST_CASE("a metric improves only by more than min-improvement and in its own direction", "[training]") {
  MetricRecord bleu;
  record_metric(bleu, 10.0, Metric::kBleu, 0.1);
  CHECK((bleu.has_best && bleu.best == 10.0 && bleu.stalled == 0));
  record_metric(bleu, 10.05, Metric::kBleu, 0.1);  // a gain, but not past min-improvement
  CHECK((bleu.best == 10.0 && bleu.stalled == 1));
  record_metric(bleu, std::nan(""), Metric::kBleu, 0.1);
  CHECK(bleu.stalled == 2);
  record_metric(bleu, 10.2, Metric::kBleu, 0.1);
  CHECK((bleu.best == 10.2 && bleu.stalled == 0));
  MetricRecord loss;
  record_metric(loss, 3.0, Metric::kLoss, 0.0);
  record_metric(loss, 3.5, Metric::kLoss, 0.0);  // higher: worse
  CHECK((loss.best == 3.0 && loss.stalled == 1));
  record_metric(loss, 2.9, Metric::kLoss, 0.0);
  CHECK((loss.best == 2.9 && loss.stalled == 0));
}

TEST_CASE("early stopping stops when the first all or any of its metrics stalled for patience validations",
          "[training]") {
  TrainConfig config;
  config.early_stopping_patience = 2;
  config.early_stopping_metrics = "bleu,chrf";
  TrainingProgress progress;
  progress.metrics[static_cast<size_t>(Metric::kBleu)].stalled = 2;
  progress.metrics[static_cast<size_t>(Metric::kChrf)].stalled = 1;
  progress.metrics[static_cast<size_t>(Metric::kLoss)].stalled = 9;  // not watched
  const auto reason = [&](const std::string& on, const std::string& metrics) {
    config.early_stopping_on = on;
    config.early_stopping_metrics = metrics;
    return StopRules(config).after_validation(progress);
  };
  CHECK(reason("first", "bleu,chrf") ==
        "early stopping: 2 validations without improvement of bleu (early-stopping-on first)");
  CHECK(reason("first", "chrf,bleu").empty());
  CHECK(reason("all", "bleu,chrf").empty());
  CHECK(reason("any", "chrf,bleu") ==
        "early stopping: 2 validations without improvement of bleu (early-stopping-on any)");
  progress.metrics[static_cast<size_t>(Metric::kChrf)].stalled = 2;
  CHECK(reason("all", "bleu,chrf") ==
        "early stopping: 2 validations without improvement of bleu, chrf (early-stopping-on all)");
  config.best_metric = Metric::kChrf;  // no list: best-metric alone
  CHECK(reason("first", "") == "early stopping: 2 validations without improvement of chrf");
  config.best_metric = Metric::kPerplexity;
  CHECK(reason("any", "").empty());
  config.early_stopping_patience = 0;
  CHECK(reason("any", "bleu,chrf,loss").empty());  // off
  config.early_stopping_metrics = "bleu,meteor";
  CHECK_THROWS_WITH(early_stopping_metrics(config), Catch::Contains("early-stopping-metrics: 'meteor'"));
}
