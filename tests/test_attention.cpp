#include <torch/torch.h>
#include <catch2/catch.hpp>

#include "helpers.h"
#include "kernels/dispatch.h"
#include "model/attention.h"
#include "model/ops/attention_products.h"
#include "model/scorers/registry.h"

using namespace nmt;
using namespace nmt::testing;

namespace {

EncodedSource random_encoded(Attention& attention, const std::vector<int64_t>& lengths, int64_t key_size) {
  const auto batch = static_cast<int64_t>(lengths.size());
  const int64_t max_length = *std::max_element(lengths.begin(), lengths.end());
  EncodedSource source;
  torch::Tensor length_tensor = torch::tensor(lengths, torch::kInt64);
  source.mask = make_source_mask(length_tensor, max_length, torch::kCPU);
  source.states = torch::randn({batch, max_length, key_size}) * source.mask.unsqueeze(2);
  source.summary = torch::randn({batch, key_size});
  source.keys = attention->project_keys(source.states);
  return source;
}

}  // namespace

TEST_CASE("every scorer's weights sum to 1 over real positions and are exactly 0 on padding", "[attention]") {
  for (const std::string& type : all_scorer_names()) {
    for (int64_t query_size : {12, 7}) {  // equal to the key size, and different (dot/cosine key map)
      DYNAMIC_SECTION(type << " query " << query_size) {
        torch::manual_seed(3);
        AttentionOptions options = attention_options(type, query_size, 12, 9, 0.0);
        options.heads = 3;                                          // dividing 9 and 12
        const bool local = type == "local-p" || type == "local-m";  // times a Gaussian: rows sum to at most 1
        Attention attention(options);
        const std::vector<int64_t> lengths = {5, 1, 3, 5};
        EncodedSource source = random_encoded(attention, lengths, 12);
        AttentionResult result = attention(torch::randn({4, query_size}) * 5, source);
        REQUIRE(result.weights.sizes() == torch::IntArrayRef({4, 5}));
        REQUIRE(result.context.sizes() == torch::IntArrayRef({4, 12}));
        for (int64_t b = 0; b < 4; ++b) {
          torch::Tensor row = result.weights[b];
          const double sum = row.narrow(0, 0, lengths[b]).sum().item<double>();
          if (local) {
            CHECK((sum > 0 && sum <= 1 + 1e-6));
          } else {
            CHECK(sum == Approx(1.0).epsilon(1e-6));
          }
          if (lengths[b] < 5) {
            CHECK(row.narrow(0, lengths[b], 5 - lengths[b]).abs().max().item<float>() == 0.0f);
          }
          CHECK(row.min().item<float>() >= 0.0f);
        }
        // The context mixes only real states; with heads, head n mixes its slice of the states.
        if (result.head_weights.defined()) {
          for (int64_t head = 0; head < 3; ++head) {
            const torch::Tensor weights = result.head_weights.select(1, head);  // [B, S]
            CHECK(torch::allclose(weights.sum(1), torch::ones({4}), 1e-5, 1e-6));
            torch::Tensor expected =
                torch::bmm(weights.unsqueeze(1), source.states.narrow(2, 4 * head, 4)).squeeze(1);  // C / N = 4
            CHECK(torch::allclose(result.context.narrow(1, 4 * head, 4), expected, 1e-5, 1e-6));
          }
        } else {
          torch::Tensor expected = torch::bmm(result.weights.unsqueeze(1), source.states).squeeze(1);
          CHECK(torch::allclose(result.context, expected));
        }
      }
    }
  }
}

TEST_CASE("padding values cannot leak into attention", "[attention]") {
  torch::manual_seed(4);
  Attention attention(attention_options("additive", 6, 6, 5, 0.0));
  EncodedSource source = random_encoded(attention, {2, 4}, 6);
  torch::Tensor query = torch::randn({2, 6});
  AttentionResult before = attention(query, source);
  // Garbage in the padded positions of sentence 0 must change nothing.
  source.states[0].narrow(0, 2, 2).fill_(1000.0);
  source.keys = attention->project_keys(source.states);
  AttentionResult after = attention(query, source);
  CHECK(torch::equal(before.weights, after.weights));
  CHECK(torch::allclose(before.context, after.context));
}

