#include "train/validator.h"

#include <torch/torch.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <stdexcept>

#include "eval/bleu.h"
#include "eval/chrf.h"
#include "text/batching.h"
#include "train/loss.h"

namespace nmt {
namespace {

SearchOptions greedy(int max_decode_ratio, bool attention = false) {
  SearchOptions search;
  search.beam_size = 1;
  search.max_length_ratio = max_decode_ratio;
  search.return_attention = attention;
  return search;
}

}  // namespace

double ValidationResult::metric(Metric which) const {
  switch (which) {
    case Metric::kBleu:
      return bleu;
    case Metric::kChrf:
      return chrf;
    case Metric::kLoss:
      return loss;
    case Metric::kPerplexity:
      return perplexity;
  }
  return bleu;
}

namespace {

TextOptions into(const std::string& language) {
  TextOptions text = whole_lines();  // a dev line is decoded whole, as the model trains on it
  text.target_language = language;
  return text;
}

}  // namespace

Validator::Validator(Seq2Seq model, const Vocabulary& source_vocabulary, const Vocabulary& target_vocabulary,
                     std::vector<DevSet> dev_sets, std::string best_pair, int batch_tokens, int max_decode_ratio,
                     torch::Device device)
    : model_(model),
      best_pair_(std::move(best_pair)),
      attending_(model, source_vocabulary, target_vocabulary,
                 greedy(max_decode_ratio, model->decoder->attention->has_scorer()), {64, false},
                 into(dev_sets.empty() ? "" : dev_sets.front().language), device),
      device_(device) {
  if (dev_sets.empty()) throw std::invalid_argument("Validator: no dev set");
  for (DevSet& dev : dev_sets) {
    std::vector<std::vector<int64_t>> batches =
        make_batches(dev.corpus, all_pairs(dev.corpus), batch_tokens, /*shuffle=*/false, 0);
    Translator translator(model, source_vocabulary, target_vocabulary, greedy(max_decode_ratio), {64, false},
                          into(dev.language), device);
    sets_.push_back({std::move(dev), std::move(batches), std::move(translator)});
  }
}

DevScores Validator::score(Set& set) {
  DevScores scores;
  scores.name = set.dev.name;
  {
    torch::InferenceMode inference_mode;
    double loss_sum = 0;
    int64_t tokens = 0;
    for (const auto& indices : set.batches) {
      Batch batch = collate(set.dev.corpus, indices, model_->options().reverse_target).to(device_);
      DecoderOutput out = model_(batch.source, batch.source_lengths, batch.target_input);
      const SequenceLoss loss = sequence_loss(*model_->decoder, out, batch.target_output, /*epsilon=*/0.0);
      loss_sum += loss.sum.item<double>();
      tokens += batch.target_tokens;
    }
    scores.loss = loss_sum / static_cast<double>(tokens);
    scores.perplexity = std::exp(scores.loss);
  }
  const auto hypotheses = best_texts(set.translator.translate(set.dev.text.source));
  scores.bleu = eval::corpus_bleu(hypotheses, {set.dev.text.target}).score;
  scores.chrf = eval::corpus_chrf(hypotheses, {set.dev.text.target}).score;
  return scores;
}

ValidationResult Validator::run(size_t samples) {
  ValidationResult result;
  model_->eval();
  for (Set& set : sets_) result.sets.push_back(score(set));
  const auto chosen = std::find_if(result.sets.begin(), result.sets.end(),
                                   [&](const DevScores& set) { return set.name == best_pair_; });
  if (chosen != result.sets.end()) {
    result.loss = chosen->loss, result.bleu = chosen->bleu, result.chrf = chosen->chrf;
  } else {
    const auto count = static_cast<double>(result.sets.size());
    for (const DevScores& set : result.sets) {
      result.loss += set.loss / count;
      result.bleu += set.bleu / count;
      result.chrf += set.chrf / count;
    }
  }
  result.perplexity = std::exp(result.loss);  // of the mean loss; a single set: its own
  if (samples > 0) {
    const auto start = std::chrono::steady_clock::now();
    result.samples = translate_samples(std::min(samples, sets_.front().dev.text.source.size()));
    result.samples_seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  }
  model_->train();
  return result;
}

std::vector<ValidationSample> Validator::translate_samples(size_t count) {
  const ParallelText& text = sets_.front().dev.text;
  const std::vector<std::string> sources(text.source.begin(), text.source.begin() + count);
  std::vector<Translation> translations = attending_.translate(sources);
  std::vector<ValidationSample> samples;
  for (size_t i = 0; i < count; ++i) {
    ValidationSample sample{sources[i], text.target[i], "", {}};
    if (!translations[i].hypotheses.empty()) {
      sample.translation = translations[i].texts.front();
      const torch::Tensor& attention = translations[i].hypotheses.front().attention;
      if (attention.defined()) {
        const torch::Tensor rows = attention.to(torch::kFloat).contiguous();
        for (int64_t row = 0; row < rows.size(0); ++row) {
          const float* values = rows[row].data_ptr<float>();
          sample.attention.emplace_back(values, values + rows.size(1));
        }
      }
    }
    samples.push_back(std::move(sample));
  }
  return samples;
}

}  // namespace nmt
