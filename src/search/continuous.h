// Greedy search with continuous batching, as LLM servers run their decoders (Orca, vLLM):
// sentences join the running batch between two decoder steps and leave it as soon as they end, so
// that a server's batch stays full instead of stepping on for its longest sentence while new
// requests wait for the next batch (serve/batch_queue.h). Each sentence gets the translation
// greedy_search (search.h) gives it in a batch of its own: the search is the same per row, only
// the rows beside it change. (With a shortlist, the output layer is the union of the lists of the
// sentences running together, so that, as between batches of Translator, a translation can differ
// with them.) The batch holds what the caller adds: greedy search's memory grows with its rows, as
// there is no beam.
//
// Joining costs an encode() of the new sentences, written into free slots of the batch's encoder
// output (which has room for more rows and positions; a copy of it only when it has none). Ended
// rows leave after each step, the last running row taking each one's slot, so only the rows that
// move are copied; once a quarter of every row's positions are padding, the positions only the
// rows that left needed go (a copy of the rows that stay).
#pragma once

#include <torch/types.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

#include "config/translate_options.h"
#include "search/ensemble.h"
#include "search/search.h"
#include "search/shortlist.h"

namespace nmt {

// When sentences that wait join a running batch. Joining costs an encoder run over the new
// sentences alone, whose fixed cost is that of a decoder step or more, and, with a shortlist, a new
// output layer: so they join in groups of a quarter of the batch, at once when none is running,
// and otherwise once the oldest has waited kMaxStepsWaiting steps (smaller groups or shorter waits
// served 64 clients more slowly: docs/dev/performance-notes.md, "Serving").
struct JoinPolicy {
  static constexpr size_t kMaxStepsWaiting = 4;
  size_t capacity = 64;  // sentences in the batch at most

  // `running` sentences in the batch; `fitting` of those waiting fit beside them; the oldest has
  // waited `steps_waited` steps.
  bool join(size_t running, size_t fitting, size_t steps_waited) const {
    const size_t group = std::max<size_t>(1, capacity / 4);
    return fitting > 0 && (running == 0 || fitting >= group || steps_waited >= kMaxStepsWaiting);
  }
};

class ContinuousGreedy {
 public:
  // Whether `options` on `model` can run so: greedy (beam size 1, one hypothesis, no sampling),
  // without attention weights in the output, on a model whose scores do not depend on the step's
  // position (rows that joined at different steps are at different positions), on the CPU.
  static bool supports(const Ensemble& model, const SearchOptions& options, const torch::Device& device);

  // The model in eval() mode; call under InferenceMode. With a `shortlist`, the output layer is
  // restricted to the union of the running sentences' lists (Shortlist::select) and the tokens
  // they were given last, chosen again whenever sentences join.
  ContinuousGreedy(Ensemble model, SearchOptions options, std::shared_ptr<const Shortlist> shortlist = nullptr);

  // Sentences that join before the next step: their source ids, each ending with EOS, and a tag
  // for each, which step() gives back with its hypothesis.
  void add(const std::vector<std::vector<int64_t>>& sources, const std::vector<int64_t>& tags);

  struct Ended {
    int64_t tag;
    Hypothesis hypothesis;  // tokens are target ids; no attention
  };
  // One decoder step of every running sentence; the sentences that ended with it, which leave.
  std::vector<Ended> step();

  // Sentences running.
  size_t size() const { return rows_.size(); }
  // The token each running sentence was given last, as a target id (BOS before its first step), in
  // the batch's order: those that joined last at the end.
  std::vector<int64_t> last_tokens() const;

 private:
  struct Row {
    int64_t tag = 0;
    std::vector<int64_t> source;  // for the shortlist
    int64_t limit = 0;            // max_output_length of its source
    int64_t steps = 0;
    bool ended = false;  // in the step that ends it, until drop_ended_rows
    Hypothesis hypothesis;
  };
  // Removes the ended rows from the batch (the last running rows take their slots), and, once a
  // quarter of the positions are padding for every row, the source positions only they had.
  void drop_ended_rows();
  // The output vocabulary of the running rows (shortlist only): decoding_ and previous_ move to it.
  void choose_vocabulary();

  Ensemble model_;
  Ensemble decoding_;  // model_, or model_ restricted to ids_
  SearchOptions options_;
  std::shared_ptr<const Shortlist> shortlist_;
  torch::Tensor ids_;  // [K] target ids on the CPU that decoding_ scores; undefined: all
  // The encoder output in slots of rows, with room for more rows and positions than are in use:
  // a sentence that joins is written into a free slot and one that leaves gives its slot to the
  // last row, so neither copies the encoder output of the others.
  Ensemble::Source slots_;
  Ensemble::Source encoded_;  // the first rows_.size() slots, as views
  Ensemble::State state_;
  torch::Tensor previous_;  // [R] each row's last token: a place in ids_, or a target id
  std::vector<Row> rows_;   // the batch's rows, in order
};

}  // namespace nmt
