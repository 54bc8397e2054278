#include <torch/torch.h>
#include <catch2/catch.hpp>

#include <algorithm>
#include <memory>
#include <set>
#include <tuple>

#include "helpers.h"
#include "kernels/dispatch.h"
#include "search/continuous.h"
#include "search/forced_decoding.h"
#include "search/memory.h"
#include "search/search.h"
#include "search/shortlist.h"
#include "text/corpus.h"
#include "text/token_corpus.h"
#include "text/vocabulary.h"

using namespace nmt;
using namespace nmt::testing;

namespace {

constexpr int64_t kSearchVocab = 15;

// A model trained for a few steps on random pairs, so that its distributions are peaked enough
// for EOS to be produced but still give different beams.
Seq2Seq small_model(const std::string& type, uint64_t seed = 71, int64_t vocab = kSearchVocab) {
  torch::manual_seed(seed);
  Seq2Seq model(tiny_model_options(type), vocab, vocab);
  auto [source, lengths] = random_source({6, 4, 5, 3}, vocab, 72);
  torch::Tensor output = torch::randint(4, vocab, {4, 4}, torch::kInt64);
  output.select(1, 3).fill_(kEosId);
  torch::Tensor input = torch::cat({torch::full({4, 1}, kBosId, torch::kInt64), output.narrow(1, 0, 3)}, 1);
  torch::optim::Adam optimizer(model->parameters(), torch::optim::AdamOptions(0.01));
  for (int step = 0; step < 15; ++step) {
    torch::Tensor logits = model->decoder->output_logits(model(source, lengths, input).attentional);
    torch::Tensor loss = torch::nn::functional::cross_entropy(logits.flatten(0, 1), output.flatten());
    optimizer.zero_grad();
    loss.backward();
    optimizer.step();
  }
  model->eval();
  return model;
}

SearchOptions options_with(int beam, double alpha = 0.0) {
  SearchOptions options;
  options.beam_size = beam;
  options.n_best = 1;
  options.length_penalty = alpha;
  options.max_length = 12;
  options.return_attention = true;
  return options;
}

// The fixed-shape searches' cases: trained, rows end at EOS at different steps; untrained (seeded
// by `seed`), most run to their own caps (ratio 1: source length + 10, different per row).
Seq2Seq fixed_shape_model(const std::string& type, bool trained, uint64_t seed) {
  torch::manual_seed(seed);
  Seq2Seq model = trained ? small_model(type) : Seq2Seq(tiny_model_options(type), kSearchVocab, kSearchVocab);
  model->eval();
  return model;
}

SearchOptions fixed_shape_options(int beam, double alpha, int n_best) {
  SearchOptions options = options_with(beam, alpha);
  options.n_best = n_best;
  options.max_length = 50;
  options.max_length_ratio = 1.0;
  return options;
}

// The same n-best lists: tokens, log-probabilities, scores and attention of every hypothesis.
void check_same_hypotheses(const SearchResult& found, const SearchResult& expected) {
  REQUIRE(found.size() == expected.size());
  for (size_t b = 0; b < expected.size(); ++b) {
    REQUIRE(found[b].size() == expected[b].size());
    for (size_t n = 0; n < expected[b].size(); ++n) {
      INFO("sentence " << b << ", hypothesis " << n);
      const Hypothesis& ours = found[b][n];
      const Hypothesis& theirs = expected[b][n];
      CHECK(ours.tokens == theirs.tokens);
      CHECK(ours.log_probability == Approx(theirs.log_probability).epsilon(1e-6));
      CHECK(ours.score == Approx(theirs.score).epsilon(1e-6));
      REQUIRE(ours.attention.defined() == theirs.attention.defined());
      if (theirs.attention.defined()) CHECK(torch::allclose(ours.attention, theirs.attention, 1e-5, 1e-6));
    }
  }
}

// beam_search without constraints, as a Search function pointer.
SearchResult plain_beam_search(Ensemble model, const torch::Tensor& source, const torch::Tensor& lengths,
                               const SearchOptions& options, const torch::Tensor& prefix) {
  return beam_search(std::move(model), source, lengths, options, prefix);
}

// How often `phrase` occurs in `tokens`.
int64_t occurrences(const std::vector<int64_t>& tokens, const Phrase& phrase) {
  int64_t count = 0;
  for (auto at = tokens.begin(); (at = std::search(at, tokens.end(), phrase.begin(), phrase.end())) != tokens.end();
       ++at) {
    ++count;
  }
  return count;
}

}  // namespace

TEST_CASE("beam size 1 gives exactly the greedy output and score", "[search]") {
  for (const std::string& type : all_attention_types()) {
    for (double alpha : {0.0, 1.0}) {
      DYNAMIC_SECTION(type << " alpha " << alpha) {
        Seq2Seq model = small_model(type);
        torch::InferenceMode guard;
        auto [source, lengths] = random_source({6, 2, 4, 7, 3}, kSearchVocab, 73);
        SearchResult greedy = greedy_search(model, source, lengths, options_with(1, alpha));
        SearchResult beam = beam_search(model, source, lengths, options_with(1, alpha));
        REQUIRE(greedy.size() == 5);
        REQUIRE(beam.size() == 5);
        for (size_t b = 0; b < 5; ++b) {
          REQUIRE(beam[b].size() == 1);
          CHECK(greedy[b][0].tokens == beam[b][0].tokens);
          CHECK(greedy[b][0].score == beam[b][0].score);
          CHECK(greedy[b][0].log_probability == beam[b][0].log_probability);
        }
      }
    }
  }
}

TEST_CASE("the GPU's fixed-shape greedy search gives greedy search's tokens, scores and attention", "[search]") {
  for (const std::string& type : all_attention_types()) {
    for (const bool trained : {true, false}) {
      DYNAMIC_SECTION(type << (trained ? ", trained" : ", untrained")) {
        Seq2Seq model = fixed_shape_model(type, trained, 75);
        torch::InferenceMode guard;
        auto [source, lengths] = random_source({6, 2, 4, 7, 3, 1}, kSearchVocab, 74);
        const SearchOptions options = fixed_shape_options(1, 1.0, 1);
        const SearchResult expected = greedy_search(model, source, lengths, options);
        check_same_hypotheses(greedy_search_fixed_shape(model, source, lengths, options), expected);
      }
    }
  }
}

TEST_CASE("the GPU's fixed-shape beam search gives beam search's n-best lists, scores and attention", "[search]") {
  // The fixed shape keeps finished sentences' rows and reorders the state in place; it must pick
  // the same hypotheses. Trained, sentences finish at different steps; untrained, most run to their
  // own caps. Beam 3 with 2-best lists and a length penalty; beam 4 with 4-best lists, no penalty.
  for (const std::string& type : all_attention_types()) {
    for (const bool trained : {true, false}) {
      for (const int beam : {3, 4}) {
        DYNAMIC_SECTION(type << (trained ? ", trained" : ", untrained") << ", beam " << beam) {
          Seq2Seq model = fixed_shape_model(type, trained, 76);
          torch::InferenceMode guard;
          auto [source, lengths] = random_source({6, 2, 4, 7, 3, 1}, kSearchVocab, 77);
          const SearchOptions options = fixed_shape_options(beam, beam == 3 ? 1.0 : 0.0, beam == 3 ? 2 : 4);
          const SearchResult expected = beam_search(model, source, lengths, options);
          check_same_hypotheses(beam_search_fixed_shape(model, source, lengths, options), expected);
        }
      }
    }
  }
}