TEST_CASE("dot and cosine use the encoder states directly when sizes match", "[attention]") {
  Attention dot(attention_options("dot", 12, 12, 9, 0.0));
  CHECK(dot->parameters().empty());
  Attention dot_mapped(attention_options("dot", 7, 12, 9, 0.0));
  CHECK(dot_mapped->parameters().size() == 1);
  Attention cosine_fixed(attention_options("cosine", 12, 12, 9, 4.0));
  CHECK(cosine_fixed->parameters().empty());
  Attention cosine_learned(attention_options("cosine", 12, 12, 9, 0.0));
  CHECK(cosine_learned->parameters().size() == 1);
}

TEST_CASE("cosine scores are the sharpness times a cosine in [-1, 1]", "[attention]") {
  torch::manual_seed(5);
  auto scorer = make_scorer(attention_options("cosine", 4, 4, 3, 3.0));
  torch::Tensor states = torch::randn({2, 3, 4});
  torch::Tensor query = torch::randn({2, 4});
  torch::Tensor scores = scorer->score(query, scorer->project_keys(states), {});
  torch::Tensor expected = 3.0 * torch::cosine_similarity(states, query.unsqueeze(1), /*dim=*/2);
  CHECK(torch::allclose(scores, expected, 1e-5, 1e-6));
}

TEST_CASE("scaled-dot scores are the dot scores divided by sqrt(Q)", "[attention]") {
  torch::manual_seed(6);
  auto dot = make_scorer(attention_options("dot", 9, 9, 3, 0.0));
  auto scaled = make_scorer(attention_options("scaled-dot", 9, 9, 3, 0.0));
  torch::Tensor states = torch::randn({2, 4, 9});
  torch::Tensor query = torch::randn({2, 9});
  CHECK(torch::allclose(scaled->score(query, states, {}), dot->score(query, states, {}) / 3.0, 1e-5, 1e-6));
}

TEST_CASE("location attention reads positions only, positions past attention-positions share the last", "[attention]") {
  torch::manual_seed(7);
  AttentionOptions options = attention_options("location", 6, 8, 3, 0.0);
  options.positions = 4;
  Attention attention(options);
  EncodedSource source = random_encoded(attention, {6, 3}, 8);
  const torch::Tensor query = torch::randn({2, 6});
  AttentionResult before = attention(query, source);
  source.states = torch::randn_like(source.states) * source.mask.unsqueeze(2);  // other content, same positions
  source.keys = attention->project_keys(source.states);
  AttentionResult after = attention(query, source);
  CHECK(torch::equal(before.weights, after.weights));
  // Positions 3, 4 and 5 all take row 3's score: equal weights.
  CHECK(before.weights[0][3].item<float>() == before.weights[0][4].item<float>());
  CHECK(before.weights[0][4].item<float>() == before.weights[0][5].item<float>());
}

TEST_CASE("local attention: weights only inside [p_t - D, p_t + D], local-m's window follows t", "[attention]") {
  for (const std::string& type : {std::string("local-m"), std::string("local-p")}) {
    for (const std::string& content : content_scorer_names()) {
      DYNAMIC_SECTION(type << " over " << content) {
        torch::manual_seed(8);
        AttentionOptions options = attention_options(type, 8, 8, 5, 0.0);
        options.local_scorer = content;
        options.local_window = 2;
        Attention attention(options);
        const std::vector<int64_t> lengths = {12, 9};
        EncodedSource source = random_encoded(attention, lengths, 8);
        for (int64_t t : {0, 4, 11}) {
          AttentionResult result = attention(torch::randn({2, 8}) * 3, source,
                                             AttentionStep{t, torch::Tensor(), torch::Tensor(), torch::Tensor()});
          for (int64_t b = 0; b < 2; ++b) {
            const torch::Tensor nonzero = result.weights[b].nonzero().view(-1);
            const int64_t first = nonzero.min().item<int64_t>(), last = nonzero.max().item<int64_t>();
            CHECK(last - first <= 2 * 2);  // inside one window of width 2D + 1
            CHECK(last < lengths[b]);
            if (type == "local-m") {  // around min(t, S - 1)
              const int64_t centre = std::min(t, lengths[b] - 1);
              CHECK(first >= centre - 2);
              CHECK(last <= centre + 2);
              CHECK(result.weights[b][centre].item<float>() > 0);
            }
          }
        }
      }
    }
  }
}

