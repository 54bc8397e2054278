#include <torch/torch.h>

#include <algorithm>
#include <catch2/catch.hpp>
#include <functional>
#include <set>
#include <tuple>

#include "helpers.h"
#include "kernels/available.h"
#include "kernels/dispatch.h"
#include "model/bigru.h"
#include "model/dropout.h"
#include "model/gpu_graph/decoder_pass.h"
#include "model/gpu_graph/recorded_pass.h"
#include "model/gru_cell.h"
#include "model/linear/int8_linear.h"
#include "model/linear/loop_linear.h"
#include "model/linear/loop_weight.h"
#include "model/seq2seq.h"

using namespace nmt;
using namespace nmt::testing;

namespace {

// The [cuda] cases fail, saying why, where no GPU is to be seen.
void require_gpu() {
  if (!torch::cuda::is_available()) FAIL("no GPU: the [cuda] cases need a CUDA build of nmt_tests and a visible GPU");
}
constexpr int64_t kVocab = 23;
}  // namespace

TEST_CASE("the encoder gives the same states for a sentence alone and padded in a batch", "[model]") {
  for (int64_t layers : {1, 2}) {
    DYNAMIC_SECTION("layers " << layers) {
      torch::manual_seed(11);
      ModelOptions options = tiny_model_options("additive");
      options.encoder_layers = layers;
      Seq2Seq model(options, kVocab, kVocab);
      model->eval();
      auto [batch, lengths] = random_source({7, 3, 5}, kVocab, 12);
      EncoderOutput together = model->encoder(batch, lengths);
      for (int64_t b = 0; b < 3; ++b) {
        const int64_t length = lengths[b].item<int64_t>();
        torch::Tensor alone_source = batch[b].narrow(0, 0, length).unsqueeze(0);
        EncoderOutput alone = model->encoder(alone_source, torch::tensor({length}));
        CHECK(torch::allclose(together.states[b].narrow(0, 0, length), alone.states[0], 1e-5, 1e-6));
        CHECK(torch::allclose(together.summary[b], alone.summary[0], 1e-5, 1e-6));
        if (length < 7) CHECK(together.states[b].narrow(0, length, 7 - length).abs().max().item<float>() == 0.0f);
      }
    }
  }
}

TEST_CASE("in inference the encoder and the keys compute real positions only, to the same values", "[model]") {
  // While autograd records, every position is computed; in inference on the CPU the encoder packs
  // the batch without its padding (BiGruImpl::forward_packed) and the keys are those of the real
  // positions (Seq2SeqImpl::encode), 0 at padding.
  for (const std::string& attention : all_attention_types()) {
    for (const bool packed : {false, true}) {
      DYNAMIC_SECTION(attention << (packed ? ", weights packed once" : "")) {
        torch::manual_seed(13);
        ModelOptions options = tiny_model_options(attention);
        options.encoder_layers = 2;
        Seq2Seq model(options, kVocab, kVocab);
        model->eval();
        auto [batch, lengths] = random_source({4, 7, 1, 5}, kVocab, 14);
        const EncodedSource recorded = model->encode(batch, lengths);
        REQUIRE(recorded.states.requires_grad());
        if (packed) model->encoder->pack_float32();
        torch::InferenceMode inference;
        const EncodedSource inferred = model->encode(batch, lengths);
        const torch::Tensor real = recorded.mask.unsqueeze(2);
        CHECK(torch::allclose(inferred.states, recorded.states, 1e-5, 1e-6));
        CHECK(torch::allclose(inferred.summary, recorded.summary, 1e-5, 1e-6));
        CHECK(inferred.states.masked_select(~real).abs().max().item<float>() == 0.0f);
        REQUIRE(inferred.keys.defined() == recorded.keys.defined());
        if (!inferred.keys.defined()) continue;  // attention none
        CHECK(torch::allclose(inferred.keys * real, recorded.keys * real, 1e-5, 1e-6));
        CHECK(inferred.keys.masked_select(~real).abs().max().item<float>() == 0.0f);
      }
    }
  }
}

TEST_CASE("a teacher-forced forward pass equals a loop of step()", "[model]") {
  for (const std::string& type : all_attention_types()) {
    for (int64_t layers : {1, 2}) {
      DYNAMIC_SECTION(type << " decoder layers " << layers) {
        torch::manual_seed(21);
        ModelOptions options = tiny_model_options(type);
        options.decoder_layers = layers;
        Seq2Seq model(options, kVocab, kVocab);
        model->eval();
        auto [source, lengths] = random_source({4, 6}, kVocab, 22);
        torch::Tensor target_input = torch::randint(4, kVocab, {2, 5}, torch::kInt64);
        target_input.select(1, 0).fill_(kBosId);
        DecoderOutput forward = model(source, lengths, target_input);
        torch::Tensor forward_logits = model->decoder->output_logits(forward.attentional);
        REQUIRE(forward_logits.sizes() == torch::IntArrayRef({2, 5, kVocab}));

        EncodedSource encoded = model->encode(source, lengths);
        DecoderState state = model->decoder->initial_state(encoded);
        for (int64_t t = 0; t < 5; ++t) {
          StepOutput out = model->decoder->step(target_input.select(1, t), state, encoded);
          state = out.state;
          CHECK(torch::allclose(forward_logits.select(1, t), out.logits, 1e-5, 1e-5));
          if (type != "none") {
            CHECK(torch::allclose(forward.attention.select(1, t), out.attention, 1e-5, 1e-6));
          }
        }
      }
    }
  }
}

TEST_CASE("gradients reach every parameter", "[model]") {
  for (const std::string& type : all_attention_types()) {
    for (bool tied : {false, true}) {
      DYNAMIC_SECTION(type << (tied ? " tied" : " untied")) {
        torch::manual_seed(31);
        ModelOptions options = tiny_model_options(type, /*decoder_hidden=*/8);
        options.tie_embeddings = tied;
        options.encoder_layers = 2;
        options.decoder_layers = 2;
        Seq2Seq model(options, kVocab, kVocab);
        model->train();
        auto [source, lengths] = random_source({5, 3}, kVocab, 32);
        torch::Tensor target = torch::randint(4, kVocab, {2, 4}, torch::kInt64);
        DecoderOutput out = model(source, lengths, target);
        torch::nn::functional::cross_entropy(model->decoder->output_logits(out.attentional).flatten(0, 1),
                                             target.flatten())
            .backward();
        for (const auto& named : model->named_parameters()) {
          INFO(named.key());
          REQUIRE(named.value().grad().defined());
          CHECK(named.value().grad().abs().sum().item<double>() > 0);
        }
      }
    }
  }
}

