// Every fast operation against its reference, in float32: once with the kernels this CPU runs, once
// with the switch off (kernels/dispatch.h, NMT_KERNELS=off), same inputs and seed. Also the switch
// itself, and the team of threads' exception path.
#include <torch/torch.h>

#include <atomic>
#include <catch2/catch.hpp>
#include <cstdlib>
#include <fstream>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "helpers.h"
#include "kernels/available.h"
#include "kernels/bf16_kernels.h"
#include "kernels/dispatch.h"
#include "kernels/int8_gemm.h"
#include "kernels/row_kernels.h"
#include "model/attention.h"
#include "model/dropout.h"
#include "model/gru_cell.h"
#include "model/linear/bf16_products.h"
#include "model/linear/int8_linear.h"
#include "model/linear/loop_weight.h"
#include "model/linear/packed_linear.h"
#include "model/ops/attention_products.h"
#include "model/seq2seq.h"
#include "train/fused_adam.h"
#include "train/loss.h"
#include "util/team.h"

using namespace nmt;
using namespace nmt::testing;
using kernels::KernelLevel;

namespace {

struct Run {
  std::vector<torch::Tensor> values;     // outputs
  std::vector<torch::Tensor> gradients;  // d(sum of outputs * fixed weights)/d(inputs)
};

// Runs `operation` on fresh copies of `inputs` (all requiring gradients) at `level`, then takes the
// gradient of a fixed random weighting of its outputs.
Run run_at(KernelLevel level, const std::vector<torch::Tensor>& inputs,
           const std::function<std::vector<torch::Tensor>(const std::vector<torch::Tensor>&)>& operation) {
  kernels::ScopedKernelLevel scoped(level);
  std::vector<torch::Tensor> copies;
  for (const auto& input : inputs) copies.push_back(input.detach().clone().requires_grad_());
  Run run;
  run.values = operation(copies);
  torch::manual_seed(7);
  torch::Tensor total = torch::zeros({});
  for (const auto& value : run.values) total = total + (value * torch::randn(value.sizes())).sum();
  run.gradients = torch::autograd::grad({total}, copies);
  return run;
}

void check_both_ways(const std::vector<torch::Tensor>& inputs,
                     const std::function<std::vector<torch::Tensor>(const std::vector<torch::Tensor>&)>& operation,
                     double rtol = 1e-5, double atol = 1e-5) {
  const Run fast = run_at(kernels::supported_kernel_level(), inputs, operation);
  const Run reference = run_at(KernelLevel::kOff, inputs, operation);
  for (size_t i = 0; i < fast.values.size(); ++i) {
    INFO("output " << i);
    CHECK(torch::allclose(fast.values[i], reference.values[i], rtol, atol));
  }
  for (size_t i = 0; i < fast.gradients.size(); ++i) {
    INFO("gradient of input " << i);
    CHECK(torch::allclose(fast.gradients[i], reference.gradients[i], rtol, atol));
  }
}

}  // namespace

TEST_CASE("the kernel switch: off rules the kernels out, a level above the CPU's is refused", "[kernels]") {
  using kernels::Operation;
  const torch::Tensor x = torch::randn({2, 3});
  // The CPU's level, or the one NMT_KERNELS names (the suite may run under NMT_KERNELS=avx2).
  const KernelLevel level = kernels::kernel_level();
  CHECK(level <= kernels::supported_kernel_level());
  if (std::getenv("NMT_KERNELS") == nullptr) CHECK(level == kernels::supported_kernel_level());
  {
    kernels::ScopedKernelLevel off(KernelLevel::kOff);
    CHECK(kernels::kernel_level() == KernelLevel::kOff);
    CHECK_FALSE(kernels::use_kernel(Operation::kGruStep, {x}));
    CHECK_FALSE(kernels::use_kernel(Operation::kPackedProducts, {x}));
    CHECK_FALSE(kernels::use_kernel(Operation::kDropoutMask, {x}));
  }
  CHECK(kernels::kernel_level() == level);  // restored
  const bool avx2 = level >= KernelLevel::kAvx2;
  CHECK(kernels::use_kernel(Operation::kGruStep, {x}) == avx2);
  CHECK(kernels::use_kernel(Operation::kPackedProducts, {x}) == avx2);
  CHECK_FALSE(kernels::use_kernel(Operation::kGruStep, {x}, /*fits=*/false));
  const torch::Tensor absent;  // an absent bias
  CHECK(kernels::use_kernel(Operation::kGruStep, {x, absent}) == avx2);
  const torch::Tensor x64 = x.to(torch::kFloat64);
  CHECK_FALSE(kernels::use_kernel(Operation::kGruStep, {x64}));
  CHECK(kernels::use_kernel(Operation::kDropoutMask, {x64}) == avx2);  // the hashed mask takes any type
  if (kernels::supported_kernel_level() < KernelLevel::kAvx512) {
    CHECK_THROWS_WITH(kernels::set_kernel_level(KernelLevel::kAvx512), Catch::Contains("at most"));
  }
  if (kernels::supported_kernel_level() == KernelLevel::kOff)
    WARN("this CPU runs no kernels: both ways are the reference");
}

