// Beam search as a GPU runs it: the rules of beam.cpp (which finish, which stay alive, when a
// sentence stops), applied by tensor operations on the device, so that the host never waits for a
// step. The batch keeps its B * K rows to the end; a sentence that has stopped goes on at -inf and
// changes nothing. Everything a step reads and writes stays put and is updated in place: the whole
// step (decoder step, the 2K best extensions, finishing, selecting the K alive beams, reordering)
// is one CUDA graph (util/cuda_graph.h), replayed until every sentence has stopped. Finished
// hypotheses go to a pool of 2K slots per sentence (K - 1 finished before a step, at most K in it),
// copied to the host once, at the end.
#include <torch/torch.h>

#include <algorithm>
#include <limits>

#include "search/search.h"
#include "search/step_loop.h"
#include "text/special_tokens.h"
#include "util/cuda_graph.h"
#include "util/runtime.h"

namespace nmt {

namespace {

constexpr double kNoScore = -std::numeric_limits<double>::infinity();

class FixedShapeBeam {
 public:
  FixedShapeBeam(Ensemble model, const torch::Tensor& source, const torch::Tensor& lengths,
                 const SearchOptions& options, const torch::Tensor& prefix);
  SearchResult run();

 private:
  void step();
  SearchResult collect(int64_t steps) const;

