// The GPU against the CPU: one model, copied to the GPU, gives the CPU's losses, gradients and
// translations. The CPU side takes our kernels (float32, AVX2 where the CPU has it); the GPU side
// takes LibTorch's CUDA operations. Hidden ([.]): these cases need a GPU and a CUDA build, and run
// only when asked for, as scripts/gpu_check.sh does (nmt_tests "[cuda]").
#include <torch/torch.h>
#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include <fstream>
#include <map>

#include "helpers.h"
#include "inference/model.h"
#include "search/search.h"
#include "train/checkpoint.h"
#include "train/fused_adam.h"
#include "train/loss.h"
#include "train/trainer.h"
#include "training_helpers.h"

using namespace nmt;
using namespace nmt::testing;

namespace {

constexpr int64_t kGpuVocab = 23;

void require_gpu() {
  if (!torch::cuda::is_available()) {
    FAIL("no GPU: the [cuda] cases need a CUDA build of nmt_tests and a visible GPU (nvidia-smi)");
  }
  // cuDNN's GRU (the encoder) would otherwise use TF32 products (LibTorch's default for cuDNN), whose
  // 10-bit mantissas are far from the CPU's float32.
  at::globalContext().setAllowTF32CuDNN(false);
}

// A model of `options` on `device` with `model`'s weights.
Seq2Seq copy_of_model(Seq2Seq& model, const ModelOptions& options, const torch::Device& device) {
  Seq2Seq copy(options, kGpuVocab, kGpuVocab);
  torch::NoGradGuard no_grad;
  const auto parameters = model->named_parameters();
  for (const auto& item : copy->named_parameters()) item.value().copy_(parameters[item.key()]);
  const auto buffers = model->named_buffers();
  for (const auto& item : copy->named_buffers()) item.value().copy_(buffers[item.key()]);
  copy->to(device);
  return copy;
}

// Teacher-forced targets [B, T] of the given lengths (EOS included) and the decoder's input.
std::pair<torch::Tensor, torch::Tensor> gpu_test_targets(const std::vector<int64_t>& lengths, uint64_t seed) {
  torch::manual_seed(seed);
  const int64_t rows = static_cast<int64_t>(lengths.size());
  const int64_t longest = *std::max_element(lengths.begin(), lengths.end());
  torch::Tensor output = torch::full({rows, longest}, kPadId, torch::kInt64);
  for (int64_t b = 0; b < rows; ++b) {
    output[b].narrow(0, 0, lengths[b] - 1).copy_(torch::randint(4, kGpuVocab, {lengths[b] - 1}, torch::kInt64));
    output[b][lengths[b] - 1] = kEosId;
  }
  torch::Tensor input =
      torch::cat({torch::full({rows, 1}, kBosId, torch::kInt64), output.narrow(1, 0, longest - 1)}, 1);
  input.masked_fill_(input.eq(kEosId), kPadId);
  return {input, output};
}

}  // namespace

TEST_CASE("cuda: every scorer gives the CPU's loss and gradients on the GPU", "[.][cuda]") {
  require_gpu();
  const torch::Device gpu(torch::kCUDA);
  for (const std::string& type : all_attention_types()) {
    for (int64_t layers : {1, 2}) {
      DYNAMIC_SECTION(type << ", " << layers << " decoder layers") {
        ModelOptions options = tiny_model_options(type, /*decoder_hidden=*/16);
        options.decoder_layers = layers;
        torch::manual_seed(101);
        Seq2Seq on_cpu(options, kGpuVocab, kGpuVocab);
        Seq2Seq on_gpu = copy_of_model(on_cpu, options, gpu);
        on_cpu->train();
        on_gpu->train();  // dropout 0: the two devices' generators draw differently
        auto [source, lengths] = random_source({7, 3, 5, 1, 6, 2}, kGpuVocab, 102);
        auto [target_input, target_output] = gpu_test_targets({5, 8, 2, 6, 1, 4}, 103);

        const SequenceLoss cpu_loss =
            sequence_loss(*on_cpu->decoder, on_cpu(source, lengths, target_input), target_output, 0.1);
        const SequenceLoss gpu_loss = sequence_loss(
            *on_gpu->decoder, on_gpu(source.to(gpu), lengths, target_input.to(gpu)), target_output.to(gpu), 0.1);
        REQUIRE(gpu_loss.sum.device().is_cuda());
        // float32 sums in different orders: a relative 1e-5 of the summed loss.
        const double expected = cpu_loss.sum.item<double>();
        CHECK(gpu_loss.sum.item<double>() == Approx(expected).epsilon(1e-5));

        cpu_loss.sum.backward();
        gpu_loss.sum.backward();
        const auto cpu_parameters = on_cpu->named_parameters();
        for (const auto& item : on_gpu->named_parameters()) {
          INFO(item.key());
          const torch::Tensor& reference = cpu_parameters[item.key()].grad();
          REQUIRE(item.value().grad().defined() == reference.defined());
          if (!reference.defined()) continue;
          const torch::Tensor ours = item.value().grad().to(torch::kCPU);
          INFO("largest difference " << (ours - reference).abs().max().item<float>() << ", largest gradient "
                                     << reference.abs().max().item<float>());
          CHECK(torch::allclose(ours, reference, 1e-3, 1e-5));
        }
      }
    }
  }
}