TEST_CASE("tied embeddings share one matrix with the output projection", "[model]") {
  ModelOptions options = tiny_model_options("general", 8);
  options.tie_embeddings = true;
  Seq2Seq tied(options, kVocab, kVocab);
  CHECK(tied->decoder->output_weight.data_ptr() == tied->decoder->embedding->weight.data_ptr());
  options.tie_embeddings = false;
  Seq2Seq untied(options, kVocab, kVocab);
  int64_t tied_count = 0, untied_count = 0;
  for (const auto& p : tied->parameters()) tied_count += p.numel();
  for (const auto& p : untied->parameters()) untied_count += p.numel();
  CHECK(untied_count - tied_count == kVocab * 8);
}

TEST_CASE("teacher forcing below 1 feeds the model's own predictions", "[model]") {
  torch::manual_seed(41);
  Seq2Seq model(tiny_model_options("dot"), kVocab, kVocab);
  model->train();
  auto [source, lengths] = random_source({4, 4}, kVocab, 42);
  torch::Tensor target = torch::randint(4, kVocab, {2, 6}, torch::kInt64);
  torch::Tensor forced = model->decoder->output_logits(model(source, lengths, target, 1.0).attentional);
  torch::Tensor free_running = model->decoder->output_logits(model(source, lengths, target, 0.0).attentional);
  // Step 0 reads BOS in both; later steps read different tokens unless predictions match the references.
  CHECK(torch::allclose(forced.select(1, 0), free_running.select(1, 0), 1e-5, 1e-6));
  CHECK_FALSE(torch::allclose(forced, free_running, 1e-5, 1e-6));
}

namespace {

// A small recurrence h_t = tanh(map(h_{t-1}) + x_t) and the loss sum_t (t + 1) sum(h_t), with h_1
// left out of the loss (it still reaches it through h_2) and one extra map() whose output is unused
// (its backward never runs).
torch::Tensor loop_loss(const std::function<torch::Tensor(const torch::Tensor&)>& map, const torch::Tensor& inputs,
                        const torch::Tensor& start) {
  torch::Tensor hidden = start;
  torch::Tensor loss = torch::zeros({});
  for (int64_t t = 0; t < inputs.size(0); ++t) {
    if (t == 2) map(hidden);
    hidden = torch::tanh(map(hidden) + inputs[t]);
    if (t != 1) loss = loss + (hidden * static_cast<double>(t + 1)).sum();
  }
  return loss;
}

}  // namespace

TEST_CASE("LoopLinear gives autograd's gradients, computing the weight gradient once after the loop", "[model]") {
  for (bool with_bias : {true, false}) {
    DYNAMIC_SECTION("bias " << with_bias) {
      torch::manual_seed(5);
      const torch::Tensor inputs = torch::randn({5, 3, 4}, torch::kFloat64);  // T, B, H
      auto make = [&] {
        torch::Tensor weight = (torch::randn({4, 4}, torch::kFloat64) * 0.5).requires_grad_();
        torch::Tensor bias = with_bias ? torch::randn({4}, torch::kFloat64).requires_grad_() : torch::Tensor();
        torch::Tensor start = torch::randn({3, 4}, torch::kFloat64).requires_grad_();
        return std::make_tuple(weight, bias, start);
      };
      torch::manual_seed(6);
      auto [weight, bias, start] = make();
      torch::manual_seed(6);
      auto [plain_weight, plain_bias, plain_start] = make();

      const LoopLinear map(weight, bias);
      const torch::Tensor loss = loop_loss(map, inputs, start);
      const torch::Tensor plain_loss =
          loop_loss([&](const torch::Tensor& x) { return torch::nn::functional::linear(x, plain_weight, plain_bias); },
                    inputs, plain_start);
      CHECK(loss.item<double>() == Approx(plain_loss.item<double>()).epsilon(1e-12));
      loss.backward();
      plain_loss.backward();
      REQUIRE(weight.grad().defined());
      CHECK(torch::allclose(weight.grad(), plain_weight.grad(), 1e-10, 1e-12));
      CHECK(torch::allclose(start.grad(), plain_start.grad(), 1e-10, 1e-12));
      if (with_bias) CHECK(torch::allclose(bias.grad(), plain_bias.grad(), 1e-10, 1e-12));
    }
  }
}

TEST_CASE("LoopLinear without gradients is a plain linear map", "[model]") {
  torch::Tensor weight = torch::randn({6, 4}).requires_grad_();
  torch::Tensor bias = torch::randn({6}).requires_grad_();
  torch::Tensor x = torch::randn({3, 4});
  torch::NoGradGuard no_grad;
  const LoopLinear map(weight, bias);
  const torch::Tensor y = map(x);
  CHECK_FALSE(y.requires_grad());
  CHECK(torch::allclose(y, torch::addmm(bias, x, weight.t())));
}

