// Attentional GRU decoder with input feeding (Luong et al. 2015, section 3.3): at step t
//   h_t   = GRU([y_{t-1}; a_{t-1}], h_{t-1})        input feeding of the attentional vector
//   c_t   = attention(h_t, encoder states)          any scorer of attention.h
//   a_t   = tanh(W_c [h_t; c_t])                    Luong et al. 2015, eq. 5
//   p(y_t)= softmax(W_o a_t + b_o)                  eq. 6
// advance() is the one place this runs; step() (both searches) and forward() (teacher forcing)
// use it. forward()'s training pass runs it once per position (model/reference/), or, faster, the
// same maths as one fused function with a hand-written backward on a CPU with the AVX2 kernels
// (model/fused_cpu/), or as a loop of recorded step graphs on a GPU (model/gpu_graph/); one
// function chooses (teacher_forced_path), and the fast passes are tested against the reference.
// After quantize_int8() (translation with compute type int8), step() runs the same advance() with the
// step's products in int8 (linear/int8_linear.h); after pack_float32() (translation in float32 on the CPU),
// with the weights packed once for the CPU's kernels (linear/packed_linear.h).
//
// Shapes: B batch (or batch * beam), S source length, T target length, E embedding size,
// H decoder hidden size, L layers, C encoder state size, V target vocabulary.
#pragma once

#include <torch/nn/module.h>
#include <torch/nn/modules/container/modulelist.h>
#include <torch/nn/modules/embedding.h>
#include <torch/nn/modules/linear.h>

#include <functional>
#include <memory>
#include <optional>
#include <vector>

#include "model/attention.h"
#include "model/encoded_source.h"
#include "model/gru_cell.h"
#include "model/linear/int8_linear.h"
#include "model/linear/loop_linear.h"
#include "model/linear/packed_linear.h"
#include "model/options.h"

namespace nmt {

class GpuDecoderLoop;       // model/gpu_graph/decoder_pass.h
class RecordedDecoderPass;  // model/gpu_graph/recorded_pass.h

struct DecoderState {
  torch::Tensor hidden;       // [L, B, H]
  torch::Tensor attentional;  // [B, H] a_{t-1}, fed to the next step
  torch::Tensor coverage;     // [B, S] the sum of the attention weights so far; only for a scorer
                              // that uses it (coverage = true), else undefined
  int64_t position = 0;       // t, the target position of the next step (the same for every row)

  // The rows `index` [B'] (beam reordering); with `positions`, the coverage of only the first that
  // many source positions (EncodedSource::index_select).
  DecoderState index_select(const torch::Tensor& index, int64_t positions = -1) const;
  // The rows of `first`, then those of `second`, coverage padded to the longer source; the
  // position is `first`'s (continuous batching, for decoders whose steps do not read it).
  static DecoderState cat_rows(const DecoderState& first, const DecoderState& second);
};

struct StepOutput {
  torch::Tensor logits;     // [B, V] unnormalised
  torch::Tensor attention;  // [B, S]; undefined for attention `none`
  DecoderState state;
};

// Some rows of the output layer (search/shortlist.h): W_o [K, H] and b_o [K] of K target tokens,
// whose logits a step then gives instead of all V. Undefined: the whole layer.
// DecoderImpl::output_rows() makes them as the decoder's step takes them: for a decoder prepared
// for translation (quantize_int8(), pack_float32()), only `prepared`, the rows' own map.
struct OutputRows {
  torch::Tensor weight;
  torch::Tensor bias;
  std::function<torch::Tensor(const torch::Tensor&)> prepared;  // [B, H] -> [B, K]
};

// The decoder step's weight matrices prepared for translation on the CPU, as maps y = x W^T + b:
// in int8 (Int8Linear, compute type int8) or in float32 packed for the kernels (PackedLinear). The
// scorer's query projection is among them, where it has one (AttentionImpl::query_weight); the
// rest of the scorer and the encoder are left as they are.
template <typename Linear>
struct StepWeights {
  Linear embedding_gates, feed;
  std::vector<Linear> hidden, layer_gates;
  std::optional<Linear> query;
  Linear combine, output;
  std::optional<Linear> keys;  // the scorer's key_map(), where it has one
};
using Int8DecoderWeights = StepWeights<Int8Linear>;

// A training-style pass over T steps (teacher forcing, or scheduled feeding). The output layer
// is left to the caller (output_logits), so that training projects only the positions that hold a
// real target token (src/train/loss.h).
// Positions past the end of a row's target (padding) are for no loss to read: the fused training
// pass (fused_cpu/decoder_pass.h) leaves them 0, the per-step path computes them.
struct DecoderOutput {
  torch::Tensor attentional;  // [B, T, H] a_t of every step, the input of the output layer
  torch::Tensor attention;    // [B, T, S]; undefined for attention `none`
};

class DecoderImpl : public torch::nn::Module {
 public:
  DecoderImpl(const DecoderOptions& options, int64_t encoder_size);