TEST_CASE("coverage: the decoder carries the sum of the weights so far, and it changes the scores", "[attention]") {
  torch::manual_seed(9);
  Seq2Seq model(tiny_model_options("additive" + kWithCoverage), 15, 15);
  model->eval();
  torch::NoGradGuard no_grad;
  auto [source, lengths] = random_source({5, 3}, 15, 10);
  EncodedSource encoded = model->encode(source, lengths);
  DecoderState state = model->decoder->initial_state(encoded);
  REQUIRE(state.coverage.defined());
  torch::Tensor sum = torch::zeros(encoded.mask.sizes());
  torch::Tensor tokens = torch::full({2}, kBosId, torch::kInt64);
  for (int64_t t = 0; t < 4; ++t) {
    StepOutput out = model->decoder->step(tokens, state, encoded);
    sum += out.attention;
    CHECK(torch::allclose(out.state.coverage, sum, 1e-6, 1e-6));
    CHECK(out.state.position == t + 1);
    state = out.state;
    tokens = out.logits.argmax(1);
  }
  // The same query with the coverage reset scores differently.
  AttentionResult covered = model->decoder->attention(
      state.hidden[0], encoded, AttentionStep{4, state.coverage, torch::Tensor(), torch::Tensor()});
  AttentionResult fresh = model->decoder->attention(
      state.hidden[0], encoded, AttentionStep{4, torch::zeros_like(state.coverage), torch::Tensor(), torch::Tensor()});
  CHECK_FALSE(torch::allclose(covered.weights, fresh.weights));
}

TEST_CASE("attention none gives the fixed encoder summary as context", "[attention]") {
  Attention attention(attention_options("none", 12, 12, 9, 0.0));
  EncodedSource source = random_encoded(attention, {3, 2}, 12);
  AttentionResult result = attention(torch::randn({2, 12}), source);
  CHECK_FALSE(result.weights.defined());
  CHECK(torch::equal(result.context, source.summary));
}

