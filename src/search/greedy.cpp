// Greedy search: at each step the most probable token, for the whole batch at once; sampling: a
// token drawn from the step's distribution, in the same loop. On the CPU,
// rows of finished sentences are dropped from the batch so the remaining steps cost less; on a GPU
// the batch keeps its shape and the host does not wait for the steps (greedy_search_fixed_shape).
#include <ATen/CPUGeneratorImpl.h>
#include <torch/torch.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <limits>
#include <numeric>
#include <stdexcept>

#include "search/search.h"
#include "search/step_loop.h"
#include "text/special_tokens.h"
#include "util/cuda_graph.h"
#include "util/device_rules.h"
#include "util/runtime.h"

namespace nmt {

double length_penalty(int64_t length, double alpha) {
  return alpha == 0 ? 1.0 : std::pow((5.0 + static_cast<double>(length)) / 6.0, alpha);
}

int64_t max_output_length(int64_t source_length, const SearchOptions& options) {
  const auto by_ratio = static_cast<int64_t>(options.max_length_ratio * static_cast<double>(source_length)) + 10;
  return std::max<int64_t>(1, std::min<int64_t>(by_ratio, options.max_length));
}

std::vector<int64_t> max_output_lengths(const torch::Tensor& lengths, const SearchOptions& options) {
  const torch::Tensor lengths_cpu = lengths.to(torch::kCPU, torch::kInt64).contiguous();
  const auto* length = lengths_cpu.data_ptr<int64_t>();
  std::vector<int64_t> limits(static_cast<size_t>(lengths_cpu.numel()));
  for (size_t b = 0; b < limits.size(); ++b) limits[b] = max_output_length(length[b], options);
  return limits;
}

torch::Tensor ban_tokens(torch::Tensor log_probs, const SearchOptions& options) {
  const float minus_infinity = -std::numeric_limits<float>::infinity();
  log_probs.select(1, kPadId).fill_(minus_infinity);
  log_probs.select(1, kBosId).fill_(minus_infinity);
  if (options.ban_unk) log_probs.select(1, kUnkId).fill_(minus_infinity);
  return log_probs;
}

torch::Tensor allowed_tokens(torch::Tensor log_probs, const SearchOptions& options, const torch::Tensor& prefix,
                             const torch::Tensor& step) {
  if (!prefix.defined() || prefix.size(1) == 0) return ban_tokens(log_probs, options);
  const int64_t width = prefix.size(1);
  const torch::Tensor token = prefix.index_select(1, step.clamp_max(width - 1).view({1}));  // [R, 1]
  const torch::Tensor forced = token.ne(kPadId).logical_and_(step.lt(width));               // [R, 1]
  const torch::Tensor model_log_prob = log_probs.gather(1, token);
  ban_tokens(log_probs, options);
  log_probs.masked_fill_(forced, -std::numeric_limits<float>::infinity());
  log_probs.scatter_(1, token, torch::where(forced, model_log_prob, log_probs.gather(1, token)));
  return log_probs;
}

// Greedy search on a GPU: the batch keeps its shape, finished rows go on with padding, and the
// host never waits for a step. The step works in place on tensors that stay put (the state, the
// previous tokens, the running sums), so that it can be captured once as a CUDA graph and replayed
// (util/cuda_graph.h); whether every row has finished is read two steps late
// (run_fixed_shape_steps), so the host queues the next step while the GPU runs this one. Same
// results as the CPU's loop, which drops finished rows instead.
SearchResult greedy_search_fixed_shape(Ensemble model, const torch::Tensor& source, const torch::Tensor& lengths,
                                       const SearchOptions& options, const torch::Tensor& prefix) {
  const int64_t batch_size = source.size(0);
  const torch::Device device = source.device();
  const SearchGraphs graphs = thread_search_graphs(device);
  const GpuSideStream stream(graphs.stream);  // graphs are captured on a stream of their own
  const Ensemble::Source encoded = model.encode(source, lengths);
  Ensemble::State state = model.initial_state(encoded);
  const torch::Tensor lengths_cpu = lengths.to(torch::kCPU, torch::kInt64);
  const std::vector<int64_t> limits = max_output_lengths(lengths, options);
  const int64_t longest = *std::max_element(limits.begin(), limits.end());
  const torch::Tensor limit = to_device(torch::tensor(limits, torch::kInt64), device);
  const auto on_device = torch::TensorOptions().device(device);
  torch::Tensor finished = torch::zeros({batch_size}, on_device.dtype(torch::kBool));
  torch::Tensor all_finished = torch::zeros({}, on_device.dtype(torch::kBool));
  torch::Tensor log_probability = torch::zeros({batch_size}, on_device.dtype(torch::kFloat64));
  torch::Tensor length = torch::zeros({batch_size}, on_device.dtype(torch::kInt64));  // tokens incl. EOS
  torch::Tensor steps_taken = torch::zeros({}, on_device.dtype(torch::kInt64));
  torch::Tensor previous = torch::full({batch_size}, kBosId, on_device.dtype(torch::kInt64));
  const bool keep_attention = options.return_attention && model.has_attention();
  // Every step's tokens [B, longest] and weights [B, longest, S] (when asked for), written in place.
  // Made here, not in the step: a graph that records the step's first call would clear them again
  // at every replay.
  torch::Tensor tokens = torch::full({batch_size, longest}, kPadId, on_device.dtype(torch::kInt64));
  const torch::Tensor attention =
      keep_attention ? torch::zeros({batch_size, longest, source.size(1)}, on_device.dtype(torch::kFloat32))
                     : torch::Tensor();
  auto step = [&] {
    Ensemble::Step out = model.step(previous, state, encoded);
    auto [best_log_probs, best_tokens] = allowed_tokens(out.log_probs, options, prefix, steps_taken).max(/*dim=*/1);
    best_tokens.masked_fill_(finished, kPadId);
    log_probability.add_(best_log_probs.to(torch::kFloat64).masked_fill_(finished, 0));
    length.add_(finished.logical_not());
    const torch::Tensor position = steps_taken.view({1});  // this step's column
    tokens.index_copy_(1, position, best_tokens.unsqueeze(1));
    if (keep_attention) attention.index_copy_(1, position, out.attention.unsqueeze(1).to(torch::kFloat32));
    steps_taken.add_(1);
    finished.logical_or_(best_tokens.eq(kEosId)).logical_or_(limit.le(steps_taken));
    all_finished.copy_(finished.all());
    previous.copy_(best_tokens);
    state.copy_(out.state);
  };
  // The step's position is a host number a graph would freeze: local-m attention runs without one.
  StepGraph graph(cuda_graphs_enabled(device) && !model.uses_step_position(), graphs.pool, graphs.warm, graphs.keeper);
  const int64_t steps = run_fixed_shape_steps(graph, step, all_finished, longest, state);
  // One copy back of everything.
  const torch::Tensor tokens_cpu = tokens.narrow(1, 0, steps).cpu();  // [B, steps]
  const torch::Tensor log_probability_cpu = log_probability.cpu();
  const torch::Tensor length_cpu = length.cpu();
  const torch::Tensor attention_cpu = keep_attention ? attention.narrow(1, 0, steps).cpu() : torch::Tensor();
  const auto token_at = tokens_cpu.accessor<int64_t, 2>();
  const auto log_probability_of = log_probability_cpu.accessor<double, 1>();
  const auto length_of = length_cpu.accessor<int64_t, 1>();
  const auto source_length_of = lengths_cpu.accessor<int64_t, 1>();
  SearchResult results(static_cast<size_t>(batch_size), std::vector<Hypothesis>(1));
  for (int64_t b = 0; b < batch_size; ++b) {
    Hypothesis& hypothesis = results[static_cast<size_t>(b)][0];
    const int64_t hypothesis_steps = length_of[b];
    for (int64_t t = 0; t < hypothesis_steps; ++t) {
      if (token_at[b][t] != kEosId) hypothesis.tokens.push_back(token_at[b][t]);
    }
    hypothesis.log_probability = log_probability_of[b];
    hypothesis.score = hypothesis.log_probability / length_penalty(hypothesis_steps, options.length_penalty);
    if (keep_attention) {
      hypothesis.attention = attention_cpu[b].narrow(0, 0, hypothesis_steps).narrow(1, 0, source_length_of[b]);
    }
  }
  return results;
}

namespace {

// The token each row takes next from its log-probabilities [R, V] (pad and BOS banned): the chosen
// tokens [R] and their log-probabilities [R].
using ChooseTokens = std::function<std::pair<torch::Tensor, torch::Tensor>(const torch::Tensor& log_probs)>;

// One token per row and step, chosen by `choose`, rows of finished sentences dropped from the batch.
SearchResult decode_token_by_token(Ensemble& model, const torch::Tensor& source, const torch::Tensor& lengths,
                                   const SearchOptions& options, const torch::Tensor& prefix,
                                   const ChooseTokens& choose) {
  const int64_t batch_size = source.size(0);
  const torch::Device device = source.device();
  Ensemble::Source encoded = model.encode(source, lengths);
  Ensemble::State state = model.initial_state(encoded);
  auto lengths_cpu = lengths.cpu();

  std::vector<int64_t> active(batch_size);  // sentence of each row
  std::iota(active.begin(), active.end(), 0);
  const std::vector<int64_t> limit = max_output_lengths(lengths, options);
  SearchResult results(batch_size, std::vector<Hypothesis>(1));
  std::vector<std::vector<torch::Tensor>> attention_rows(batch_size);
  torch::Tensor previous =
      torch::full({batch_size}, kBosId, torch::TensorOptions().dtype(torch::kInt64).device(device));
  torch::Tensor row_prefix = prefix;  // of the rows still in the batch

  for (int64_t t = 0; !active.empty(); ++t) {
    Ensemble::Step out = model.step(previous, state, encoded);
    // The step as a tensor only where a prefix reads it.
    const torch::Tensor step = row_prefix.defined() ? torch::full({}, t, row_prefix.options()) : torch::Tensor();
    auto [chosen_log_probs, chosen_tokens] = choose(allowed_tokens(out.log_probs, options, row_prefix, step));  // [R]
    torch::Tensor tokens_cpu = chosen_tokens.cpu();
    torch::Tensor log_probs_cpu = chosen_log_probs.to(torch::kFloat64).cpu();
    torch::Tensor weights_cpu =
        (options.return_attention && out.attention.defined()) ? out.attention.cpu() : torch::Tensor();
    const auto* token_data = tokens_cpu.data_ptr<int64_t>();
    const auto* log_prob_data = log_probs_cpu.data_ptr<double>();

    std::vector<int64_t> keep_rows, still_active;
    for (size_t row = 0; row < active.size(); ++row) {
      const int64_t sentence = active[row];
      Hypothesis& hypothesis = results[sentence][0];
      hypothesis.log_probability += log_prob_data[row];
      if (weights_cpu.defined()) attention_rows[sentence].push_back(weights_cpu[static_cast<int64_t>(row)]);
      const bool ended = token_data[row] == kEosId;
      if (!ended) hypothesis.tokens.push_back(token_data[row]);
      if (ended || t + 1 >= limit[sentence]) {
        hypothesis.score = hypothesis.log_probability / length_penalty(t + 1, options.length_penalty);
      } else {
        keep_rows.push_back(static_cast<int64_t>(row));
        still_active.push_back(sentence);
      }
    }
    if (still_active.empty()) break;
    if (still_active.size() != active.size()) {
      torch::Tensor index = torch::tensor(keep_rows, torch::kInt64).to(device);
      encoded = encoded.index_select(index);
      out.state = out.state.index_select(index);
      chosen_tokens = chosen_tokens.index_select(0, index);
      if (row_prefix.defined()) row_prefix = row_prefix.index_select(0, index);
    }
    active = std::move(still_active);
    state = out.state;
    previous = chosen_tokens;
  }
  for (int64_t b = 0; b < batch_size; ++b) {
    if (!attention_rows[b].empty()) {
      results[b][0].attention = torch::stack(attention_rows[b]).narrow(1, 0, lengths_cpu[b].item<int64_t>());
    }
  }
  return results;
}

// Sampling's draw from log-probabilities [R, V]: tempered, cut to the top k and the top p, then one
// token per row from a CPU generator; returns the model's own log-probabilities of the tokens.
class TokenSampler {
 public:
  explicit TokenSampler(const SearchOptions& options)
      : options_(options),
        generator_(at::make_generator<at::CPUGeneratorImpl>(
            static_cast<uint64_t>(options.seed) * 0x9E3779B97F4A7C15ULL + options.sampling_stream)) {}