TEST_CASE("both ways in float32: GRU step, additive energy, weighted sum, output-layer loss", "[kernels]") {
  if (kernels::supported_kernel_level() == KernelLevel::kOff) {
    return skip_case("this CPU runs no kernels: both ways would be the reference");
  }
  torch::set_num_threads(2);
  torch::manual_seed(11);
  SECTION("GRU step") {  // 40 rows split between two threads; H = 13 ends in a lane tail
    check_both_ways(
        {2 * torch::randn({40, 39}), 2 * torch::randn({40, 39}), torch::randn({40, 13})},
        [](const auto& in) { return std::vector<torch::Tensor>{GruCellImpl::from_gates(in[0], in[1], in[2])}; });
  }
  SECTION("additive energy") {
    check_both_ways({torch::randn({9, 7, 13}), torch::randn({9, 13}), torch::randn({13})},
                    [](const auto& in) { return std::vector<torch::Tensor>{additive_energy(in[0], in[1], in[2])}; });
  }
  SECTION("weighted sum") {
    check_both_ways({torch::softmax(torch::randn({9, 7}), 1), torch::randn({9, 7, 11})},
                    [](const auto& in) { return std::vector<torch::Tensor>{weighted_sum(in[0], in[1])}; });
  }
  SECTION("output-layer loss") {
    const torch::Tensor targets = torch::randint(0, 29, {40}, torch::kInt64);
    check_both_ways(
        {torch::randn({40, 6}), 3 * torch::randn({29, 6}), torch::randn({29})},
        [&](const auto& in) {
          return std::vector<torch::Tensor>{output_layer_loss(in[0], in[1], in[2], targets, 0.1)};
        },
        1e-4, 1e-4);
  }
}

TEST_CASE("attention's masked softmax kernel matches LibTorch's and is exactly 0 at padding", "[kernels]") {
  if (kernels::supported_kernel_level() == KernelLevel::kOff) return skip_case("no AVX2 on this CPU: no kernel");
  torch::manual_seed(5);
  const torch::Tensor scores = 4 * torch::randn({4, 19});  // 19 positions: two lanes of 8 and a tail
  const torch::Tensor lengths = torch::tensor({19, 11, 8, 1}, torch::kInt64);
  const torch::Tensor mask = make_source_mask(lengths, 19, torch::kCPU);
  const torch::Tensor expected = torch::softmax(scores.masked_fill(mask.logical_not(), -INFINITY), 1);
  torch::Tensor weights = scores.clone();
  for (int64_t b = 0; b < 4; ++b) {
    kernels::prefix_softmax(weights[b].data_ptr<float>(), lengths[b].item<int64_t>(), 19);
  }
  CHECK(torch::allclose(weights, expected, 1e-5, 1e-7));
  CHECK(torch::equal(weights.masked_select(mask.logical_not()), torch::zeros({19 - 11 + 19 - 8 + 18})));
}

TEST_CASE("decoding's log-softmax kernels: LibTorch's values, and the fused top-k takes the same bits", "[kernels]") {
  if (kernels::supported_kernel_level() == KernelLevel::kOff) return skip_case("no AVX2 on this CPU: no kernel");
  torch::manual_seed(6);
  for (const int64_t cols : {1, 7, 8, 37, 2000}) {
    for (const int64_t k : {1, 2, 10}) {
      if (k > cols) continue;
      INFO(cols << " columns, top " << k);
      torch::Tensor z = 6 * torch::randn({5, cols});
      z[1].fill_(0.5);                              // all tied: the lowest columns win
      if (cols > 8) z[2][3] = z[2][cols - 2] = 40;  // the maximum at a banned column and a tie at the top
      const std::vector<int64_t> banned{0, std::min<int64_t>(3, cols - 1)};
      torch::Tensor all = torch::empty_like(z);
      kernels::log_softmax_rows(z.data_ptr<float>(), 5, cols, all.data_ptr<float>());
      CHECK(torch::allclose(all, torch::log_softmax(z, 1), 1e-5, 1e-5));

      torch::Tensor values = torch::empty({5, k}), ids = torch::empty({5, k}, torch::kInt64);
      const int64_t banned_count = cols > 1 ? 2 : 0;
      kernels::top_log_softmax_rows(z.data_ptr<float>(), 5, cols, k, banned.data(), banned_count,
                                    values.data_ptr<float>(), ids.data_ptr<int64_t>());
      // The reference: every log-probability, banned columns out, then a stable sort (ties: lower column).
      torch::Tensor choosable = all.clone();
      for (int64_t b = 0; b < banned_count; ++b) choosable.select(1, banned[static_cast<size_t>(b)]).fill_(-INFINITY);
      const int64_t distinct_banned = banned_count == 0 ? 0 : (banned[0] == banned[1] ? 1 : 2);
      const int64_t finite = cols - distinct_banned;
      const int64_t compared = std::min(k, finite);
      auto [sorted, order] = choosable.sort(/*stable=*/true, /*dim=*/1, /*descending=*/true);
      CHECK(torch::equal(ids.narrow(1, 0, compared), order.narrow(1, 0, compared)));
      CHECK(torch::equal(values.narrow(1, 0, compared), sorted.narrow(1, 0, compared)));  // bit for bit
      if (compared < k) CHECK(torch::all(values.narrow(1, compared, k - compared) == -INFINITY).item<bool>());
    }
  }
}

