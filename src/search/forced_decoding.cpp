#include "search/forced_decoding.h"

#include <torch/torch.h>

#include <algorithm>
#include <numeric>

#include "search/search.h"
#include "text/batching.h"
#include "text/special_tokens.h"

namespace nmt {
namespace {

// The ensemble's log-probabilities of `output` [B, T] (padded with kPadId) after `input` [B, T]
// (BOS first), each member teacher-forced: [B, T], 0 at padding.
torch::Tensor token_log_probabilities(Ensemble& model, const torch::Tensor& source, const torch::Tensor& lengths,
                                      const torch::Tensor& input, const torch::Tensor& output) {
  torch::Tensor sum;
  for (Seq2Seq member : model.members()) {  // a handle: its modules run non-const
    const EncodedSource encoded = member->encode(source, lengths);
    const DecoderOutput decoded = member->decoder->forward(input, encoded);
    const int64_t size = decoded.attentional.size(2);
    const torch::Tensor positions = decoded.attentional.reshape({-1, size});  // [B * T, H]
    const torch::Tensor wanted = output.reshape({-1, 1});
    std::vector<torch::Tensor> chunks;
    for (int64_t first = 0; first < positions.size(0); first += kForcedRows) {
      const int64_t count = std::min(kForcedRows, positions.size(0) - first);
      const torch::Tensor logits = member->decoder->output_logits(positions.narrow(0, first, count));
      chunks.push_back(log_softmax_rows(logits).gather(1, wanted.narrow(0, first, count)));
    }
    const torch::Tensor member_log_probs = torch::cat(chunks).view(output.sizes());
    sum = sum.defined() ? sum + member_log_probs : member_log_probs;
  }
  // The mean of the members' log-probabilities, as Ensemble::step scores the searches' steps.
  const torch::Tensor mean = model.members().size() > 1 ? sum / static_cast<double>(model.members().size()) : sum;
  return mean.masked_fill(output.eq(kPadId), 0.0);
}

}  // namespace

std::vector<ForcedScore> force_decode(Ensemble model, const std::vector<std::vector<int64_t>>& sources,
                                      const std::vector<std::vector<int64_t>>& targets, double alpha,
                                      int64_t batch_size, const torch::Device& device) {
  TORCH_CHECK(sources.size() == targets.size(), "force_decode: one target per source");
  TORCH_CHECK(batch_size >= 1, "force_decode: batch_size must be at least 1");
  std::vector<ForcedScore> scores(sources.size());
  torch::InferenceMode inference_mode;
  const bool was_training = model.is_training();
  if (was_training) model.train(false);  // as the translator: a model in eval mode is left alone
  // Longest source first (then longest target): similar lengths share a batch.
  std::vector<int64_t> order(sources.size());
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](int64_t a, int64_t b) {
    return std::make_pair(sources[a].size(), targets[a].size()) > std::make_pair(sources[b].size(), targets[b].size());
  });
  // A right-to-left model reads the target backwards; its token scores come back in text order.
  const bool backwards = model.members().front()->options().reverse_target;
  for (size_t first = 0; first < order.size(); first += static_cast<size_t>(batch_size)) {
    const size_t count = std::min(static_cast<size_t>(batch_size), order.size() - first);
    std::vector<std::vector<int64_t>> inputs(count), outputs(count);
    std::vector<const std::vector<int64_t>*> batch_sources, batch_inputs, batch_outputs;
    for (size_t row = 0; row < count; ++row) {
      std::vector<int64_t> target = targets[static_cast<size_t>(order[first + row])];
      if (backwards) std::reverse(target.begin(), target.end());
      inputs[row] = {kBosId};
      inputs[row].insert(inputs[row].end(), target.begin(), target.end());
      outputs[row] = target;
      outputs[row].push_back(kEosId);
      batch_sources.push_back(&sources[static_cast<size_t>(order[first + row])]);
      batch_inputs.push_back(&inputs[row]);
      batch_outputs.push_back(&outputs[row]);
    }
    auto [source, lengths] = pad_sequences(batch_sources);
    const torch::Tensor log_probs =
        token_log_probabilities(model, source.to(device), lengths, pad_sequences(batch_inputs).first.to(device),
                                pad_sequences(batch_outputs).first.to(device))
            .to(torch::kCPU, torch::kFloat64);
    for (size_t row = 0; row < count; ++row) {
      ForcedScore& score = scores[static_cast<size_t>(order[first + row])];
      const auto length = static_cast<int64_t>(outputs[row].size());
      const double* values = log_probs[static_cast<int64_t>(row)].data_ptr<double>();
      score.tokens.assign(values, values + length);
      // Summed in the model's order, as the searches add their steps.
      for (const double value : score.tokens) score.log_probability += value;
      if (backwards) std::reverse(score.tokens.begin(), score.tokens.end() - 1);  // EOS stays last
      score.score = score.log_probability / length_penalty(length, alpha);
    }
  }
  if (was_training) model.train(true);
  return scores;
}

}  // namespace nmt
