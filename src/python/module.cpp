// The Python module nmt (its compiled part, nmt._nmt; src/python/nmt holds the package): the
// Translator, nmt.train and nmt.evaluate over the same C++ as the nmt command. Errors become
// Python exceptions with the command's messages; the GIL is released while C++ works.
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>
#include <torch/torch.h>

#include <CLI/CLI.hpp>
#include <filesystem>
#include <string>
#include <vector>

#include "cli/program.h"
#include "config/train_config.h"
#include "eval/bleu.h"
#include "eval/chrf.h"
#include "python/support.h"
#include "python/translator.h"
#include "train/trainer.h"
#include "util/blas_core.h"
#include "util/io.h"
#include "util/runtime.h"

namespace py = pybind11;
using namespace py::literals;

namespace nmt::python {

namespace {

void translate_exceptions() {
  py::register_exception_translator([](std::exception_ptr error) {
    try {
      if (error) std::rethrow_exception(error);
    } catch (const FileNotFound& e) {
      PyErr_SetString(PyExc_FileNotFoundError, e.what());
    } catch (const c10::Error& e) {  // LibTorch's messages carry a backtrace: the first line
      const std::string message = e.what_without_backtrace();
      PyErr_SetString(PyExc_RuntimeError, message.substr(0, message.find('\n')).c_str());
    }
  });
}

// The training options that start or join several processes: the command's.
std::string distributed_key(const std::string& key) {
  for (const char* name :
       {"nproc", "rank", "world_size", "local_rank", "master_addr", "master_port", "dist_timeout", "check_replicas"}) {
    if (key == name) return "starts or joins several processes: run nmt train for that";
  }
  if (key == "dump_config") return "prints the configuration: run nmt train --dump-config for that";
  return "";
}

std::string train(const py::object& config, const py::kwargs& overrides) {
  std::vector<std::string> arguments{"train"};
  if (!config.is_none()) {
    const std::string path = py::module_::import("os").attr("fspath")(config).cast<std::string>();
    if (!std::filesystem::exists(path)) throw FileNotFound(path + ": configuration file not found (check the path)");
    check_config_file(path);
    arguments.insert(arguments.end(), {"--config", path});
  }
  cli::Program program({"nmt", {}});
  const CLI::App* command = program.app.get_subcommand("train");
  for (std::string& argument : keyword_arguments(*command, overrides, "train", distributed_key)) {
    arguments.push_back(std::move(argument));
  }
  parse_arguments(program.app, arguments, "train");
  cli::TrainCommand& request = *program.train;
  Interruption interruption;
  request.run.interrupted = [&interruption] { return interruption.requested(); };
  run_interruptible(interruption, [&request] { nmt::train(request.config, request.run); });
  return request.config.model_dir;
}

// sacreBLEU's reference argument: one stream (a list of str) or several (a list of lists).
std::vector<std::vector<std::string>> reference_streams(const py::object& references) {
  const py::list list(references);
  if (list.size() > 0 && py::isinstance<py::str>(list[0])) return {list.cast<std::vector<std::string>>()};
  return list.cast<std::vector<std::vector<std::string>>>();
}

void bind_evaluate(py::module_& module) {
  py::module_ evaluate = module.def_submodule(
      "evaluate", "Corpus BLEU and chrF exactly as sacreBLEU 2.x computes them (and nmt evaluate prints them).");
  py::class_<eval::BleuScore>(evaluate, "BleuScore", "Corpus BLEU, with sacreBLEU's fields and signature.")
      .def_readonly("score", &eval::BleuScore::score, "BLEU, 0 to 100")
      .def_readonly("precisions", &eval::BleuScore::precisions, "n-gram precisions in percent, n = 1..4")
      .def_readonly("counts", &eval::BleuScore::matches, "matching n-grams, n = 1..4")
      .def_readonly("totals", &eval::BleuScore::totals, "hypothesis n-grams, n = 1..4")
      .def_readonly("bp", &eval::BleuScore::brevity_penalty, "brevity penalty")
      .def_readonly("sys_len", &eval::BleuScore::hyp_length, "hypothesis length in tokens")
      .def_readonly("ref_len", &eval::BleuScore::ref_length, "effective reference length in tokens")
      .def_readonly("signature", &eval::BleuScore::signature, "sacreBLEU's signature, e.g. nrefs:1|case:mixed|...")
      .def("format", &eval::BleuScore::format, "sacreBLEU's line: BLEU = 34.12 65.1/40.2/27.3/19.0 (BP = ...)")
      .def("__str__", &eval::BleuScore::format)
      .def("__float__", [](const eval::BleuScore& score) { return score.score; })
      .def("__repr__", [](const eval::BleuScore& score) { return "<BleuScore " + score.format() + ">"; });
  py::class_<eval::ChrfScore>(evaluate, "ChrfScore", "Corpus chrF2, with sacreBLEU's signature.")
      .def_readonly("score", &eval::ChrfScore::score, "chrF2, 0 to 100")
      .def_readonly("signature", &eval::ChrfScore::signature, "sacreBLEU's signature, e.g. nrefs:1|case:mixed|...")
      .def("format", &eval::ChrfScore::format, "sacreBLEU's line: chrF2 = 58.34")
      .def("__str__", &eval::ChrfScore::format)
      .def("__float__", [](const eval::ChrfScore& score) { return score.score; })
      .def("__repr__", [](const eval::ChrfScore& score) { return "<ChrfScore " + score.format() + ">"; });
  evaluate.def(
      "bleu",
      [](const std::vector<std::string>& hypotheses, const py::object& references, bool lowercase,
         const std::string& tokenize) {
        if (tokenize != "13a" && tokenize != "none") throw py::value_error("tokenize must be 13a or none");
        const eval::BleuOptions options{lowercase,
                                        tokenize == "none" ? eval::BleuTokenize::kNone : eval::BleuTokenize::k13a};
        const std::vector<std::vector<std::string>> streams = reference_streams(references);
        py::gil_scoped_release release;
        return eval::corpus_bleu(hypotheses, streams, options);
      },
      "hypotheses"_a, "references"_a, py::kw_only(), "lowercase"_a = false, "tokenize"_a = "13a",
      "Corpus BLEU of `hypotheses` against `references`: one reference stream (a list of str, one line per "
      "hypothesis) or several (a list of such lists), as sacrebleu.corpus_bleu takes them. An empty reference "
      "line means no such reference for that sentence. tokenize: 13a or none.");
  evaluate.def(
      "chrf",
      [](const std::vector<std::string>& hypotheses, const py::object& references) {
        const std::vector<std::vector<std::string>> streams = reference_streams(references);
        py::gil_scoped_release release;
        return eval::corpus_chrf(hypotheses, streams);
      },
      "hypotheses"_a, "references"_a, "Corpus chrF2 (sacreBLEU's default chrF); references as for bleu().");
}

// The results' classes: Hypothesis, TranslationResult, ScoreResult.
void bind_results(py::module_& module) {
  py::class_<PyHypothesis>(module, "Hypothesis", "One translation of a sentence.")
      .def_readonly("text", &PyHypothesis::text, "the detokenized text")
      .def_readonly("score", &PyHypothesis::score,
                    "the log-probability over the GNMT length penalty, as nmt translate --with-scores gives it")
      .def_readonly("log_probability", &PyHypothesis::log_probability,
                    "the sum of the tokens' log-probabilities, EOS included when produced")
      .def_readonly("tokens", &PyHypothesis::tokens, "the target subwords, without EOS")
      .def_readonly("attention", &PyHypothesis::attention,
                    "with return_attention: float32 array [rows, len(source_tokens)], a row per token and one for "
                    "EOS when produced; each row sums to 1. Else None.")
      .def_readonly("alignment", &PyHypothesis::alignment,
                    "with return_alignment: (source, target) index pairs, as nmt translate --alignment. Else None.")
      .def("__repr__", [](const PyHypothesis& h) {
        return "<Hypothesis score=" + std::to_string(h.score) +
               " text=" + py::repr(py::str(h.text)).cast<std::string>() + ">";
      });
  const auto best = [](const PyTranslation& t) -> const PyHypothesis* {
    return t.n_best.empty() ? nullptr : &t.n_best.front();
  };
  py::class_<PyTranslation>(module, "TranslationResult",
                            "A sentence's translation: the n-best list and, as attributes, its best entry's fields.")
      .def_readonly("n_best", &PyTranslation::n_best, "the hypotheses, best first (empty for an empty sentence)")
      .def_readonly("source_tokens", &PyTranslation::source_tokens,
                    "the source subwords and '</s>': the attention's columns")
      .def_readonly("sentences", &PyTranslation::sentences,
                    "what was translated: the text's sentences (split_sentences), or the text itself")
      .def_readonly("confidence", &PyTranslation::confidence,
                    "with return_confidence: the geometric mean of the probabilities of the best translation's "
                    "subwords and each sentence's end, in (0, 1] (None for an empty sentence, or when not asked)")
      .def_readonly("words", &PyTranslation::words,
                    "with return_confidence: the best translation's words, each with the model's probability of it "
                    "(the product of its subwords'); None when not asked")
      .def_readonly("capped", &PyTranslation::capped,
                    "indices into sentences of those whose translation stopped at an output cap (max_length_ratio, "
                    "max_output_length) before it ended")
      .def_readonly("cut", &PyTranslation::cut,
                    "indices into sentences of those that are parts of a sentence longer than cut_sentences, "
                    "cut after its commas, semicolons and colons")
      .def_readonly("markup_problem", &PyTranslation::markup_problem,
                    "with markup: why the text's markup was translated as text (malformed), or ''")
      .def_property_readonly(
          "text", [best](const PyTranslation& t) { return best(t) ? best(t)->text : std::string(); },
          "the best translation ('' for an empty sentence)")
      .def_property_readonly(
          "score", [best](const PyTranslation& t) { return best(t) ? best(t)->score : 0.0; }, "its score")
      .def_property_readonly(
          "tokens", [best](const PyTranslation& t) { return best(t) ? best(t)->tokens : std::vector<std::string>(); },
          "its target subwords")
      .def_property_readonly(
          "attention", [best](const PyTranslation& t) { return best(t) ? best(t)->attention : py::none(); },
          "its attention (Hypothesis.attention)")
      .def_property_readonly(
          "alignment", [best](const PyTranslation& t) { return best(t) ? best(t)->alignment : py::none(); },
          "its alignment (Hypothesis.alignment)")
      .def("__repr__", [best](const PyTranslation& t) {
        return "<TranslationResult text=" + py::repr(py::str(best(t) ? best(t)->text : "")).cast<std::string>() + ">";
      });
  py::class_<PyScore>(module, "ScoreResult", "A sentence pair's forced-decoding score, as nmt score gives it.")
      .def_readonly("score", &PyScore::score, "the log-probability over the GNMT length penalty")
      .def_readonly("log_probability", &PyScore::log_probability, "the sum of the token log-probabilities")
      .def_readonly("token_log_probabilities", &PyScore::token_log_probabilities,
                    "each target token's log-probability, EOS last")
      .def("__repr__", [](const PyScore& s) { return "<ScoreResult score=" + std::to_string(s.score) + ">"; });
}

void bind_translator(py::module_& module) {
  std::string options;
  for (const SearchOption& option : search_options()) {
    options += "    " + option.name + " (" + option.default_value + "): " + option.help + "\n";
  }
  py::class_<PyTranslator>(module, "Translator",
                           "Models trained with nmt train, loaded once, that translate and score sentences.")
      .def(py::init<const py::object&, const py::object&, std::string, int, const std::string&, const py::object&>(),
           "model"_a, "checkpoint"_a = "best", "device"_a = "cpu", "threads"_a = 0, "compute_type"_a = "default",
           "shortlist"_a = py::none(),
           "Loads `model`, a model directory from nmt train or a file from nmt export, or a list of them (an "
           "ensemble). checkpoint: best, "
           "last or a path, or a list (one per model, or several of one model). device: cpu, cuda or cuda:N. threads: "
           "CPU "
           "threads (0 = number of cores; set for the whole process). compute_type: default (int8 for an int8 export, "
           "float32 otherwise), float32 or int8 (weights rounded to int8 and the encoder's and decoder's products in "
           "int8, on the "
           "CPU). shortlist: a "
           "lexical shortlist file from nmt shortlist (each batch's output layer covers only its candidates).")
      .def("translate_batch", &PyTranslator::translate_batch, "sentences"_a, py::kw_only(), "n_best"_a = 1,
           "return_attention"_a = false, "return_alignment"_a = false, "return_confidence"_a = false,
           "prefix"_a = py::none(), "constraints"_a = py::none(),
           ("Translates `sentences` (a list of str) and returns a TranslationResult each, in order.\n\n"
            "n_best: hypotheses per sentence (at most beam_size). return_attention, return_alignment: keep each "
            "hypothesis's attention matrix or hard alignment. return_confidence: give each result its confidence "
            "and words (one more teacher-forced pass of the model). prefix: a list with a target prefix (str) or None "
            "per sentence; each translation starts with it. constraints: a list with a phrase (str), a list of "
            "phrases or None per sentence; each translation contains them.\n\n"
            "Search options, as nmt translate's (beam_size for --beam-size), with their defaults:\n" +
            options)
               .c_str())
      .def("score_batch", &PyTranslator::score_batch, "sources"_a, "targets"_a,
           "Scores each (source, target) pair by forced decoding, as nmt score does; returns a ScoreResult each. "
           "Options: length_penalty (1.0), batch_size (64, pairs per batch), target_language (\"\": a multilingual "
           "model's only one).")
      .def("translate_file", &PyTranslator::translate_file, "input"_a, "output"_a, py::kw_only(), "n_best"_a = 1,
           "with_scores"_a = false, "alignment"_a = false, "attention_dir"_a = py::none(), "prefix_file"_a = py::none(),
           "constraints_file"_a = py::none(),
           ("Translates the lines of the file `input` into the file `output` exactly as nmt translate "
            "--input INPUT --output OUTPUT does with the same options (the output is written whole or not at "
            "all). with_scores, alignment, attention_dir, prefix_file, constraints_file: as --with-scores, "
            "--alignment, --attention-dir, --prefix, --constraints. Search options as for translate_batch:\n" +
            options)
               .c_str())
      .def_property_readonly(
          "model", [](const PyTranslator& t) { return t.options().models; }, "the model directories")
      .def_property_readonly(
          "checkpoints", [](const PyTranslator& t) { return t.models().checkpoints; },
          "the checkpoint file of each member")
      .def_property_readonly(
          "device", [](const PyTranslator& t) { return t.options().device; }, "cpu, cuda or cuda:N")
      .def_property_readonly(
          "attention", [](const PyTranslator& t) { return t.models().attention(); }, "the members' attention scorers")
      .def_property_readonly(
          "target_languages", [](const PyTranslator& t) { return t.models().members.front().options.target_languages; },
          "the languages a multilingual model translates into (target_language picks one); [] for a model of one");
}

}  // namespace

}  // namespace nmt::python