TEST_CASE("target prefixes: every search starts its outputs with them, and an empty one changes nothing", "[search]") {
  // Prefixes of 3, 0, 1 and 2 tokens (PAD-padded); the sentence without one translates as before.
  const torch::Tensor prefix = torch::tensor({5, 9, 7, 0, 0, 0, 11, 0, 0, 4, 4, 0}, torch::kInt64).view({4, 3});
  const torch::Tensor none = torch::zeros({4, 3}, torch::kInt64);
  for (const bool trained : {true, false}) {
    DYNAMIC_SECTION((trained ? "trained" : "untrained")) {
      Seq2Seq model = fixed_shape_model("additive", trained, 78);
      torch::InferenceMode guard;
      auto [source, lengths] = random_source({6, 2, 4, 7}, kSearchVocab, 79);
      SearchOptions sampling = fixed_shape_options(1, 1.0, 1);
      sampling.sampling_topk = 5;
      sampling.seed = 3;
      using Search = SearchResult (*)(Ensemble, const torch::Tensor&, const torch::Tensor&, const SearchOptions&,
                                      const torch::Tensor&);
      const std::vector<std::tuple<std::string, Search, SearchOptions>> searches{
          {"greedy", greedy_search, fixed_shape_options(1, 1.0, 1)},
          {"greedy, fixed shape", greedy_search_fixed_shape, fixed_shape_options(1, 1.0, 1)},
          {"beam", plain_beam_search, fixed_shape_options(3, 1.0, 2)},
          {"beam, fixed shape", beam_search_fixed_shape, fixed_shape_options(3, 1.0, 2)},
          {"sampling", sample_search, sampling}};
      for (const auto& [name, run, options] : searches) {
        INFO(name);
        const SearchResult plain = run(model, source, lengths, options, {});
        const SearchResult prefixed = run(model, source, lengths, options, prefix);
        check_same_hypotheses(run(model, source, lengths, options, none), plain);
        for (int64_t b = 0; b < 4; ++b) {
          INFO("sentence " << b);
          std::vector<int64_t> start;
          for (int64_t t = 0; t < 3 && prefix[b][t].item<int64_t>() != kPadId; ++t) {
            start.push_back(prefix[b][t].item<int64_t>());
          }
          REQUIRE(!prefixed[static_cast<size_t>(b)].empty());
          for (const Hypothesis& hypothesis : prefixed[static_cast<size_t>(b)]) {
            REQUIRE(hypothesis.tokens.size() >= start.size());
            CHECK(std::vector<int64_t>(hypothesis.tokens.begin(), hypothesis.tokens.begin() + start.size()) == start);
          }
        }
        check_same_hypotheses({prefixed[1]}, {plain[1]});
      }
      // Forcing one token, then that token and the one greedy search took after it: the same output.
      for (const Search run : {Search{greedy_search}, Search{greedy_search_fixed_shape}}) {
        const SearchOptions options = fixed_shape_options(1, 1.0, 1);
        const torch::Tensor one = prefix.narrow(1, 0, 1).clone().masked_fill_(prefix.narrow(1, 0, 1).eq(kPadId), 8);
        const SearchResult first = run(model, source, lengths, options, one);
        torch::Tensor two = torch::zeros({4, 2}, torch::kInt64);
        for (int64_t b = 0; b < 4; ++b) {
          const std::vector<int64_t>& tokens = first[static_cast<size_t>(b)][0].tokens;
          for (int64_t t = 0; t < 2 && t < static_cast<int64_t>(tokens.size()); ++t) two[b][t] = tokens[t];
        }
        check_same_hypotheses(run(model, source, lengths, options, two), first);
      }
      // The GPU's fixed-shape searches choose what the CPU's do.
      check_same_hypotheses(greedy_search_fixed_shape(model, source, lengths, fixed_shape_options(1, 1.0, 1), prefix),
                            greedy_search(model, source, lengths, fixed_shape_options(1, 1.0, 1), prefix));
      check_same_hypotheses(beam_search_fixed_shape(model, source, lengths, fixed_shape_options(3, 1.0, 2), prefix),
                            beam_search(model, source, lengths, fixed_shape_options(3, 1.0, 2), prefix));
    }
  }
}

TEST_CASE("constraint states: phrases met, broken off and restarted, and banks sharing out the beam", "[search]") {
  const SentenceConstraints phrases{{5, 6, 7}, {9}};
  ConstraintState state(&phrases);
  auto advancing = [](const ConstraintState& from) {
    std::vector<int64_t> tokens;
    from.advancing_tokens(tokens);
    return tokens;
  };
  CHECK(advancing(state) == std::vector<int64_t>{5, 9});
  state = state.advance(4);
  CHECK(state.met() == 0);
  state = state.advance(5).advance(6);
  CHECK(state.met() == 2);
  CHECK(advancing(state) == std::vector<int64_t>{7});  // under way: only the phrase's next token
  state = state.advance(5);                            // broke off, and starts the phrase again
  CHECK(state.met() == 1);
  state = state.advance(6).advance(7);
  CHECK(state.met() == 3);
  CHECK(!state.complete());
  CHECK(advancing(state) == std::vector<int64_t>{9});
  state = state.advance(9);
  CHECK(state.complete());
  CHECK(state.advance(5).met() == 4);  // complete stays complete
  CHECK(advancing(state).empty());
  CHECK(ConstraintState().complete());
  // A phrase that broke off can go on from an overlap: 7 7 8 in 7 7 7 8, and 5 6 in 5 5 6.
  const SentenceConstraints overlapping{{7, 7, 8}, {5, 6}};
  ConstraintState repeated = ConstraintState(&overlapping).advance(7).advance(7).advance(7);
  CHECK(repeated.met() == 2);
  CHECK(repeated.advance(8).met() == 3);
  CHECK(repeated.advance(8).advance(5).advance(5).advance(6).complete());
  // Broken off into another phrase's start: 7 5 6 meets 5 6.
  CHECK(ConstraintState(&overlapping).advance(7).advance(5).advance(6).met() == 2);

  using Chosen = std::vector<std::pair<size_t, size_t>>;
  // Five places over three banks: one each, the remainder to the two highest.
  CHECK(allocate_banks({5, 5, 5}, 5) == Chosen{{0, 0}, {1, 0}, {1, 1}, {2, 0}, {2, 1}});
  // A bank short of its share gives its places away, highest bank first.
  CHECK(allocate_banks({5, 0, 1}, 5) == Chosen{{0, 0}, {0, 1}, {0, 2}, {0, 3}, {2, 0}});
  CHECK(allocate_banks({1, 3, 0}, 3) == Chosen{{0, 0}, {1, 0}, {1, 1}});
  CHECK(allocate_banks({0, 0}, 4).empty());
  CHECK(allocate_banks({2, 9}, 1) == Chosen{{1, 0}});
}

