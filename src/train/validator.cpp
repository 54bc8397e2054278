#include "train/validator.h"

#include <torch/torch.h>

#include <chrono>
#include <cmath>

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

Validator::Validator(Seq2Seq model, const Vocabulary& source_vocabulary, const Vocabulary& target_vocabulary,
                     ParallelText dev_text, TokenCorpus dev_corpus, int batch_tokens, int max_decode_ratio,
                     torch::Device device)
    : model_(model),
      dev_text_(std::move(dev_text)),
      dev_corpus_(std::move(dev_corpus)),
      dev_batches_(make_batches(dev_corpus_, all_pairs(dev_corpus_), batch_tokens, /*shuffle=*/false, 0)),
      // A dev line is decoded whole, as the model trains on it.
      translator_(model, source_vocabulary, target_vocabulary, greedy(max_decode_ratio), {64, false}, whole_lines(),
                  device),
      attending_(model, source_vocabulary, target_vocabulary,
                 greedy(max_decode_ratio, model->decoder->attention->has_scorer()), {64, false}, whole_lines(), device),
      device_(device) {}

ValidationResult Validator::run(size_t samples) {
  ValidationResult result;
  {
    model_->eval();
    torch::InferenceMode inference_mode;
    double loss_sum = 0;
    int64_t tokens = 0;
    for (const auto& indices : dev_batches_) {
      Batch batch = collate(dev_corpus_, indices, model_->options().reverse_target).to(device_);
      DecoderOutput out = model_(batch.source, batch.source_lengths, batch.target_input);
      const SequenceLoss loss = sequence_loss(*model_->decoder, out, batch.target_output, /*epsilon=*/0.0);
      loss_sum += loss.sum.item<double>();
      tokens += batch.target_tokens;
    }
    result.loss = loss_sum / static_cast<double>(tokens);
    result.perplexity = std::exp(result.loss);
  }
  const auto hypotheses = best_texts(translator_.translate(dev_text_.source));
  result.bleu = eval::corpus_bleu(hypotheses, {dev_text_.target}).score;
  result.chrf = eval::corpus_chrf(hypotheses, {dev_text_.target}).score;
  if (samples > 0) {
    const auto start = std::chrono::steady_clock::now();
    result.samples = translate_samples(std::min(samples, dev_text_.source.size()));
    result.samples_seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  }
  model_->train();
  return result;
}

std::vector<ValidationSample> Validator::translate_samples(size_t count) {
  const std::vector<std::string> sources(dev_text_.source.begin(), dev_text_.source.begin() + count);
  std::vector<Translation> translations = attending_.translate(sources);
  std::vector<ValidationSample> samples;
  for (size_t i = 0; i < count; ++i) {
    ValidationSample sample{sources[i], dev_text_.target[i], "", {}};
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
