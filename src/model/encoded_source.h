// What encode() returns and every decoder step reads. Computed once per batch; nothing is cached
// on a module between calls.
//
// Shapes: B batch (or batch * beam), S source length, H_e encoder size per direction,
// K attention key size (depends on the scorer).
#pragma once

#include <torch/types.h>

namespace nmt {

struct EncodedSource {
  torch::Tensor states;   // [B, S, 2H_e] encoder outputs, exactly 0 at padded positions
  torch::Tensor keys;     // [B, S, K] scorer's projection of `states` (in inference on the CPU, 0 at
                          // padding: Seq2SeqImpl::encode); undefined for `none`
  torch::Tensor mask;     // [B, S] bool, true at real source positions
  torch::Tensor summary;  // [B, 2H_e] last layer's final forward and backward states

  // The same source for the rows `index` [B'] (beam expansion and reordering); with `positions`,
  // only the first that many source positions (those the rows' sources fill).
  EncodedSource index_select(const torch::Tensor& index, int64_t positions = -1) const;
  // The rows of `first`, then those of `second`, the shorter source padded as encode() pads
  // (continuous batching: sentences joining a running batch).
  static EncodedSource cat_rows(const EncodedSource& first, const EncodedSource& second);
};

// `tensor` [B, S, ...] with S grown to `length` by `value` at the end (unchanged when it has that).
torch::Tensor pad_positions(const torch::Tensor& tensor, int64_t length, double value = 0);

// [B, S] bool mask, true where position < length. `lengths` [B] int64 on any device.
torch::Tensor make_source_mask(const torch::Tensor& lengths, int64_t max_length, const torch::Device& device);

}  // namespace nmt