TEST_CASE("terminology constraints: every phrase appears, and a sentence without any searches as before", "[search]") {
  // Phrases of one to three tokens, several per sentence, one repeated; the second sentence has none.
  const BatchConstraints constraints{{{5, 9}, {12}}, {}, {{7, 7, 8}}, {{13}, {6}, {4, 10}, {13}}};
  for (const bool trained : {true, false}) {
    for (const int beam : {1, 3, 5}) {
      DYNAMIC_SECTION((trained ? "trained" : "untrained") << ", beam " << beam) {
        Seq2Seq model = fixed_shape_model("additive", trained, 84);
        torch::InferenceMode guard;
        auto [source, lengths] = random_source({6, 2, 4, 7}, kSearchVocab, 85);
        const SearchOptions options = fixed_shape_options(beam, 1.0, std::min(beam, 2));
        const SearchResult plain = search(model, source, lengths, options);
        const torch::Tensor prefix = torch::tensor({6, 0, 0, 4}, torch::kInt64).view({4, 1});
        for (const bool prefixed : {false, true}) {
          INFO((prefixed ? "with" : "without") << " a prefix");
          const SearchResult found =
              search(model, source, lengths, options, prefixed ? prefix : torch::Tensor(), constraints);
          std::vector<std::vector<int64_t>> sources, targets;
          std::vector<const Hypothesis*> hypotheses;
          std::vector<int64_t> caps;
          for (size_t b = 0; b < 4; ++b) {
            INFO("sentence " << b);
            REQUIRE(!found[b].empty());
            for (const Hypothesis& hypothesis : found[b]) {
              for (const Phrase& phrase : constraints[b]) {
                const auto wanted = std::count(constraints[b].begin(), constraints[b].end(), phrase);
                CHECK(occurrences(hypothesis.tokens, phrase) >= wanted);
              }
              if (prefixed && prefix[static_cast<int64_t>(b)][0].item<int64_t>() != kPadId) {
                CHECK(hypothesis.tokens.front() == prefix[static_cast<int64_t>(b)][0].item<int64_t>());
              }
              std::vector<int64_t> ids;
              for (int64_t t = 0; t < lengths[static_cast<int64_t>(b)].item<int64_t>(); ++t) {
                ids.push_back(source[static_cast<int64_t>(b)][t].item<int64_t>());
              }
              sources.push_back(ids);
              targets.push_back(hypothesis.tokens);
              hypotheses.push_back(&hypothesis);
              caps.push_back(max_output_length(lengths[static_cast<int64_t>(b)].item<int64_t>(), options));
            }
          }
          if (!prefixed) check_same_hypotheses({found[1]}, {plain[1]});
          // The scores the search gave its hypotheses are the model's: forced decoding agrees.
          const std::vector<ForcedScore> scored = force_decode(model, sources, targets, 1.0, 3, torch::kCPU);
          for (size_t i = 0; i < hypotheses.size(); ++i) {
            // One that ended at its cap has no EOS, which forced decoding scores.
            if (static_cast<int64_t>(hypotheses[i]->tokens.size()) >= caps[i]) continue;
            CHECK(scored[i].log_probability == Approx(hypotheses[i]->log_probability).epsilon(1e-5));
          }
        }
      }
    }
  }
  // Sampling takes none; a batch's constraints are one entry per sentence.
  Seq2Seq model = fixed_shape_model("additive", true, 84);
  torch::InferenceMode guard;
  auto [source, lengths] = random_source({6, 2, 4, 7}, kSearchVocab, 85);
  SearchOptions sampling = fixed_shape_options(1, 1.0, 1);
  sampling.sampling_topk = 3;
  CHECK_THROWS_WITH(search(model, source, lengths, sampling, {}, constraints),
                    Catch::Contains("need beam search, not sampling"));
  CHECK_THROWS_WITH(beam_search(model, source, lengths, fixed_shape_options(3, 1.0, 1), {}, {{{5}}}),
                    Catch::Contains("constraints for 1 sentences in a batch of 4"));
}

TEST_CASE("forced decoding reads a right-to-left model's targets backwards", "[search]") {
  // A model flagged reverse-target searches in its own order; its hypotheses, turned into text
  // order, get back their scores from forced decoding, token scores in text order, EOS last.
  ModelOptions options = tiny_model_options("additive");
  options.reverse_target = true;
  torch::manual_seed(81);
  Seq2Seq model(options, kSearchVocab, kSearchVocab);
  model->eval();
  torch::InferenceMode guard;
  auto [source, lengths] = random_source({6, 2, 4}, kSearchVocab, 82);
  SearchOptions search = options_with(1, 1.0);
  search.max_length = 6;
  const SearchResult found = greedy_search(model, source, lengths, search);
  std::vector<std::vector<int64_t>> sources, targets;
  for (int64_t b = 0; b < 3; ++b) {
    std::vector<int64_t> ids;
    for (int64_t t = 0; t < lengths[b].item<int64_t>(); ++t) ids.push_back(source[b][t].item<int64_t>());
    sources.push_back(ids);
    std::vector<int64_t> text_order = found[static_cast<size_t>(b)][0].tokens;
    std::reverse(text_order.begin(), text_order.end());
    targets.push_back(text_order);
  }
  options.reverse_target = false;
  torch::manual_seed(81);
  Seq2Seq forwards(options, kSearchVocab, kSearchVocab);  // the same weights, read left to right
  forwards->eval();
  const std::vector<ForcedScore> scored = force_decode(model, sources, targets, 1.0, 2, torch::kCPU);
  std::vector<std::vector<int64_t>> model_order;
  for (size_t b = 0; b < 3; ++b) model_order.push_back(found[b][0].tokens);
  const std::vector<ForcedScore> reference = force_decode(forwards, sources, model_order, 1.0, 2, torch::kCPU);
  for (size_t b = 0; b < 3; ++b) {
    INFO("sentence " << b);
    // Both batches pad differently; LibTorch 2's kernels then round differently in float32.
    CHECK(scored[b].log_probability == Approx(reference[b].log_probability).epsilon(1e-6));
    std::vector<double> expected = reference[b].tokens;
    std::reverse(expected.begin(), expected.end() - 1);
    REQUIRE(scored[b].tokens.size() == expected.size());
    for (size_t t = 0; t < expected.size(); ++t) CHECK(scored[b].tokens[t] == Approx(expected[t]).epsilon(1e-6));
  }
}