TEST_CASE("both ways in float32: encoder and decoder training pass of a whole model", "[kernels]") {
  // The BiGru layer loop and the fused decoder loop against the per-step reference. Dropout 0:
  // the two ways draw dropout masks differently (see the dropout test below).
  if (kernels::supported_kernel_level() == KernelLevel::kOff) {
    return skip_case("this CPU runs no kernels: both ways would be the reference");
  }
  torch::set_num_threads(2);
  for (const std::string& attention : all_attention_types()) {
    DYNAMIC_SECTION(attention) {
      ModelOptions options = tiny_model_options(attention, /*decoder_hidden=*/13);
      options.encoder_hidden_size = 7;
      torch::manual_seed(21);
      Seq2Seq model(options, 23, 23);
      model->train();
      auto [source, lengths] = random_source({6, 5, 5, 3, 1}, 23, 22);
      torch::Tensor target = torch::randint(4, 23, {5, 6}, torch::kInt64);
      target.select(1, 0).fill_(kBosId);
      const std::vector<int64_t> target_lengths = {6, 5, 4, 4, 2};  // decreasing, as make_batches leaves them
      for (int64_t b = 0; b < 5; ++b) target[b].narrow(0, target_lengths[b], 6 - target_lengths[b]).fill_(kPadId);
      const torch::Tensor real = target.ne(kPadId).unsqueeze(2).to(torch::kFloat32);
      std::vector<torch::Tensor> parameters = model->parameters();
      auto run = [&](KernelLevel level) {
        kernels::ScopedKernelLevel scoped(level);
        model->zero_grad(/*set_to_none=*/true);
        DecoderOutput out = model(source, lengths, target);
        torch::manual_seed(23);
        (out.attentional * real * torch::randn(out.attentional.sizes())).sum().backward();
        std::vector<torch::Tensor> gradients;
        for (const auto& parameter : parameters) {
          gradients.push_back(parameter.grad().defined() ? parameter.grad().clone() : torch::zeros_like(parameter));
        }
        return std::make_pair((out.attentional * real).detach(), gradients);
      };
      const auto [fast, fast_gradients] = run(kernels::supported_kernel_level());
      const auto [reference, reference_gradients] = run(KernelLevel::kOff);
      CHECK(torch::allclose(fast, reference, 1e-4, 1e-5));
      for (size_t i = 0; i < parameters.size(); ++i) {
        INFO("parameter " << i);
        CHECK(torch::allclose(fast_gradients[i], reference_gradients[i], 1e-3, 1e-4));
      }
    }
  }
}

TEST_CASE("both ways in float32: the loops' packed products, AVX-512 and AVX2", "[kernels]") {
  torch::manual_seed(31);
  // 70 columns: four whole panels and a ragged one; 1 to 13 rows: whole and partial row blocks of
  // both kernels (8 and 6 rows); a bias, a matrix, or nothing to add; a block of columns alone.
  const torch::Tensor weight = torch::randn({21, 70}), bias = torch::randn({70});
  std::vector<KernelLevel> levels;
  for (KernelLevel level : {KernelLevel::kAvx512, KernelLevel::kAvx2}) {
    if (level <= kernels::supported_kernel_level()) levels.push_back(level);
  }
  if (levels.empty()) return skip_case("no AVX2 on this CPU: no packed products to compare");
  for (KernelLevel level : levels) {
    for (int64_t rows : {1, 5, 6, 7, 8, 13}) {
      DYNAMIC_SECTION(kernels::to_string(level) << ", " << rows << " rows") {
        const torch::Tensor x = torch::randn({rows, 21}), matrix = torch::randn({rows, 70});
        kernels::ScopedKernelLevel scoped(level);
        const LoopWeight packed(weight);
        for (const torch::Tensor& init : {bias, matrix, torch::Tensor()}) {
          torch::Tensor fast = torch::full({rows, 70}, 7.0f);
          packed.multiply(x, init, fast);
          const torch::Tensor expected = init.defined() ? x.mm(weight) + init : x.mm(weight);
          CHECK(torch::allclose(fast, expected, 1e-5, 1e-5));
        }
        torch::Tensor part = torch::full({rows, 70}, 7.0f);
        packed.multiply(x, bias, part, {32, 70});  // the columns of a thread's share, the rest left alone
        CHECK(torch::allclose(part.narrow(1, 32, 38), (x.mm(weight) + bias).narrow(1, 32, 38), 1e-5, 1e-5));
        CHECK(part.narrow(1, 0, 32).eq(7.0f).all().item<bool>());
      }
    }
  }
  torch::Tensor reference = torch::empty({9, 70});
  const torch::Tensor x = torch::randn({9, 21});
  kernels::ScopedKernelLevel off(KernelLevel::kOff);
  LoopWeight(weight).multiply(x, bias, reference);
  CHECK(torch::allclose(reference, x.mm(weight) + bias, 1e-5, 1e-5));
}

TEST_CASE("packed float32 maps for decoding: BLAS's values, the same bits in any batch and for any rows", "[kernels]") {
  torch::manual_seed(33);
  // 70 outputs: four whole panels and a ragged one; 21 inputs; 1 to 13 rows.
  const torch::Tensor weight = torch::randn({70, 21}), bias = torch::randn({70});
  const torch::Tensor ids = torch::tensor({69, 3, 40, 16, 17, 0}, torch::kInt64);
  for (const int threads : {1, 2}) {
    for (const bool with_bias : {true, false}) {
      DYNAMIC_SECTION(threads << " threads, " << (with_bias ? "a bias" : "no bias")) {
        torch::set_num_threads(threads);
        const PackedLinear packed(weight, with_bias ? bias : torch::Tensor());
        const PackedLinear some = packed.rows(ids);
        REQUIRE(some.out_features() == 6);
        for (int64_t rows : {1, 5, 8, 13}) {
          INFO(rows << " rows");
          const torch::Tensor x = torch::randn({rows, 21});
          const torch::Tensor out = packed(x);
          CHECK(torch::allclose(out, torch::nn::functional::linear(x, weight, with_bias ? bias : torch::Tensor()), 1e-5,
                                1e-5));
          if (kernels::kernel_level() == KernelLevel::kOff) continue;  // BLAS: no promise of the same bits
          CHECK(torch::equal(some(x), out.index_select(1, ids)));      // a shortlist's rows
          for (int64_t r = 0; r < rows; ++r) CHECK(torch::equal(packed(x.narrow(0, r, 1)), out.narrow(0, r, 1)));
        }
        CHECK(packed(torch::randn({0, 21})).sizes() == torch::IntArrayRef({0, 70}));
      }
    }
  }
  // Columns split between two threads, as a decoder step's are (300 outputs, 19 panels, for 13
  // rows), in inference mode, which OpenMP's other threads are not in; and the weights copied.
  torch::set_num_threads(2);
  {
    const torch::Tensor big = torch::randn({300, 64}), big_bias = torch::randn({300});
    const PackedLinear split(big, big_bias);
    torch::InferenceMode inference;
    const torch::Tensor x = torch::randn({13, 64});
    const torch::Tensor out = split(x);
    CHECK(torch::allclose(out, torch::nn::functional::linear(x, big, big_bias), 1e-4, 1e-5));
    big.mul_(2), big_bias.mul_(2);
    CHECK(torch::equal(split(x), out));
    if (kernels::kernel_level() != KernelLevel::kOff) {
      for (int64_t r = 0; r < 13; ++r) CHECK(torch::equal(split(x.narrow(0, r, 1)), out.narrow(0, r, 1)));
    }
  }
  // The reference, BLAS on the plain weight, as translation runs it.
  kernels::ScopedKernelLevel off(KernelLevel::kOff);
  const PackedLinear reference(weight, bias);
  torch::InferenceMode inference;
  const torch::Tensor x = torch::randn({200, 21});
  CHECK(torch::allclose(reference(x), torch::nn::functional::linear(x, weight, bias), 1e-5, 1e-5));
}

