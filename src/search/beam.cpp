// Batched beam search. All B sentences and their K beams run as one batch of B * K rows; each
// step is one decoder step, one top-k over [B, K * V], and an index_select of the state.
//
// Per sentence and step: of the 2K best extensions, those ending in EOS and ranked within the
// top K finish (so beam 1 behaves exactly like greedy); the K best others stay alive. A sentence
// stops when K hypotheses have finished, when no alive hypothesis can still beat its n-best
// (with alpha = 0 a hypothesis's log-probability only falls; with alpha > 0 the bound uses the
// largest length penalty it can reach), or at its length cap, where alive hypotheses are
// finished as they are. Finished sentences leave the batch.
//
// The phases of a step, in BeamSearch::run: expand (the decoder step and the 2K best extensions
// of each sentence), finish hypotheses and select the K alive beams (per sentence), and reorder
// the state for the next step. The selection runs on the host, with the token histories there.
//
// A sentence with terminology constraints (search/constraints.h) selects its beams differently:
// more candidates (each beam's best token and the tokens that advance its constraints), shared out
// among banks by how many constraint tokens they met; only hypotheses that met every constraint
// finish, and those within the top K of the complete ones.
//
// A GPU runs the same rules as tensor operations on the device instead, without waiting for a
// step: beam_fixed_shape.cpp.
#include <ATen/record_function.h>
#include <torch/torch.h>

#include <algorithm>
#include <limits>
#include <numeric>
#include <set>
#include <stdexcept>
#include <string>

#include "kernels/dispatch.h"
#include "kernels/row_kernels.h"
#include "search/constraints.h"
#include "search/search.h"
#include "text/special_tokens.h"
#include "util/device_rules.h"
#include "util/runtime.h"

namespace nmt {

namespace {

constexpr double kMinusInfinity = -std::numeric_limits<double>::infinity();

struct Candidate {
  int64_t origin_row;  // row of the alive hypothesis it extends
  int64_t token;
  double log_probability;
};

// Rows [B * K] of the history of all alive beams.
struct BeamRows {
  std::vector<std::vector<int64_t>> tokens;  // R x [t] output so far, on the host
  torch::Tensor attention;                   // [R, t, S] (only with return_attention)
};

// The 2K best extensions of each active sentence, best first, on the CPU.
struct Extensions {
  torch::Tensor scores;  // [A, W] float64 cumulative log-probabilities
  torch::Tensor ids;     // [A, W] beam k * V + token, in [0, K*V)
  int64_t vocab;         // V
  // Per active sentence with constraints: each alive beam's best token and the tokens that advance
  // its constraints (cumulative log-probabilities; may repeat the 2K best).
  std::vector<std::vector<Candidate>> constraint_candidates;
};

// The beams of the next step: K rows for each sentence that goes on.
struct NextBeams {
  std::vector<int64_t> origin, token, still_active, encoded_rows;
  std::vector<double> scores;
  std::vector<ConstraintState> constraint_states;  // with constraints
};

class BeamSearch {
 public:
  BeamSearch(Ensemble model, const torch::Tensor& source, const torch::Tensor& lengths, const SearchOptions& options,
             const torch::Tensor& prefix, const BatchConstraints& constraints);
  SearchResult run();