TEST_CASE("forced decoding gives every searched hypothesis the searches' log-probability and score", "[search]") {
  // Scoring a translation the search made gives the search's numbers: greedy and a 3-best beam, one
  // model and an ensemble of two, for every scorer (local-m reads the step's position), with a
  // length penalty. Batches of 1 and of 4 pairs agree.
  for (const std::string& type : all_attention_types()) {
    for (const int members : {1, 2}) {
      DYNAMIC_SECTION(type << ", " << members << " member(s)") {
        std::vector<Seq2Seq> models{small_model(type)};
        if (members == 2) models.push_back(small_model(type, 79));
        Ensemble ensemble(models);
        ensemble.train(false);
        auto [source, lengths] = random_source({6, 2, 4, 7, 3}, kSearchVocab, 78);
        std::vector<std::vector<int64_t>> sources;
        for (int64_t b = 0; b < source.size(0); ++b) {
          const int64_t* row = source[b].data_ptr<int64_t>();
          sources.emplace_back(row, row + lengths[b].item<int64_t>());
        }
        for (const int beam : {1, 3}) {
          SearchOptions options = options_with(beam, /*alpha=*/1.0);
          options.n_best = beam;
          SearchResult found;
          {
            torch::InferenceMode guard;
            found = search(ensemble, source, lengths, options);
          }
          // A hypothesis cut at its length cap has no EOS, which forced decoding scores: left out.
          std::vector<std::vector<int64_t>> pair_sources, targets;
          std::vector<const Hypothesis*> hypotheses;
          for (size_t b = 0; b < found.size(); ++b) {
            const int64_t cap = max_output_length(lengths[static_cast<int64_t>(b)].item<int64_t>(), options);
            for (const Hypothesis& hypothesis : found[b]) {
              if (static_cast<int64_t>(hypothesis.tokens.size()) >= cap) continue;
              pair_sources.push_back(sources[b]);
              targets.push_back(hypothesis.tokens);
              hypotheses.push_back(&hypothesis);
            }
          }
          const std::vector<ForcedScore> scores = force_decode(ensemble, pair_sources, targets, 1.0, 4, torch::kCPU);
          const std::vector<ForcedScore> one_by_one =
              force_decode(ensemble, pair_sources, targets, 1.0, 1, torch::kCPU);
          REQUIRE(scores.size() == hypotheses.size());
          CHECK(hypotheses.size() * 2 > found.size() * static_cast<size_t>(beam));  // most are compared
          for (size_t i = 0; i < scores.size(); ++i) {
            INFO("beam " << beam << ", pair " << i);
            const Hypothesis& hypothesis = *hypotheses[i];
            CHECK(scores[i].tokens.size() == hypothesis.tokens.size() + 1);  // EOS last
            CHECK(scores[i].log_probability == Approx(hypothesis.log_probability).epsilon(1e-5));
            CHECK(scores[i].score == Approx(hypothesis.score).epsilon(1e-5));
            CHECK(one_by_one[i].log_probability == Approx(scores[i].log_probability).epsilon(1e-5));
          }
        }
      }
    }
  }
}

TEST_CASE("sampling repeats with its seed, differs across seeds, and its narrowest cuts are greedy search",
          "[search]") {
  torch::manual_seed(80);
  Seq2Seq model(tiny_model_options("additive"), kSearchVocab, kSearchVocab);  // untrained: flat distributions
  model->eval();
  auto [source, lengths] = random_source({6, 2, 4, 7, 3, 5}, kSearchVocab, 81);
  const auto run = [&](const SearchOptions& options) {
    torch::InferenceMode guard;
    return search(model, source, lengths, options);
  };
  const auto tokens_of = [](const SearchResult& result) {
    std::vector<std::vector<int64_t>> tokens;
    for (const auto& hypotheses : result) tokens.push_back(hypotheses.at(0).tokens);
    return tokens;
  };
  SearchOptions options = options_with(1, /*alpha=*/1.0);
  options.sampling = true;
  const SearchResult first = run(options);
  CHECK(tokens_of(run(options)) == tokens_of(first));  // the same seed draws the same
  options.seed = 2;
  CHECK(tokens_of(run(options)) != tokens_of(first));
  options.sampling_stream = 1;  // another batch's generator
  const SearchResult other_stream = run(options);
  options.sampling_stream = 0;
  CHECK(tokens_of(other_stream) != tokens_of(run(options)));

  const SearchResult greedy = run(options_with(1, 1.0));
  SearchOptions top_one = options_with(1, 1.0);
  top_one.sampling_topk = 1;
  SearchOptions nucleus = options_with(1, 1.0);
  nucleus.sampling_topp = 1e-6;  // only the most probable token reaches it
  nucleus.sampling_temperature = 0.5;
  for (const SearchOptions& narrowest : {top_one, nucleus}) {
    const SearchResult sampled = run(narrowest);
    CHECK(tokens_of(sampled) == tokens_of(greedy));
    for (size_t b = 0; b < greedy.size(); ++b) {
      CHECK(sampled[b][0].log_probability == Approx(greedy[b][0].log_probability).epsilon(1e-9));
      CHECK(sampled[b][0].score == Approx(greedy[b][0].score).epsilon(1e-9));
    }
  }
  // A sampled translation's log-probability is the model's: forced decoding gives it back.
  std::vector<std::vector<int64_t>> sources, targets;
  std::vector<double> expected;
  for (size_t b = 0; b < first.size(); ++b) {
    const int64_t length = lengths[static_cast<int64_t>(b)].item<int64_t>();
    if (static_cast<int64_t>(first[b][0].tokens.size()) >= max_output_length(length, options)) continue;  // no EOS
    const int64_t* row = source[static_cast<int64_t>(b)].data_ptr<int64_t>();
    sources.emplace_back(row, row + length);
    targets.push_back(first[b][0].tokens);
    expected.push_back(first[b][0].log_probability);
  }
  REQUIRE_FALSE(expected.empty());
  const std::vector<ForcedScore> forced = force_decode(model, sources, targets, 1.0, 8, torch::kCPU);
  for (size_t i = 0; i < expected.size(); ++i) CHECK(forced[i].log_probability == Approx(expected[i]).epsilon(1e-5));

  SearchOptions n_best = options_with(3, 1.0);
  n_best.n_best = 2;
  n_best.sampling_topk = 5;
  CHECK_THROWS_WITH(validate(n_best), Catch::Contains("--n-best must be 1"));
  SearchOptions bad_p = options_with(1, 1.0);
  bad_p.sampling_topp = 1.5;
  CHECK_THROWS_WITH(validate(bad_p), Catch::Contains("--sampling-topp"));
}

TEST_CASE("search output does not depend on the batch it is in", "[search]") {
  Seq2Seq model = small_model("additive");
  torch::InferenceMode guard;
  const std::vector<int64_t> lengths = {6, 2, 4, 7, 3, 5};
  auto [source, length_tensor] = random_source(lengths, kSearchVocab, 74);
  for (int beam : {1, 3}) {
    DYNAMIC_SECTION("beam " << beam) {
      SearchResult together = search(model, source, length_tensor, options_with(beam));
      for (size_t b = 0; b < lengths.size(); ++b) {
        torch::Tensor alone = source[static_cast<int64_t>(b)].narrow(0, 0, lengths[b]).unsqueeze(0);
        SearchResult single = search(model, alone, torch::tensor({lengths[b]}), options_with(beam));
        CHECK(single[0][0].tokens == together[b][0].tokens);
        CHECK(single[0][0].score == Approx(together[b][0].score).epsilon(1e-5));
      }
    }
  }
}