TEST_CASE("bf16 products: the reference rounds as LibTorch does, below AVX-512 a LoopWeight multiplies in float32",
          "[kernels]") {
  torch::manual_seed(37);
  const auto rounded = [](const torch::Tensor& t) { return t.to(torch::kBFloat16).to(torch::kFloat32); };
  // The plain reference rounds as LibTorch does (to nearest, ties to even).
  const torch::Tensor a = torch::randn({5, 37}), b = torch::randn({37, 19});
  torch::Tensor plain = torch::empty({5, 19});
  kernels::bf16_reference(a.data_ptr<float>(), 37, b.data_ptr<float>(), 19, 37, 19, 5, nullptr, 0,
                          plain.data_ptr<float>(), 19);
  CHECK(torch::allclose(plain, rounded(a).mm(rounded(b)), 1e-5, 1e-5));
  // Without the AVX-512 level there are no bf16 products (kernels::packed_kernel), whatever the CPU
  // has: the AVX2 kernel where it runs, else BLAS.
  const kernels::ScopedKernelLevel below(std::min(kernels::supported_kernel_level(), KernelLevel::kAvx2));
  const Bf16ProductsScope bf16(true);
  torch::Tensor out = torch::empty({5, 19});
  LoopWeight(b).multiply(a, {}, out);
  CHECK(torch::allclose(out, a.mm(b), 1e-5, 1e-5));
  CHECK_FALSE(torch::allclose(out, plain, 1e-5, 1e-5));  // not rounded
}

TEST_CASE("bf16 products on AMX tiles and with AVX512_BF16: the rounded factors' float32 sums, from 1 and 2 threads",
          "[kernels]") {
  const bool amx = kernels::amx_kernels_available(), avx512_bf16 = kernels::avx512_bf16_kernels_available();
  if (!(amx || avx512_bf16)) return skip_case("no AMX or AVX512_BF16 on this CPU");
  if (kernels::kernel_level() != KernelLevel::kAvx512) {
    return skip_case("the kernels run below AVX-512 (NMT_KERNELS): no bf16 products");
  }
  torch::manual_seed(37);
  // Depths below, at and past a tile's 32; 70 columns: four whole panels and a ragged one; rows
  // within one tile, two, and a ragged third.
  for (int64_t depth : {21, 64, 70}) {
    const torch::Tensor weight = torch::randn({depth, 70}), bias = torch::randn({70});
    for (int64_t rows : {1, 15, 16, 17, 33, 60}) {
      DYNAMIC_SECTION(depth << " deep, " << rows << " rows") {
        const torch::Tensor x = torch::randn({rows, depth}), matrix = torch::randn({rows, 70});
        const Bf16ProductsScope bf16(true);
        const LoopWeight packed(weight);
        for (const torch::Tensor& init : {bias, matrix, torch::Tensor()}) {
          torch::Tensor fast = torch::full({rows, 70}, 7.0f), expected = torch::empty({rows, 70});
          packed.multiply(x, init, fast);
          const torch::Tensor full_init = init.defined() ? init.expand({rows, 70}).contiguous() : init;
          kernels::bf16_reference(x.data_ptr<float>(), depth, weight.data_ptr<float>(), 70, depth, 70, rows,
                                  init.defined() ? full_init.data_ptr<float>() : nullptr, 70,
                                  expected.data_ptr<float>(), 70);
          CHECK(torch::allclose(fast, expected, 1e-5, 1e-5));
          // and it did round: float32's product is further off than the order of the sums
          const torch::Tensor exact = init.defined() ? x.mm(weight) + init : x.mm(weight);
          CHECK_FALSE(torch::allclose(fast, exact, 1e-5, 1e-5));
        }
        // x and out as views with longer rows, as the loops pass them, and out added to itself.
        const torch::Tensor wide_x = torch::zeros({rows, depth + 5});
        wide_x.narrow(1, 0, depth).copy_(x);
        torch::Tensor view_out = torch::zeros({rows, 80}).narrow(1, 0, 70);
        view_out.copy_(matrix);
        packed.multiply(wide_x.narrow(1, 0, depth), view_out, view_out);
        torch::Tensor expected = torch::empty({rows, 70});
        kernels::bf16_reference(x.data_ptr<float>(), depth, weight.data_ptr<float>(), 70, depth, 70, rows,
                                matrix.data_ptr<float>(), 70, expected.data_ptr<float>(), 70);
        CHECK(torch::allclose(view_out, expected, 1e-5, 1e-5));
        // Two threads, each writing its share of the columns of one output.
        torch::Tensor shared = torch::full({rows, 70}, 7.0f);
        std::thread other([&] { packed.multiply(x, bias, shared, {32, 70}); });
        packed.multiply(x, bias, shared, {0, 32});
        other.join();
        torch::Tensor alone = torch::empty({rows, 70});
        packed.multiply(x, bias, alone);
        CHECK(torch::equal(shared, alone));
        // The vdpbf16ps kernel called directly over the same packed panels (a CPU with AMX too runs
        // the tiles in a LoopWeight), by column blocks starting on an odd panel and an even one.
        if (avx512_bf16) {
          std::vector<uint16_t> panels(kernels::packed_bf16_size(depth, 70));
          kernels::pack_weight_bf16(weight.data_ptr<float>(), 70, depth, 70, panels.data());
          torch::Tensor dot = torch::full({rows, 70}, 7.0f);
          for (const auto& [begin, end] : {std::pair<int64_t, int64_t>{0, 16}, {16, 48}, {48, 70}}) {
            kernels::gemm_bf16_avx512(x.data_ptr<float>(), depth, panels.data(), depth, 70, rows, begin, end,
                                      bias.data_ptr<float>(), 0, dot.data_ptr<float>(), 70);
          }
          CHECK(torch::allclose(dot, alone, 1e-5, 1e-5));
          // a matrix to add, and none
          torch::Tensor with_matrix = torch::empty({rows, 70}), no_init = torch::empty({rows, 70});
          kernels::gemm_bf16_avx512(x.data_ptr<float>(), depth, panels.data(), depth, 70, rows, 0, 70,
                                    matrix.data_ptr<float>(), 70, with_matrix.data_ptr<float>(), 70);
          kernels::gemm_bf16_avx512(x.data_ptr<float>(), depth, panels.data(), depth, 70, rows, 0, 70, nullptr, 0,
                                    no_init.data_ptr<float>(), 70);
          CHECK(torch::allclose(with_matrix, expected, 1e-5, 1e-5));
          CHECK(torch::allclose(no_init + matrix, expected, 1e-5, 1e-5));
        }
      }
    }
  }
}

