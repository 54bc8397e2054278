// The training configuration: one typed struct, filled from defaults < config file < command line.
// Every key is declared once, in visit_fields() (train_config.cpp); the command line, the TOML
// dump written to the model directory and the copy stored in checkpoints all come from that list.
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "config/enums.h"
#include "config/model_fields.h"
#include "model/options.h"
#include "text/vocabulary.h"

namespace CLI {
class App;
}

namespace nmt {

struct TrainConfig {
  // Data
  // Training corpora (text/corpus_mix.h): each comma-separated entry of train-source (a file or a glob) is
  // one corpus, paired with the entry at its position in train-target.
  std::string train_source;   // source side, one sentence per line
  std::string train_target;   // target side
  std::string train_weights;  // one weight per corpus, comma-separated: epochs take its pairs that many times; "": 1s
  std::string train_tags;     // one tag per corpus, comma-separated, "" for none: prepended to its source sentences
  // One target language per corpus, comma-separated ("" for a model of one target language): its
  // token <2xx> starts each of the corpus's source sentences (text/languages.h).
  std::string train_languages;
  // Corpus shares by size at this temperature instead of train-weights (text/corpus_mix.h); 0 = off.
  double train_temperature = 0;
  std::string reserved_tags;  // more tags for the vocabulary to reserve, for later runs (init-from) to use
  // Development sets, comma-separated, one per language pair: each validated on its own
  // (dev_sets()); the mean of their metrics, or best_pair's, picks checkpoints.
  std::string dev_source;     // source side
  std::string dev_target;     // target side
  std::string dev_languages;  // target language of each; "": each target file's extension
  std::string best_pair;      // the dev set whose metrics pick checkpoints; "": their mean
  std::string model_dir;      // where vocabularies, checkpoints and logs go
  std::string corpus_dir;     // the prepared corpus (train.corpus) and its vocabularies; empty: model_dir
  std::string init_from;      // fine-tuning: a checkpoint, or a model directory (its best.ckpt); empty: none

  // Vocabulary (sentencepiece, trained by `nmt train` on the training corpus)
  VocabType vocab_type = VocabType::kUnigram;
  int vocab_size = 8000;    // per vocabulary; an upper bound for tiny corpora
  bool joint_vocab = true;  // one vocabulary for both languages
  // The 256 bytes as pieces: any character spelt as its UTF-8 bytes, never <unk>. Read when a
  // vocabulary is built; models trained before this key have no byte pieces.
  bool byte_fallback = true;
  // The share of training pairs whose spans (names, numbers, URLs, ...) both sides hold are masked
  // as placeholder tokens (text/masking.h), which the vocabulary then holds: the model learns to
  // copy them, and translate gives it protected spans as tokens. 0: none, no tokens.
  double placeholder_share = 0.0;
  int max_length = 100;  // training pairs longer than this (subwords) are skipped
  // Subword regularisation (text/subword_sampling.h): each epoch's pairs segmented anew. Unigram:
  // draws with P(x)^alpha among the subword-nbest best (-1: all); BPE: merges dropped with
  // probability alpha. 0: off.
  double subword_alpha = 0;
  int subword_nbest = -1;

  // Model
  ModelOptions model;

  // Optimisation
  int batch_tokens = 2000;  // padded source+target tokens per batch
  int accumulate = 1;       // batches per rank summed into one update (gradient accumulation)
  int max_epochs = 30;
  int max_steps = 0;             // 0 = no step limit
  double max_minutes = 0;        // wall-clock budget of one `nmt train` run; 0 = no limit
  double learning_rate = 1e-3;   // Adam
  int warmup_steps = 0;          // linear warm-up from 0
  double lr_decay_factor = 0.5;  // reduce on plateau of the validation metric
  int lr_patience = 3;           // validations without improvement before a decay
  double min_learning_rate = 1e-5;
  double clip_norm = 1.0;      // gradient-norm clipping; 0 = off
  int max_skipped_steps = 10;  // a run stops after this many updates in a row skipped as diverged
  double label_smoothing = 0.0;
  double teacher_forcing = 1.0;  // probability of feeding the reference token