TEST_CASE("BiGru equals LibTorch's packed bidirectional GRU, outputs and gradients, and loads its weights", "[model]") {
  // float64 takes the LibTorch-op path; float32 the fused one (fused_cpu/bigru_layer.h) where the CPU has
  // AVX2, its two directions side by side with two threads (three: one thread waits) and one after
  // the other with one.
  // Hidden size 5 is all tail lanes, 13 one group of eight and a tail.
  struct Case {
    torch::ScalarType type;
    double tolerance;
    int threads;
  };
  for (const Case& run : {Case{torch::kFloat64, 1e-10, 2}, Case{torch::kFloat32, 1e-5, 2},
                          Case{torch::kFloat32, 1e-5, 1}, Case{torch::kFloat32, 1e-5, 3}}) {
    for (int64_t layers : {1, 2}) {
      for (int64_t hidden : {5, 13}) {
        for (const std::vector<int64_t>& length_list :
             {std::vector<int64_t>{3, 6, 1, 4}, std::vector<int64_t>{6, 6, 6, 6}, std::vector<int64_t>{3, 5, 1, 4}}) {
          DYNAMIC_SECTION(run.type << ", " << run.threads << " threads, " << layers << " layers, hidden " << hidden
                                   << ", lengths " << length_list[0] << "...") {
            torch::set_num_threads(run.threads);
            torch::manual_seed(81);
            BiGru ours(4, hidden, layers, 0.0);
            torch::nn::GRU reference(
                torch::nn::GRUOptions(4, hidden).num_layers(layers).bidirectional(true).batch_first(true));
            // The same parameter names and shapes: LibTorch's weights load into ours by name.
            const auto reference_parameters = reference->named_parameters();
            // ... in the same order (an optimizer's saved state follows the order).
            REQUIRE(ours->named_parameters().keys() == reference_parameters.keys());
            {
              torch::NoGradGuard no_grad;
              for (const auto& item : ours->named_parameters()) {
                REQUIRE(reference_parameters.contains(item.key()));
                item.value().copy_(reference_parameters[item.key()]);
              }
            }
            const torch::Tensor lengths = torch::tensor(length_list, torch::kInt64);
            const torch::Tensor input = torch::randn({4, 6, 4}, run.type);
            ours->to(run.type);
            reference->to(run.type);

            BiGruImpl::Output output = ours(input, lengths);
            namespace rnn_utils = torch::nn::utils::rnn;
            auto packed =
                rnn_utils::pack_padded_sequence(input, lengths, /*batch_first=*/true, /*enforce_sorted=*/false);
            auto [packed_states, reference_final] = reference->forward_with_packed_input(packed);
            torch::Tensor reference_states = std::get<0>(
                rnn_utils::pad_packed_sequence(packed_states, /*batch_first=*/true, 0.0, /*total_length=*/6));
            CHECK(torch::allclose(output.states, reference_states, run.tolerance, run.tolerance / 100));
            CHECK(torch::allclose(output.final, reference_final, run.tolerance, run.tolerance / 100));
            if (length_list[2] == 1) {
              CHECK(output.states[2].narrow(0, 1, 5).abs().max().item<double>() == 0.0);  // padding is exactly 0
            }

            // Gradients of a loss on the states and the final states reach the same values.
            const torch::Tensor weights = torch::randn({4, 6, 2 * hidden}, run.type);
            const torch::Tensor final_weights = torch::randn({2 * layers, 4, hidden}, run.type);
            ((output.states * weights).sum() + (output.final * final_weights).sum()).backward();
            ((reference_states * weights).sum() + (reference_final * final_weights).sum()).backward();
            for (const auto& item : ours->named_parameters()) {
              INFO(item.key());
              CHECK(torch::allclose(item.value().grad(), reference_parameters[item.key()].grad(), 10 * run.tolerance,
                                    run.tolerance / 10));
            }
            // Inference (no gradients kept) gives the same states.
            torch::NoGradGuard no_grad;
            CHECK(torch::allclose(ours(input, lengths).states, output.states, 1e-12, 1e-12));
            // ... and so does translation's (evaluation mode), which in float32 with the kernels
            // packs the batch without its padding (forward_packed): the sentences out of order,
            // and in the third list every sentence shorter than the batch's positions.
            ours->eval();
            const BiGruImpl::Output inferred = ours(input, lengths);
            CHECK(torch::allclose(inferred.states, reference_states, run.tolerance, run.tolerance / 100));
            CHECK(torch::allclose(inferred.final, reference_final, run.tolerance, run.tolerance / 100));
            for (int64_t b = 0; b < 4; ++b) {  // padding is exactly 0
              const int64_t padding = 6 - length_list[static_cast<size_t>(b)];
              if (padding > 0) {
                CHECK(inferred.states[b].narrow(0, 6 - padding, padding).abs().max().item<double>() == 0.0);
              }
            }
            // ... and with the weights packed once, as translation loads them (inference/model.h).
            ours->pack_float32();
            const BiGruImpl::Output prepacked = ours(input, lengths);
            CHECK(torch::allclose(prepacked.states, inferred.states, 1e-6, 1e-7));
            CHECK(torch::allclose(prepacked.final, inferred.final, 1e-6, 1e-7));
          }
        }
      }
    }
  }
  torch::set_num_threads(2);
}

TEST_CASE("prepared for translation, the keys are the prepared copy of the scorer's key map", "[model]") {
  // A scorer whose keys are a linear map of the states alone (ScorerImpl::key_map) gets them from
  // the decoder's prepared copy: int8's after quantize_int8(), packed float32's after pack_float32();
  // the others' (cosine, location, dot without a map) stay their own.
  std::set<std::string> mapped;
  for (const std::string& attention : all_attention_types()) {
    for (const int64_t decoder_hidden : {12, 10}) {  // 10: dot and cosine need a key map
      INFO(attention << ", decoder " << decoder_hidden);
      torch::manual_seed(17);
      Seq2Seq model(tiny_model_options(attention, decoder_hidden), kVocab, kVocab);
      model->eval();
      torch::NoGradGuard no_grad;
      const torch::Tensor states = torch::randn({2, 5, 12});
      const torch::Tensor own = model->decoder->project_keys(states);
      if (!own.defined()) continue;  // attention none
      const ScorerImpl::KeyMap key_map = model->decoder->attention->key_map();
      model->decoder->quantize_int8();
      const torch::Tensor int8 = model->decoder->project_keys(states);
      REQUIRE(int8.sizes() == own.sizes());
      if (key_map.weight.defined()) {
        mapped.insert(attention);
        const Int8Linear linear(key_map.weight, key_map.bias);
        CHECK(torch::equal(int8, linear(states.reshape({10, 12})).view(own.sizes())));
        CHECK(!torch::equal(int8, own));
        CHECK(torch::allclose(int8, own, 0, 0.05));
      } else {
        CHECK(torch::equal(int8, own));
      }
      model->decoder->pack_float32();
      CHECK(torch::allclose(model->decoder->project_keys(states), own, 1e-5, 1e-6));
    }
  }
  CHECK(mapped == std::set<std::string>{"additive", "additive+coverage", "dot", "general", "local-m", "local-p",
                                        "multi-head", "scaled-dot"});
}