  // Keys of the encoder states for EncodedSource::keys (once per batch): the scorer's, or, in a
  // decoder prepared for translation whose scorer has a key_map(), its prepared copy's (int8 after
  // quantize_int8()).
  torch::Tensor project_keys(const torch::Tensor& states);

  // Initial state from the encoder summary: h_0 = tanh(W_b summary + b_b) for every layer, a_0 = 0
  // (and coverage 0).
  DecoderState initial_state(const EncodedSource& source);

  // One step from the previous tokens [B]: logits [B, V], or [B, K] over `rows`.
  StepOutput step(const torch::Tensor& previous_tokens, const DecoderState& state, const EncodedSource& source,
                  const OutputRows& rows = {});

  // target_input [B, T] (BOS y_1 .. y_{T-1}). With teacher_forcing < 1 (training only), each step
  // feeds the model's own previous argmax instead, with probability 1 - teacher_forcing.
  DecoderOutput forward(const torch::Tensor& target_input, const EncodedSource& source, double teacher_forcing = 1.0);

  // p(y_t) before the softmax: W_o a_t + b_o, for a_t of any shape [..., H] -> [..., V].
  torch::Tensor output_logits(const torch::Tensor& attentional);

  const DecoderOptions& options() const { return options_; }

  // From now on step() multiplies by int8 copies of its weights (inference on the CPU; the float32
  // weights stay for training and saving). The copies are of the weights as they are now.
  void quantize_int8();
  // The same with float32 copies packed for the CPU's kernels (linear/packed_linear.h), for translation
  // in float32 on the CPU: the same products without repacking the weights at every step.
  void pack_float32();
  const Int8DecoderWeights* int8_weights() const { return int8_.get(); }
  // The output layer's rows `ids` [K] (a shortlist's), as step() takes them.
  OutputRows output_rows(const torch::Tensor& ids) const;

  torch::nn::Embedding embedding{nullptr};
  torch::nn::Linear bridge{nullptr};           // C -> L * H
  torch::nn::Linear embedding_gates{nullptr};  // E -> 3H, first layer's input gates from y_{t-1}
  torch::nn::Linear feed_gates{nullptr};       // H -> 3H, first layer's input gates from a_{t-1}
  torch::nn::ModuleList cells{nullptr};        // L GruCell
  torch::nn::ModuleList layer_gates{nullptr};  // L - 1 Linear H -> 3H, input gates of upper layers
  Attention attention{nullptr};
  torch::nn::Linear combine{nullptr};  // [H; C] -> H, W_c
  torch::Tensor output_weight;         // [V, H], W_o (the embedding matrix when tied)
  torch::Tensor output_bias;           // [V]