TEST_CASE("bf16 conversions give LibTorch's bits at every level, and bf16 linear maps the right values and gradients",
          "[kernels]") {
  torch::manual_seed(41);
  // Random values; ties (a low half of exactly 0x8000 rounds to the even neighbour); infinity and
  // NaNs (any NaN becomes 0xFFFF, as in LibTorch's vectorized conversion).
  torch::Tensor x = torch::randn({37, 53}) * 100;
  std::vector<uint32_t> special = {0x3F808000, 0x3F818000, 0xBF808000, 0x00008000,
                                   0x7F800000, 0x7FC00000, 0x7F800001, 0xFFFFFFFF};
  x.view({-1}).narrow(0, 0, 8).copy_(torch::from_blob(special.data(), {8}, torch::kInt32).view(torch::kFloat32));
  // Compared as bits: NaN != NaN.
  const auto same_bits = [](const torch::Tensor& a, const torch::Tensor& b) {
    const auto type = a.element_size() == 2 ? torch::kInt16 : torch::kInt32;
    return torch::equal(a.contiguous().view(type), b.contiguous().view(type));
  };
  const torch::Tensor bias = torch::randn({53});
  std::vector<KernelLevel> levels = {KernelLevel::kOff};
  if (kernels::supported_kernel_level() == KernelLevel::kAvx512) levels.push_back(KernelLevel::kAvx512);
  for (KernelLevel level : levels) {
    DYNAMIC_SECTION("level " << kernels::to_string(level)) {
      const kernels::ScopedKernelLevel scoped(level);
      const torch::Tensor rounded = to_bf16(x);
      CHECK(same_bits(rounded, x.to(torch::kBFloat16)));
      CHECK(same_bits(to_bf16(x.t()), x.t().to(torch::kBFloat16)));
      CHECK(same_bits(to_float(rounded), rounded.to(torch::kFloat32)));
      CHECK(same_bits(to_float(rounded, bias), rounded.to(torch::kFloat32) + bias));
    }
  }
  // training_linear in bf16 against float64 products of the rounded factors, for the values and both
  // gradients: within 1% in norm (LibTorch's bfloat16 products round their results to bfloat16); a
  // wrong factor or transpose would be off by the order of the values themselves.
  const auto widened = [](const torch::Tensor& t) { return t.to(torch::kBFloat16).to(torch::kFloat64); };
  const auto near = [](const torch::Tensor& ours, const torch::Tensor& expected) {
    return (ours.to(torch::kFloat64) - expected).norm().item<double>() <= 1e-2 * expected.norm().item<double>();
  };
  const torch::Tensor input = torch::randn({2, 5, 16}, torch::requires_grad()),
                      weight = torch::randn({12, 16}, torch::requires_grad()),
                      shift = torch::randn({12}, torch::requires_grad()), upstream = torch::randn({2, 5, 12});
  torch::Tensor output;
  {
    const Bf16ProductsScope bf16(true);
    output = training_linear(input, weight, shift);
    (output * upstream).sum().backward();
  }
  const torch::Tensor grad_rows = widened(upstream).view({10, 12});
  CHECK(near(output, torch::matmul(widened(input), widened(weight).t()) + shift.to(torch::kFloat64)));
  CHECK(near(input.grad(), grad_rows.mm(widened(weight)).view({2, 5, 16})));
  CHECK(near(weight.grad(), grad_rows.t().mm(widened(input).view({10, 16}))));
  CHECK(torch::allclose(shift.grad(), upstream.view({10, 12}).sum(0), 1e-5, 1e-5));
  // And without a bias (the general scorer's keys).
  const torch::Tensor plain = torch::randn({7, 16}, torch::requires_grad());
  {
    const Bf16ProductsScope bf16(true);
    output = training_linear(plain, weight, {});
    (output * upstream.view({10, 12}).narrow(0, 0, 7)).sum().backward();
  }
  CHECK(near(output, widened(plain).mm(widened(weight).t())));
  CHECK(near(plain.grad(), widened(upstream).view({10, 12}).narrow(0, 0, 7).mm(widened(weight))));
}