TEST_CASE("int8 BiGru: each product an int8 map of its weight, at every kernel level", "[model]") {
  // Translation with compute type int8 runs the encoder's products in int8 (BiGruImpl::quantize_int8):
  // the states are those of the GRU's equations with each product W x + b an Int8Linear (int8
  // weight rows, each input row quantized on the fly), sentence by sentence, wherever a sentence sits
  // in the packed batch.
  torch::manual_seed(83);
  torch::set_num_threads(2);
  const int64_t hidden = 13, layers = 2, input_size = 6;
  BiGru rnn(input_size, hidden, layers, 0.0);
  rnn->eval();
  const std::vector<int64_t> length_list{3, 7, 1, 5, 7};
  const torch::Tensor lengths = torch::tensor(length_list, torch::kInt64);
  const torch::Tensor input = torch::randn({5, 7, input_size});
  torch::NoGradGuard no_grad;
  const BiGruImpl::Output float32 = rnn(input, lengths);
  rnn->quantize_int8();
  auto weights = rnn->named_parameters();
  // At every kernel level, the equations at that level: the activations have 6 bits with the AVX2
  // kernel (Int8Linear::activation_limit); without kernels the GRU step runs in LibTorch's ops.
  for (const kernels::KernelLevel level :
       {kernels::KernelLevel::kOff, kernels::KernelLevel::kAvx2, kernels::KernelLevel::kAvx512}) {
    if (level > kernels::supported_kernel_level()) continue;
    kernels::ScopedKernelLevel scoped(level);
    const BiGruImpl::Output int8 = rnn(input, lengths);
    // LibTorch's GRU step on the whole batch and on one row may round differently.
    const auto same = [&](const torch::Tensor& got, const torch::Tensor& expected) {
      return level == kernels::KernelLevel::kOff ? torch::allclose(got, expected, 1e-5, 1e-6)
                                                 : torch::equal(got, expected);
    };
    for (int64_t b = 0; b < 5; ++b) {
      const int64_t length = length_list[static_cast<size_t>(b)];
      INFO(kernels::to_string(level) << ", sentence " << b << ", length " << length);
      torch::Tensor layer_input = input[b].narrow(0, 0, length);  // [T, I]
      for (int64_t layer = 0; layer < layers; ++layer) {
        std::vector<torch::Tensor> halves;
        for (const std::string suffix : {"", "_reverse"}) {
          const std::string tag = "_l" + std::to_string(layer) + suffix;
          const Int8Linear input_map(weights["weight_ih" + tag], weights["bias_ih" + tag]);
          const Int8Linear hidden_map(weights["weight_hh" + tag], weights["bias_hh" + tag]);
          const torch::Tensor gates = input_map(layer_input);  // [T, 3H]
          torch::Tensor h = torch::zeros({1, hidden});
          std::vector<torch::Tensor> states(static_cast<size_t>(length));
          for (int64_t i = 0; i < length; ++i) {
            const int64_t t = suffix.empty() ? i : length - 1 - i;
            h = GruCellImpl::from_gates(gates.narrow(0, t, 1), hidden_map(h), h);
            states[static_cast<size_t>(t)] = h[0];
          }
          const int64_t direction = 2 * layer + (suffix.empty() ? 0 : 1);
          CHECK(same(int8.final[direction][b], h[0]));
          halves.push_back(torch::stack(states));
        }
        layer_input = torch::cat(halves, 1);  // [T, 2H]
      }
      CHECK(same(int8.states[b].narrow(0, 0, length), layer_input));
      if (length < 7) CHECK(int8.states[b].narrow(0, length, 7 - length).abs().max().item<float>() == 0.0f);
    }
    // int8, not float32, and close to it.
    CHECK(!torch::equal(int8.states, float32.states));
    CHECK(torch::allclose(int8.states, float32.states, 0, 0.05));
  }
}

TEST_CASE("a GRU step gives the equations' values and gradients (fused kernels where the CPU has them)", "[model]") {
  torch::manual_seed(71);
  torch::set_num_threads(2);       // 40 rows: split between two threads (16 rows or more each)
  for (int64_t size : {16, 13}) {  // whole lane groups, and a tail
    INFO("H = " << size);
    torch::Tensor gi = (2 * torch::randn({40, 3 * size})).requires_grad_();
    torch::Tensor gh = (2 * torch::randn({40, 3 * size})).requires_grad_();
    torch::Tensor h = torch::randn({40, size}).requires_grad_();
    torch::Tensor ours = GruCellImpl::from_gates(gi, gh, h);
    // Cho et al. 2014, eq. 5-8, gate order (r, z, n) as torch::nn::GRU.
    auto i = gi.chunk(3, 1), g = gh.chunk(3, 1);
    torch::Tensor r = torch::sigmoid(i[0] + g[0]), z = torch::sigmoid(i[1] + g[1]);
    torch::Tensor n = torch::tanh(i[2] + r * g[2]);
    torch::Tensor reference = (1 - z) * n + z * h;
    CHECK(torch::allclose(ours, reference, 1e-5, 1e-6));
    torch::Tensor upstream = torch::randn({40, size});
    auto our_grads = torch::autograd::grad({ours}, {gi, gh, h}, {upstream});
    auto reference_grads = torch::autograd::grad({reference}, {gi, gh, h}, {upstream});
    for (size_t k = 0; k < 3; ++k) {
      INFO("input " << k);
      CHECK(torch::allclose(our_grads[k], reference_grads[k], 1e-5, 1e-6));
    }
    torch::NoGradGuard no_grad;  // inference: same values, nothing kept
    CHECK(torch::allclose(GruCellImpl::from_gates(gi, gh, h), reference, 1e-5, 1e-6));
  }
}