TEST_CASE("continuous batching: sentences joining a running batch get greedy search's translations", "[search]") {
  const std::vector<int64_t> lengths = {6, 2, 4, 7, 3, 5, 8, 1, 4};
  auto [source, length_tensor] = random_source(lengths, kSearchVocab, 77);
  SearchOptions options = fixed_shape_options(1, 1.0, 1);
  options.return_attention = false;
  // Which sentences join before each step; the rest join once the batch has run out. The longest
  // source joins first, so that its leaving cuts the padding; late joins find ended rows to drop.
  const std::vector<std::vector<int64_t>> joining = {{6, 0}, {}, {2}, {3, 4, 5}, {}, {1}, {}, {}, {},
                                                     {},     {}, {},  {7},       {}, {},  {}, {8}};
  for (const std::string& type : all_attention_types()) {
    for (const auto& [trained, packed] : {std::pair{true, false}, {false, false}, {true, true}}) {
      DYNAMIC_SECTION(type << (trained ? ", trained" : ", untrained: rows run to their caps")
                           << (packed ? ", packed for the CPU as the server loads it" : "")) {
        const Seq2Seq model = fixed_shape_model(type, trained, 78);
        // An ensemble of two different models too: each keeps its own encoder output and state.
        const Ensemble ensemble({model, fixed_shape_model(type, trained, 79)});
        if (packed) {
          for (Seq2Seq member : ensemble.members()) {
            member->encoder->pack_float32();
            member->decoder->pack_float32();
          }
        }
        for (const Ensemble& decoder : {Ensemble(model), ensemble}) {
          torch::InferenceMode guard;
          if (decoder.uses_step_position()) {  // local-m: rows joining later would sit at other positions
            CHECK_FALSE(ContinuousGreedy::supports(decoder, options, torch::kCPU));
            continue;
          }
          REQUIRE(ContinuousGreedy::supports(decoder, options, torch::kCPU));
          ContinuousGreedy running(decoder, options);
          SearchResult found(lengths.size());
          size_t most_running = 0;
          std::set<int64_t> waiting;
          for (size_t b = 0; b < lengths.size(); ++b) waiting.insert(static_cast<int64_t>(b));
          for (size_t step = 0; !waiting.empty() || running.size() > 0; ++step) {
            std::vector<int64_t> tags;
            for (const int64_t b : step < joining.size() ? joining[step] : std::vector<int64_t>()) {
              if (waiting.count(b) == 1) tags.push_back(b);
            }
            if (tags.empty() && running.size() == 0 && !waiting.empty()) tags = {*waiting.begin()};
            for (const int64_t b : tags) waiting.erase(b);
            std::vector<std::vector<int64_t>> sources;
            for (const int64_t b : tags) {
              const torch::Tensor row = source[b].narrow(0, 0, lengths[static_cast<size_t>(b)]).contiguous();
              sources.emplace_back(row.data_ptr<int64_t>(), row.data_ptr<int64_t>() + row.numel());
            }
            running.add(sources, tags);
            most_running = std::max(most_running, running.size());
            for (ContinuousGreedy::Ended& ended : running.step()) {
              found[static_cast<size_t>(ended.tag)].push_back(std::move(ended.hypothesis));
            }
          }
          CHECK(most_running >= 4);  // sentences really ran side by side, joining at different steps
          // Each sentence as greedy search translates it alone.
          for (size_t b = 0; b < lengths.size(); ++b) {
            INFO("sentence " << b);
            const auto row = static_cast<int64_t>(b);
            const torch::Tensor alone = source.narrow(0, row, 1).narrow(1, 0, lengths[b]);
            check_same_hypotheses({found[b]}, greedy_search(decoder, alone, length_tensor.narrow(0, row, 1), options));
          }
        }
      }
    }
  }
  SearchOptions beam = options;
  beam.beam_size = 2;
  SearchOptions attention = options;
  attention.return_attention = true;
  const Seq2Seq model = fixed_shape_model("additive", true, 78);
  CHECK_FALSE(ContinuousGreedy::supports(model, beam, torch::kCPU));
  CHECK_FALSE(ContinuousGreedy::supports(model, attention, torch::kCPU));
  CHECK_THROWS_AS(ContinuousGreedy(model, beam), std::invalid_argument);
}

TEST_CASE("continuous batching: waves of sentences grow the batch past its first slots and cut its positions",
          "[search]") {
  // 60 sentences, ten of 13 to 16 tokens, then ten of 1 to 4, and so on, joining in groups of 1 to
  // 24 every third step: the batch's slots grow while rows run, and its positions are cut when only
  // short sentences are left and grow again as long ones join.
  std::vector<int64_t> lengths;
  for (int64_t i = 0; i < 60; ++i) lengths.push_back((i / 10) % 2 == 0 ? 13 + i % 4 : 1 + i % 4);
  auto [source, length_tensor] = random_source(lengths, kSearchVocab, 81);
  SearchOptions options = fixed_shape_options(1, 1.0, 1);
  options.return_attention = false;
  options.max_length = 8;  // untrained rows run 8 steps whatever their length: they leave as they came
  for (const std::string& type : std::vector<std::string>{"additive", "additive" + kWithCoverage, "dot", "none"}) {
    for (const bool packed : {false, true}) {
      DYNAMIC_SECTION(type << (packed ? ", packed" : "")) {
        Seq2Seq model = fixed_shape_model(type, false, 82);  // untrained: rows run to their caps
        if (packed) {
          model->encoder->pack_float32();
          model->decoder->pack_float32();
        }
        torch::InferenceMode guard;
        ContinuousGreedy running(model, options);
        SearchResult found(lengths.size());
        size_t next = 0, most_running = 0;
        for (size_t step = 0; next < lengths.size() || running.size() > 0; ++step) {
          std::vector<std::vector<int64_t>> sources;
          std::vector<int64_t> tags;
          const size_t group = step % 3 == 0 ? 1 + (step * 5) % 24 : 0;
          for (size_t i = 0; i < group && next < lengths.size(); ++i, ++next) {
            const auto row = static_cast<int64_t>(next);
            const torch::Tensor ids = source[row].narrow(0, 0, lengths[next]).contiguous();
            sources.emplace_back(ids.data_ptr<int64_t>(), ids.data_ptr<int64_t>() + ids.numel());
            tags.push_back(row);
          }
          running.add(sources, tags);
          most_running = std::max(most_running, running.size());
          for (ContinuousGreedy::Ended& ended : running.step()) {
            found[static_cast<size_t>(ended.tag)].push_back(std::move(ended.hypothesis));
          }
        }
        CHECK(most_running > 16);  // more rows than the first slots held
        for (size_t b = 0; b < lengths.size(); ++b) {
          INFO("sentence " << b);
          const auto row = static_cast<int64_t>(b);
          const torch::Tensor alone = source.narrow(0, row, 1).narrow(1, 0, lengths[b]);
          check_same_hypotheses({found[b]},
                                greedy_search(Ensemble(model), alone, length_tensor.narrow(0, row, 1), options));
        }
      }
    }
  }
}