TEST_CASE("the output layer's fused loss in bf16: float64's loss and gradients on the rounded factors", "[kernels]") {
  if (!kernels::cpu_has_bf16()) return skip_case("no bf16 dot products on this CPU: precision bf16 is refused");
  torch::manual_seed(43);
  // 37 rows: several blocks of 8 and a ragged one, over two threads' shares.
  const torch::Tensor hidden = torch::randn({37, 24}, torch::requires_grad()),
                      weight = torch::randn({50, 24}, torch::requires_grad()),
                      bias = torch::randn({50}, torch::requires_grad()), targets = torch::randint(0, 50, {37});
  torch::Tensor loss;
  {
    const Bf16ProductsScope bf16(true);
    loss = output_layer_loss(hidden, weight, bias, targets, 0.1);
    loss.backward();
  }
  // The reference: the same smoothed cross-entropy sum in float64 on the factors rounded to bfloat16.
  const auto widened = [](const torch::Tensor& t) {
    return t.detach().to(torch::kBFloat16).to(torch::kFloat64).requires_grad_();
  };
  const torch::Tensor h = widened(hidden), w = widened(weight), b = bias.detach().to(torch::kFloat64).requires_grad_();
  const torch::Tensor log_p = torch::log_softmax(h.mm(w.t()) + b, 1);
  const torch::Tensor expected = -(0.9 * log_p.gather(1, targets.unsqueeze(1)).sum() + 0.1 / 50 * log_p.sum());
  expected.backward();
  const auto near = [](const torch::Tensor& ours, const torch::Tensor& reference) {
    return (ours.to(torch::kFloat64) - reference).norm().item<double>() <= 1e-2 * reference.norm().item<double>();
  };
  CHECK(std::abs(loss.item<double>() - expected.item<double>()) <= 2e-3 * expected.item<double>());
  CHECK(near(hidden.grad(), h.grad()));
  CHECK(near(weight.grad(), w.grad()));
  CHECK(near(bias.grad(), b.grad()));
}

TEST_CASE("both ways in float32: an Adam step", "[kernels]") {
  if (kernels::supported_kernel_level() == KernelLevel::kOff) {
    return skip_case("this CPU runs no kernels: both ways would be the reference");
  }
  torch::manual_seed(41);
  const torch::Tensor start = torch::randn({1001}), grad = torch::randn({1001});
  auto step = [&](KernelLevel level) {
    kernels::ScopedKernelLevel scoped(level);
    torch::Tensor parameter = start.clone().requires_grad_();
    FusedAdam adam({parameter}, torch::optim::AdamOptions(0.01));
    for (int i = 0; i < 3; ++i) {
      parameter.mutable_grad() = grad * (i + 1);
      adam.step();
    }
    return parameter.detach();
  };
  CHECK(torch::allclose(step(kernels::supported_kernel_level()), step(KernelLevel::kOff), 1e-6, 1e-6));
}

TEST_CASE("both ways: dropout keeps 1 - p of the elements, scaled by 1 / (1 - p)", "[kernels]") {
  for (KernelLevel level : {kernels::supported_kernel_level(), KernelLevel::kOff}) {
    DYNAMIC_SECTION(kernels::to_string(level)) {
      kernels::ScopedKernelLevel scoped(level);
      torch::manual_seed(51);
      const torch::Tensor out = apply_dropout(torch::ones({200, 100}), 0.3, /*training=*/true);
      const double kept = out.ne(0).to(torch::kFloat64).mean().item<double>();
      CHECK(kept == Approx(0.7).margin(0.02));
      CHECK(out.max().item<float>() == Approx(1.0 / 0.7));
    }
  }
}

TEST_CASE("a team of threads: an exception in one thread skips the later phases everywhere and is rethrown",
          "[kernels]") {
  torch::set_num_threads(3);
  std::atomic<int> first_phase{0}, after_failure{0}, barriers_met{0};
  auto body = [&](Team& team) {
    team.phase([&] { ++first_phase; });
    team.phase([&] {
      if (team.share(3).first == 0) throw std::runtime_error("thread 0 failed");
    });
    team.phase([&] { ++after_failure; });
    ++barriers_met;
  };
  CHECK_THROWS_WITH(run_as_team(body), "thread 0 failed");
  CHECK(first_phase.load() == 3);
  CHECK(after_failure.load() == 0);  // skipped on every thread
  CHECK(barriers_met.load() == 3);   // every thread reached the end: no barrier was left waiting
  torch::set_num_threads(2);
}