PYBIND11_MODULE(_nmt, module) {
  using namespace nmt::python;
  module.doc() = "The compiled part of the nmt package: import nmt.";
  module.attr("__version__") = NMT_VERSION;
  translate_exceptions();
  send_logs_to_python();
  // The interpreter cannot restart as nmt does for OpenBLAS's kernels (util/blas_core.h): advice.
  if (const std::string advice = nmt::blas_core_advice(); !advice.empty()) {
    py::module_::import("logging").attr("getLogger")("nmt").attr("debug")(advice);
  }
  bind_results(module);
  bind_translator(module);
  bind_evaluate(module);
  module.def(
      "_search_options",
      [] {
        std::vector<std::pair<std::string, std::string>> options;
        for (const SearchOption& option : search_options()) options.emplace_back(option.name, option.default_value);
        return options;
      },
      "(name, default) of each search option translate_batch takes as a keyword: for the tests of the stubs.");
  module.def("train", &train, "config"_a = py::none(),
             "Trains a model as nmt train does (the same checks, files and train.log) from the TOML file `config` "
             "and keyword overrides named as nmt train's options (model_dir for --model-dir, resume=True for "
             "--resume). Progress goes to the Python logger nmt.train. Returns the model directory. Ctrl-C stops "
             "the run between updates with last.ckpt written (resume=True goes on from it) and raises "
             "KeyboardInterrupt.");
}