TEST_CASE("the fused training pass of the decoder equals the per-step path, values and gradients", "[model]") {
  // float32 with the AVX2 kernels takes the fused function (fused_cpu/decoder_pass.h); the float64 copy of
  // the same model takes advance() step by step. Dropout masks are drawn in the same order, so
  // with the same seed both compute the same function. Decoder size 13 is a lane group and a tail;
  // 9 rows split unevenly between two threads. Targets are ragged: the fused loop skips the rows
  // that have ended, so the two agree at the real positions, which are all a loss reads.
  if (!kernels::avx2_kernels_available()) return skip_case("no AVX2 on this CPU: there is no fused decoder pass");
  // The kernels on, also when the suite runs under NMT_KERNELS=off.
  const kernels::ScopedKernelLevel kernels_on(std::max(kernels::kernel_level(), kernels::KernelLevel::kAvx2));
  // Every scorer: the additive form (additive, with coverage, multi-head) on the loop's kernels,
  // the others through their recorded forward().
  for (const std::string& type : all_attention_types()) {
    if (type == kNoAttention) continue;
    for (int64_t layers : {1, 2}) {
      for (bool sorted : {true, false}) {
        for (double dropout : {0.0, 0.3}) {
          for (int threads : {1, 2}) {
            DYNAMIC_SECTION(type << ", " << layers << " decoder layers, "
                                 << (sorted ? "rows by decreasing target length" : "rows in any order") << ", dropout "
                                 << dropout << ", " << threads << " threads") {
              torch::set_num_threads(threads);
              ModelOptions options = tiny_model_options(type, /*decoder_hidden=*/13);
              options.decoder_layers = layers;
              options.dropout = dropout;
              torch::manual_seed(91);
              Seq2Seq fused(options, kVocab, kVocab);
              Seq2Seq reference(options, kVocab, kVocab);
              {
                torch::NoGradGuard no_grad;
                const auto fused_parameters = fused->named_parameters();
                for (const auto& item : reference->named_parameters()) item.value().copy_(fused_parameters[item.key()]);
              }
              reference->to(torch::kFloat64);
              fused->train();
              reference->train();
              auto [source, lengths] = random_source({6, 3, 5, 1, 6, 2, 4, 6, 3}, kVocab, 92);
              const std::vector<int64_t> target_lengths = sorted ? std::vector<int64_t>{7, 7, 6, 5, 4, 4, 3, 2, 1}
                                                                 : std::vector<int64_t>{4, 7, 2, 7, 1, 5, 3, 6, 4};
              torch::Tensor target_input = torch::randint(4, kVocab, {9, 7}, torch::kInt64);
              target_input.select(1, 0).fill_(kBosId);
              for (int64_t b = 0; b < 9; ++b)
                target_input[b].narrow(0, target_lengths[b], 7 - target_lengths[b]).fill_(kPadId);
              const torch::Tensor real = target_input.ne(kPadId).to(torch::kFloat64).unsqueeze(2);  // [B, T, 1]
              const torch::Tensor output_weights = torch::randn({9, 7, 13}, torch::kFloat64);
              const torch::Tensor attention_weights = torch::randn({9, 7, 6}, torch::kFloat64);

              torch::manual_seed(93);
              DecoderOutput ours = fused(source, lengths, target_input);
              torch::manual_seed(93);
              DecoderOutput theirs = reference(source, lengths, target_input);
              // The fused function made the output (under the transpose to [B, T, H]), not a stack of steps.
              REQUIRE(ours.attentional.grad_fn() != nullptr);
              CHECK(ours.attentional.grad_fn()->next_edges().at(0).function->name().find("DecoderLoop") !=
                    std::string::npos);
              const torch::Tensor our_attentional = ours.attentional.to(torch::kFloat64);
              const torch::Tensor our_attention = ours.attention.to(torch::kFloat64);
              CHECK(torch::allclose(our_attentional * real, theirs.attentional * real, 1e-4, 1e-5));
              CHECK(torch::allclose(our_attention * real, theirs.attention * real, 1e-4, 1e-5));
              CHECK(ours.attention[3].narrow(1, 1, 5).abs().max().item<float>() == 0.0f);  // source padding: exactly 0
              if (sorted) {  // every skipped position is padding, and is 0
                CHECK((our_attentional * (1 - real)).abs().max().item<double>() == 0.0);
                CHECK((our_attention * (1 - real)).abs().max().item<double>() == 0.0);
              }
              if (dropout > 0) CHECK((ours.attentional == 0).sum().item<int64_t>() > 0);  // dropout did drop

              // A loss on both outputs at the real positions: every parameter's gradient, encoder
              // included (through the states, the keys and the initial state). With sorted rows the
              // fused side's loss also weighs the skipped positions: they are 0 and constant, so the
              // gradients that reach them must change nothing.
              const torch::Tensor our_mask = sorted ? torch::ones_like(real) : real;
              ((our_attentional * output_weights * our_mask).sum() +
               (our_attention * attention_weights * our_mask).sum())
                  .backward();
              ((theirs.attentional * output_weights * real).sum() + (theirs.attention * attention_weights * real).sum())
                  .backward();
              const auto reference_parameters = reference->named_parameters();
              for (const auto& item : fused->named_parameters()) {
                INFO(item.key());
                const torch::Tensor& expected = reference_parameters[item.key()].grad();
                REQUIRE(item.value().grad().defined() == expected.defined());  // the output layer is not in this loss
                if (expected.defined()) {
                  CHECK(torch::allclose(item.value().grad().to(torch::kFloat64), expected, 1e-3, 1e-4));
                }
              }
            }
          }
        }
      }
    }
  }
  torch::set_num_threads(2);
}

TEST_CASE("LoopWeight multiplies as LibTorch does: every init, blocks of columns, strided operands", "[model]") {
  // With AVX-512 this is the packed kernel (kernels/packed_gemm.h), otherwise OpenBLAS. The shapes
  // cover row counts that are not a multiple of the kernel's 8 rows, and columns that end inside
  // a 16-column panel or a 32-column pair.
  // The weight is packed by LibTorch's threads, whole panels each: 3 threads split 200 columns
  // (13 panels) unevenly.
  torch::manual_seed(95);
  for (int threads : {1, 3}) {
    for (const auto& [rows, depth, width] : std::vector<std::tuple<int64_t, int64_t, int64_t>>{
             {13, 7, 45}, {8, 16, 32}, {3, 5, 16}, {9, 21, 70}, {1, 3, 5}, {11, 9, 200}}) {
      for (bool transposed : {false, true}) {
        DYNAMIC_SECTION(threads << " threads, " << rows << " x " << depth << " by " << depth << " x " << width
                                << (transposed ? ", W^T" : "")) {
          torch::set_num_threads(threads);
          // The weight as stored, or as the transpose of a stored [width, depth] (x W^T).
          const torch::Tensor weight = transposed ? torch::randn({width, depth}).t() : torch::randn({depth, width});
          const LoopWeight loop_weight(weight);
          // x with a row stride larger than its width (a block of columns of a wider matrix).
          const torch::Tensor x = torch::randn({rows, depth + 3}).narrow(1, 2, depth);
          const torch::Tensor product = x.mm(weight);
          const auto fresh = [&] { return torch::full({rows, width}, std::nan("")); };

          torch::Tensor out = fresh();
          loop_weight.multiply(x, torch::Tensor(), out);
          CHECK(torch::allclose(out, product, 1e-5, 1e-5));

          const torch::Tensor bias = torch::randn({width});
          loop_weight.multiply(x, bias, out);
          CHECK(torch::allclose(out, product + bias, 1e-5, 1e-5));

          const torch::Tensor init = torch::randn({rows, width});
          loop_weight.multiply(x, init, out);
          CHECK(torch::allclose(out, product + init, 1e-5, 1e-5));

          torch::Tensor accumulated = init.clone();  // init and out the same tensor: out += x W
          loop_weight.multiply(x, accumulated, accumulated);
          CHECK(torch::allclose(accumulated, product + init, 1e-5, 1e-5));

          // One block of columns writes that block and nothing else.
          if (width > 16) {
            torch::Tensor block = fresh();
            loop_weight.multiply(x, bias, block, {16, width});
            CHECK(torch::allclose(block.narrow(1, 16, width - 16), (product + bias).narrow(1, 16, width - 16), 1e-5,
                                  1e-5));
            CHECK(block.narrow(1, 0, 16).isnan().all().item<bool>());
            CHECK_THROWS_WITH(loop_weight.multiply(x, bias, block, {5, width}), Catch::Contains("multiple of 16"));
          }
        }
      }
    }
  }
  torch::set_num_threads(2);
}

