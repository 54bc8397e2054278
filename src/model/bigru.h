// The encoder's recurrent network: a stacked bidirectional GRU over a padded batch.
//
// Same equations, gate order, initialisation and parameter names as torch::nn::GRU(bidirectional)
// (weight_ih_l0, weight_hh_l0, bias_ih_l0, bias_hh_l0, then the same with _reverse, per layer),
// so checkpoints of either load into the other. It runs faster in training than LibTorch's packed
// GRU, which computes the input gates one step at a time: here each direction's input gates for
// all positions are one matrix product before the loop, the loop holds only the hidden product,
// and that product's weight gradient is one product after the loop (linear/loop_linear.h).
//
// On a GPU the whole network is one cuDNN call instead (forward_cudnn).
//
// Padding: a sentence's real positions come first. Steps past a sentence's end leave its state
// unchanged (forward direction) or still at h_0 = 0 (backward direction, which starts at S - 1),
// so padded positions never reach real ones, and their outputs are exactly 0. In inference on the
// CPU, the padded positions are not computed at all (forward_packed).
// Shapes: B batch, S positions, I input size, H hidden size per direction, L layers.
#pragma once

#include <torch/nn/module.h>
#include <torch/nn/pimpl.h>

#include <functional>
#include <vector>

namespace nmt {

// A loop's hidden product, out [R, 3H] = W_h hidden + b_h for hidden [R, H] (both with contiguous
// rows), in float32 or in int8 (BiGruImpl); called on its direction's own thread
// (fused_cpu/bigru_layer.h, packed_bigru_layer).
using HiddenGates = std::function<void(const torch::Tensor& hidden, const torch::Tensor& out)>;

class BiGruImpl : public torch::nn::Module {
 public:
  BiGruImpl(int64_t input_size, int64_t hidden_size, int64_t num_layers, double dropout_between_layers);

  struct Output {
    torch::Tensor states;  // [B, S, 2H] top layer, forward and backward halves; 0 at padding
    torch::Tensor final;   // [2L, B, H] per layer and direction (as torch::nn::GRU): the state after
                           // the sentence's last real position (forward) or its first (backward)
  };

  // input [B, S, I]; lengths [B] int64 on the CPU, each >= 1.
  Output forward(const torch::Tensor& input, const torch::Tensor& lengths);

  // From now on inference on the CPU (forward_packed) multiplies by copies of the weights prepared
  // once, instead of packing them for every batch: in float32 for the kernels (the input gates'
  // products, linear/packed_linear.h, and the loops', linear/loop_weight.h), or, for compute type int8, rounded
  // to int8 per row with the activations quantized per row on the fly (linear/int8_linear.h), as the
  // decoder's products are. The copies are of the weights as they are now (translation;
  // inference/model.h). In int8 the packed path is taken at every kernel level: its products fall
  // back to linear/int8_linear.h's reference, not to float32.
  void pack_float32();
  void quantize_int8();

 private:
  struct Direction {
    torch::Tensor weight_ih, weight_hh, bias_ih, bias_hh;  // [3H, I], [3H, H], [3H], [3H]
  };
  struct PackedDirection {  // pack_float32()'s or quantize_int8()'s copies of a Direction
    std::function<torch::Tensor(const torch::Tensor&)> input;  // x [N, I] -> W_i x + b_i [N, 3H]
    HiddenGates hidden;                                        // W_h h + b_h (fused_cpu/bigru_layer.h)
  };
  // One direction over time-major input gates [S, B, 3H]; returns its states [S, B, H] and sets
  // `final` [B, H]. mask [S, B, 1] float (1 at real positions); first_padded = min length.
  torch::Tensor run(const Direction& direction, const torch::Tensor& input_gates, const torch::Tensor& mask,
                    int64_t first_padded, bool reverse, torch::Tensor& final);

  Output forward_cudnn(const torch::Tensor& input, const torch::Tensor& lengths_cpu);
  // Inference on the CPU with the kernels: the batch packed without its padding
  // (fused_cpu/bigru_layer.h, packed_bigru_layer), for the input gates' products and the loops alike.
  Output forward_packed(const torch::Tensor& input, const torch::Tensor& lengths_cpu);
  bool takes_packed_path(const torch::Tensor& input) const;
  void flatten_for_cudnn(const std::vector<torch::Tensor>& weights, int64_t input_size);
  // Every parameter in at::gru's order: per layer and direction w_ih, w_hh, b_ih, b_hh.
  std::vector<torch::Tensor> all_weights() const;

  int64_t hidden_size_;
  double dropout_;
  std::vector<Direction> directions_;        // layer 0 forward, layer 0 backward, layer 1 forward, ...
  std::vector<PackedDirection> packed_;      // pack_float32() or quantize_int8(), in the same order; empty: none
  bool int8_ = false;                        // packed_ is quantize_int8()'s
  torch::Tensor flat_weights_;               // on a GPU: the buffer cuDNN reads the parameters from
  std::vector<const void*> flat_addresses_;  // where each parameter was in it
};
TORCH_MODULE(BiGru);

// The padding rule above, in one place for the per-step loop and the fused one (fused_cpu/bigru_layer.cpp).
// mask [B, 1] at step t: 1 for rows whose sentence is still running, 0 for rows that have ended.
//
// The next state: h + m (h' - h), which is h' for m = 1 and h for m = 0 (ended rows keep h).
torch::Tensor keep_ended_rows(const torch::Tensor& hidden, const torch::Tensor& next, const torch::Tensor& mask);
// The output of step t: a kept state is not an output at padding (forward direction, h m); in the
// backward direction, which starts at S - 1, the kept state is still h_0 = 0 and is the output.
torch::Tensor output_at_step(const torch::Tensor& hidden, const torch::Tensor& mask, bool reverse);

}  // namespace nmt
