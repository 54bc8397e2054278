#include <catch2/catch.hpp>
#include <torch/torch.h>

#include "helpers.h"
#include "model/seq2seq.h"

using namespace nmt;
using namespace nmt::testing;

namespace {
constexpr int64_t kVocab = 23;
}

TEST_CASE("the encoder gives the same states for a sentence alone and padded in a batch", "[model]") {
  for (int64_t layers : {1, 2}) {
    DYNAMIC_SECTION("layers " << layers) {
      torch::manual_seed(11);
      ModelOptions options = tiny_model_options(AttentionType::kAdditive);
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

TEST_CASE("a teacher-forced forward pass equals a loop of step()", "[model]") {
  for (AttentionType type : all_attention_types()) {
    for (int64_t layers : {1, 2}) {
      DYNAMIC_SECTION(to_string(type) << " decoder layers " << layers) {
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
          if (type != AttentionType::kNone) {
            CHECK(torch::allclose(forward.attention.select(1, t), out.attention, 1e-5, 1e-6));
          }
        }
      }
    }
  }
}

TEST_CASE("gradients reach every parameter", "[model]") {
  for (AttentionType type : all_attention_types()) {
    for (bool tied : {false, true}) {
      DYNAMIC_SECTION(to_string(type) << (tied ? " tied" : " untied")) {
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
        torch::nn::functional::cross_entropy(model->decoder->output_logits(out.attentional).flatten(0, 1), target.flatten())
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
  ModelOptions options = tiny_model_options(AttentionType::kGeneral, 8);
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
  Seq2Seq model(tiny_model_options(AttentionType::kDot), kVocab, kVocab);
  model->train();
  auto [source, lengths] = random_source({4, 4}, kVocab, 42);
  torch::Tensor target = torch::randint(4, kVocab, {2, 6}, torch::kInt64);
  torch::Tensor forced = model->decoder->output_logits(model(source, lengths, target, 1.0).attentional);
  torch::Tensor free_running = model->decoder->output_logits(model(source, lengths, target, 0.0).attentional);
  // Step 0 reads BOS in both; later steps read different tokens unless predictions match the references.
  CHECK(torch::allclose(forced.select(1, 0), free_running.select(1, 0), 1e-5, 1e-6));
  CHECK_FALSE(torch::allclose(forced, free_running, 1e-5, 1e-6));
}
