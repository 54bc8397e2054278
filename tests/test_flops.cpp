#include <catch2/catch.hpp>

#include "bench/flops.h"
#include "helpers.h"

using namespace nmt;
using namespace nmt::testing;

// Hand counts for tiny_model_options(): E = 8, encoder 6 per direction (C = 12), decoder H = 12,
// additive size A = 10, one layer each; V = 15, S = 5 source and T = 4 target tokens per sentence.
//   encoder per source token: 2 directions x (2*8*18 + 2*6*18) = 1008; additive keys 2*12*10 = 240
//   decoder per target token: embedding gates 2*8*36 = 576, fed-back gates 2*12*36 = 864,
//     recurrent gates 864, combine 2*24*12 = 576, output 2*12*15 = 360 (= 3240 without attention);
//     additive attention: query 2*12*10 = 240, scores 5*2*10 = 100, context 5*2*12 = 120
//   bridge once per sentence: 2*12*12 = 288
TEST_CASE("FLOP counts follow the model's shapes", "[flops]") {
  const FlopShapes shapes{15, 5.0, 4.0};

  const FlopCount additive = count_flops(tiny_model_options("additive"), shapes);
  CHECK(additive.encoder == 1008 + 240);
  CHECK(additive.decoder == 3240 + 240 + 100 + 120);
  CHECK(additive.per_sentence == 288);
  CHECK(additive.forward_per_target_token(shapes) == Approx(3700 + 1248 * 5.0 / 4.0 + 288 / 4.0));
  CHECK(training_flops_per_target_token(tiny_model_options("additive"), shapes) ==
        Approx(3 * additive.forward_per_target_token(shapes)));

  // dot with C == H: no key map; scores and context are S * 2 * 12 each.
  const FlopCount dot = count_flops(tiny_model_options("dot"), shapes);
  CHECK(dot.encoder == 1008);
  CHECK(dot.decoder == 3240 + 120 + 120);
  // ... with H = 16 != C the keys are mapped (2*12*16 per source token), and every H-sized product grows.
  const FlopCount mapped = count_flops(tiny_model_options("dot", 16), shapes);
  CHECK(mapped.encoder == 1008 + 2 * 12 * 16);

  const FlopCount none = count_flops(tiny_model_options("none"), shapes);
  CHECK(none.decoder == 3240);
  CHECK(none.encoder == 1008);

  // The output layer is linear in the vocabulary: 2 * H more per target token for each word type.
  const FlopCount bigger = count_flops(tiny_model_options("none"), FlopShapes{30, 5.0, 4.0});
  CHECK(bigger.decoder - none.decoder == 2 * 12 * 15);

  // A second decoder layer adds its recurrent and input gates: 2 * (2*12*36).
  ModelOptions two_layers = tiny_model_options("none");
  two_layers.decoder_layers = 2;
  CHECK(count_flops(two_layers, shapes).decoder == 3240 + 2 * 864);
}
