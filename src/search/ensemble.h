// Several models decoding as one. At every step each member takes one decoder step and the
// ensemble's next-token scores are the mean of the members' log-probabilities,
//   log p(y_t) = (1/M) sum_m log p_m(y_t | y_<t, x)
// (as OpenNMT-py and Marian combine members; the mean is not renormalised). A single model is an
// ensemble of one, whose scores are exactly its log_softmax: both searches go through this class.
//
// Members must share their vocabularies (inference/model.h checks it when it loads them); their
// sizes and scorers may differ. Shapes: B batch (or batch * beam), S source length, V target
// vocabulary.
#pragma once

#include <torch/types.h>

#include <vector>

#include "model/seq2seq.h"

namespace nmt {

class Ensemble {
 public:
  // A single model: an ensemble of one (implicit, so that code taking a model takes an ensemble).
  Ensemble(Seq2Seq model);  // NOLINT(google-explicit-constructor)
  explicit Ensemble(std::vector<Seq2Seq> members);

  struct Source {
    std::vector<EncodedSource> members;
    const torch::Tensor& mask() const { return members.front().mask; }  // [B, S], the same for all
    // The rows `index`; with `positions`, the first that many source positions only.
    Source index_select(const torch::Tensor& index, int64_t positions = -1) const;
    // The rows of `first`, then those of `second` (EncodedSource::cat_rows).
    static Source cat_rows(const Source& first, const Source& second);
  };
  struct State {
    std::vector<DecoderState> members;
    State index_select(const torch::Tensor& index, int64_t positions = -1) const;
    static State cat_rows(const State& first, const State& second);
    // In place: every member's tensors take `from`'s values (not the positions), so that the state
    // of a fixed-shape search (search.h) stays where a CUDA graph reads it.
    void copy_(const State& from);
  };
  struct Step {
    torch::Tensor log_probs;  // [B, V] float32: the mean of the members' log-probabilities
    torch::Tensor logits;     // [B, V] float32: a single model's, instead, when step() is not to normalise
    torch::Tensor attention;  // [B, S] the mean of the weights of the members with a scorer; or undefined
    State state;
  };

  Source encode(const torch::Tensor& source, const torch::Tensor& lengths);
  State initial_state(const Source& source);
  // normalize = false: a single model leaves its logits for the caller to normalise (beam search's
  // fused log-softmax and top-k); an ensemble always gives log_probs.
  Step step(const torch::Tensor& previous_tokens, const State& state, const Source& source, bool normalize = true);

  // The same members with the output layer restricted to the target ids `ids` [K] (sorted, the
  // special ids first, so that they keep their places; search/shortlist.h): step() then takes and
  // scores tokens as places in `ids`, its log_probs [B, K] normalised over them.
  Ensemble restricted_to(const torch::Tensor& ids) const;

  // Whether any member has a scorer (Step::attention is defined).
  bool has_attention() const;
  // Whether any member's scores depend on the step's position (local-m attention).
  bool uses_step_position() const;
  const std::vector<Seq2Seq>& members() const { return members_; }
  // train() / eval() on every member; whether the first is training.
  void train(bool on);
  bool is_training() const { return members_.front()->is_training(); }

 private:
  std::vector<Seq2Seq> members_;
  torch::Tensor output_ids_;             // [K] with restricted_to, else undefined
  std::vector<OutputRows> output_rows_;  // each member's rows of W_o and b_o for output_ids_
};

// The log-softmax over V of logits [B, V], as every search takes it: the row kernel of
// kernels/row_kernels.h (the arithmetic of beam search's fused top-k), or torch::log_softmax with
// NMT_KERNELS=off and on a GPU. float32.
torch::Tensor log_softmax_rows(const torch::Tensor& logits);

}  // namespace nmt