namespace {

struct GpuLoopCase {
  torch::Tensor gates, initial_hidden, states, keys, mask;  // [B, T, 3H], [B, H], [B, S, C], [B, S, A], [B, S]
  GpuLoopWeights weights;
};

// Random inputs of the GPU's decoder loop (gpu_graph/decoder_pass.h), float64 leaves that require gradients.
GpuLoopCase random_gpu_loop_case(int64_t batch, int64_t steps, const std::vector<int64_t>& source_lengths,
                                 uint64_t seed) {
  constexpr int64_t H = 5, A = 4, C = 6;
  torch::manual_seed(seed);
  const int64_t positions = *std::max_element(source_lengths.begin(), source_lengths.end());
  const auto leaf = [](std::vector<int64_t> shape) {
    return (torch::randn(shape, torch::kFloat64) * 0.5).requires_grad_();
  };
  GpuLoopCase c;
  c.gates = leaf({batch, steps, 3 * H}), c.initial_hidden = leaf({batch, H});
  c.states = leaf({batch, positions, C}), c.keys = leaf({batch, positions, A});
  c.mask = torch::arange(positions).unsqueeze(0) < torch::tensor(source_lengths).unsqueeze(1);
  c.weights = {leaf({3 * H, H}), leaf({3 * H, H}), leaf({3 * H}), leaf({A, H}), leaf({A}), leaf({H, H + C})};
  return c;
}

// The loop's maths in autograd's operations (gpu_graph/decoder_pass.h), with dropout masks [T, B, H] (or none).
std::pair<torch::Tensor, torch::Tensor> reference_gpu_loop(const GpuLoopCase& c, const torch::Tensor& masks) {
  const GpuLoopWeights& w = c.weights;
  torch::Tensor hidden = c.initial_hidden, fed = torch::zeros_like(c.initial_hidden);
  std::vector<torch::Tensor> attentionals, attentions;
  for (int64_t t = 0; t < c.gates.size(1); ++t) {
    const auto input = (c.gates.select(1, t) + fed.mm(w.feed.t())).chunk(3, 1);
    const auto recurrent = (hidden.mm(w.hidden.t()) + w.hidden_bias).chunk(3, 1);
    const torch::Tensor reset = torch::sigmoid(input[0] + recurrent[0]);
    const torch::Tensor update = torch::sigmoid(input[1] + recurrent[1]);
    const torch::Tensor candidate = torch::tanh(input[2] + reset * recurrent[2]);
    hidden = (1 - update) * candidate + update * hidden;
    const torch::Tensor energies = (torch::tanh(c.keys + hidden.mm(w.query.t()).unsqueeze(1)) * w.energy)
                                       .sum(2)
                                       .masked_fill(c.mask.logical_not(), -std::numeric_limits<double>::infinity());
    const torch::Tensor weights = torch::softmax(energies, 1);
    const torch::Tensor context = torch::bmm(weights.unsqueeze(1), c.states).squeeze(1);
    fed = torch::tanh(torch::cat({hidden, context}, 1).mm(w.combine.t()));
    if (masks.defined()) fed = fed * masks[t];
    attentionals.push_back(fed);
    attentions.push_back(weights);
  }
  return {torch::stack(attentionals, 1), torch::stack(attentions, 1)};
}

std::vector<torch::Tensor> gpu_loop_leaves(const GpuLoopCase& c) {
  const GpuLoopWeights& w = c.weights;
  return {c.gates, c.initial_hidden, c.states, c.keys, w.feed, w.hidden, w.hidden_bias, w.query, w.energy, w.combine};
}

// One GpuDecoderLoop on `device` meets several shapes in turn, `rounds` times over, a longer target
// after a shorter one included: its buffers grow and keep their records from forward to backward,
// and on a GPU its step graphs, recorded in the first round, replay in the next. Each pass is held
// against the same maths in float64 autograd on the CPU.
void check_gpu_loop_shapes(const torch::Device& device, int rounds) {
  GpuDecoderLoop loop;
  struct Shape {
    int64_t batch, steps;
    std::vector<int64_t> source_lengths;
    double dropout;
  };
  const std::vector<Shape> shapes{{3, 4, {5, 2, 4}, 0.0},
                                  {5, 2, {3, 3, 1, 2, 3}, 0.3},
                                  {3, 7, {5, 5, 1}, 0.0},
                                  {3, 4, {2, 5, 4}, 0.3},
                                  {1, 1, {1}, 0.0}};
  uint64_t seed = 200;
  for (int round = 0; round < rounds; ++round) {
    for (const Shape& shape : shapes) {
      INFO("round " << round << ", B " << shape.batch << ", T " << shape.steps << ", dropout " << shape.dropout);
      const GpuLoopCase c = random_gpu_loop_case(shape.batch, shape.steps, shape.source_lengths, ++seed);
      const auto as_float = [&](const torch::Tensor& tensor) { return tensor.to(device, torch::kFloat); };
      const GpuLoopWeights& w = c.weights;
      EncodedSource source;
      source.states = as_float(c.states), source.keys = as_float(c.keys), source.mask = c.mask.to(device);
      torch::manual_seed(seed);  // the loop draws its masks [T, B, H] at once
      torch::Tensor masks;
      if (shape.dropout > 0) {
        masks = dropout_mask({shape.steps, shape.batch, 5}, shape.dropout, torch::TensorOptions(device)).cpu();
      }
      torch::manual_seed(seed);
      auto [attentional, attention] = loop.run(as_float(c.gates), as_float(c.initial_hidden), source,
                                               {as_float(w.feed), as_float(w.hidden), as_float(w.hidden_bias),
                                                as_float(w.query), as_float(w.energy), as_float(w.combine)},
                                               shape.dropout);
      auto [expected_attentional, expected_attention] =
          reference_gpu_loop(c, masks.defined() ? masks.to(torch::kFloat64) : masks);
      const auto on_cpu = [](const torch::Tensor& tensor) { return tensor.to(torch::kCPU, torch::kFloat64); };
      CHECK(torch::allclose(on_cpu(attentional), expected_attentional, 1e-4, 1e-5));
      CHECK(torch::allclose(on_cpu(attention), expected_attention, 1e-4, 1e-5));
      if (shape.dropout > 0) CHECK((attentional == 0).sum().item<int64_t>() > 0);

      const torch::Tensor output_weights = torch::randn(attentional.sizes(), torch::kFloat64);
      const torch::Tensor attention_weights = torch::randn(attention.sizes(), torch::kFloat64);
      const std::vector<torch::Tensor> leaves = gpu_loop_leaves(c);
      const auto ours = torch::autograd::grad(
          {(on_cpu(attentional) * output_weights).sum() + (on_cpu(attention) * attention_weights).sum()}, leaves);
      const auto theirs = torch::autograd::grad(
          {(expected_attentional * output_weights).sum() + (expected_attention * attention_weights).sum()}, leaves);
      const char* names[] = {"gates", "initial_hidden", "states", "keys", "W_f", "W_h", "b_h", "W_q", "v", "W_c"};
      for (size_t i = 0; i < leaves.size(); ++i) {
        INFO(names[i] << ": largest difference " << (ours[i] - theirs[i]).abs().max().item<double>());
        CHECK(torch::allclose(ours[i], theirs[i], 1e-3, 1e-5));
      }
    }
  }
}

}  // namespace