TEST_CASE("continuous batching with a shortlist: lists that hold greedy's tokens keep them as the union changes",
          "[search]") {
  // Untrained: its sentences run to their caps, so that many are running when others join.
  const Seq2Seq model = fixed_shape_model("additive", false, 78);
  // The shortlist's file checks need vocabularies; it counts only ids below kSearchVocab here.
  const std::vector<std::string> lines = read_lines(source_path("data/toy/train.src"));
  const Vocabulary vocabulary =
      Vocabulary::from_serialized(train_vocabulary({&lines}, {VocabType::kBpe, 60, 1, 1, false, {}}), "toy");
  const int64_t vocab = kSearchVocab;
  torch::InferenceMode guard;
  SearchOptions options = fixed_shape_options(1, 1.0, 1);
  options.return_attention = false;
  const std::vector<int64_t> lengths = {6, 2, 4, 7, 3, 5, 8, 1};
  auto [source, length_tensor] = random_source(lengths, vocab, 84);
  std::vector<std::vector<int64_t>> sources;
  std::vector<Hypothesis> alone;  // each sentence by greedy search over the whole vocabulary
  std::set<int64_t> written;
  for (size_t b = 0; b < lengths.size(); ++b) {
    const torch::Tensor row = source[static_cast<int64_t>(b)].narrow(0, 0, lengths[b]).contiguous();
    sources.emplace_back(row.data_ptr<int64_t>(), row.data_ptr<int64_t>() + row.numel());
    alone.push_back(greedy_search(model, row.unsqueeze(0), torch::tensor({lengths[b]}), options)[0][0]);
    written.insert(alone.back().tokens.begin(), alone.back().tokens.end());
  }
  // Pairs whose most frequent targets are the tokens greedy search wrote (in every pair) and whose
  // random source subwords go with two random target subwords each: the frequent ids hold every
  // token greedy writes, and each sentence's lists add others, so the batch's union changes as
  // sentences join and leave.
  torch::manual_seed(85);
  std::vector<Example> pairs(40);
  for (Example& pair : pairs) {
    const torch::Tensor ids = torch::randint(4, vocab, {5}, torch::kInt64);
    pair.source.assign(ids.data_ptr<int64_t>(), ids.data_ptr<int64_t>() + 3);
    pair.target.assign(written.begin(), written.end());
    pair.target.insert(pair.target.end(), ids.data_ptr<int64_t>() + 3, ids.data_ptr<int64_t>() + 5);
  }
  const auto shortlist = std::make_shared<const Shortlist>(Shortlist::build(
      corpus_in_memory(pairs, 1), vocabulary, vocabulary, {1, static_cast<int64_t>(written.size()), 1000}, "test"));
  std::vector<const std::vector<int64_t>*> all, first;
  for (const auto& ids : sources) all.push_back(&ids);
  first.push_back(&sources[0]);
  REQUIRE(shortlist->select(all).size(0) > shortlist->select(first).size(0));  // the union changes
  REQUIRE(shortlist->select(all).size(0) < vocab);

  ContinuousGreedy running(model, options, shortlist);
  const std::vector<std::vector<int64_t>> joining = {{6, 0}, {}, {2}, {3, 4}, {}, {1}, {}, {}, {}, {5}, {}, {}, {7}};
  std::vector<std::vector<int64_t>> found(lengths.size());
  for (size_t step = 0; step < joining.size() || running.size() > 0; ++step) {
    std::vector<std::vector<int64_t>> joined;
    for (const int64_t b : step < joining.size() ? joining[step] : std::vector<int64_t>()) {
      joined.push_back(sources[static_cast<size_t>(b)]);
    }
    // Joining chooses the union again and moves each running row's last token to its new place:
    // the rows keep their tokens, and the new ones start at BOS.
    const std::vector<int64_t> before = running.last_tokens();
    running.add(joined, step < joining.size() ? joining[step] : std::vector<int64_t>());
    std::vector<int64_t> expected = before;
    expected.resize(before.size() + joined.size(), kBosId);
    CHECK(running.last_tokens() == expected);
    for (ContinuousGreedy::Ended& ended : running.step()) {
      found[static_cast<size_t>(ended.tag)] = ended.hypothesis.tokens;
    }
  }
  for (size_t b = 0; b < lengths.size(); ++b) {
    INFO("sentence " << b);
    CHECK(found[b] == alone[b].tokens);  // the tokens; their scores are normalised over the union
  }
}

TEST_CASE("beam search never scores below greedy, n-best lists are sorted and distinct", "[search]") {
  for (const std::string type : {"additive", "general", "none"}) {
    DYNAMIC_SECTION(type) {
      Seq2Seq model = small_model(type);
      torch::InferenceMode guard;
      auto [source, lengths] = random_source({6, 2, 4, 7, 3}, kSearchVocab, 75);
      SearchResult greedy = greedy_search(model, source, lengths, options_with(1));
      for (int beam : {2, 4}) {
        SearchOptions options = options_with(beam);
        options.n_best = beam;
        SearchResult result = beam_search(model, source, lengths, options);
        for (size_t b = 0; b < 5; ++b) {
          REQUIRE_FALSE(result[b].empty());
          // Beam rows batch differently from greedy rows, so equal paths may differ in the last float bits.
          CHECK(result[b][0].score >= greedy[b][0].score - 1e-5);
          std::set<std::vector<int64_t>> distinct;
          for (size_t k = 0; k < result[b].size(); ++k) {
            distinct.insert(result[b][k].tokens);
            if (k > 0) CHECK(result[b][k - 1].score >= result[b][k].score);
          }
          CHECK(distinct.size() == result[b].size());
        }
      }
    }
  }
}

TEST_CASE("returned attention has one row per output step and rows summing to 1", "[search]") {
  Seq2Seq model = small_model("cosine");
  torch::InferenceMode guard;
  const std::vector<int64_t> lengths = {6, 3};
  auto [source, length_tensor] = random_source(lengths, kSearchVocab, 76);
  for (int beam : {1, 3}) {
    SearchResult result = search(model, source, length_tensor, options_with(beam));
    for (size_t b = 0; b < lengths.size(); ++b) {
      const Hypothesis& best = result[b][0];
      REQUIRE(best.attention.defined());
      const int64_t rows = best.attention.size(0);
      // One row per output token, plus one for the EOS step when the output ended with EOS.
      CHECK((rows == static_cast<int64_t>(best.tokens.size()) || rows == static_cast<int64_t>(best.tokens.size()) + 1));
      CHECK(best.attention.size(1) == lengths[b]);
      CHECK(torch::allclose(best.attention.sum(1), torch::ones({rows}), 1e-5, 1e-5));
    }
  }
}

TEST_CASE("length limits and option checks", "[search]") {
  SearchOptions options;
  options.max_length_ratio = 1.5;
  options.max_length = 20;
  CHECK(max_output_length(4, options) == 16);
  CHECK(max_output_length(40, options) == 20);
  CHECK(length_penalty(7, 0.0) == 1.0);
  CHECK(length_penalty(7, 1.0) == Approx(2.0));
  options.n_best = 6;
  options.beam_size = 5;
  CHECK_THROWS_WITH(validate(options), Catch::Contains("--n-best"));
  options.n_best = 1;
  options.beam_size = 0;
  CHECK_THROWS_WITH(validate(options), Catch::Contains("--beam-size"));
}