TEST_CASE("fused attention steps: same values and gradients as the LibTorch expressions", "[attention]") {
  // Sizes 21 and 13: two and one groups of eight lanes plus tails; a zero weight (padding) too.
  // Two threads: the 5 rows are split (4 rows or more per thread).
  torch::set_num_threads(2);
  torch::manual_seed(31);
  torch::Tensor keys = torch::randn({5, 7, 21}).requires_grad_();
  torch::Tensor query = (2 * torch::randn({5, 21})).requires_grad_();
  torch::Tensor v = torch::randn({21}).requires_grad_();
  torch::Tensor weights = torch::softmax(torch::randn({5, 7}), 1);
  weights.select(1, 6).zero_();
  weights.requires_grad_();
  torch::Tensor states = torch::randn({5, 7, 13}).requires_grad_();

  SECTION("additive energy") {
    torch::Tensor ours = additive_energy(keys, query, v);
    torch::Tensor reference = torch::matmul(torch::tanh(keys + query.unsqueeze(1)), v);
    CHECK(torch::allclose(ours, reference, 1e-5, 1e-6));
    torch::Tensor upstream = torch::randn({5, 7});
    auto our_grads = torch::autograd::grad({ours}, {keys, query, v}, {upstream});
    auto reference_grads = torch::autograd::grad({reference}, {keys, query, v}, {upstream});
    for (size_t i = 0; i < 3; ++i) {
      INFO("input " << i);
      CHECK(torch::allclose(our_grads[i], reference_grads[i], 1e-5, 1e-6));
    }
    torch::NoGradGuard no_grad;  // inference keeps no activations: the same scores
    CHECK(torch::allclose(additive_energy(keys, query, v), reference, 1e-5, 1e-6));
    // and with a mask it computes only the real positions: the same scores there, 0 on padding.
    const torch::Tensor mask = torch::rand({5, 7}) > 0.3, padding = mask.logical_not();
    REQUIRE(padding.any().item<bool>());
    const torch::Tensor masked = additive_energy(keys, query, v, 1, mask);
    CHECK(torch::equal(masked.masked_select(mask), additive_energy(keys, query, v).masked_select(mask)));
    if (kernels::kernel_level() != kernels::KernelLevel::kOff)
      CHECK(masked.masked_select(padding).eq(0).all().item<bool>());
  }
  SECTION("additive energy per head (multi-head)") {
    // 21 = 3 heads of 7 (a tail only); 42 = 2 heads of 21 (lanes and a tail); 48 = 3 of 16.
    for (int64_t size : {21, 42, 48}) {
      const int64_t heads = size == 42 ? 2 : 3;
      const torch::Tensor head_keys = torch::randn({5, 7, size}).requires_grad_();
      const torch::Tensor head_query = (2 * torch::randn({5, size})).requires_grad_();
      const torch::Tensor head_v = torch::randn({size}).requires_grad_();
      torch::Tensor ours = additive_energy(head_keys, head_query, head_v, heads);
      torch::Tensor reference =
          (torch::tanh(head_keys + head_query.unsqueeze(1)) * head_v).view({5, 7, heads, -1}).sum(3);
      REQUIRE(ours.sizes() == torch::IntArrayRef({5, 7, heads}));
      CHECK(torch::allclose(ours, reference, 1e-5, 1e-6));
      {  // with a mask, in inference: every head's score 0 on padding, the same elsewhere
        torch::NoGradGuard no_grad;
        const torch::Tensor mask = torch::rand({5, 7}) > 0.3, real = mask.unsqueeze(2).expand({5, 7, heads});
        const torch::Tensor masked = additive_energy(head_keys, head_query, head_v, heads, mask);
        const torch::Tensor plain = additive_energy(head_keys, head_query, head_v, heads);
        CHECK(torch::equal(masked.masked_select(real), plain.masked_select(real)));
        if (kernels::kernel_level() != kernels::KernelLevel::kOff) {
          CHECK(masked.masked_select(real.logical_not()).eq(0).all().item<bool>());
        }
      }
      torch::Tensor upstream = torch::randn({5, 7, heads});
      auto our_grads = torch::autograd::grad({ours}, {head_keys, head_query, head_v}, {upstream});
      auto reference_grads = torch::autograd::grad({reference}, {head_keys, head_query, head_v}, {upstream});
      for (size_t i = 0; i < 3; ++i) {
        INFO("size " << size << ", input " << i);
        CHECK(torch::allclose(our_grads[i], reference_grads[i], 1e-4, 1e-5));
      }
    }
  }
  SECTION("weighted sum") {
    torch::Tensor ours = weighted_sum(weights, states);
    torch::Tensor reference = (weights.unsqueeze(2) * states).sum(1);
    CHECK(torch::allclose(ours, reference, 1e-5, 1e-6));
    torch::Tensor upstream = torch::randn({5, 13});
    auto our_grads = torch::autograd::grad({ours}, {weights, states}, {upstream});
    auto reference_grads = torch::autograd::grad({reference}, {weights, states}, {upstream});
    for (size_t i = 0; i < 2; ++i) {
      INFO("input " << i);
      CHECK(torch::allclose(our_grads[i], reference_grads[i], 1e-5, 1e-6));
    }
    torch::NoGradGuard no_grad;
    CHECK(torch::allclose(weighted_sum(weights, states), reference, 1e-5, 1e-6));
  }
  SECTION("non-contiguous inputs") {  // beam search and transposes can hand over strided views
    torch::Tensor strided = keys.detach().transpose(0, 1).contiguous().transpose(0, 1);
    REQUIRE_FALSE(strided.is_contiguous());
    CHECK(torch::allclose(additive_energy(strided, query.detach(), v.detach()),
                          torch::matmul(torch::tanh(strided + query.detach().unsqueeze(1)), v.detach()), 1e-5, 1e-6));
  }
}