TEST_CASE("the GPU's training loop of the decoder gives the maths' values and gradients, shape after shape",
          "[model]") {
  check_gpu_loop_shapes(torch::kCPU, 1);  // on the CPU (its graphs are a GPU's), float32 against float64
}

TEST_CASE("cuda: the GPU's decoder loop, as recorded graphs, gives the maths' values and gradients", "[.][cuda]") {
  require_gpu();
  check_gpu_loop_shapes(torch::kCUDA, 3);
}

TEST_CASE("the GPU's training loop refuses a backward whose records a later forward overwrote", "[model]") {
  GpuDecoderLoop loop;
  const GpuLoopCase c = random_gpu_loop_case(2, 3, {2, 1}, 300);
  const auto as_float = [](const torch::Tensor& tensor) { return tensor.to(torch::kFloat); };
  EncodedSource source;
  source.states = as_float(c.states), source.keys = as_float(c.keys), source.mask = c.mask;
  const GpuLoopWeights& w = c.weights;
  const GpuLoopWeights weights{as_float(w.feed),  as_float(w.hidden), as_float(w.hidden_bias),
                               as_float(w.query), as_float(w.energy), as_float(w.combine)};
  auto first = loop.run(as_float(c.gates), as_float(c.initial_hidden), source, weights, 0.0);
  auto second = loop.run(as_float(c.gates), as_float(c.initial_hidden), source, weights, 0.0);
  CHECK_THROWS_WITH(first.first.sum().backward(), Catch::Contains("before this pass's backward"));
  second.first.sum().backward();  // the last forward's backward still runs
  CHECK(c.weights.combine.grad().defined());
}

TEST_CASE("the decoder's training pass through the GPU's loop equals the per-step path", "[model]") {
  // The loop taken on the CPU (ScopedGpuLoopEverywhere) for the one-layer additive decoder, against
  // the per-step path in float64: the wiring of the decoder's weights and initial state into it.
  const ScopedGpuLoopEverywhere everywhere;
  ModelOptions options = tiny_model_options("additive", /*decoder_hidden=*/13);
  torch::manual_seed(310);
  Seq2Seq ours(options, kVocab, kVocab);
  Seq2Seq reference(options, kVocab, kVocab);
  {
    torch::NoGradGuard no_grad;
    const auto parameters = ours->named_parameters();
    for (const auto& item : reference->named_parameters()) item.value().copy_(parameters[item.key()]);
  }
  reference->to(torch::kFloat64);  // float64 takes the per-step path
  ours->train(), reference->train();
  auto [source, lengths] = random_source({6, 3, 5, 1}, kVocab, 311);
  torch::Tensor target_input = torch::randint(4, kVocab, {4, 5}, torch::kInt64);
  target_input.select(1, 0).fill_(kBosId);
  const DecoderOutput mine = ours(source, lengths, target_input);
  const DecoderOutput theirs = reference(source, lengths, target_input);
  REQUIRE(mine.attentional.grad_fn() != nullptr);
  CHECK(mine.attentional.grad_fn()->name().find("DecoderLoopGpu") != std::string::npos);
  CHECK(torch::allclose(mine.attentional.to(torch::kFloat64), theirs.attentional, 1e-4, 1e-5));
  CHECK(torch::allclose(mine.attention.to(torch::kFloat64), theirs.attention, 1e-4, 1e-5));
  const torch::Tensor output_weights = torch::randn(theirs.attentional.sizes(), torch::kFloat64);
  (mine.attentional.to(torch::kFloat64) * output_weights).sum().backward();
  (theirs.attentional * output_weights).sum().backward();
  const auto expected = reference->named_parameters();
  for (const auto& item : ours->named_parameters()) {
    INFO(item.key());
    REQUIRE(item.value().grad().defined() == expected[item.key()].grad().defined());
    if (item.value().grad().defined()) {
      CHECK(torch::allclose(item.value().grad().to(torch::kFloat64), expected[item.key()].grad(), 1e-3, 1e-4));
    }
  }
}

namespace {

// The recorded pass (ScopedRecordedPassEverywhere) against the per-step path in float64, for every
// decoder: batches of two buckets, each taken `rounds` times with new values (on a GPU: run as it
// is, then recorded, then replayed). Rows of 5 and 7 share a bucket (8 rows, 8 target and 8 source
// positions); 9 rows are another. Targets and sources are ragged, as collate pads them.
void check_recorded_pass(const torch::Device& device, int rounds) {
  const ScopedRecordedPassEverywhere everywhere;
  struct Batch {
    std::vector<int64_t> source_lengths, target_lengths;
  };
  const std::vector<Batch> batches{{{6, 3, 5, 1, 6}, {5, 2, 4, 5, 1}},
                                   {{7, 2, 5, 7, 1, 3, 4}, {6, 6, 3, 2, 1, 4, 5}},
                                   {{3, 2, 3, 1, 2, 3, 1, 2, 3}, {2, 1, 2, 2, 1, 2, 2, 1, 2}}};
  for (const std::string& type : all_attention_types()) {
    for (int64_t layers : {1, 2}) {
      DYNAMIC_SECTION(type << ", " << layers << " decoder layers") {
        ModelOptions options = tiny_model_options(type, /*decoder_hidden=*/13);
        options.decoder_layers = layers;
        torch::manual_seed(400);
        Seq2Seq ours(options, kVocab, kVocab);
        Seq2Seq reference(options, kVocab, kVocab);
        {
          torch::NoGradGuard no_grad;
          const auto parameters = ours->named_parameters();
          for (const auto& item : reference->named_parameters()) item.value().copy_(parameters[item.key()]);
        }
        reference->to(torch::kFloat64);  // float64 takes the per-step path
        ours->to(device);
        ours->train(), reference->train();
        const int64_t replays = recorded_pass_replays();
        uint64_t seed = 401;
        for (int round = 0; round < rounds; ++round) {
          for (const Batch& batch : batches) {
            const int64_t rows = static_cast<int64_t>(batch.target_lengths.size());
            const int64_t steps = *std::max_element(batch.target_lengths.begin(), batch.target_lengths.end());
            INFO("round " << round << ", " << rows << " rows");
            auto [source, lengths] = random_source(batch.source_lengths, kVocab, ++seed);
            torch::Tensor target_input = torch::randint(4, kVocab, {rows, steps}, torch::kInt64);
            target_input.select(1, 0).fill_(kBosId);
            for (int64_t b = 0; b < rows; ++b) {
              target_input[b].narrow(0, batch.target_lengths[b], steps - batch.target_lengths[b]).fill_(kPadId);
            }
            ours->zero_grad(), reference->zero_grad();
            const DecoderOutput mine = ours(source.to(device), lengths.to(device), target_input.to(device));
            const DecoderOutput theirs = reference(source, lengths, target_input);
            REQUIRE(mine.attentional.grad_fn() != nullptr);
            CHECK(mine.attentional.grad_fn()->name().find("RecordedPassFunction") != std::string::npos);
            const auto on_cpu = [](const torch::Tensor& tensor) { return tensor.to(torch::kCPU, torch::kFloat64); };
            CHECK(torch::allclose(on_cpu(mine.attentional), theirs.attentional, 1e-4, 1e-5));
            REQUIRE(mine.attention.defined() == theirs.attention.defined());
            if (theirs.attention.defined()) {
              REQUIRE(mine.attention.sizes() == theirs.attention.sizes());  // the bucket's padding is cut off
              CHECK(torch::allclose(on_cpu(mine.attention), theirs.attention, 1e-4, 1e-5));
            }

            // A loss on both outputs: every parameter's gradient, the encoder's included (through
            // the states, the keys and the initial state).
            const torch::Tensor output_weights = torch::randn(theirs.attentional.sizes(), torch::kFloat64);
            torch::Tensor our_loss = (on_cpu(mine.attentional) * output_weights).sum();
            torch::Tensor their_loss = (theirs.attentional * output_weights).sum();
            if (theirs.attention.defined()) {
              const torch::Tensor attention_weights = torch::randn(theirs.attention.sizes(), torch::kFloat64);
              our_loss = our_loss + (on_cpu(mine.attention) * attention_weights).sum();
              their_loss = their_loss + (theirs.attention * attention_weights).sum();
            }
            our_loss.backward(), their_loss.backward();
            const auto expected = reference->named_parameters();
            for (const auto& item : ours->named_parameters()) {
              INFO(item.key());
              const torch::Tensor& wanted = expected[item.key()].grad();
              REQUIRE(item.value().grad().defined() == wanted.defined());  // the output layer is in no loss
              if (wanted.defined()) CHECK(torch::allclose(on_cpu(item.value().grad()), wanted, 1e-3, 1e-4));
            }
          }
        }
        // On a GPU the later rounds replayed recordings; the CPU has none.
        if (device.is_cuda()) {
          CHECK(recorded_pass_replays() > replays);
        } else {
          CHECK(recorded_pass_replays() == replays);
        }
      }
    }
  }
}

}  // namespace

