// The checkpoint file format, shared by the reader of models (inference/model.h) and the writer
// and reader of training state (train/checkpoint.h): a LibTorch archive with a format name and a
// version, the resolved configuration as "key\tvalue" lines, both vocabularies, the model's
// weights, and (written by training only) progress and optimizer state.
#pragma once

#include <torch/serialize/input-archive.h>
#include <torch/serialize/output-archive.h>

#include <cstdint>
#include <functional>
#include <string>
#include <utility>
#include <vector>

namespace nmt {

constexpr int64_t kCheckpointVersion = 1;

// The fixed file names in a model directory (step checkpoints are named by train/average.h).
inline constexpr const char* kBestCheckpoint = "best.ckpt";          // best validation so far
inline constexpr const char* kLastCheckpoint = "last.ckpt";          // where --resume continues
inline constexpr const char* kAveragedCheckpoint = "averaged.ckpt";  // nmt average's default output

using ConfigEntries = std::vector<std::pair<std::string, std::string>>;

// Writes the format name, the version and the configuration entries.
void write_checkpoint_header(torch::serialize::OutputArchive& archive, const ConfigEntries& entries);

// What a reader of a damaged checkpoint can do, for the messages: translate and evaluate pick a
// checkpoint with --checkpoint; train --resume needs last.ckpt itself.
inline constexpr const char* kChooseAnotherCheckpoint =
    "use another checkpoint (--checkpoint best|last|PATH) or retrain";
inline constexpr const char* kResumeNeedsLastCheckpoint =
    "--resume needs this file whole: restore it from a copy, or start again with --overwrite (best.ckpt and "
    "step-*.ckpt still serve translate --checkpoint)";

// Opens `path` onto `device` and checks the format name and version (std::runtime_error naming
// the file and ending with `remedy` otherwise). The caller reads the records it needs.
void open_checkpoint(const std::string& path, const torch::Device& device, torch::serialize::InputArchive& archive,
                     const std::string& remedy = kChooseAnotherCheckpoint);

ConfigEntries read_config_entries(torch::serialize::InputArchive& archive);

// Serializes `archive` in memory and writes it to `path` with write_file_atomic (util/io.h):
// LibTorch's own file writer reports a failed write (a full disk) from its destructor, which ends
// the process; this throws a message and leaves any earlier file at `path` as it was.
void write_archive_atomic(torch::serialize::OutputArchive& archive, const std::string& path);

// Strings (vocabularies) stored as byte tensors.
void write_bytes(torch::serialize::OutputArchive& archive, const std::string& key, const std::string& bytes);
std::string read_bytes(torch::serialize::InputArchive& archive, const std::string& key);

// Runs `read`, turning LibTorch's errors and unnamed runtime errors into one-line
// std::runtime_errors that name `path` and say what to do.
void with_checkpoint_errors(const std::string& path, const std::function<void()>& read,
                            const std::string& remedy = kChooseAnotherCheckpoint);

}  // namespace nmt