TEST_CASE("memory: a beam the vocabulary cannot fill is refused, batches are cut to --max-search-memory", "[search]") {
  Seq2Seq model = small_model("additive");
  SearchOptions options = options_with(5);
  // 15 tokens less pad and BOS can be produced; with ban_unk, one fewer.
  CHECK(largest_beam(kSearchVocab, options) == 13);
  options.beam_size = 13;
  CHECK_NOTHROW(check_beam_fits_vocabulary(kSearchVocab, options));
  options.beam_size = 100000;
  CHECK_THROWS_WITH(check_beam_fits_vocabulary(kSearchVocab, options),
                    Catch::Contains("--beam-size 100000") && Catch::Contains("use at most 13"));
  options.beam_size = 13;
  options.ban_unk = true;
  CHECK_THROWS_WITH(check_beam_fits_vocabulary(kSearchVocab, options), Catch::Contains("use at most 12"));

  // A row's cost grows with the source, the length cap and a returned attention.
  options = options_with(4);
  const int64_t row = search_bytes_per_row(model, 6, kSearchVocab, options);
  CHECK(search_bytes_per_row(model, 12, kSearchVocab, options) > row);
  options.return_attention = false;
  const int64_t without_attention = search_bytes_per_row(model, 6, kSearchVocab, options);
  CHECK(without_attention < row);
  options.max_length_ratio = 1000;
  options.max_length = 1000;
  CHECK(search_bytes_per_row(model, 6, kSearchVocab, options) > without_attention);

  // Sentences 0..6, longest first, with a bound of three of the longest sentence's beams: consecutive
  // pieces, each sentence once, each within the bound at its first (longest) sentence's cost.
  options = options_with(4);
  const std::vector<int64_t> lengths = {6, 6, 5, 5, 4, 3, 2};
  const std::vector<int64_t> batch = {0, 1, 2, 3, 4, 5, 6};
  const auto cost = [&](int64_t length) {
    return options.beam_size * search_bytes_per_row(model, length, kSearchVocab, options);
  };
  const int64_t three = 3 * cost(6);
  const auto pieces = split_for_memory(batch, lengths, model, kSearchVocab, options, three);
  std::vector<int64_t> joined;
  for (const auto& piece : pieces) {
    CHECK(static_cast<int64_t>(piece.size()) * cost(lengths[piece.front()]) <= three);
    joined.insert(joined.end(), piece.begin(), piece.end());
  }
  CHECK(joined == batch);
  CHECK(pieces.front() == std::vector<int64_t>{0, 1, 2});
  CHECK(split_for_memory(batch, lengths, model, kSearchVocab, options, 100 * three).size() == 1);
  // Not even one sentence fits: an error naming the options to change.
  CHECK_THROWS_WITH(split_for_memory(batch, lengths, model, kSearchVocab, options, three / 6),
                    Catch::Contains("--max-search-memory") && Catch::Contains("--beam-size 4"));
}

TEST_CASE("ensembles: a model with itself is the model, in greedy and beam search", "[search][ensemble]") {
  for (const std::string& type : {std::string("additive"), std::string("dot")}) {
    for (int beam : {1, 4}) {
      DYNAMIC_SECTION(type << " beam " << beam) {
        Seq2Seq model = small_model(type);
        torch::InferenceMode guard;
        auto [source, lengths] = random_source({6, 2, 4, 7, 3}, kSearchVocab, 74);
        SearchOptions options = options_with(beam);
        options.n_best = beam;
        SearchResult alone = search(model, source, lengths, options);
        SearchResult doubled = search(Ensemble({model, model}), source, lengths, options);
        REQUIRE(doubled.size() == alone.size());
        for (size_t b = 0; b < alone.size(); ++b) {
          REQUIRE(doubled[b].size() == alone[b].size());
          for (size_t k = 0; k < alone[b].size(); ++k) {
            CHECK(doubled[b][k].tokens == alone[b][k].tokens);
            CHECK(doubled[b][k].log_probability == alone[b][k].log_probability);  // (a + a) / 2 == a exactly
            CHECK(torch::equal(doubled[b][k].attention, alone[b][k].attention));
          }
        }
      }
    }
  }
}

TEST_CASE("ensembles: a hypothesis's score is the mean of its members' scores of it on a forced target",
          "[search][ensemble]") {
  // Two different models (other seeds, other scorers); each hypothesis the ensemble's beam search
  // returns is scored again by each member alone, teacher-forced through forward().
  std::vector<Seq2Seq> members = {small_model("additive", 81), small_model("general", 82)};
  torch::InferenceMode guard;
  auto [source, lengths] = random_source({6, 2, 4, 7, 3}, kSearchVocab, 75);
  SearchOptions options = options_with(3);
  options.n_best = 3;
  const SearchResult result = search(Ensemble(members), source, lengths, options);
  bool members_disagree = false;
  for (int64_t b = 0; b < source.size(0); ++b) {
    const int64_t length = lengths[b].item<int64_t>();
    const torch::Tensor row = source.narrow(0, b, 1).narrow(1, 0, length);
    for (const Hypothesis& hypothesis : result[static_cast<size_t>(b)]) {
      // Ended with EOS unless it reached the length cap.
      std::vector<int64_t> output = hypothesis.tokens;
      if (static_cast<int64_t>(output.size()) < max_output_length(length, options)) output.push_back(kEosId);
      std::vector<int64_t> input = {kBosId};
      input.insert(input.end(), output.begin(), output.end() - 1);
      const torch::Tensor input_tensor = torch::tensor(input, torch::kInt64).unsqueeze(0);
      const torch::Tensor output_tensor = torch::tensor(output, torch::kInt64).unsqueeze(1);  // [T, 1]
      std::vector<double> member_scores;
      for (Seq2Seq& member : members) {
        const torch::Tensor logits =
            member->decoder->output_logits(member(row, torch::tensor({length}), input_tensor).attentional)[0];
        member_scores.push_back(torch::log_softmax(logits, 1).gather(1, output_tensor).sum().item<double>());
      }
      members_disagree = members_disagree || std::abs(member_scores[0] - member_scores[1]) > 1e-2;
      CHECK(hypothesis.log_probability == Approx((member_scores[0] + member_scores[1]) / 2).margin(1e-4));
    }
  }
  CHECK(members_disagree);  // else the mean would not be tested
}

