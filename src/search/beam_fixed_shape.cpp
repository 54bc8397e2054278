// Beam search as a GPU runs it: the rules of beam.cpp (which finish, which stay alive, when a
// sentence stops), applied on the device, so that the host never waits for a step. The batch
// keeps its B * K rows to the end; a sentence that has stopped goes on at -inf and
// changes nothing. Everything a step reads and writes stays put and is updated in place: the whole
// step (decoder step, the 2K best extensions, the selection of what finishes and the K alive beams,
// reordering) is one CUDA graph (util/cuda_graph.h), replayed until every sentence has stopped.
// The selection is one kernel (beam_select.h), a loop over the sentences on the CPU. Finished
// hypotheses go to a pool of 2K slots per sentence (K - 1 finished before a step, at most K in it),
// copied to the host once, at the end.
#include <torch/torch.h>
#ifdef NMT_WITH_CUDA
#include <c10/cuda/CUDAStream.h>
#endif

#include <algorithm>
#include <limits>

#include "search/beam_select.h"
#include "search/search.h"
#include "search/step_loop.h"
#include "text/special_tokens.h"
#include "util/cuda_graph.h"
#include "util/device_rules.h"
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
  void select(const torch::Tensor& best, int64_t vocab);
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
  // The selection's results (beam_select.h): per candidate [B * 2K], the row it extends, its token
  // and its pool row; per row [R], the row and token it continues with.
  torch::Tensor candidate_origin_, candidate_token_, candidate_pool_row_, next_origin_, next_token_;
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
  candidate_origin_ = torch::zeros({rows_ * 2}, integers);
  candidate_token_ = torch::zeros({rows_ * 2}, integers);
  candidate_pool_row_ = torch::zeros({rows_ * 2}, integers);
  next_origin_ = torch::zeros({rows_}, integers);
  next_token_ = torch::zeros({rows_}, integers);
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

  // The 2K best extensions of every sentence, best first: [2, B, W] scores and ids.
  const torch::Tensor best = best_extensions(allowed_tokens(out.log_probs, options_, row_prefix_, position),
                                             alive_scores_.view({rows_, 1}), beam_);
  select(best, out.log_probs.size(1));

  // The finishing extensions' tokens to their pool slots; the others to each sentence's last slot,
  // which is never read.
  const int64_t candidates = sentences_ * best.size(2);
  const torch::Tensor origin = candidate_origin_.narrow(0, 0, candidates);
  const torch::Tensor pool_row = candidate_pool_row_.narrow(0, 0, candidates);
  torch::Tensor tokens = history_.index_select(0, origin);  // [B*W, longest]
  tokens.index_copy_(1, column, candidate_token_.narrow(0, 0, candidates).view({-1, 1}));
  pool_tokens_.view({sentences_ * slots_, longest_}).index_copy_(0, pool_row, tokens);
  if (keep_attention_) {
    pool_attention_.view({sentences_ * slots_, longest_, -1})
        .index_copy_(0, pool_row, attention_history_.index_select(0, origin));
  }

  // The reordering for the next step.
  state_.copy_(out.state.index_select(next_origin_));
  history_.copy_(history_.index_select(0, next_origin_));
  history_.index_copy_(1, column, next_token_.view({-1, 1}));
  if (keep_attention_) attention_history_.copy_(attention_history_.index_select(0, next_origin_));
  previous_.copy_(next_token_);
  length_.add_(1);
  all_done_.copy_(stopped_.all());
}

// The selection of beam_select.h over every sentence: one kernel on a GPU, a loop on the CPU.
void FixedShapeBeam::select(const torch::Tensor& best, int64_t vocab) {
  const torch::Tensor numbers = best.contiguous();  // [2, B, W] float64
  BeamStep selection;
  selection.sentences = sentences_;
  selection.beam = beam_;
  selection.width = numbers.size(2);
  selection.vocab = vocab;
  selection.slots = slots_;
  selection.n_best = options_.n_best;
  selection.scores = numbers.data_ptr<double>();
  selection.ids = selection.scores + sentences_ * selection.width;
  selection.limit = limit_.data_ptr<int64_t>();
  selection.cap_penalty = cap_penalty_.data_ptr<double>();
  selection.length = length_.data_ptr<int64_t>();
  selection.penalty = penalty_.data_ptr<double>();
  selection.stopped = stopped_.data_ptr<bool>();
  selection.finished_count = finished_count_.data_ptr<int64_t>();
  selection.pool_numbers = pool_numbers_.data_ptr<double>();
  selection.candidate_origin = candidate_origin_.data_ptr<int64_t>();
  selection.candidate_token = candidate_token_.data_ptr<int64_t>();
  selection.candidate_pool_row = candidate_pool_row_.data_ptr<int64_t>();
  selection.alive_scores = alive_scores_.data_ptr<double>();
  selection.next_origin = next_origin_.data_ptr<int64_t>();
  selection.next_token = next_token_.data_ptr<int64_t>();
#ifdef NMT_WITH_CUDA
  if (queues_work(device_)) {
    select_beams_on_gpu(selection, c10::cuda::getCurrentCUDAStream(device_.index()).stream());
    return;
  }
#endif
  TORCH_CHECK(!queues_work(device_), "beam search: no selection for ", device_.str(), " in this build");
  for (int64_t b = 0; b < sentences_; ++b) select_sentence(selection, b);
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