TEST_CASE("int8 quantization of activations: AVX2 gives the reference's bytes and scales", "[kernels]") {
  if (!kernels::avx2_kernels_available()) return skip_case("no AVX2 on this CPU: no kernel to compare");
  torch::manual_seed(42);
  for (const int32_t limit : {kernels::kInt8Limit, kernels::kInt8Avx2Limit}) {
    for (const int64_t depth : {1, 7, 8, 33, 64, 100, 512}) {
      INFO(depth << " columns, limit " << limit);
      torch::Tensor x = 3 * torch::randn({6, depth});
      x[1].zero_();                  // scale 1
      x[2] = x[2].sign() * 0.5;      // every entry at the limit exactly, rounding ties below
      if (depth > 3) x[3][2] = -50;  // the largest magnitude negative
      x[4] *= 1e-30;                 // tiny scales
      const int64_t padded = kernels::int8_depth(depth);
      torch::Tensor expected = torch::full({6, padded}, 99, torch::kInt8), got = expected.clone();
      torch::Tensor expected_scale = torch::empty({6}), got_scale = torch::empty({6});
      kernels::quantize_int8_rows(x.data_ptr<float>(), depth, 6, depth, limit, expected.data_ptr<int8_t>(),
                                  expected_scale.data_ptr<float>());
      kernels::quantize_int8_rows_avx2(x.data_ptr<float>(), depth, 6, depth, limit, got.data_ptr<int8_t>(),
                                       got_scale.data_ptr<float>());
      CHECK(torch::equal(got, expected));
      CHECK(torch::equal(got_scale, expected_scale));
      CHECK(torch::all(expected.narrow(1, depth, padded - depth) == 0).item<bool>());
      CHECK(expected.abs().max().item<int>() == limit);  // row 2 reaches it, none passes it
      CHECK(expected_scale[0].item<float>() == x[0].abs().max().item<float>() / static_cast<float>(limit));
    }
  }
  // Ties go to the even neighbour, as std::nearbyint: 2.5 -> 2, 3.5 -> 4 (scale 127 / 127 = 1); four
  // times over, so that the vector loop (32 at a time) and the scalar tail both meet them.
  const torch::Tensor ties = torch::tensor({127.0f, 2.5f, 3.5f, -2.5f, -3.5f, 0.5f, 1.5f, 0.0f, 4.5f}).repeat(4);
  torch::Tensor bytes = torch::empty({36}, torch::kInt8), scale = torch::empty({1});
  kernels::quantize_int8_rows_avx2(ties.data_ptr<float>(), 36, 1, 36, kernels::kInt8Limit, bytes.data_ptr<int8_t>(),
                                   scale.data_ptr<float>());
  CHECK(torch::equal(bytes, torch::tensor({127, 2, 4, -2, -4, 0, 2, 0, 4}, torch::kInt8).repeat(4)));
}

TEST_CASE("int8 products: the VNNI and AVX2 kernels give the reference's sums and outputs exactly", "[kernels]") {
  torch::manual_seed(41);
  using Kernel = void (*)(const kernels::Int8Product&, int64_t, int64_t);
  struct Fast {
    std::string name;
    Kernel kernel;
    int32_t limit;  // the activations' magnitude the kernel takes
  };
  std::vector<Fast> fast;
  if (kernels::avx2_kernels_available()) fast.push_back({"avx2", kernels::int8_gemm_avx2, kernels::kInt8Avx2Limit});
  if (kernels::vnni_kernels_available()) fast.push_back({"vnni", kernels::int8_gemm_vnni, kernels::kInt8Limit});
  if (fast.empty()) return skip_case("no AVX2 or VNNI on this CPU: no kernel to compare");
  // Ragged everything: rows around the kernels' blocks (3 rows for AVX2, 4 for VNNI), depths not a
  // multiple of 4, columns past whole panels and blocks of 4 panels (64); the extreme values
  // included: the first row at the activations' limit in depths 0, 1, 4 and 5 against weights at
  // 127 and at -127, the largest and smallest sums the AVX2 kernel adds in int16 (two pairs of two
  // groups: +-4 * 63 * 127 once shifted), and -127 against -limit.
  for (const auto& [name, kernel, limit] : fast) {
    for (const int64_t m : {1, 3, 4, 5, 9}) {
      for (const int64_t depth : {1, 6, 33, 256}) {
        for (const int64_t columns : {1, 16, 17, 70, 130}) {
          const int64_t padded = kernels::int8_depth(depth);
          torch::Tensor q = torch::randint(-127, 128, {columns, depth}, torch::kInt8);
          torch::Tensor a = torch::zeros({m, padded}, torch::kInt8);
          a.narrow(1, 0, depth).copy_(torch::randint(-limit, limit + 1, {m, depth}, torch::kInt8));
          for (const int64_t k : {0, 1, 4, 5}) {
            if (k >= depth) break;
            a.index_put_({0, k}, limit);
            q.index_put_({0, k}, 127);
            if (columns > 1) q.index_put_({1, k}, -127);
          }
          if (m > 1) a.index_put_({1, 0}, -limit);
          torch::Tensor packed = torch::empty({kernels::int8_packed_size(columns, depth)}, torch::kInt8);
          kernels::pack_int8_weight(q.data_ptr<int8_t>(), depth, columns, depth, packed.data_ptr<int8_t>());
          const torch::Tensor sums = q.to(torch::kInt32).sum(1, false, torch::kInt32).contiguous();
          const torch::Tensor ones_m = torch::ones({m}), ones_n = torch::ones({columns});
          const torch::Tensor row_scale = torch::rand({m}) + 0.5, scale = torch::rand({columns}) + 0.5;
          const torch::Tensor bias = torch::randn({columns});
          // Unit scales and no bias: the outputs are the integer sums, exactly (all below 2^24).
          const torch::Tensor exact =
              a.narrow(1, 0, depth).to(torch::kInt64).mm(q.to(torch::kInt64).t()).to(torch::kFloat);
          for (const bool scaled : {false, true}) {
            const auto product = [&](torch::Tensor& c) {
              return kernels::Int8Product{a.data_ptr<int8_t>(),
                                          m,
                                          packed.data_ptr<int8_t>(),
                                          depth,
                                          columns,
                                          (scaled ? row_scale : ones_m).data_ptr<float>(),
                                          (scaled ? scale : ones_n).data_ptr<float>(),
                                          scaled ? bias.data_ptr<float>() : nullptr,
                                          sums.data_ptr<int32_t>(),
                                          c.data_ptr<float>(),
                                          columns};
            };
            torch::Tensor reference = torch::full({m, columns}, 7.0f);
            kernels::int8_gemm_reference(product(reference), 0, columns);
            if (!scaled) REQUIRE(torch::equal(reference, exact));
            INFO(name << ": " << m << " rows, depth " << depth << ", " << columns << " columns, scaled " << scaled);
            torch::Tensor c = torch::full({m, columns}, 7.0f);
            kernel(product(c), 0, columns);
            CHECK(torch::equal(c, reference));
            if (columns > 16) {  // a thread's share of the columns, the others left alone
              torch::Tensor part = torch::full({m, columns}, 7.0f);
              kernel(product(part), 16, columns);
              CHECK(torch::equal(part.narrow(1, 16, columns - 16), reference.narrow(1, 16, columns - 16)));
              CHECK(part.narrow(1, 0, 16).eq(7.0f).all().item<bool>());
            }
          }
        }
      }
    }
  }
}

