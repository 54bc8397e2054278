// TensorBoard event files, written as TensorFlow's EventsWriter and tensorboardX write them: a
// file of TFRecords, each an Event message (util/tensorboard_event.proto), the first saying the
// file's version. TensorBoard reads a directory of such files while they grow. Also the PNG
// encoder and the attention heat map for the images it shows, and a reader for the tests.
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>
#include <string_view>
#include <vector>

namespace nmt {

// CRC-32C (Castagnoli, reflected polynomial 0x82F63B78), the checksum TFRecords carry.
uint32_t crc32c(std::string_view data);

// TFRecord's masked form of crc32c(data): rotated right by 15 bits plus a constant, because a
// CRC of bytes that themselves hold CRCs is weak (tensorflow/core/lib/hash/crc32c.h, Mask).
uint32_t masked_crc32c(std::string_view data);

// One TFRecord: the payload's length as 8 bytes little-endian, the masked CRC of those 8 bytes,
// the payload, the masked CRC of the payload (CRCs as 4 bytes little-endian).
std::string tfrecord(std::string_view payload);

// A PNG file of 8-bit pixels, `channels` 1 (grayscale) or 3 (RGB), rows top to bottom, each
// pixel's channels together. std::invalid_argument when a size is not positive, `channels` is
// neither, or `pixels` does not hold width * height * channels bytes.
std::string encode_png(const std::vector<uint8_t>& pixels, int width, int height, int channels);

// An attention matrix as RGB pixels for encode_png: `weights` rows are target tokens (top to
// bottom), columns source tokens (left to right), each weight in [0, 1] a `cell` x `cell` square
// from white (0) to dark blue (1); values outside are clamped, NaN is red so that it shows. A
// 1-pixel light grey line runs between cells and around the edge, so that white cells do not
// merge with the page. Sets `width` and `height` to the image's size. std::invalid_argument when
// `weights` is empty or ragged, `cell` < 1, or a side would exceed 16384 pixels.
std::vector<uint8_t> heatmap_pixels(const std::vector<std::vector<float>>& weights, int cell, int& width, int& height);

// Appends events to a new file in a directory TensorBoard reads (tensorboard --logdir DIR).
// Every event is one whole record handed to the kernel by write(2) before the call returns, with
// nothing buffered in the process: a run killed at any moment, even by SIGKILL, leaves every
// event written before it complete, and at most a cut last record, which TensorBoard skips. (A
// crash of the machine itself can lose what the page cache held; nothing is fsynced.)
// Not thread-safe: one writer (rank 0) calls it from one thread.
class EventWriter {
 public:
  // Creates `directory` (and its parents) and the file
  // events.out.tfevents.<unix seconds, 10 digits>.<hostname>.<pid>.nmt in it (.nmt.1, .nmt.2 ...
  // when that name is taken), and writes the file_version event. std::runtime_error naming the
  // path and the reason when either cannot be created.
  explicit EventWriter(const std::filesystem::path& directory);
  ~EventWriter();
  EventWriter(const EventWriter&) = delete;
  EventWriter& operator=(const EventWriter&) = delete;
  EventWriter(EventWriter&&) = delete;
  EventWriter& operator=(EventWriter&&) = delete;

  // Each writes one event at `step`, stamped with the current time. A failed write throws
  // std::runtime_error naming the file and the reason; the file may then end in a cut record.
  // A number for TensorBoard's scalars dashboard (stored as a float, as TensorBoard keeps it).
  void scalar(const std::string& tag, int64_t step, double value);
  // A PNG file (encode_png) of `width` x `height` pixels with `channels` 1 or 3.
  void image(const std::string& tag, int64_t step, const std::string& png, int width, int height, int channels);
  // Markdown for TensorBoard's text dashboard.
  void text(const std::string& tag, int64_t step, const std::string& markdown);

  const std::filesystem::path& path() const { return path_; }
  // Events written, the file_version included.
  size_t events() const { return events_; }

 private:
  void write_event(const std::string& serialized_event);

  std::filesystem::path path_;
  int descriptor_ = -1;
  size_t events_ = 0;
};

// One summary value (or the file_version) of an event file, for tests.
struct EventRecord {
  double wall_time = 0;
  int64_t step = 0;
  std::string tag;   // empty for the file_version
  std::string kind;  // "scalar", "image", "text" or "file_version"
  double value = 0;  // the scalar
  std::string data;  // the PNG, the text, or the version ("brain.Event:2")
};

// The records of an event file in order, each CRC checked (std::runtime_error naming the file
// and the record's byte offset when one fails, or when a record does not parse as an Event). A
// last record cut short ends the list without an error, as TensorBoard reads a file still being
// written. Values of other kinds than the four above are left out.
std::vector<EventRecord> read_events(const std::filesystem::path& file);

// Removes the events after `step` from every event file of `directory` (each file rewritten through
// a temporary file and a rename, so that it is whole before or after): what an interrupted run
// wrote past the checkpoint that a resumed run continues from, and will write again. Returns how
// many went. A damaged file (see read_events) is left as it is, the others trimmed, and then the
// first damage is thrown.
size_t drop_events_after(const std::filesystem::path& directory, int64_t step);

}  // namespace nmt