  Ensemble model_;
  const SearchOptions& options_;
  const int64_t beam_, sentences_, rows_;
  const torch::Device device_;
  const torch::Tensor lengths_cpu_;
  int64_t longest_ = 0;  // the longest cap: columns of the histories
  int64_t slots_ = 0;    // finished-pool slots per sentence, plus one that takes what is dropped
  bool keep_attention_ = false;
  Ensemble::Source encoded_;
  Ensemble::State state_;
  // Per sentence [B]: length cap, lp(cap), stopped, finished count; [B, K]: the alive beams'
  // cumulative log-probabilities; [R]: each row's last token; per length, lp(length).
  torch::Tensor limit_, cap_penalty_, stopped_, finished_count_, alive_scores_, previous_, penalty_;
  // Constants: each sentence's first row [B, 1], candidate ranks [1, 2K], each row's own index [B, K],
  // each sentence's first pool slot [B, 1].
  torch::Tensor first_row_, rank_, own_rows_, first_slot_;
  torch::Tensor length_;             // [] int64: the length of the hypotheses this step makes (steps so far + 1)
  torch::Tensor all_done_;           // [] bool
  torch::Tensor row_prefix_;         // [R, P] each row's target prefix (search.h), or undefined
  torch::Tensor history_;            // [R, longest] int64: each alive row's tokens
  torch::Tensor attention_history_;  // [R, longest, S] (return_attention)
  // The pool: [B, slots, 3] float64 normalized score (-inf: empty), log-probability and length
  // (counting EOS; exact in float64); tokens [B, slots, longest]; attention [B, slots, longest, S].
  torch::Tensor pool_numbers_, pool_tokens_, pool_attention_;
};

FixedShapeBeam::FixedShapeBeam(Ensemble model, const torch::Tensor& source, const torch::Tensor& lengths,
                               const SearchOptions& options, const torch::Tensor& prefix)
    : model_(std::move(model)),
      options_(options),
      beam_(options.beam_size),
      sentences_(source.size(0)),
      rows_(source.size(0) * options.beam_size),
      device_(source.device()),
      lengths_cpu_(lengths.to(torch::kCPU, torch::kInt64)) {
  const auto on_device = torch::TensorOptions().device(device_);
  const auto integers = on_device.dtype(torch::kInt64), doubles = on_device.dtype(torch::kFloat64);
  encoded_ = model_.encode(source, lengths);
  state_ = model_.initial_state(encoded_);
  const torch::Tensor expand = torch::arange(sentences_, integers).repeat_interleave(beam_);  // sentence b: rows bK..
  encoded_ = encoded_.index_select(expand);
  state_ = state_.index_select(expand);
  if (prefix.defined()) row_prefix_ = prefix.index_select(0, expand);

  const std::vector<int64_t> limits = max_output_lengths(lengths, options);
  longest_ = *std::max_element(limits.begin(), limits.end());
  std::vector<double> penalties(static_cast<size_t>(longest_ + 1)), cap_penalties;
  for (int64_t length = 0; length <= longest_; ++length) {
    penalties[static_cast<size_t>(length)] = length_penalty(length, options.length_penalty);
  }
  for (const int64_t limit : limits) cap_penalties.push_back(length_penalty(limit, options.length_penalty));
  limit_ = to_device(torch::tensor(limits, torch::kInt64), device_);
  penalty_ = to_device(torch::tensor(penalties, torch::kFloat64), device_);
  cap_penalty_ = to_device(torch::tensor(cap_penalties, torch::kFloat64), device_);

  stopped_ = torch::zeros({sentences_}, on_device.dtype(torch::kBool));
  all_done_ = torch::zeros({}, on_device.dtype(torch::kBool));
  finished_count_ = torch::zeros({sentences_}, integers);
  alive_scores_ = torch::full({sentences_, beam_}, kNoScore, doubles);
  alive_scores_.select(1, 0).fill_(0.0);  // at the start only beam 0 is real
  previous_ = torch::full({rows_}, kBosId, integers);
  length_ = torch::ones({}, integers);
  history_ = torch::full({rows_, longest_}, kPadId, integers);
  slots_ = 2 * beam_ + 1;
  pool_numbers_ = torch::zeros({sentences_, slots_, 3}, doubles);
  pool_numbers_.select(2, 0).fill_(kNoScore);
  first_row_ = torch::arange(sentences_, integers).mul_(beam_).unsqueeze(1);
  rank_ = torch::arange(2 * beam_, integers).unsqueeze(0);
  own_rows_ = torch::arange(rows_, integers).view({sentences_, beam_});
  first_slot_ = torch::arange(sentences_, integers).mul_(slots_).unsqueeze(1);
  pool_tokens_ = torch::full({sentences_, slots_, longest_}, kPadId, integers);
  keep_attention_ = options.return_attention && model_.has_attention();
  if (keep_attention_) {
    const int64_t source_length = source.size(1);
    attention_history_ = torch::zeros({rows_, longest_, source_length}, on_device.dtype(torch::kFloat32));
    pool_attention_ = torch::zeros({sentences_, slots_, longest_, source_length}, attention_history_.options());
  }
}

// One step, in place. The column of the step's token in the histories is length_ - 1.
void FixedShapeBeam::step() {
  const torch::Tensor position = length_ - 1;
  const torch::Tensor column = position.view({1});
  Ensemble::Step out = model_.step(previous_, state_, encoded_);
  if (keep_attention_) attention_history_.index_copy_(1, column, out.attention.unsqueeze(1).to(torch::kFloat32));

  // The 2K best extensions of every sentence, best first: [B, W] scores, rows they extend, tokens.
  const torch::Tensor best = best_extensions(allowed_tokens(out.log_probs, options_, row_prefix_, position),
                                             alive_scores_.view({rows_, 1}), beam_);
  const torch::Tensor scores = best[0];
  const torch::Tensor ids = best[1].to(torch::kInt64);
  const int64_t vocab = out.log_probs.size(1), width = scores.size(1);
  const torch::Tensor origin = ids.div(vocab, "floor").add_(first_row_);
  const torch::Tensor token = ids.remainder(vocab);

  // Of the real extensions of a sentence still going, those ending in EOS, or at its cap, finish
  // if ranked within the top K; the first K others stay alive.
  const torch::Tensor real = scores.gt(kNoScore).logical_and_(stopped_.logical_not().unsqueeze(1));  // [B, W]
  const torch::Tensor is_eos = token.eq(kEosId);
  const torch::Tensor at_cap = limit_.le(length_);  // [B]
  const torch::Tensor ends = is_eos.logical_or(at_cap.unsqueeze(1));
  const torch::Tensor finishing = real.logical_and(ends).logical_and_(rank_.narrow(1, 0, width).lt(beam_));
  const torch::Tensor eligible = real.logical_and_(ends.logical_not());
  const torch::Tensor alive_rank = eligible.cumsum(1).sub_(1);
  const torch::Tensor alive = eligible.logical_and(alive_rank.lt(beam_));

  // Finishing extensions to the pool, in rank order after the sentence's earlier ones; the others
  // to the last slot, which is never read.
  const torch::Tensor slot = torch::where(finishing, finishing.cumsum(1).sub_(1).add_(finished_count_.unsqueeze(1)),
                                          torch::Scalar(slots_ - 1));  // [B, W]
  const torch::Tensor numbers = torch::stack(
      {scores / penalty_.index_select(0, length_.view({1})), scores, length_.to(torch::kFloat64).expand_as(scores)}, 2);
  pool_numbers_.scatter_(1, slot.unsqueeze(2).expand({-1, -1, 3}), numbers);
  const torch::Tensor pool_row = (slot + first_slot_).view({-1});
  torch::Tensor tokens = history_.index_select(0, origin.view({-1}));  // [B*W, longest]
  tokens.index_copy_(1, column, token.masked_fill(is_eos, kPadId).view({-1, 1}));
  pool_tokens_.view({sentences_ * slots_, longest_}).index_copy_(0, pool_row, tokens);
  if (keep_attention_) {
    pool_attention_.view({sentences_ * slots_, longest_, -1})
        .index_copy_(0, pool_row, attention_history_.index_select(0, origin.view({-1})));
  }
  finished_count_.add_(finishing.sum(1));

  // The K alive beams [B, K] (score, row, token, exact in float64); fewer than K: copies of the
  // first at -inf, which never win.
  const torch::Tensor place = torch::where(alive, alive_rank, torch::Scalar(beam_));
  torch::Tensor next = torch::full({sentences_, beam_ + 1, 3}, kNoScore, scores.options());
  next.scatter_(1, place.unsqueeze(2).expand({-1, -1, 3}),
                torch::stack({scores, origin.to(torch::kFloat64), token.to(torch::kFloat64)}, 2));
  next = next.narrow(1, 0, beam_);
  const torch::Tensor count = alive.sum(1, /*keepdim=*/true);        // [B, 1]
  const torch::Tensor filler = rank_.narrow(1, 0, beam_).ge(count);  // [B, K]
  const torch::Tensor first = next.narrow(1, 0, 1);                  // [B, 1, 3]
  const torch::Tensor next_scores = next.select(2, 0);               // -inf where filler
  torch::Tensor next_origin = torch::where(filler, first.select(2, 1), next.select(2, 1)).to(torch::kInt64);
  torch::Tensor next_token = torch::where(filler, first.select(2, 2), next.select(2, 2)).to(torch::kInt64);

  // A sentence stops at its cap, with no alive beam, with K finished, or when no alive beam can
  // beat its n-th best finished one (beam.cpp, sentence_done).
  const int64_t n_best = options_.n_best;
  const torch::Tensor finished_scores = pool_numbers_.narrow(1, 0, slots_ - 1).select(2, 0);
  const torch::Tensor nth_best = std::get<0>(finished_scores.topk(n_best, 1)).select(1, n_best - 1);
  const torch::Tensor beaten =
      finished_count_.ge(n_best).logical_and_(nth_best.ge(next_scores.select(1, 0) / cap_penalty_));
  stopped_.logical_or_(
      at_cap.logical_or(count.squeeze(1).eq(0)).logical_or_(finished_count_.ge(beam_)).logical_or_(beaten));

  // Rows of stopped sentences continue themselves at -inf; then the reordering for the next step.
  const torch::Tensor stop_rows = stopped_.unsqueeze(1);
  next_origin = torch::where(stop_rows, own_rows_, next_origin).view({-1});
  next_token = next_token.masked_fill_(stop_rows, kPadId).view({-1});
  alive_scores_.copy_(next_scores.masked_fill(stop_rows, kNoScore));
  state_.copy_(out.state.index_select(next_origin));
  history_.copy_(history_.index_select(0, next_origin));
  history_.index_copy_(1, column, next_token.view({-1, 1}));
  if (keep_attention_) attention_history_.copy_(attention_history_.index_select(0, next_origin));
  previous_.copy_(next_token);
  length_.add_(1);
  all_done_.copy_(stopped_.all());
}

SearchResult FixedShapeBeam::run() {
  const SearchGraphs graphs = thread_search_graphs(device_);
  const GpuSideStream stream(graphs.stream);  // graphs are captured on a stream of their own
  // The step's position is a host number a graph would freeze: local-m attention runs without one.
  StepGraph graph(cuda_graphs_enabled(device_) && !model_.uses_step_position(), graphs.pool, graphs.warm,
                  graphs.keeper);
  const int64_t steps = run_fixed_shape_steps(
      graph, [this] { step(); }, all_done_, longest_, state_);
  return collect(steps);
}

// The pool to the host, each sentence's n-best first.
SearchResult FixedShapeBeam::collect(int64_t steps) const {
  const torch::Tensor count_cpu = finished_count_.cpu(), numbers_cpu = pool_numbers_.cpu();
  const torch::Tensor tokens_cpu = pool_tokens_.narrow(2, 0, steps).cpu();
  const torch::Tensor attention = keep_attention_ ? pool_attention_.narrow(2, 0, steps).cpu() : torch::Tensor();
  const auto count = count_cpu.accessor<int64_t, 1>();
  const auto numbers = numbers_cpu.accessor<double, 3>();
  const auto tokens = tokens_cpu.accessor<int64_t, 3>();
  const auto source_length = lengths_cpu_.accessor<int64_t, 1>();
  SearchResult results(static_cast<size_t>(sentences_));
  for (int64_t b = 0; b < sentences_; ++b) {
    std::vector<Hypothesis>& hypotheses = results[static_cast<size_t>(b)];
    for (int64_t s = 0; s < count[b]; ++s) {
      Hypothesis hypothesis;
      hypothesis.score = numbers[b][s][0];
      hypothesis.log_probability = numbers[b][s][1];
      const auto length = static_cast<int64_t>(numbers[b][s][2]);
      for (int64_t t = 0; t < length && tokens[b][s][t] != kPadId; ++t) hypothesis.tokens.push_back(tokens[b][s][t]);
      if (keep_attention_)
        hypothesis.attention = attention[b][s].narrow(0, 0, length).narrow(1, 0, source_length[b]).clone();
      hypotheses.push_back(std::move(hypothesis));
    }
    std::stable_sort(hypotheses.begin(), hypotheses.end(),
                     [](const Hypothesis& x, const Hypothesis& y) { return x.score > y.score; });
    if (static_cast<int64_t>(hypotheses.size()) > options_.n_best) hypotheses.resize(options_.n_best);
  }
  return results;
}

}  // namespace

SearchResult beam_search_fixed_shape(Ensemble model, const torch::Tensor& source, const torch::Tensor& lengths,
                                     const SearchOptions& options, const torch::Tensor& prefix) {
  return FixedShapeBeam(std::move(model), source, lengths, options, prefix).run();
}

}  // namespace nmt