TEST_CASE("shortlists: the whole vocabulary searches as none and a list holding greedy's tokens keeps them",
          "[search]") {
  Seq2Seq model = small_model("additive");
  torch::InferenceMode guard;
  auto [source, lengths] = random_source({6, 2, 4, 7}, kSearchVocab, 91);
  const torch::Tensor everything = torch::arange(kSearchVocab, torch::kInt64);
  const torch::Tensor prefix = torch::tensor({5, 9, 0, 0, 7, 0, 11, 4}, torch::kInt64).view({4, 2});
  const BatchConstraints constraints{{{5, 9}}, {}, {{7, 8}}, {{13}, {6}}};
  SearchOptions sampling = fixed_shape_options(1, 1.0, 1);
  sampling.sampling_topk = 5;
  for (const auto& [name, options] :
       std::vector<std::pair<std::string, SearchOptions>>{{"greedy", fixed_shape_options(1, 1.0, 1)},
                                                          {"beam", fixed_shape_options(3, 1.0, 2)},
                                                          {"sampling", sampling}}) {
    INFO(name);
    check_same_hypotheses(search_in_vocabulary(model, everything, source, lengths, options),
                          search(model, source, lengths, options));
    check_same_hypotheses(search_in_vocabulary(model, everything, source, lengths, options, prefix),
                          search(model, source, lengths, options, prefix));
    if (!options.samples()) {
      check_same_hypotheses(search_in_vocabulary(model, everything, source, lengths, options, {}, constraints),
                            search(model, source, lengths, options, {}, constraints));
    }
  }
  // One sentence at a time: a list of the special tokens and the tokens greedy search wrote holds
  // its choice at every step, so greedy search over the list writes the same tokens; beam search
  // over it writes only tokens of the list.
  int64_t smaller = 0;
  for (int64_t b = 0; b < 4; ++b) {
    INFO("sentence " << b);
    const torch::Tensor one = source.narrow(0, b, 1).narrow(1, 0, lengths[b].item<int64_t>());
    const torch::Tensor length = lengths.narrow(0, b, 1);
    const SearchOptions greedy = fixed_shape_options(1, 1.0, 1);
    const std::vector<int64_t> written = search(model, one, length, greedy)[0][0].tokens;
    std::set<int64_t> kept(written.begin(), written.end());
    for (int64_t id = 0; id <= kEosId; ++id) kept.insert(id);
    const torch::Tensor ids = torch::tensor(std::vector<int64_t>(kept.begin(), kept.end()), torch::kInt64);
    smaller += ids.size(0) < kSearchVocab - 2 ? 1 : 0;
    CHECK(search_in_vocabulary(model, ids, one, length, greedy)[0][0].tokens == written);
    if (ids.size(0) >= 6) {
      for (const Hypothesis& hypothesis :
           search_in_vocabulary(model, ids, one, length, fixed_shape_options(2, 1.0, 2))[0]) {
        for (const int64_t token : hypothesis.tokens) CHECK(kept.count(token) == 1);
      }
    }
  }
  REQUIRE(smaller > 0);  // the lists left tokens out: the places were mapped, not just the identity
}

TEST_CASE("float32 packed for the CPU: the module's translations, and a whole shortlist changes nothing", "[search]") {
  // Models made before inference mode (they train); the second of each pair packed.
  std::vector<std::tuple<std::string, Seq2Seq, Seq2Seq>> scorers;
  for (const std::string type : {"additive", "multi-head", "local-p", "dot", "none"}) {
    scorers.emplace_back(type, small_model(type), small_model(type));
    std::get<2>(scorers.back())->decoder->quantize_int8();
    std::get<2>(scorers.back())->decoder->pack_float32();  // replaces the int8 copies
    REQUIRE(std::get<2>(scorers.back())->decoder->int8_weights() == nullptr);
    std::get<2>(scorers.back())->encoder->pack_float32();  // as translation loads a model
  }
  torch::InferenceMode guard;
  std::vector<int64_t> lengths_list;
  for (int64_t i = 0; i < 200; ++i) lengths_list.push_back(2 + i % 7);
  auto [source, lengths] = random_source(lengths_list, kSearchVocab, 93);
  for (auto& [type, plain, packed] : scorers) {
    for (const int beam : {1, 4}) {
      INFO(type << ", beam " << beam);
      const SearchOptions options = fixed_shape_options(beam, 1.0, 1);
      const SearchResult full = search(plain, source, lengths, options);
      const SearchResult found = search(packed, source, lengths, options);
      for (size_t b = 0; b < full.size(); ++b) {
        INFO("sentence " << b);
        CHECK(found[b][0].tokens == full[b][0].tokens);
        CHECK(found[b][0].log_probability == Approx(full[b][0].log_probability).epsilon(1e-4));
      }
      check_same_hypotheses(
          search_in_vocabulary(packed, torch::arange(kSearchVocab, torch::kInt64), source, lengths, options), found);
    }
  }
}

TEST_CASE("int8: translations agree with float32 on nearly every sentence and a whole shortlist changes nothing",
          "[search]") {
  // As translation loads a model in int8: the encoder's products and the decoder's (the keys' too).
  Seq2Seq model = small_model("additive"), quantized = small_model("additive");
  quantized->encoder->quantize_int8();
  quantized->decoder->quantize_int8();
  REQUIRE(quantized->decoder->int8_weights()->query.has_value());  // the scorer's W s in int8 too
  REQUIRE(quantized->decoder->int8_weights()->keys.has_value());
  // Scorers with and without a query projection of their own, made before inference mode (they train).
  std::vector<std::tuple<std::string, Seq2Seq, Seq2Seq>> scorers;
  for (const std::string type : {"multi-head", "local-p", "dot", "none"}) {
    scorers.emplace_back(type, small_model(type), small_model(type));
    std::get<2>(scorers.back())->encoder->quantize_int8();
    std::get<2>(scorers.back())->decoder->quantize_int8();
  }
  torch::InferenceMode guard;
  std::vector<int64_t> lengths_list;
  for (int64_t i = 0; i < 200; ++i) lengths_list.push_back(2 + i % 7);
  auto [source, lengths] = random_source(lengths_list, kSearchVocab, 93);
  // At every kernel level: 8-bit activations without kernels and with VNNI, 6 bits with AVX2.
  for (const kernels::KernelLevel level :
       {kernels::KernelLevel::kOff, kernels::KernelLevel::kAvx2, kernels::KernelLevel::kAvx512}) {
    if (level > kernels::supported_kernel_level()) continue;
    kernels::ScopedKernelLevel scoped(level);
    for (const int beam : {1, 4}) {
      INFO(kernels::to_string(level) << ", beam " << beam);
      const SearchOptions options = fixed_shape_options(beam, 1.0, 1);
      const SearchResult full = search(model, source, lengths, options);
      const SearchResult int8 = search(quantized, source, lengths, options);
      int64_t same = 0;
      for (size_t b = 0; b < full.size(); ++b) same += full[b][0].tokens == int8[b][0].tokens ? 1 : 0;
      CHECK(same >= 190);  // 95%
      check_same_hypotheses(
          search_in_vocabulary(quantized, torch::arange(kSearchVocab, torch::kInt64), source, lengths, options), int8);
    }
  }
  // The step is int8's: a quantized model scores differently from the float one.
  const SearchOptions greedy = fixed_shape_options(1, 1.0, 1);
  CHECK(search(model, source, lengths, greedy)[0][0].log_probability !=
        search(quantized, source, lengths, greedy)[0][0].log_probability);
  for (auto& [type, plain, int8] : scorers) {
    INFO(type);
    CHECK(int8->decoder->int8_weights()->query.has_value() == plain->decoder->attention->query_weight().defined());
    const SearchResult full = search(plain, source, lengths, greedy), found = search(int8, source, lengths, greedy);
    int64_t same = 0;
    for (size_t b = 0; b < full.size(); ++b) same += full[b][0].tokens == found[b][0].tokens ? 1 : 0;
    CHECK(same >= 190);
  }
}