 private:
  Extensions expand(const Ensemble::Step& out, const torch::Tensor& log_probs) const;
  void ban_unmet_ends(const torch::Tensor& log_probs) const;
  void add_constraint_candidates(const torch::Tensor& log_probs, Extensions& extensions) const;
  void append_attention(const torch::Tensor& step_attention);
  NextBeams select(const Extensions& extensions, int64_t length);
  // a: the sentence's place among the active ones (its row of the extensions, its block of K rows).
  std::vector<Candidate> finish_hypotheses(int64_t sentence, int64_t a, int64_t length, bool at_cap,
                                           at::TensorAccessor<double, 1> scores, at::TensorAccessor<int64_t, 1> ids,
                                           int64_t vocab);
  std::vector<Candidate> finish_constrained(int64_t sentence, int64_t a, int64_t length, bool at_cap,
                                            at::TensorAccessor<double, 1> scores, at::TensorAccessor<int64_t, 1> ids,
                                            const Extensions& extensions);
  void finish(int64_t sentence, const Candidate& candidate, int64_t length, bool ended_with_eos);
  bool sentence_done(int64_t sentence, bool at_cap, const std::vector<Candidate>& alive) const;
  void keep_alive(int64_t a, const std::vector<Candidate>& alive, NextBeams& next) const;
  void reorder(const Ensemble::State& stepped, NextBeams& next);
  SearchResult best_first();

