// Checkpoints of format version 1: LibTorch archives (a zip of a pickled TorchScript object, the
// TorchScript code of its classes and its tensors' bytes), read without LibTorch. LibTorch's own
// reader runs the code an archive carries (a class's __setstate__, say) and its unpickler trusts the
// bytes, so a LibTorch archive from a stranger is a program, not data.
//
// The converter reads only what this program's writer wrote: the records a LibTorch archive of
// ours has (any other is refused), class code that declares attributes and nothing else (a `def`,
// and so any __setstate__ or __reduce__, is refused), and a pickle of protocol 2 that builds
// objects of those classes, tensors (torch._utils._rebuild_tensor_v2 on a storage record of this
// archive, every size and stride checked against the storage) and empty OrderedDicts: no other
// callable. The zip is checked first (util/zip_reader.h). What it gives is a checkpoint of the
// current format (inference/checkpoint_format.h), built from those values.
#pragma once

#include <string>

#include "util/safetensors.h"

namespace nmt {

// Whether `bytes` begin as a zip file does (a version 1 checkpoint, or something else zipped).
bool is_legacy_checkpoint(const std::string& bytes);

// The version 2 checkpoint that holds what the version 1 checkpoint `bytes` holds: configuration,
// vocabularies, weights (float32 or int8 export), progress, random states and optimizer state.
// std::runtime_error saying what is refused otherwise.
TensorFile convert_legacy_checkpoint(const std::string& bytes);

}  // namespace nmt