TEST_CASE("the recorded GPU training pass equals the per-step path for every decoder, values and gradients",
          "[model]") {
  check_recorded_pass(torch::kCPU, 2);  // on the CPU (its graphs are a GPU's), float32 against float64
}

TEST_CASE("cuda: the recorded GPU training pass, as graphs, equals the per-step path for every decoder", "[.][cuda]") {
  require_gpu();
  check_recorded_pass(torch::kCUDA, 3);
}

TEST_CASE("the recorded GPU training pass drops out, differently in every pass", "[model]") {
  // With dropout, the same batch twice gives two different outputs (on a GPU, the recording draws
  // new masks at every replay), and the gradients still reach every weight of the steps.
  const ScopedRecordedPassEverywhere everywhere;
  for (const std::string& type : {std::string("general"), std::string("local-p")}) {
    INFO(type);
    ModelOptions options = tiny_model_options(type, /*decoder_hidden=*/13);
    options.decoder_layers = 2;
    options.dropout = 0.5;
    torch::manual_seed(410);
    Seq2Seq model(options, kVocab, kVocab);
    model->train();
    auto [source, lengths] = random_source({6, 3, 5}, kVocab, 411);
    torch::Tensor target_input = torch::randint(4, kVocab, {3, 5}, torch::kInt64);
    target_input.select(1, 0).fill_(kBosId);
    std::vector<torch::Tensor> outputs;
    for (int pass = 0; pass < 3; ++pass) {
      model->zero_grad();
      const DecoderOutput output = model(source, lengths, target_input);
      CHECK(output.attentional.grad_fn()->name().find("RecordedPassFunction") != std::string::npos);
      CHECK((output.attentional == 0).sum().item<int64_t>() > 0);
      output.attentional.sum().backward();
      CHECK(model->decoder->combine->weight.grad().abs().sum().item<double>() > 0);
      outputs.push_back(output.attentional.detach());
    }
    CHECK_FALSE(torch::equal(outputs[1], outputs[2]));
  }
}

TEST_CASE("the recorded GPU training pass refuses a backward whose values are gone", "[model]") {
  const ScopedRecordedPassEverywhere everywhere;
  torch::manual_seed(420);
  Seq2Seq model(tiny_model_options("dot"), kVocab, kVocab);
  model->train();
  auto [source, lengths] = random_source({4, 2}, kVocab, 421);
  torch::Tensor target_input = torch::randint(4, kVocab, {2, 3}, torch::kInt64);
  target_input.select(1, 0).fill_(kBosId);
  const DecoderOutput first = model(source, lengths, target_input);
  const DecoderOutput second = model(source, lengths, target_input);
  CHECK_THROWS_WITH(first.attentional.sum().backward(), Catch::Contains("before this pass's backward"));
  const torch::Tensor loss = second.attentional.sum();
  loss.backward({}, /*retain_graph=*/true);  // the last forward's backward still runs
  CHECK(model->decoder->combine->weight.grad().defined());
  CHECK_THROWS_WITH(loss.backward(), Catch::Contains("one backward per forward"));  // its values are spent
}

TEST_CASE("the recorded GPU training pass steps aside for a weight whose gradient has a hook", "[model]") {
  // Data parallel's all-reduce hooks every weight: the hook must see each gradient once, the one
  // autograd hands the weight, so the reference pass runs unwrapped.
  const ScopedRecordedPassEverywhere everywhere;
  torch::manual_seed(430);
  Seq2Seq model(tiny_model_options("general"), kVocab, kVocab);
  model->train();
  int calls = 0;
  torch::Tensor seen;
  model->decoder->combine->weight.register_hook([&](const torch::Tensor& gradient) {
    ++calls;
    seen = gradient.clone();
  });
  auto [source, lengths] = random_source({5, 3}, kVocab, 431);
  torch::Tensor target_input = torch::randint(4, kVocab, {2, 4}, torch::kInt64);
  target_input.select(1, 0).fill_(kBosId);
  const DecoderOutput output = model(source, lengths, target_input);
  CHECK(output.attentional.grad_fn()->name().find("RecordedPassFunction") == std::string::npos);
  output.attentional.sum().backward();
  CHECK(calls == 1);
  CHECK(torch::equal(seen, model->decoder->combine->weight.grad()));
}

TEST_CASE("a bucket pads a size up to its multiple", "[model]") {
  CHECK(bucket_size(1, 8) == 8);
  CHECK(bucket_size(8, 8) == 8);
  CHECK(bucket_size(9, 8) == 16);
  CHECK(bucket_size(13, 4) == 16);
}
