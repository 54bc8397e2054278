// libFuzzer target: the checkpoint loader. Any bytes as a checkpoint file, loaded as translate
// loads one (LibTorch's zip reader, our format, version, configuration, vocabularies and
// weights): refused with an exception naming the file, or loaded, never a crash.
#include <torch/torch.h>

#include <cstddef>
#include <cstdint>
#include <string>

#include "fuzz_file.h"
#include "inference/model.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string path = nmt::fuzz::write_input("model.ckpt", data, size);
  try {
    nmt::load_model(path, torch::kCPU);
  } catch (const std::exception&) {
  }
  return 0;
}