TEST_CASE("cuda: FusedAdam's fused GPU step equals Adam's on the CPU, and saves the same state", "[.][cuda]") {
  require_gpu();
  const torch::Device gpu(torch::kCUDA);
  torch::manual_seed(121);
  std::vector<torch::Tensor> on_cpu = {torch::randn({7, 5}), torch::randn({11})};
  std::vector<torch::Tensor> on_gpu;
  for (const torch::Tensor& param : on_cpu) {
    param.set_requires_grad(true);
    on_gpu.push_back(param.detach().to(gpu).set_requires_grad(true));
  }
  const auto options = torch::optim::AdamOptions(0.01).betas({0.8, 0.9}).eps(1e-6);
  torch::optim::Adam reference(on_cpu, options);
  FusedAdam fused(on_gpu, options);
  for (int step = 0; step < 4; ++step) {
    for (size_t i = 0; i < on_cpu.size(); ++i) {
      const torch::Tensor grad = torch::randn(on_cpu[i].sizes());
      on_cpu[i].mutable_grad() = grad.clone();
      on_gpu[i].mutable_grad() = grad.to(gpu);
    }
    reference.step();
    fused.step();
  }
  for (size_t i = 0; i < on_cpu.size(); ++i) {
    INFO("parameter " << i);
    CHECK(torch::allclose(on_gpu[i].cpu(), on_cpu[i].detach(), 1e-5, 1e-6));
    const auto& state = static_cast<const torch::optim::AdamParamState&>(*fused.state().at(adam_state_key(on_gpu[i])));
    CHECK(state.step() == 4);  // counted on the host, as the checkpoint stores it
    CHECK(state.exp_avg().device().is_cuda());
  }
}

TEST_CASE("cuda: greedy and beam search give the CPU's translations and scores on the GPU", "[.][cuda]") {
  require_gpu();
  const torch::Device gpu(torch::kCUDA);
  for (const std::string& type : all_attention_types()) {
    DYNAMIC_SECTION(type) {
      const ModelOptions options = tiny_model_options(type, /*decoder_hidden=*/16);
      // A few steps of training on random pairs, so that EOS comes and beams differ (test_search.cpp).
      torch::manual_seed(111);
      Seq2Seq on_cpu(options, kGpuVocab, kGpuVocab);
      auto [train_source, train_lengths] = random_source({6, 4, 5, 3}, kGpuVocab, 112);
      auto [train_input, train_output] = gpu_test_targets({4, 4, 3, 5}, 113);
      torch::optim::Adam optimizer(on_cpu->parameters(), torch::optim::AdamOptions(0.01));
      for (int step = 0; step < 15; ++step) {
        optimizer.zero_grad();
        sequence_loss(*on_cpu->decoder, on_cpu(train_source, train_lengths, train_input), train_output, 0.0)
            .sum.backward();
        optimizer.step();
      }
      on_cpu->eval();
      Seq2Seq on_gpu = copy_of_model(on_cpu, options, gpu);
      on_gpu->eval();
      auto [source, lengths] = random_source({6, 2, 5, 7, 1}, kGpuVocab, 114);
      torch::InferenceMode inference;
      for (int beam : {1, 4}) {
        SearchOptions search;
        search.beam_size = beam;
        search.n_best = beam;
        search.length_penalty = 0.6;
        search.max_length = 12;
        search.return_attention = true;
        const SearchResult expected =
            beam == 1 ? greedy_search(on_cpu, source, lengths, search) : beam_search(on_cpu, source, lengths, search);
        const SearchResult found = beam == 1 ? greedy_search(on_gpu, source.to(gpu), lengths, search)
                                             : beam_search(on_gpu, source.to(gpu), lengths, search);
        REQUIRE(found.size() == expected.size());
        for (size_t sentence = 0; sentence < expected.size(); ++sentence) {
          REQUIRE(found[sentence].size() == expected[sentence].size());
          for (size_t rank = 0; rank < expected[sentence].size(); ++rank) {
            INFO("beam " << beam << ", sentence " << sentence << ", hypothesis " << rank);
            const Hypothesis& ours = found[sentence][rank];
            const Hypothesis& theirs = expected[sentence][rank];
            CHECK(ours.tokens == theirs.tokens);
            CHECK(ours.score == Approx(theirs.score).epsilon(1e-5).margin(1e-5));
            REQUIRE(ours.attention.defined() == theirs.attention.defined());  // none without attention
            if (!theirs.attention.defined()) continue;
            CHECK(ours.attention.device().is_cpu());  // results come back to the CPU, as outputs.cpp reads them
            CHECK(torch::allclose(ours.attention, theirs.attention, 1e-4, 1e-5));
          }
        }
      }
    }
  }
}