  // Validation, checkpoints, logging
  int validate_every = 500;  // steps
  int log_every = 50;        // steps
  Metric best_metric = Metric::kBleu;
  int early_stopping_patience = 8;  // validations without improvement; 0 = off
  // The metrics early stopping watches, comma-separated ("bleu,chrf"): "" = best_metric alone.
  std::string early_stopping_metrics;
  // Stop when the first of them (best_metric when they are not given), all, or any has not
  // improved for early_stopping_patience validations (Marian's --early-stopping-on).
  std::string early_stopping_on = "first";
  double min_improvement = 0;    // a metric improves only by more than this
  int dev_max_decode_ratio = 2;  // greedy dev decoding stops at ratio * source length + 10
  int dev_max_length = 1000;     // a longer dev line (subwords) is an error naming it
  int keep_checkpoints = 0;      // keep the weights of the last N validations (for nmt average)
  bool shortlist = false;        // at the end, write model_dir/shortlist.bin (nmt shortlist's defaults)
  std::string tensorboard;       // TensorBoard's event files: "" = model_dir/tensorboard, "no" = none

  // Run
  int seed = 1;
  int threads = 0;                 // 0 = number of cores
  std::string device = "cpu";      // cpu | cuda
  std::string precision = "fp32";  // fp32 | bf16 (products in bf16, weights and loss in float32)
};

// Declares `config`'s fields as options of `app` (long names, e.g. --hidden-size).
void add_train_options(CLI::App& app, TrainConfig& config);

// (key, value) pairs of every field, in declaration order, values as on the command line.
std::vector<std::pair<std::string, std::string>> config_entries(const TrainConfig& config);

// A TOML document with a [train] section, readable by `nmt train --config`.
std::string to_toml(const TrainConfig& config);

// Rebuilds a configuration from config_entries() output (as stored in a checkpoint).
TrainConfig config_from_entries(const std::vector<std::pair<std::string, std::string>>& entries);

// Checks ranges and combinations; throws std::invalid_argument naming the key.
void validate(const TrainConfig& config);

// One development set of dev-source, dev-target and dev-languages.
struct DevSetSpec {
  std::string source, target;
  std::string language;  // the target language (train-languages' token), "" for a model of none
  std::string name;      // "de-en" from the files' extensions (or the language), else "devN"; unique
};

// The development sets of `config`. Throws std::invalid_argument naming the key: lists of
// different lengths, a language that is no ISO 639 code or that train-languages lacks, a language
// for a model without languages, none for one with them (where the target file's extension is no
// language code), a best-pair that names no dev set.
std::vector<DevSetSpec> dev_sets(const TrainConfig& config);

// The metrics early stopping watches: those of early_stopping_metrics in their order (each once),
// or best_metric alone. Throws std::invalid_argument naming a name that is no metric.
std::vector<Metric> early_stopping_metrics(const TrainConfig& config);

// `config` with an empty source-language (target-language) set to the extension of the
// train-source (train-target) entries when they all share it and it is a language code (train.de:
// de); otherwise as is. The model's target languages are train-languages' (ModelOptions::
// target_languages); with more than one, target-language stays as it is.
TrainConfig with_languages(TrainConfig config);

// The keys a resumed run must keep (OnResume::kFixed): the corpus, vocabulary and batching keys,
// the seed and the network's shapes.
std::vector<std::string> keys_fixed_on_resume();

// Throws std::invalid_argument naming the first key that `requested` changes against `stored` (the
// configuration of `checkpoint`) although a resumed run must keep it (OnResume::kFixed).
void check_resumable(const TrainConfig& requested, const TrainConfig& stored, const std::string& checkpoint);

// Throws std::invalid_argument naming the first model key that `requested` changes against
// `stored`, the options of `checkpoint` that init-from fine-tunes, among those that fix the
// network's shapes (the dropout rates may change).
void check_fine_tunable(const ModelOptions& requested, const ModelOptions& stored, const std::string& checkpoint);

// Checks what the TOML reader lets pass in a configuration file: a key given twice in one section,
// a quoted value without its closing quote. Throws std::invalid_argument naming file:line and the
// key. A missing file is left to the reader's own error.
void check_config_file(const std::string& path);

}  // namespace nmt
