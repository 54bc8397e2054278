// The checkpoint file format, shared by the reader of models (inference/model.h) and the writer
// and reader of training state (train/checkpoint.h): a safetensors file (util/safetensors.h), so
// that loading one runs nothing it holds. Its metadata names the format and version (and, in a
// training checkpoint, the progress); the resolved configuration ("key\tvalue" lines) and both
// vocabularies are byte tensors ("nmt.config", "nmt.source_vocabulary", "nmt.target_vocabulary");
// the model's weights are "model.NAME" (inference/model.h) and training's optimizer state
// "optimizer.NAME.*" (train/optimizer_state.h).
//
// Files of the format before (version 1, a LibTorch archive) are read through the converter of
// inference/legacy_checkpoint.h, which refuses what this program's own writer never wrote.
#pragma once

#include <torch/types.h>

#include <cstdint>
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "util/safetensors.h"

namespace nmt {

inline constexpr const char* kCheckpointFormatName = "nmt-rnn-checkpoint";
constexpr int64_t kCheckpointVersion = 2;

// The fixed file names in a model directory (step checkpoints are named by train/average.h).
inline constexpr const char* kBestCheckpoint = "best.ckpt";          // best validation so far
inline constexpr const char* kLastCheckpoint = "last.ckpt";          // where --resume continues
inline constexpr const char* kAveragedCheckpoint = "averaged.ckpt";  // nmt average's default output
// Where `nmt train --overwrite` keeps the replaced run's files until the new run's first checkpoint.
inline constexpr const char* kReplacedRunDir = "previous-run";

// "; DIR/previous-run/ still holds the model an --overwrite run replaced ...", when it does, for a
// message about `model_dir` holding no checkpoint; else "".
std::string replaced_run_hint(const std::string& model_dir);

// The records every checkpoint has.
inline constexpr const char* kConfigRecord = "nmt.config";
inline constexpr const char* kSourceVocabularyRecord = "nmt.source_vocabulary";
inline constexpr const char* kTargetVocabularyRecord = "nmt.target_vocabulary";

using ConfigEntries = std::vector<std::pair<std::string, std::string>>;

// Writes the format name, the version and the configuration entries.
void write_checkpoint_header(TensorFile& file, const ConfigEntries& entries);

// What a reader of a damaged checkpoint can do, for the messages: translate and evaluate pick a
// checkpoint with --checkpoint; train --resume needs last.ckpt itself.
inline constexpr const char* kChooseAnotherCheckpoint =
    "use another checkpoint (--checkpoint best|last|PATH) or retrain";
inline constexpr const char* kResumeNeedsLastCheckpoint =
    "--resume needs this file whole: restore it from a copy, or start again with --overwrite (best.ckpt and "
    "step-*.ckpt still serve translate --checkpoint)";

// Reads the checkpoint at `path` (once, whole) and checks it: its structure, format name and
// version. A version 1 file is converted in memory (inference/legacy_checkpoint.h) with a warning
// on standard error that says how to convert it for good. std::runtime_error naming the file and
// ending with `remedy` otherwise; FileNotFound when there is no file.
TensorFile open_checkpoint(const std::string& path, const std::string& remedy = kChooseAnotherCheckpoint);

// Checks bytes read as a checkpoint (format name and version); `what` names them in messages.
TensorFile parse_checkpoint(const std::string& bytes, const std::string& what,
                            const std::string& remedy = kChooseAnotherCheckpoint);

ConfigEntries read_config_entries(const TensorFile& file);

// Writes `file` to `path` with write_file_atomic (util/io.h): a failed write (a full disk) throws a
// message and leaves any earlier file at `path` as it was.
void write_checkpoint_atomic(const TensorFile& file, const std::string& path);

// An integer or a real number of the metadata, written so that it reads back exactly.
void set_metadata_number(TensorFile& file, const std::string& key, int64_t value);
void set_metadata_number(TensorFile& file, const std::string& key, double value);
int64_t metadata_integer(const TensorFile& file, const std::string& key);
double metadata_real(const TensorFile& file, const std::string& key);

// Runs `read`, turning LibTorch's errors and unnamed runtime errors into one-line
// std::runtime_errors that name `path` and say what to do.
void with_checkpoint_errors(const std::string& path, const std::function<void()>& read,
                            const std::string& remedy = kChooseAnotherCheckpoint);

}  // namespace nmt