  std::pair<torch::Tensor, torch::Tensor> operator()(const torch::Tensor& log_probs) {
    torch::Tensor weights = log_probs.to(torch::kCPU, torch::kFloat32) / options_.sampling_temperature;  // [R, V]
    const float minus_infinity = -std::numeric_limits<float>::infinity();
    const int64_t vocab = weights.size(1);
    if (options_.sampling_topk > 0 && options_.sampling_topk < vocab) {
      const torch::Tensor kth = std::get<0>(weights.topk(options_.sampling_topk, 1)).narrow(1, -1, 1);  // [R, 1]
      weights.masked_fill_(weights < kth, minus_infinity);
    }
    if (options_.sampling_topp < 1.0) {
      auto [sorted, order] = weights.sort(1, /*descending=*/true);
      const torch::Tensor probabilities = torch::softmax(sorted, 1);
      // Past the fewest tokens that reach p: the mass before a token already reaches it. The most
      // probable token always stays.
      const torch::Tensor past = (probabilities.cumsum(1) - probabilities) >= options_.sampling_topp;
      weights.scatter_(1, order, sorted.masked_fill(past, minus_infinity));
    }
    const torch::Tensor tokens =
        torch::multinomial(torch::softmax(weights, 1), 1, /*replacement=*/false, generator_).to(log_probs.device());
    return {log_probs.gather(1, tokens).squeeze(1), tokens.squeeze(1)};
  }

