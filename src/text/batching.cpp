#include "text/batching.h"

#include <algorithm>
#include <numeric>
#include <random>

#include "text/special_tokens.h"
#include "util/runtime.h"

namespace nmt {

Batch Batch::to(const torch::Device& device) const {
  Batch moved = *this;
  moved.source = to_device(source, device);
  moved.target_input = to_device(target_input, device);
  moved.target_output = to_device(target_output, device);
  return moved;  // source_lengths stay on the CPU: the encoder reads them there
}

std::vector<std::vector<int64_t>> cut_batches(const std::vector<int64_t>& order,
                                              const std::function<PaddedLengths(int64_t)>& lengths, size_t budget,
                                              BatchCost cost) {
  std::vector<std::vector<int64_t>> batches;
  std::vector<int64_t> current;
  size_t longest_source = 0, longest_target = 0;
  for (const int64_t index : order) {
    const PaddedLengths item = lengths(index);
    const size_t source = std::max(longest_source, item.source), target = std::max(longest_target, item.target);
    const size_t size = current.size() + 1;
    const size_t batch_cost = cost == BatchCost::kPaddedTokens ? size * (source + target) : size;
    if (!current.empty() && batch_cost > budget) {
      batches.push_back(std::move(current));
      current.clear();
      longest_source = item.source, longest_target = item.target;
    } else {
      longest_source = source, longest_target = target;
    }
    current.push_back(index);
  }
  if (!current.empty()) batches.push_back(std::move(current));
  return batches;
}

namespace {

// Training batches: `order` cut within the token budget, each batch's examples in order of
// decreasing target length.
void cut_training_batches(const TokenCorpus& corpus, const std::vector<int64_t>& order, int batch_tokens,
                          std::vector<std::vector<int64_t>>& batches) {
  const auto lengths = [&](int64_t index) {
    return PaddedLengths{static_cast<size_t>(corpus.source_length(index)) + 1,
                         static_cast<size_t>(corpus.target_length(index)) + 1};
  };
  for (auto& batch : cut_batches(order, lengths, static_cast<size_t>(batch_tokens), BatchCost::kPaddedTokens)) {
    std::stable_sort(batch.begin(), batch.end(),
                     [&](int64_t a, int64_t b) { return corpus.target_length(a) > corpus.target_length(b); });
    batches.push_back(std::move(batch));
  }
}

}  // namespace

std::vector<std::vector<int64_t>> make_batches(const TokenCorpus& corpus, const std::vector<int64_t>& pairs,
                                               int batch_tokens, bool shuffle, uint64_t seed) {
  std::vector<int64_t> order = pairs;
  auto by_length = [&](int64_t a, int64_t b) {
    const int64_t source_a = corpus.source_length(a), source_b = corpus.source_length(b);
    if (source_a != source_b) return source_a < source_b;
    const int64_t target_a = corpus.target_length(a), target_b = corpus.target_length(b);
    if (target_a != target_b) return target_a < target_b;
    return a < b;
  };
  std::vector<std::vector<int64_t>> batches;
  if (!shuffle) {
    std::sort(order.begin(), order.end(), by_length);
    cut_training_batches(corpus, order, batch_tokens, batches);
    return batches;
  }
  std::mt19937_64 generator(seed);
  std::shuffle(order.begin(), order.end(), generator);
  // Window of roughly 100 batches: enough to sort lengths together, small enough to stay random.
  size_t total_tokens = 0;
  for (const int64_t pair : pairs) {
    total_tokens += static_cast<size_t>(corpus.source_length(pair) + corpus.target_length(pair) + 2);
  }
  const size_t mean_tokens = std::max<size_t>(1, total_tokens / std::max<size_t>(1, pairs.size()));
  const size_t window = std::max<size_t>(1, 100 * static_cast<size_t>(batch_tokens) / mean_tokens);
  for (size_t begin = 0; begin < order.size(); begin += window) {
    const size_t end = std::min(order.size(), begin + window);
    std::vector<int64_t> chunk(order.begin() + static_cast<std::ptrdiff_t>(begin),
                               order.begin() + static_cast<std::ptrdiff_t>(end));
    std::sort(chunk.begin(), chunk.end(), by_length);
    cut_training_batches(corpus, chunk, batch_tokens, batches);
  }
  std::shuffle(batches.begin(), batches.end(), generator);
  return batches;
}

std::pair<torch::Tensor, torch::Tensor> pad_sequences(const std::vector<const std::vector<int64_t>*>& sequences) {
  size_t max_length = 0;
  for (const auto* sequence : sequences) max_length = std::max(max_length, sequence->size());
  const auto batch_size = static_cast<int64_t>(sequences.size());
  torch::Tensor padded = torch::full({batch_size, static_cast<int64_t>(max_length)}, kPadId, torch::kInt64);
  torch::Tensor lengths = torch::empty({batch_size}, torch::kInt64);
  auto padded_access = padded.accessor<int64_t, 2>();
  auto lengths_access = lengths.accessor<int64_t, 1>();
  for (int64_t b = 0; b < batch_size; ++b) {
    const auto& sequence = *sequences[b];
    for (size_t t = 0; t < sequence.size(); ++t) padded_access[b][static_cast<int64_t>(t)] = sequence[t];
    lengths_access[b] = static_cast<int64_t>(sequence.size());
  }
  return {padded, lengths};
}

Batch collate(const TokenCorpus& corpus, const std::vector<int64_t>& indices, bool reverse_target) {
  std::vector<std::vector<int64_t>> sources, inputs, outputs;
  for (int64_t index : indices) {
    // The source ends with EOS: the encoder sees where the sentence ends, and attention always
    // has a real position to attend to.
    std::vector<int64_t> source = corpus.source(index);
    source.push_back(kEosId);
    sources.push_back(std::move(source));
    std::vector<int64_t> target = corpus.target(index);
    if (reverse_target) std::reverse(target.begin(), target.end());
    std::vector<int64_t> input{kBosId};
    input.insert(input.end(), target.begin(), target.end());
    std::vector<int64_t> output(target.begin(), target.end());
    output.push_back(kEosId);
    inputs.push_back(std::move(input));
    outputs.push_back(std::move(output));
  }
  std::vector<const std::vector<int64_t>*> source_pointers, input_pointers, output_pointers;
  Batch batch;
  for (size_t i = 0; i < inputs.size(); ++i) {
    source_pointers.push_back(&sources[i]);
    input_pointers.push_back(&inputs[i]);
    output_pointers.push_back(&outputs[i]);
    batch.target_tokens += static_cast<int64_t>(outputs[i].size());
  }
  std::tie(batch.source, batch.source_lengths) = pad_sequences(source_pointers);
  batch.target_input = pad_sequences(input_pointers).first;
  batch.target_output = pad_sequences(output_pointers).first;
  return batch;
}

}  // namespace nmt