TEST_CASE("cuda: bf16 training follows fp32 training's loss over its first updates", "[.][cuda]") {
  require_gpu();
  const std::filesystem::path dir = fresh_directory("cuda_bf16");
  std::map<std::string, std::vector<double>> losses;
  for (const std::string precision : {"fp32", "bf16"}) {
    TrainConfig config = tiny_config(dir);
    config.device = "cuda";
    config.precision = precision;
    config.model.dropout = 0;
    config.max_steps = 30;
    config.log_every = 1;
    config.model_dir = (dir / precision).string();
    train(config, {});
    std::ifstream log(dir / precision / "metrics.jsonl");
    for (std::string line; std::getline(log, line);) {
      const nlohmann::json entry = nlohmann::json::parse(line);
      if (entry["event"] == "train") losses[precision].push_back(entry["loss"].get<double>());
    }
  }
  REQUIRE(losses["fp32"].size() == 30);
  REQUIRE(losses["bf16"].size() == losses["fp32"].size());
  CHECK(losses["fp32"].back() < losses["fp32"].front());  // it learns
  size_t differs = 0;
  for (size_t step = 0; step < losses["fp32"].size(); ++step) {
    INFO("update " << step + 1);
    // bfloat16 keeps 8 bits of mantissa: 2% of the loss, over steps that compound the difference.
    CHECK(losses["bf16"][step] == Approx(losses["fp32"][step]).epsilon(0.02));
    differs += losses["bf16"][step] != losses["fp32"][step] ? 1 : 0;
  }
  // bf16 did run: float32's losses to the last bit, as the log writes them (a double, in full),
  // would mean the forward never left float32. The very first loss, of the same weights, differs.
  CHECK(differs > losses["fp32"].size() / 2);
  CHECK(losses["bf16"].front() != losses["fp32"].front());
  std::filesystem::remove_all(dir);
}

TEST_CASE("cuda: with dropout, a run on the GPU stopped and resumed ends with the weights of an uninterrupted one",
          "[.][cuda]") {
  require_gpu();
  const std::filesystem::path dir = fresh_directory("cuda_resume");
  TrainConfig config = tiny_config(dir);
  config.device = "cuda";
  config.model.dropout = 0.3;  // drawn from the GPU's generator: its state is in the checkpoint
  config.model.word_dropout = 0.1;
  config.max_steps = 8;
  config.model_dir = (dir / "whole").string();
  train(config, {});
  TrainingCheckpoint whole = load_training_checkpoint(resolve_checkpoint(config.model_dir, "last"), torch::kCPU);
  REQUIRE(whole.cuda_random_state.defined());
  config.model_dir = (dir / "stopped").string();
  config.max_steps = 4;
  train(config, {});
  config.max_steps = 8;
  train(config, {/*resume=*/true, false, {}, {}});
  TrainingCheckpoint resumed = load_training_checkpoint(resolve_checkpoint(config.model_dir, "last"), torch::kCPU);
  CHECK(resumed.progress.step == 8);
  auto expected = whole.model.network->named_parameters();
  for (const auto& item : resumed.model.network->named_parameters()) {
    INFO(item.key());
    CHECK(torch::equal(item.value(), expected[item.key()]));
  }
  std::filesystem::remove_all(dir);
}
