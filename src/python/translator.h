// nmt.Translator: one or several loaded models (an ensemble) that translate, score and translate
// files with the search of `nmt translate` and `nmt score`, results as Python objects.
#pragma once

#include <pybind11/pybind11.h>

#include <string>
#include <utility>
#include <vector>

#include "config/translate_options.h"
#include "inference/model.h"

namespace nmt::python {

namespace py = pybind11;

// One hypothesis of a sentence.
struct PyHypothesis {
  std::string text;
  double score = 0;                   // as translate --with-scores gives it (length-penalised)
  double log_probability = 0;         // the sum of its tokens' log-probabilities, EOS included when produced
  std::vector<std::string> tokens;    // target subwords, without EOS
  py::object attention = py::none();  // float32 [rows, source_tokens]: one row per token, then EOS's
  py::object alignment = py::none();  // [(source, target)] pairs, as translate --alignment gives them
};

// One sentence's translation: its n-best list, best first, and the best one's fields.
struct PyTranslation {
  std::vector<PyHypothesis> n_best;        // empty for an empty input line
  std::vector<std::string> source_tokens;  // the source subwords and "</s>" (the attention's columns)
  std::vector<std::string> sentences;      // what was translated: the text's sentences, or the text
  std::vector<size_t> capped;              // indices of those cut at an output cap
  std::vector<size_t> cut;                 // indices of those that are parts of a longer sentence
  std::string markup_problem;              // why its markup was read as text, or ""
  py::object confidence = py::none();      // with return_confidence (inference/outputs.h), else None
  py::object words = py::none();           // ditto: [(word, probability), ...]
};

// One pair's forced-decoding score, as `nmt score` gives it.
struct PyScore {
  double score = 0;
  double log_probability = 0;
  std::vector<double> token_log_probabilities;  // EOS last
};

class PyTranslator {
 public:
  PyTranslator(const py::object& model, const py::object& checkpoint, std::string device, int threads,
               const std::string& compute_type, const py::object& shortlist);

  std::vector<PyTranslation> translate_batch(const std::vector<std::string>& sentences, int n_best,
                                             bool return_attention, bool return_alignment, bool return_confidence,
                                             const py::object& prefix, const py::object& constraints,
                                             const py::kwargs& options);
  std::vector<PyScore> score_batch(const std::vector<std::string>& sources, const std::vector<std::string>& targets,
                                   const py::kwargs& options);
  void translate_file(const py::object& input, const py::object& output, int n_best, bool with_scores, bool alignment,
                      const py::object& attention_dir, const py::object& prefix_file,
                      const py::object& constraints_file, const py::kwargs& options);

  const TranslateOptions& options() const { return options_; }
  const TranslationModels& models() const { return models_; }

 private:
  TranslateOptions options_;  // models, checkpoints, device and threads; the rest per call
  TranslationModels models_;
};

// A search option translate_batch and translate_file take as a keyword (nmt translate's, less the
// Translator's own), for the docstrings and the stubs' test.
struct SearchOption {
  std::string name;           // beam_size
  std::string default_value;  // as the command line's help gives it
  std::string help;
};
std::vector<SearchOption> search_options();

}  // namespace nmt::python