 private:
  // The linear maps applied inside every step. Made once per pass over the target, so that while
  // training each weight's gradient is one product over all steps (linear/loop_linear.h).
  // LoopLinear maps, or Int8Linear ones after quantize_int8().
  using StepMap = std::function<torch::Tensor(const torch::Tensor&)>;
  struct StepMaps {
    StepMap feed;                       // feed_gates
    std::vector<StepMap> hidden;        // each cell's W_h, b_h
    std::vector<StepMap> layer_inputs;  // layer_gates
    StepMap query;                      // the scorer's W s (AttentionStep::projected); empty: the scorer's own
    StepMap combine;                    // W_c
  };
  StepMaps step_maps() const;
  // The maps of a decoder prepared for translation (quantize_int8(), pack_float32()): those of
  // every step, the first layer's input gates from y_{t-1}, and the output layer, whole or some of
  // its rows.
  struct PreparedMaps {
    StepMaps steps;
    StepMap embedding_gates, output;
    StepMap keys;  // the scorer's key_map(); empty: its own project_keys()
    std::function<StepMap(const torch::Tensor& ids)> output_rows;
  };
  // Copies of the step's weights as maps of type Linear (Int8Linear, PackedLinear), kept by
  // prepared_ from now on; returned for int8_weights().
  template <typename Linear>
  std::shared_ptr<const StepWeights<Linear>> prepare();

  // The recurrence, attention and attentional vector of one step, from the first layer's input
  // gates computed from y_{t-1} [B, 3H]. Returns a_t [B, H] and the attention weights.
  std::pair<torch::Tensor, torch::Tensor> advance(const torch::Tensor& token_gates, DecoderState& state,
                                                  const EncodedSource& source, const StepMaps& maps);
  // The passes of forward() with every input token known (teacher forcing), each in a folder of its
  // own beside the architecture: the reference (model/reference/), the fused CPU pass
  // (model/fused_cpu/) and the two GPU graph passes (model/gpu_graph/). teacher_forced_path() is the
  // one place that chooses. While autograd records, with float32 weights that learn: on a GPU, the
  // GPU loop for one layer and the additive scorer of one head without coverage, the recorded
  // reference pass for every other decoder; on the CPU, the fused CPU pass with the kernels on
  // (kernels/dispatch.h), for any scorer and number of layers. Else the reference (on a GPU, logged
  // once at debug level).
  enum class Path { kReference, kFusedCpu, kGpuLoop, kGpuRecorded };
  Path teacher_forced_path(const torch::Tensor& token_gates, const EncodedSource& source) const;
  bool learns_in_float32(const torch::Tensor& token_gates) const;
  bool takes_fused_loop(const torch::Tensor& token_gates, const EncodedSource& source) const;
  bool takes_gpu_loop(const torch::Tensor& token_gates) const;
  DecoderOutput gpu_loop_pass(const torch::Tensor& token_gates, const DecoderState& state, const EncodedSource& source);
  DecoderOutput gpu_recorded_pass(const torch::Tensor& token_gates, const DecoderState& state,
                                  const EncodedSource& source);
  // The reference pass of teacher forcing from these inputs.
  DecoderOutput reference_pass(const torch::Tensor& token_gates, const DecoderState& state,
                               const EncodedSource& source);
  DecoderOutput fused_cpu_pass(const torch::Tensor& token_gates, const DecoderState& state, const EncodedSource& source,
                               const torch::Tensor& target_input);
  // Embeddings of tokens [...] -> [..., E], with word dropout and dropout while training.
  torch::Tensor embed(const torch::Tensor& tokens);

  DecoderOptions options_;
  std::vector<GruCellImpl*> cell_pointers_;
  std::vector<torch::nn::LinearImpl*> layer_gate_pointers_;
  std::shared_ptr<GpuDecoderLoop> gpu_loop_;        // made by the first pass that takes it
  std::shared_ptr<RecordedDecoderPass> recorded_;   // the same
  std::shared_ptr<const Int8DecoderWeights> int8_;  // quantize_int8(); null: float32
  std::optional<PreparedMaps> prepared_;            // prepare(); none: the module's own weights
};
TORCH_MODULE(Decoder);

}  // namespace nmt
