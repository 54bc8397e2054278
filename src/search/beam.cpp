// Batched beam search. All B sentences and their K beams run as one batch of B * K rows; each
// step is one decoder step, one top-k over [B, K * V], and an index_select of the state.
//
// Per sentence and step: of the 2K best extensions, those ending in EOS and ranked within the
// top K finish (so beam 1 behaves exactly like greedy); the K best others stay alive. A sentence
// stops when K hypotheses have finished, when no alive hypothesis can still beat its n-best
// (with alpha = 0 a hypothesis's log-probability only falls; with alpha > 0 the bound uses the
// largest length penalty it can reach), or at its length cap, where alive hypotheses are
// finished as they are. Finished sentences leave the batch.
#include <torch/torch.h>

#include <algorithm>
#include <limits>

#include "search/search.h"
#include "text/special_tokens.h"

namespace nmt {

namespace {

struct Candidate {
  int64_t origin_row;  // row of the alive hypothesis it extends
  int64_t token;
  double log_probability;
};

// Rows [B * K] of the state or history, tensors of all alive beams.
struct BeamRows {
  torch::Tensor tokens;     // [R, t] output so far
  torch::Tensor attention;  // [R, t, S] (only with return_attention)
};

}  // namespace

SearchResult beam_search(Ensemble model, const torch::Tensor& source, const torch::Tensor& lengths,
                         const SearchOptions& options) {
  const int64_t batch_size = source.size(0);
  const int64_t beam = options.beam_size;
  const torch::Device device = source.device();
  const auto int_options = torch::TensorOptions().dtype(torch::kInt64).device(device);
  const double minus_infinity = -std::numeric_limits<double>::infinity();
  torch::Tensor lengths_cpu = lengths.cpu();

  Ensemble::Source encoded = model.encode(source, lengths);
  Ensemble::State state = model.initial_state(encoded);
  // Expand every sentence to K identical rows: sentence b owns rows b*K .. b*K + K-1.
  torch::Tensor expand = torch::arange(batch_size, int_options).repeat_interleave(beam);
  encoded = encoded.index_select(expand);
  state = state.index_select(expand);

  std::vector<int64_t> active(batch_size), limit(batch_size);
  for (int64_t b = 0; b < batch_size; ++b) {
    active[b] = b;
    limit[b] = max_output_length(lengths_cpu[b].item<int64_t>(), options);
  }
  // Cumulative log-probabilities of the alive beams; at the start only beam 0 is real.
  std::vector<double> alive_scores(batch_size * beam, minus_infinity);
  for (int64_t b = 0; b < batch_size; ++b) alive_scores[b * beam] = 0.0;

  SearchResult finished(batch_size);
  BeamRows rows{torch::empty({batch_size * beam, 0}, int_options), torch::Tensor()};
  torch::Tensor previous = torch::full({batch_size * beam}, kBosId, int_options);

  auto finish = [&](int64_t sentence, const Candidate& candidate, int64_t length, bool ended_with_eos,
                    const torch::Tensor& row_tokens, const torch::Tensor& row_attention) {
    Hypothesis hypothesis;
    auto token_data = row_tokens.cpu();
    hypothesis.tokens.assign(token_data.data_ptr<int64_t>(), token_data.data_ptr<int64_t>() + token_data.numel());
    if (!ended_with_eos) hypothesis.tokens.push_back(candidate.token);
    hypothesis.log_probability = candidate.log_probability;
    hypothesis.score = candidate.log_probability / length_penalty(length, options.length_penalty);
    if (row_attention.defined()) {
      // clone: a view would keep the whole [rows, steps, S] history of this step alive.
      hypothesis.attention = row_attention.narrow(1, 0, lengths_cpu[sentence].item<int64_t>()).cpu().clone();
    }
    finished[sentence].push_back(std::move(hypothesis));
  };

  for (int64_t t = 0; !active.empty(); ++t) {
    const auto active_count = static_cast<int64_t>(active.size());
    Ensemble::Step out = model.step(previous, state, encoded);
    torch::Tensor log_probs = ban_tokens(out.log_probs, options);  // [A*K, V]
    const int64_t vocab = log_probs.size(1);
    // The best 2K extensions of a sentence are among the best 2K of each of its rows: take those
    // per row in float32 first, then add the float64 running scores to [A*K, 2K] candidates only.
    const int64_t per_row = std::min<int64_t>(2 * beam, vocab);
    auto [row_log_probs, row_tokens] = log_probs.topk(per_row, /*dim=*/1);  // [A*K, 2K]
    torch::Tensor scores_tensor =
        torch::tensor(alive_scores, torch::kFloat64).to(device).view({active_count * beam, 1});
    torch::Tensor candidates = (row_log_probs.to(torch::kFloat64) + scores_tensor).view({active_count, beam * per_row});
    auto [top_scores, top_positions] = candidates.topk(std::min<int64_t>(2 * beam, beam * per_row), /*dim=*/1);
    // Back to ids in [0, K*V): beam k = position / per_row, token from row_tokens.
    torch::Tensor top_beams = top_positions.div(per_row, "floor");
    torch::Tensor flat_rows = top_beams + torch::arange(active_count, int_options).unsqueeze(1) * beam;  // [A, 2K]
    torch::Tensor top_tokens = row_tokens.view({-1})
                                   .index_select(0, (flat_rows * per_row + top_positions.remainder(per_row)).view({-1}))
                                   .view(top_positions.sizes());
    torch::Tensor top_ids = (top_beams * vocab + top_tokens).cpu();
    top_scores = top_scores.cpu();
    const int64_t width = top_ids.size(1);
    auto score_access = top_scores.accessor<double, 2>();
    auto id_access = top_ids.accessor<int64_t, 2>();

    torch::Tensor step_attention;  // [A*K, 1, S]
    if (options.return_attention && out.attention.defined()) {
      step_attention = out.attention.unsqueeze(1);
      rows.attention = rows.attention.defined() ? torch::cat({rows.attention, step_attention}, 1) : step_attention;
    }

    std::vector<int64_t> next_origin, next_token, still_active, encoded_rows;
    std::vector<double> next_scores;
    for (int64_t a = 0; a < active_count; ++a) {
      const int64_t sentence = active[a];
      const int64_t length = t + 1;
      const bool at_cap = length >= limit[sentence];
      std::vector<Candidate> alive;
      for (int64_t j = 0; j < width && static_cast<int64_t>(alive.size()) < beam; ++j) {
        const double score = score_access[a][j];
        if (score == minus_infinity) break;
        Candidate candidate{a * beam + id_access[a][j] / vocab, id_access[a][j] % vocab, score};
        const bool is_eos = candidate.token == kEosId;
        if (is_eos || at_cap) {
          if (j < beam) {
            torch::Tensor history_attention =
                rows.attention.defined() ? rows.attention[candidate.origin_row] : torch::Tensor();
            finish(sentence, candidate, length, is_eos, rows.tokens[candidate.origin_row], history_attention);
          }
        } else {
          alive.push_back(candidate);
        }
      }
      auto& done = finished[sentence];
      bool stop = at_cap || alive.empty() || static_cast<int64_t>(done.size()) >= beam;
      if (!stop && static_cast<int64_t>(done.size()) >= options.n_best) {
        std::vector<double> done_scores;
        for (const auto& hypothesis : done) done_scores.push_back(hypothesis.score);
        std::nth_element(done_scores.begin(), done_scores.begin() + (options.n_best - 1), done_scores.end(),
                         std::greater<double>());
        const double nth_best = done_scores[options.n_best - 1];
        // The best an alive hypothesis can still reach: its log-probability can only fall, and
        // with alpha > 0 the most it can be divided by is the cap's length penalty.
        const double best_alive = alive.front().log_probability;
        const double bound = best_alive / length_penalty(limit[sentence], options.length_penalty);
        stop = nth_best >= bound;
      }
      if (stop) continue;
      still_active.push_back(sentence);
      for (int64_t k = 0; k < beam; ++k) {
        // Fewer than K alive candidates: fill with copies at -inf, which never win.
        const bool real = k < static_cast<int64_t>(alive.size());
        const Candidate& candidate = alive[real ? k : 0];
        next_origin.push_back(candidate.origin_row);
        next_token.push_back(candidate.token);
        next_scores.push_back(real ? candidate.log_probability : minus_infinity);
        encoded_rows.push_back(a * beam + k);
      }
    }
    if (still_active.empty()) break;

    torch::Tensor origin = torch::tensor(next_origin, torch::kInt64).to(device);
    torch::Tensor tokens = torch::tensor(next_token, torch::kInt64).to(device);
    state = out.state.index_select(origin);
    rows.tokens = torch::cat({rows.tokens.index_select(0, origin), tokens.unsqueeze(1)}, 1);
    if (rows.attention.defined()) rows.attention = rows.attention.index_select(0, origin);
    // Rows of one sentence share the same encoder output, so it is reselected only when
    // sentences leave the batch, not on every beam reorder.
    if (still_active.size() != active.size()) {
      encoded = encoded.index_select(torch::tensor(encoded_rows, torch::kInt64).to(device));
    }
    active = std::move(still_active);
    alive_scores = std::move(next_scores);
    previous = tokens;
  }

  for (auto& hypotheses : finished) {
    std::stable_sort(hypotheses.begin(), hypotheses.end(),
                     [](const Hypothesis& x, const Hypothesis& y) { return x.score > y.score; });
    if (static_cast<int64_t>(hypotheses.size()) > options.n_best) hypotheses.resize(options.n_best);
  }
  return finished;
}

}  // namespace nmt