TEST_CASE("int8 linear maps: within the quantization bound of float32, the reference's sums at every kernel level",
          "[kernels]") {
  torch::manual_seed(43);
  const int64_t depth = 45;
  const torch::Tensor weight = torch::randn({70, depth}), bias = torch::randn({70});
  torch::Tensor x = torch::randn({11, depth});
  x.index_put_({3}, 0.0f);  // a row of zeros: scale 1, output the bias
  const Int8Linear linear(weight, bias);
  // The map as the reference computes it with the activations quantized to `limit`.
  const auto reference = [&](int32_t limit) {
    const QuantizedRows rows = quantize_rows(weight);
    torch::Tensor packed = torch::empty({kernels::int8_packed_size(70, depth)}, torch::kInt8);
    kernels::pack_int8_weight(rows.values.data_ptr<int8_t>(), depth, 70, depth, packed.data_ptr<int8_t>());
    torch::Tensor a = torch::empty({11, kernels::int8_depth(depth)}, torch::kInt8), t = torch::empty({11});
    kernels::quantize_int8_rows(x.data_ptr<float>(), depth, 11, depth, limit, a.data_ptr<int8_t>(),
                                t.data_ptr<float>());
    torch::Tensor y = torch::empty({11, 70});
    kernels::int8_gemm_reference(
        {a.data_ptr<int8_t>(), 11, packed.data_ptr<int8_t>(), depth, 70, t.data_ptr<float>(),
         rows.scales.data_ptr<float>(), bias.data_ptr<float>(), nullptr, y.data_ptr<float>(), 70},
        0, 70);
    return y;
  };
  for (const KernelLevel level : {KernelLevel::kOff, KernelLevel::kAvx2, KernelLevel::kAvx512}) {
    if (level > kernels::supported_kernel_level()) continue;
    INFO(kernels::to_string(level));
    kernels::ScopedKernelLevel scoped(level);
    // 8-bit activations without kernels and with VNNI; 6 bits for the AVX2 kernel (vpmaddubsw).
    const bool vnni = level == KernelLevel::kAvx512 && kernels::vnni_kernels_available();
    const int32_t limit = Int8Linear::activation_limit();
    CHECK(limit == (level == KernelLevel::kOff || vnni ? 127 : 31));
    const torch::Tensor y = linear(x);
    CHECK(torch::equal(y, reference(limit)));
    // x = t a + e with |e| <= t / 2 and W = s q + d with |d| <= s / 2, per row, so
    // |x.w - (t a).(s q)| <= (t / 2) |w|_1 + (s / 2) (|x|_1 + K t / 2).
    const torch::Tensor t = x.abs().amax(1, true) / limit, s = weight.abs().amax(1) / 127;  // [M, 1], [N]
    const torch::Tensor bound = t / 2 * weight.abs().sum(1) + s / 2 * (x.abs().sum(1, true) + depth * t / 2);
    CHECK((y - torch::addmm(bias, x, weight.t())).abs().le(bound + 1e-5).all().item<bool>());
    CHECK(torch::allclose(y[3], bias));
    // A shortlist's rows: those columns of the whole map, exactly.
    const torch::Tensor ids = torch::tensor({0, 5, 17, 18, 69}, torch::kInt64);
    CHECK(torch::equal(linear.rows(ids)(x), y.index_select(1, ids)));
  }
  const torch::Tensor s = weight.abs().amax(1) / 127;
  CHECK(torch::allclose(linear.dequantized_weight(), weight, 0, s.max().item<float>() / 2 + 1e-6));
}

TEST_CASE("the CPU's features as CPUID gives them match the flags Linux shows", "[kernels]") {
  // Linux reads the same CPUID bits for /proc/cpuinfo's flags (and hides those whose state it does
  // not save): every feature the kernels choose by must agree with it.
  std::ifstream cpuinfo("/proc/cpuinfo");
  std::string line;
  std::set<std::string> flags;
  while (std::getline(cpuinfo, line)) {
    if (line.rfind("flags", 0) != 0) continue;
    std::istringstream words(line.substr(line.find(':') + 1));
    for (std::string flag; words >> flag;) flags.insert(flag);
    break;
  }
  if (flags.empty()) return skip_case("no /proc/cpuinfo flags to compare with");
  const auto has = [&](const char* flag) { return flags.count(flag) > 0; };
  const kernels::CpuFeatures features = kernels::cpu_features();
  CHECK(features.avx2_fma == (has("avx2") && has("fma")));
  const bool avx512 = has("avx512f") && has("avx512bw") && has("avx512vl") && has("avx512dq");
  CHECK(features.avx512 == avx512);
  CHECK(features.avx512_bf16 == (avx512 && has("avx512_bf16")));
  CHECK(features.amx_bf16 == (avx512 && has("amx_bf16")));
  CHECK(kernels::cpu_has_bf16() == (avx512 && (has("avx512_bf16") || has("amx_bf16"))));
}