  Ensemble model_;
  const SearchOptions& options_;
  const int64_t beam_;
  const torch::Device device_;
  const torch::TensorOptions int_options_;
  const torch::Tensor lengths_cpu_;
  bool fused_;  // expand() takes logits into the fused log-softmax and top-k (search.h)
  Ensemble::Source encoded_;
  Ensemble::State state_;
  std::vector<int64_t> active_, limit_;  // sentences in the batch; each sentence's length cap
  std::vector<double> alive_scores_;     // cumulative log-probabilities of the alive beams
  SearchResult finished_;
  BeamRows rows_;
  torch::Tensor previous_;                   // [A*K] the last token of each beam
  torch::Tensor row_prefix_;                 // [A*K, P] each row's target prefix (search.h), or undefined
  const BatchConstraints& constraints_;      // per sentence (search/constraints.h)
  const bool constrained_;                   // any sentence has constraints
  std::vector<ConstraintState> row_states_;  // [A*K] each row's, when constrained_
};

BeamSearch::BeamSearch(Ensemble model, const torch::Tensor& source, const torch::Tensor& lengths,
                       const SearchOptions& options, const torch::Tensor& prefix, const BatchConstraints& constraints)
    : model_(std::move(model)),
      options_(options),
      beam_(options.beam_size),
      device_(source.device()),
      int_options_(torch::TensorOptions().dtype(torch::kInt64).device(device_)),
      lengths_cpu_(lengths.cpu()),
      constraints_(constraints),
      constrained_(has_constraints(constraints)) {
  const int64_t batch_size = source.size(0);
  encoded_ = model_.encode(source, lengths);
  state_ = model_.initial_state(encoded_);
  // Expand every sentence to K identical rows: sentence b owns rows b*K .. b*K + K-1.
  torch::Tensor expand = torch::arange(batch_size, int_options_).repeat_interleave(beam_);
  encoded_ = encoded_.index_select(expand);
  state_ = state_.index_select(expand);
  if (prefix.defined()) row_prefix_ = prefix.index_select(0, expand);

  active_.resize(batch_size);
  std::iota(active_.begin(), active_.end(), 0);
  limit_ = max_output_lengths(lengths, options);
  // Cumulative log-probabilities of the alive beams; at the start only beam 0 is real.
  alive_scores_.assign(batch_size * beam_, kMinusInfinity);
  for (int64_t b = 0; b < batch_size; ++b) alive_scores_[b * beam_] = 0.0;

  finished_.resize(batch_size);
  rows_ = BeamRows{std::vector<std::vector<int64_t>>(static_cast<size_t>(batch_size * beam_)), torch::Tensor()};
  previous_ = torch::full({batch_size * beam_}, kBosId, int_options_);
  if (constrained_) {
    for (int64_t row = 0; row < batch_size * beam_; ++row) row_states_.emplace_back(&constraints_[row / beam_]);
  }
  // Prefixes and constraints edit the log-probabilities themselves; an ensemble averages them.
  fused_ = model_.members().size() == 1 && !prefix.defined() && !constrained_ && fuses_log_softmax(device_);
}

SearchResult BeamSearch::run() {
  for (int64_t t = 0; !active_.empty(); ++t) {
    Ensemble::Step out = model_.step(previous_, state_, encoded_, /*normalize=*/!fused_);
    // The step as a tensor only where a prefix reads it.
    const torch::Tensor step = row_prefix_.defined() ? torch::full({}, t, int_options_) : torch::Tensor();
    // [A*K, V]; undefined when fused
    const torch::Tensor log_probs =
        fused_ ? torch::Tensor() : allowed_tokens(out.log_probs, options_, row_prefix_, step);
    if (constrained_) ban_unmet_ends(log_probs);
    Extensions extensions = expand(out, log_probs);
    if (constrained_) add_constraint_candidates(log_probs, extensions);
    if (options_.return_attention && out.attention.defined()) append_attention(out.attention);
    NextBeams next = select(extensions, t + 1);
    if (next.still_active.empty()) break;
    reorder(out.state, next);
  }
  return best_first();
}

// Expand: the 2K best extensions of each sentence from next-token log-probabilities [A*K, V], or
// when fused from the step's logits.
Extensions BeamSearch::expand(const Ensemble::Step& out, const torch::Tensor& log_probs) const {
  const torch::Tensor scores = to_device(torch::tensor(alive_scores_, torch::kFloat64), device_).view({-1, 1});
  const torch::Tensor both = fused_ ? best_extensions_of_logits(out.logits, scores, beam_, options_)
                                    : best_extensions(log_probs, scores, beam_).cpu();  // on a GPU the step's one wait
  return Extensions{both[0], both[1].to(torch::kInt64), fused_ ? out.logits.size(1) : log_probs.size(1), {}};
}

// A row that has not met all its constraints may not end: its EOS gets -inf.
void BeamSearch::ban_unmet_ends(const torch::Tensor& log_probs) const {
  std::vector<int64_t> rows;
  for (size_t row = 0; row < row_states_.size(); ++row) {
    if (!row_states_[row].complete()) rows.push_back(static_cast<int64_t>(row));
  }
  if (rows.empty()) return;
  log_probs.select(1, kEosId).index_fill_(0, to_device(torch::tensor(rows, torch::kInt64), device_), kMinusInfinity);
}

// The candidates constrained sentences add to their 2K best: each alive row's best token, and the
// tokens that advance its constraints.
void BeamSearch::add_constraint_candidates(const torch::Tensor& log_probs, Extensions& extensions) const {
  std::vector<int64_t> rows, tokens;
  for (size_t a = 0; a < active_.size(); ++a) {
    if (constraints_[static_cast<size_t>(active_[a])].empty()) continue;
    for (int64_t row = static_cast<int64_t>(a) * beam_; row < static_cast<int64_t>(a + 1) * beam_; ++row) {
      if (alive_scores_[static_cast<size_t>(row)] == kMinusInfinity) continue;
      row_states_[static_cast<size_t>(row)].advancing_tokens(tokens);
      rows.resize(tokens.size(), row);
    }
  }
  auto [best_log_probs, best_tokens] = log_probs.max(/*dim=*/1);
  const torch::Tensor row_index = to_device(torch::tensor(rows, torch::kInt64), device_);
  const torch::Tensor token_index = to_device(torch::tensor(tokens, torch::kInt64), device_);
  const torch::Tensor advancing_tensor = log_probs.index({row_index, token_index}).to(torch::kFloat64).cpu();
  const torch::Tensor best_tensor = best_log_probs.to(torch::kFloat64).cpu();
  const torch::Tensor best_token_tensor = best_tokens.cpu();
  const auto advancing = advancing_tensor.accessor<double, 1>();
  const auto best = best_tensor.accessor<double, 1>();
  const auto best_token = best_token_tensor.accessor<int64_t, 1>();
  extensions.constraint_candidates.assign(active_.size(), {});
  auto add = [&](int64_t row, int64_t token, double log_probability) {
    const double score = alive_scores_[static_cast<size_t>(row)] + log_probability;
    if (score == kMinusInfinity) return;
    extensions.constraint_candidates[static_cast<size_t>(row / beam_)].push_back(Candidate{row, token, score});
  };
  for (size_t i = 0; i < rows.size(); ++i) add(rows[i], tokens[i], advancing[static_cast<int64_t>(i)]);
  for (size_t a = 0; a < active_.size(); ++a) {
    if (constraints_[static_cast<size_t>(active_[a])].empty()) continue;
    for (int64_t row = static_cast<int64_t>(a) * beam_; row < static_cast<int64_t>(a + 1) * beam_; ++row) {
      if (alive_scores_[static_cast<size_t>(row)] == kMinusInfinity) continue;
      add(row, best_token[row], best[row]);
    }
  }
}

// The step's attention [A*K, S] joins the history of every row.
void BeamSearch::append_attention(const torch::Tensor& attention) {
  torch::Tensor step_attention = attention.unsqueeze(1);  // [A*K, 1, S]
  rows_.attention = rows_.attention.defined() ? torch::cat({rows_.attention, step_attention}, 1) : step_attention;
}

// Finish hypotheses and select the K alive beams of every active sentence.
NextBeams BeamSearch::select(const Extensions& extensions, int64_t length) {
  RECORD_FUNCTION("nmt::beam_select", std::vector<c10::IValue>());
  auto score_access = extensions.scores.accessor<double, 2>();
  auto id_access = extensions.ids.accessor<int64_t, 2>();
  NextBeams next;
  for (int64_t a = 0; a < static_cast<int64_t>(active_.size()); ++a) {
    const int64_t sentence = active_[a];
    const bool at_cap = length >= limit_[sentence];
    const bool constrained = constrained_ && !constraints_[static_cast<size_t>(sentence)].empty();
    const std::vector<Candidate> alive =
        constrained ? finish_constrained(sentence, a, length, at_cap, score_access[a], id_access[a], extensions)
                    : finish_hypotheses(sentence, a, length, at_cap, score_access[a], id_access[a], extensions.vocab);
    if (sentence_done(sentence, at_cap, alive)) continue;
    next.still_active.push_back(sentence);
    keep_alive(a, alive, next);
  }
  return next;
}

// Of active sentence a's extensions (best first), those ending in EOS or at the length cap and
// ranked within the top K finish; returns the best K others, which stay alive.
std::vector<Candidate> BeamSearch::finish_hypotheses(int64_t sentence, int64_t a, int64_t length, bool at_cap,
                                                     at::TensorAccessor<double, 1> scores,
                                                     at::TensorAccessor<int64_t, 1> ids, int64_t vocab) {
  const int64_t width = scores.size(0);
  std::vector<Candidate> alive;
  for (int64_t j = 0; j < width && static_cast<int64_t>(alive.size()) < beam_; ++j) {
    const double score = scores[j];
    if (score == kMinusInfinity) break;
    Candidate candidate{a * beam_ + ids[j] / vocab, ids[j] % vocab, score};
    const bool is_eos = candidate.token == kEosId;
    if (is_eos || at_cap) {
      if (j < beam_) finish(sentence, candidate, length, is_eos);
    } else {
      alive.push_back(candidate);
    }
  }
  return alive;
}

// finish_hypotheses for a sentence with constraints: of all its candidates, those ending (EOS, or
// at the length cap) finish if they met every constraint and rank within the top K of the
// candidates that did; the others are shared out among the banks (allocate_banks). A sentence
// that reaches its cap with nothing finished ends with its candidate that met the most.
std::vector<Candidate> BeamSearch::finish_constrained(int64_t sentence, int64_t a, int64_t length, bool at_cap,
                                                      at::TensorAccessor<double, 1> scores,
                                                      at::TensorAccessor<int64_t, 1> ids,
                                                      const Extensions& extensions) {
  std::vector<Candidate> pool;
  for (int64_t j = 0; j < scores.size(0) && scores[j] != kMinusInfinity; ++j) {
    pool.push_back(Candidate{a * beam_ + ids[j] / extensions.vocab, ids[j] % extensions.vocab, scores[j]});
  }
  const std::vector<Candidate>& more = extensions.constraint_candidates[static_cast<size_t>(a)];
  pool.insert(pool.end(), more.begin(), more.end());
  std::stable_sort(pool.begin(), pool.end(),
                   [](const Candidate& x, const Candidate& y) { return x.log_probability > y.log_probability; });
  std::vector<std::vector<Candidate>> banks(
      static_cast<size_t>(constraint_tokens(constraints_[static_cast<size_t>(sentence)])) + 1);
  std::set<std::pair<int64_t, int64_t>> seen;  // (row, token): a candidate may come twice
  int64_t complete_rank = 0;
  const Candidate* most_met = nullptr;
  int64_t most = -1;
  for (const Candidate& candidate : pool) {
    const std::pair<int64_t, int64_t> key{candidate.origin_row, candidate.token};
    if (!seen.insert(key).second) continue;
    const bool is_eos = candidate.token == kEosId;
    const ConstraintState& before = row_states_[static_cast<size_t>(candidate.origin_row)];
    const ConstraintState after = is_eos ? before : before.advance(candidate.token);
    if (is_eos || at_cap) {
      if (after.complete() && complete_rank < beam_) finish(sentence, candidate, length, is_eos);
      if (after.met() > most) {
        most = after.met();
        most_met = &candidate;
      }
    } else {
      banks[static_cast<size_t>(after.met())].push_back(candidate);
    }
    if (after.complete()) ++complete_rank;
  }
  if (at_cap && finished_[static_cast<size_t>(sentence)].empty() && most_met != nullptr) {
    finish(sentence, *most_met, length, most_met->token == kEosId);
  }
  std::vector<size_t> bank_sizes;
  for (const auto& bank : banks) bank_sizes.push_back(bank.size());
  std::vector<Candidate> alive;
  for (const auto& [bank, index] : allocate_banks(bank_sizes, beam_)) alive.push_back(banks[bank][index]);
  std::stable_sort(alive.begin(), alive.end(),
                   [](const Candidate& x, const Candidate& y) { return x.log_probability > y.log_probability; });
  return alive;
}

// A finished hypothesis of `sentence`: the history of the candidate's row, plus its token
// unless that is EOS.
void BeamSearch::finish(int64_t sentence, const Candidate& candidate, int64_t length, bool ended_with_eos) {
  Hypothesis hypothesis;
  hypothesis.tokens = rows_.tokens[static_cast<size_t>(candidate.origin_row)];
  if (!ended_with_eos) hypothesis.tokens.push_back(candidate.token);
  hypothesis.log_probability = candidate.log_probability;
  hypothesis.score = candidate.log_probability / length_penalty(length, options_.length_penalty);
  if (rows_.attention.defined()) {
    // clone: a view would keep the whole [rows, steps, S] history of this step alive.
    hypothesis.attention =
        rows_.attention[candidate.origin_row].narrow(1, 0, lengths_cpu_[sentence].item<int64_t>()).cpu().clone();
  }
  finished_[sentence].push_back(std::move(hypothesis));
}

// Whether `sentence` stops: at its cap, with no alive beam, with K finished hypotheses, or when
// no alive beam can still beat its n-th best finished one.
bool BeamSearch::sentence_done(int64_t sentence, bool at_cap, const std::vector<Candidate>& alive) const {
  const auto& done = finished_[sentence];
  bool stop = at_cap || alive.empty() || static_cast<int64_t>(done.size()) >= beam_;
  if (!stop && static_cast<int64_t>(done.size()) >= options_.n_best) {
    std::vector<double> done_scores;
    for (const auto& hypothesis : done) done_scores.push_back(hypothesis.score);
    std::nth_element(done_scores.begin(), done_scores.begin() + (options_.n_best - 1), done_scores.end(),
                     std::greater<double>());
    const double nth_best = done_scores[options_.n_best - 1];
    // The best an alive hypothesis can still reach: its log-probability can only fall, and
    // with alpha > 0 the most it can be divided by is the cap's length penalty.
    const double best_alive = alive.front().log_probability;
    const double bound = best_alive / length_penalty(limit_[sentence], options_.length_penalty);
    stop = nth_best >= bound;
  }
  return stop;
}

// The K beams active sentence a goes on with.
void BeamSearch::keep_alive(int64_t a, const std::vector<Candidate>& alive, NextBeams& next) const {
  for (int64_t k = 0; k < beam_; ++k) {
    // Fewer than K alive candidates: fill with copies at -inf, which never win.
    const bool real = k < static_cast<int64_t>(alive.size());
    const Candidate& candidate = alive[real ? k : 0];
    next.origin.push_back(candidate.origin_row);
    next.token.push_back(candidate.token);
    next.scores.push_back(real ? candidate.log_probability : kMinusInfinity);
    next.encoded_rows.push_back(a * beam_ + k);
    if (constrained_) {
      next.constraint_states.push_back(row_states_[static_cast<size_t>(candidate.origin_row)].advance(candidate.token));
    }
  }
}

// Reorder the state, the histories and the encoder output for the next step's beams.
void BeamSearch::reorder(const Ensemble::State& stepped, NextBeams& next) {
  RECORD_FUNCTION("nmt::beam_reorder", std::vector<c10::IValue>());
  torch::Tensor origin = to_device(torch::tensor(next.origin, torch::kInt64), device_);
  torch::Tensor tokens = to_device(torch::tensor(next.token, torch::kInt64), device_);
  state_ = stepped.index_select(origin);
  std::vector<std::vector<int64_t>> histories(next.origin.size());
  for (size_t row = 0; row < histories.size(); ++row) {
    histories[row] = rows_.tokens[static_cast<size_t>(next.origin[row])];
    histories[row].push_back(next.token[row]);
  }
  rows_.tokens = std::move(histories);
  if (rows_.attention.defined()) rows_.attention = rows_.attention.index_select(0, origin);
  // Rows of one sentence share the same encoder output, so it is reselected only when
  // sentences leave the batch, not on every beam reorder.
  if (next.still_active.size() != active_.size()) {
    const torch::Tensor rows = to_device(torch::tensor(next.encoded_rows, torch::kInt64), device_);
    encoded_ = encoded_.index_select(rows);
    if (row_prefix_.defined()) row_prefix_ = row_prefix_.index_select(0, rows);
  }
  active_ = std::move(next.still_active);
  alive_scores_ = std::move(next.scores);
  row_states_ = std::move(next.constraint_states);
  previous_ = tokens;
}

// Each sentence's n-best finished hypotheses, best first.
SearchResult BeamSearch::best_first() {
  for (auto& hypotheses : finished_) {
    std::stable_sort(hypotheses.begin(), hypotheses.end(),
                     [](const Hypothesis& x, const Hypothesis& y) { return x.score > y.score; });
    if (static_cast<int64_t>(hypotheses.size()) > options_.n_best) hypotheses.resize(options_.n_best);
  }
  return std::move(finished_);
}

}  // namespace

namespace {

// The second half of best_extensions: from each row's best per_row extensions [N*K, per_row]
// (log-probabilities and tokens), the best 2K of each block of K rows.
torch::Tensor best_of_row_bests(const torch::Tensor& row_log_probs, const torch::Tensor& row_tokens,
                                const torch::Tensor& alive_scores, int64_t beam, int64_t vocab) {
  const int64_t blocks = row_log_probs.size(0) / beam;
  const int64_t per_row = row_log_probs.size(1);
  torch::Tensor candidates = (row_log_probs.to(torch::kFloat64) + alive_scores).view({blocks, beam * per_row});
  auto [top_scores, top_positions] = candidates.topk(std::min<int64_t>(2 * beam, beam * per_row), /*dim=*/1);
  // Back to ids in [0, K*V): beam k = position / per_row, token from row_tokens.
  torch::Tensor top_beams = top_positions.div(per_row, "floor");
  const torch::Tensor block =
      torch::arange(blocks, torch::TensorOptions().dtype(torch::kInt64).device(row_log_probs.device()));
  torch::Tensor flat_rows = top_beams + block.unsqueeze(1) * beam;  // [N, 2K]
  torch::Tensor top_tokens = row_tokens.view({-1})
                                 .index_select(0, (flat_rows * per_row + top_positions.remainder(per_row)).view({-1}))
                                 .view(top_positions.sizes());
  // Scores and ids (exact in float64: ids < K * V) in one tensor, for one copy to the host.
  return torch::stack({top_scores, (top_beams * vocab + top_tokens).to(torch::kFloat64)});
}

}  // namespace

torch::Tensor best_extensions(const torch::Tensor& log_probs, const torch::Tensor& alive_scores, int64_t beam) {
  // The best 2K extensions of a sentence are among the best 2K of each of its rows: take those
  // per row in float32 first, then add the float64 running scores to [N*K, 2K] candidates only.
  const int64_t per_row = std::min<int64_t>(2 * beam, log_probs.size(1));
  auto [row_log_probs, row_tokens] = log_probs.topk(per_row, /*dim=*/1);  // [N*K, 2K]
  return best_of_row_bests(row_log_probs, row_tokens, alive_scores, beam, log_probs.size(1));
}

bool fuses_log_softmax(const torch::Device& device) {
  return kernels::run_on(device) && kernels::use_kernel(kernels::Operation::kLogSoftmax);
}

torch::Tensor best_extensions_of_logits(const torch::Tensor& logits, const torch::Tensor& alive_scores, int64_t beam,
                                        const SearchOptions& options) {
  RECORD_FUNCTION("nmt::top_log_softmax", std::vector<c10::IValue>());  // named in nmt_bench --profile traces
  const torch::Tensor z = logits.to(torch::kFloat32).contiguous();
  const int64_t rows = z.size(0), vocab = z.size(1);
  const int64_t per_row = std::min<int64_t>(2 * beam, vocab);
  std::vector<int64_t> banned{kPadId, kBosId};  // as ban_tokens (search.h)
  if (options.ban_unk) banned.push_back(kUnkId);
  torch::Tensor row_log_probs = torch::empty({rows, per_row}, torch::kFloat32);
  torch::Tensor row_tokens = torch::empty({rows, per_row}, torch::kInt64);
  at::parallel_for(0, rows, std::max<int64_t>(1, (int64_t{1} << 14) / vocab), [&](int64_t begin, int64_t end) {
    kernels::top_log_softmax_rows(z.data_ptr<float>() + begin * vocab, end - begin, vocab, per_row, banned.data(),
                                  static_cast<int64_t>(banned.size()),
                                  row_log_probs.data_ptr<float>() + begin * per_row,
                                  row_tokens.data_ptr<int64_t>() + begin * per_row);
  });
  return best_of_row_bests(row_log_probs, row_tokens, alive_scores, beam, vocab);
}

SearchResult beam_search(Ensemble model, const torch::Tensor& source, const torch::Tensor& lengths,
                         const SearchOptions& options, const torch::Tensor& prefix,
                         const BatchConstraints& constraints) {
  if (!constraints.empty() && static_cast<int64_t>(constraints.size()) != source.size(0)) {
    throw std::invalid_argument("beam_search: constraints for " + std::to_string(constraints.size()) +
                                " sentences in a batch of " + std::to_string(source.size(0)));
  }
  if (queues_work(source.device()) && !has_constraints(constraints)) {
    return beam_search_fixed_shape(std::move(model), source, lengths, options, prefix);
  }
  return BeamSearch(std::move(model), source, lengths, options, prefix, constraints).run();
}

}  // namespace nmt