 private:
  const SearchOptions& options_;
  at::Generator generator_;
};

}  // namespace

SearchResult greedy_search(Ensemble model, const torch::Tensor& source, const torch::Tensor& lengths,
                           const SearchOptions& options, const torch::Tensor& prefix) {
  if (queues_work(source.device())) return greedy_search_fixed_shape(model, source, lengths, options, prefix);
  return decode_token_by_token(model, source, lengths, options, prefix, [](const torch::Tensor& log_probs) {
    auto [best_log_probs, best_tokens] = log_probs.max(/*dim=*/1);
    return std::make_pair(best_log_probs, best_tokens);
  });
}

SearchResult sample_search(Ensemble model, const torch::Tensor& source, const torch::Tensor& lengths,
                           const SearchOptions& options, const torch::Tensor& prefix) {
  TokenSampler sampler(options);
  return decode_token_by_token(model, source, lengths, options, prefix, std::ref(sampler));
}

SearchResult search(Ensemble model, const torch::Tensor& source, const torch::Tensor& lengths,
                    const SearchOptions& options, const torch::Tensor& prefix, const BatchConstraints& constraints) {
  const bool constrained = has_constraints(constraints);
  if (options.samples()) {
    if (constrained) throw std::invalid_argument("terminology constraints need beam search, not sampling");
    return sample_search(model, source, lengths, options, prefix);
  }
  return options.beam_size == 1 && !constrained ? greedy_search(model, source, lengths, options, prefix)
                                                : beam_search(model, source, lengths, options, prefix, constraints);
}

}  // namespace nmt
