#include "model/decoder.h"

#include <torch/torch.h>

#include <spdlog/spdlog.h>

#include <algorithm>
#include <cmath>
#include <mutex>
#include <tuple>

#include "kernels/dispatch.h"
#include "model/dropout.h"
#include "model/fused_cpu/decoder_pass.h"
#include "model/gpu_graph/decoder_pass.h"
#include "model/gpu_graph/recorded_pass.h"
#include "model/linear/bf16_products.h"
#include "model/reference/decoder_steps.h"
#include "model/word_dropout.h"
#include "text/special_tokens.h"

namespace nmt {

DecoderState DecoderState::index_select(const torch::Tensor& index, int64_t positions) const {
  torch::Tensor selected_coverage;
  if (coverage.defined()) {
    selected_coverage = (positions < 0 ? coverage : coverage.narrow(1, 0, positions)).index_select(0, index);
  }
  return {hidden.index_select(1, index), attentional.index_select(0, index), selected_coverage, position};
}

DecoderState DecoderState::cat_rows(const DecoderState& first, const DecoderState& second) {
  torch::Tensor coverage;
  if (first.coverage.defined()) {
    const int64_t length = std::max(first.coverage.size(1), second.coverage.size(1));
    coverage = torch::cat({pad_positions(first.coverage, length), pad_positions(second.coverage, length)});
  }
  return {torch::cat({first.hidden, second.hidden}, 1), torch::cat({first.attentional, second.attentional}), coverage,
          first.position};
}

DecoderImpl::DecoderImpl(const DecoderOptions& options, int64_t encoder_size) : options_(options) {
  const int64_t hidden = options.hidden_size;
  embedding = register_module(
      "embedding", torch::nn::Embedding(
                       torch::nn::EmbeddingOptions(options.vocab_size, options.embedding_size).padding_idx(kPadId)));
  bridge = register_module("bridge", torch::nn::Linear(encoder_size, options.num_layers * hidden));
  embedding_gates = register_module("embedding_gates", torch::nn::Linear(options.embedding_size, 3 * hidden));
  feed_gates =
      register_module("feed_gates", torch::nn::Linear(torch::nn::LinearOptions(hidden, 3 * hidden).bias(false)));
  cells = register_module("cells", torch::nn::ModuleList());
  layer_gates = register_module("layer_gates", torch::nn::ModuleList());
  for (int64_t layer = 0; layer < options.num_layers; ++layer) {
    GruCell cell(hidden);
    cells->push_back(cell);
    cell_pointers_.push_back(cell.get());
    if (layer > 0) {
      torch::nn::Linear gates(hidden, 3 * hidden);
      layer_gates->push_back(gates);
      layer_gate_pointers_.push_back(gates.get());
    }
  }
  attention = register_module("attention", Attention(options.attention));
  combine = register_module("combine",
                            torch::nn::Linear(torch::nn::LinearOptions(hidden + encoder_size, hidden).bias(false)));
  if (options.tie_embeddings) {
    TORCH_CHECK(options.embedding_size == hidden, "tie-embeddings needs embedding-size == decoder-hidden-size");
    output_weight = embedding->weight;  // shared, registered once (by the embedding)
  } else {
    const double bound = 1.0 / std::sqrt(static_cast<double>(hidden));
    output_weight =
        register_parameter("output_weight", torch::empty({options.vocab_size, hidden}).uniform_(-bound, bound));
  }
  output_bias = register_parameter("output_bias", torch::zeros({options.vocab_size}));
}

torch::Tensor DecoderImpl::project_keys(const torch::Tensor& states) {
  if (!prepared_ || !prepared_->keys || is_training() || kernels::autograd_records({states})) {
    return attention->project_keys(states);
  }
  const torch::Tensor keys = prepared_->keys(states.reshape({-1, states.size(-1)}));  // [N, K]
  std::vector<int64_t> sizes = states.sizes().vec();
  sizes.back() = keys.size(1);
  return keys.view(sizes);
}

DecoderState DecoderImpl::initial_state(const EncodedSource& source) {
  const int64_t batch_size = source.summary.size(0);
  torch::Tensor hidden = torch::tanh(bridge(source.summary))  // [B, L * H]
                             .view({batch_size, options_.num_layers, options_.hidden_size})
                             .transpose(0, 1)
                             .contiguous();  // [L, B, H]
  torch::Tensor attentional = torch::zeros({batch_size, options_.hidden_size}, source.summary.options());
  torch::Tensor coverage =
      attention->uses_coverage() ? torch::zeros(source.mask.sizes(), source.summary.options()) : torch::Tensor();
  return {hidden, attentional, coverage, 0};
}

DecoderImpl::StepMaps DecoderImpl::step_maps() const {
  StepMaps maps;
  maps.feed = LoopLinear(feed_gates->weight, torch::Tensor());
  for (const GruCellImpl* cell : cell_pointers_) maps.hidden.emplace_back(LoopLinear(cell->weight_hh, cell->bias_hh));
  for (const torch::nn::LinearImpl* gates : layer_gate_pointers_)
    maps.layer_inputs.emplace_back(LoopLinear(gates->weight, gates->bias));
  maps.combine = LoopLinear(combine->weight, torch::Tensor());
  return maps;
}

template <typename Linear>
std::shared_ptr<const StepWeights<Linear>> DecoderImpl::prepare() {
  auto weights = std::make_shared<StepWeights<Linear>>();
  weights->embedding_gates = Linear(embedding_gates->weight, embedding_gates->bias);
  weights->feed = Linear(feed_gates->weight, torch::Tensor());
  for (const GruCellImpl* cell : cell_pointers_) weights->hidden.emplace_back(cell->weight_hh, cell->bias_hh);
  for (const torch::nn::LinearImpl* gates : layer_gate_pointers_) {
    weights->layer_gates.emplace_back(gates->weight, gates->bias);
  }
  if (const torch::Tensor query = attention->query_weight(); query.defined()) {
    weights->query = Linear(query, torch::Tensor());
  }
  weights->combine = Linear(combine->weight, torch::Tensor());
  if (const ScorerImpl::KeyMap keys = attention->key_map(); keys.weight.defined()) {
    weights->keys = Linear(keys.weight, keys.bias);
  }
  weights->output = Linear(output_weight, output_bias);
  // Each map holds the weights it multiplies by, so that preparing again cannot pull them away.
  const auto map = [&weights](const Linear& linear) -> StepMap {
    return [weights, &linear](const torch::Tensor& x) { return linear(x); };
  };
  PreparedMaps maps;
  maps.steps.feed = map(weights->feed);
  for (const Linear& hidden : weights->hidden) maps.steps.hidden.push_back(map(hidden));
  for (const Linear& gates : weights->layer_gates) maps.steps.layer_inputs.push_back(map(gates));
  if (weights->query) maps.steps.query = map(*weights->query);
  maps.steps.combine = map(weights->combine);
  maps.embedding_gates = map(weights->embedding_gates);
  maps.output = map(weights->output);
  if (weights->keys) maps.keys = map(*weights->keys);
  maps.output_rows = [weights](const torch::Tensor& ids) -> StepMap {
    auto rows = std::make_shared<const Linear>(weights->output.rows(ids));
    return [rows](const torch::Tensor& x) { return (*rows)(x); };
  };
  prepared_ = std::move(maps);
  return weights;
}

void DecoderImpl::quantize_int8() { int8_ = prepare<Int8Linear>(); }

void DecoderImpl::pack_float32() {
  prepare<PackedLinear>();
  int8_.reset();
}

OutputRows DecoderImpl::output_rows(const torch::Tensor& ids) const {
  OutputRows rows;  // a prepared decoder's rows as its own map only, else in float32: [K, H], [K]
  if (prepared_) {
    rows.prepared = prepared_->output_rows(ids);
  } else {
    rows.weight = output_weight.index_select(0, ids);
    rows.bias = output_bias.index_select(0, ids);
  }
  return rows;
}

std::pair<torch::Tensor, torch::Tensor> DecoderImpl::advance(const torch::Tensor& token_gates, DecoderState& state,
                                                             const EncodedSource& source, const StepMaps& maps) {
  torch::Tensor gates = token_gates + maps.feed(state.attentional);  // [B, 3H]
  std::vector<torch::Tensor> new_hidden;
  new_hidden.reserve(cell_pointers_.size());
  torch::Tensor output;
  for (size_t layer = 0; layer < cell_pointers_.size(); ++layer) {
    if (layer > 0) gates = maps.layer_inputs[layer - 1](apply_dropout(output, options_.dropout, is_training()));
    const torch::Tensor hidden = state.hidden[static_cast<int64_t>(layer)];  // [B, H]
    output = GruCellImpl::from_gates(gates, maps.hidden[layer](hidden), hidden);
    new_hidden.push_back(output);
  }
  const torch::Tensor projected = maps.query ? maps.query(output) : torch::Tensor();  // [B, P] W s, or the scorer's
  AttentionResult attended =
      attention(output, source, AttentionStep{state.position, state.coverage, projected, torch::Tensor()});  // [B, C]
  torch::Tensor attentional =                                                                                // [B, H]
      apply_dropout(torch::tanh(maps.combine(torch::cat({output, attended.context}, 1))), options_.dropout,
                    is_training());
  torch::Tensor coverage = state.coverage.defined() ? state.coverage + attended.weights : torch::Tensor();
  torch::Tensor hidden =
      new_hidden.size() == 1 ? new_hidden[0].unsqueeze(0) : torch::stack(new_hidden, 0);  // [L, B, H]
  state = {hidden, attentional, coverage, state.position + 1};
  return {attentional, attended.weights};
}

bool DecoderImpl::takes_fused_loop(const torch::Tensor& token_gates, const EncodedSource& source) const {
  const bool fits =
      token_gates.size(1) > 0 && attention->has_scorer() &&
      kernels::autograd_records({token_gates, source.states, source.keys, feed_gates->weight, combine->weight});
  return kernels::use_kernel(kernels::Operation::kDecoderLoop, {token_gates, source.states, source.keys}, fits);
}

bool DecoderImpl::learns_in_float32(const torch::Tensor& token_gates) const {
  return token_gates.size(1) > 0 && torch::autograd::GradMode::is_enabled() && feed_gates->weight.requires_grad() &&
         feed_gates->weight.scalar_type() == torch::kFloat;
}

bool DecoderImpl::takes_gpu_loop(const torch::Tensor& token_gates) const {
  if (!gpu_loop_device(token_gates.device()) || cell_pointers_.size() != 1 || !learns_in_float32(token_gates)) {
    return false;
  }
  const std::optional<AdditiveForm> form = attention->additive_form();
  return form && form->heads == 1 && !form->coverage.defined();
}

torch::Tensor DecoderImpl::embed(const torch::Tensor& tokens) {
  return apply_dropout(word_dropout(embedding(tokens), options_.word_dropout, is_training()), options_.dropout,
                       is_training());
}

torch::Tensor DecoderImpl::output_logits(const torch::Tensor& attentional) {
  return torch::nn::functional::linear(attentional, output_weight, output_bias);
}

StepOutput DecoderImpl::step(const torch::Tensor& previous_tokens, const DecoderState& state,
                             const EncodedSource& source, const OutputRows& rows) {
  TORCH_CHECK(previous_tokens.dim() == 1 && previous_tokens.size(0) == state.attentional.size(0),
              "decoder step: previous_tokens [B] expected");
  DecoderState next = state;
  torch::Tensor attentional, weights;
  if (prepared_) {
    TORCH_CHECK(!is_training(), "decoder step: a decoder prepared for translation (int8 or packed) only translates");
    const torch::Tensor token_gates = prepared_->embedding_gates(embed(previous_tokens));  // [B, 3H]
    std::tie(attentional, weights) = advance(token_gates, next, source, prepared_->steps);
  } else {
    const torch::Tensor token_gates = embedding_gates(embed(previous_tokens));  // [B, 3H]
    std::tie(attentional, weights) = advance(token_gates, next, source, step_maps());
  }
  torch::Tensor logits;
  if (rows.prepared) {
    logits = rows.prepared(attentional);
  } else if (rows.weight.defined()) {
    logits = torch::nn::functional::linear(attentional, rows.weight, rows.bias);
  } else {
    logits = prepared_ ? prepared_->output(attentional) : output_logits(attentional);
  }
  return {logits, weights, next};
}

DecoderImpl::Path DecoderImpl::teacher_forced_path(const torch::Tensor& token_gates,
                                                   const EncodedSource& source) const {
  const bool learns = learns_in_float32(token_gates);
  if (learns && recorded_pass_takes_all(token_gates.device())) return Path::kGpuRecorded;
  if (takes_gpu_loop(token_gates)) return Path::kGpuLoop;
  if (learns && recorded_pass_device(token_gates.device())) return Path::kGpuRecorded;
  const Path path = takes_fused_loop(token_gates, source) ? Path::kFusedCpu : Path::kReference;
  if (recorded_pass_device(token_gates.device()) && torch::autograd::GradMode::is_enabled()) {
    static std::once_flag logged;
    std::call_once(logged, [&] {
      spdlog::debug(
          "decoder: not a GPU graph pass (they take float32 weights that learn, and teacher forcing): scorer {} "
          "with {} layer(s) trains on the reference pass",
          options_.attention.scorer, cell_pointers_.size());
    });
  }
  return path;  // use_kernel logs the fused CPU pass's choice
}

DecoderOutput DecoderImpl::gpu_loop_pass(const torch::Tensor& token_gates, const DecoderState& state,
                                         const EncodedSource& source) {
  const AdditiveForm form = *attention->additive_form();
  const GruCellImpl& cell = *cell_pointers_.front();
  if (!gpu_loop_) gpu_loop_ = std::make_shared<GpuDecoderLoop>();
  auto [attentional, weights] = gpu_loop_->run(
      token_gates, state.hidden[0], source,
      {feed_gates->weight, cell.weight_hh, cell.bias_hh, form.query_weight, form.energy, combine->weight},
      is_training() ? options_.dropout : 0.0);
  return {attentional, weights};
}

DecoderOutput DecoderImpl::gpu_recorded_pass(const torch::Tensor& token_gates, const DecoderState& state,
                                             const EncodedSource& source) {
  // The weights the steps read: the first layer's feed gates, each layer's, the scorer's, W_c.
  std::vector<torch::Tensor> weights;
  const auto add = [&weights](const torch::nn::Module& module) {
    for (const torch::Tensor& parameter : module.parameters()) {
      if (parameter.requires_grad()) weights.push_back(parameter);
    }
  };
  add(*feed_gates), add(*cells), add(*layer_gates), add(*attention), add(*combine);
  if (!recorded_) recorded_ = std::make_shared<RecordedDecoderPass>();
  return recorded_->run(token_gates, state, source, weights, is_training() && options_.dropout > 0,
                        [this](const torch::Tensor& gates, const DecoderState& initial, const EncodedSource& padded) {
                          return reference_pass(gates, initial, padded);
                        });
}

DecoderOutput DecoderImpl::reference_pass(const torch::Tensor& token_gates, const DecoderState& state,
                                          const EncodedSource& source) {
  const StepMaps maps = step_maps();
  return reference::teacher_forced_steps(
      token_gates, state,
      [&](const torch::Tensor& gates, DecoderState& next) { return advance(gates, next, source, maps); },
      attention->has_scorer());
}

DecoderOutput DecoderImpl::fused_cpu_pass(const torch::Tensor& token_gates, const DecoderState& state,
                                          const EncodedSource& source, const torch::Tensor& target_input) {
  // The additive form runs on the loop's own kernels; any other scorer runs its forward().
  const std::optional<AdditiveForm> form = attention->additive_form();
  FusedDecoderWeights fused;
  fused.feed = feed_gates->weight;
  for (const GruCellImpl* cell : cell_pointers_) {
    fused.hidden.push_back(cell->weight_hh);
    fused.hidden_bias.push_back(cell->bias_hh);
  }
  for (const torch::nn::LinearImpl* gates : layer_gate_pointers_) {
    fused.layer_gates.push_back(gates->weight);
    fused.layer_bias.push_back(gates->bias);
  }
  if (form) {
    fused.query = form->query_weight, fused.energy = form->energy, fused.coverage = form->coverage;
    fused.heads = form->heads;
  }
  fused.combine = combine->weight;
  // [B]: BOS y_1 .. y_n, then padding only (collate pads at the end).
  const torch::Tensor target_lengths = target_input.ne(kPadId).sum(1);
  FusedDecoderOutput output = fused_decoder_loop(token_gates, state.hidden, source, fused, *attention, target_lengths,
                                                 is_training() ? options_.dropout : 0.0);
  return {output.attentional, output.attention};
}

DecoderOutput DecoderImpl::forward(const torch::Tensor& target_input, const EncodedSource& source,
                                   double teacher_forcing) {
  TORCH_CHECK(target_input.dim() == 2 && target_input.size(0) == source.states.size(0),
              "decoder: target_input [B, T] expected, with the encoder's batch size");
  const DecoderState state = initial_state(source);
  const bool has_scorer = attention->has_scorer();
  if (teacher_forcing < 1.0 && is_training()) {
    // Scheduled feeding: per step, the reference token with probability teacher_forcing, else the
    // model's own greedy prediction from the previous step.
    const StepMaps maps = step_maps();
    return reference::scheduled_feeding_steps(
        target_input, state, teacher_forcing,
        [this](const torch::Tensor& tokens) { return embedding_gates(embed(tokens)); },
        [this](const torch::Tensor& attentional) { return output_logits(attentional); },
        [&](const torch::Tensor& gates, DecoderState& next) { return advance(gates, next, source, maps); }, has_scorer);
  }
  // Every input token is known: embed and project all of them in one matrix multiply.
  const torch::Tensor token_gates =
      training_linear(embed(target_input), embedding_gates->weight, embedding_gates->bias);  // [B, T, 3H]
  switch (teacher_forced_path(token_gates, source)) {
    case Path::kGpuLoop:
      return gpu_loop_pass(token_gates, state, source);
    case Path::kGpuRecorded:
      return gpu_recorded_pass(token_gates, state, source);
    case Path::kFusedCpu:
      return fused_cpu_pass(token_gates, state, source, target_input);
    case Path::kReference:
      break;
  }
  return reference_pass(token_gates, state, source);
}

}  // namespace nmt
