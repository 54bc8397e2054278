#include "util/tensorboard.h"

#include <fcntl.h>
#include <unistd.h>
#include <zlib.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <chrono>
#include <climits>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <stdexcept>
#include <system_error>
#include <utility>

#include "util/io.h"
#include "util/tensorboard_event.pb.h"

namespace nmt {

namespace fs = std::filesystem;

namespace {

// The table of the reflected CRC-32C: entry b is the CRC of the byte b alone (before the
// initial and final inversions), so that the CRC advances a byte per lookup.
constexpr uint32_t kCastagnoli = 0x82F63B78u;

constexpr std::array<uint32_t, 256> make_crc32c_table() {
  std::array<uint32_t, 256> table{};
  for (uint32_t byte = 0; byte < 256; ++byte) {
    uint32_t crc = byte;
    for (int bit = 0; bit < 8; ++bit) crc = (crc >> 1) ^ ((crc & 1u) != 0 ? kCastagnoli : 0u);
    table[byte] = crc;
  }
  return table;
}

constexpr std::array<uint32_t, 256> kCrc32cTable = make_crc32c_table();

// tensorflow/core/lib/hash/crc32c.h, kMaskDelta.
constexpr uint32_t kMaskDelta = 0xa282ead8u;

// A TFRecord's framing around its payload: length and its CRC before, the payload's CRC after.
constexpr size_t kRecordHeaderBytes = 8 + 4;
constexpr size_t kRecordFooterBytes = 4;

constexpr const char* kFileVersion = "brain.Event:2";
constexpr const char* kDirectoryHint = "choose another --tensorboard DIR, or --tensorboard no";
// Enough for the writers of one directory that start within the same second of one process.
constexpr int kMaxNameAttempts = 1000;

void append_little_endian(std::string& out, uint64_t value, int bytes) {
  for (int i = 0; i < bytes; ++i) out.push_back(static_cast<char>((value >> (8 * i)) & 0xFFu));
}

uint64_t read_little_endian(const char* data, int bytes) {
  uint64_t value = 0;
  for (int i = 0; i < bytes; ++i) value |= static_cast<uint64_t>(static_cast<uint8_t>(data[i])) << (8 * i);
  return value;
}

// PNG stores its integers big-endian (PNG specification, section 7.1).
void append_big_endian32(std::string& out, uint32_t value) {
  for (int shift = 24; shift >= 0; shift -= 8) out.push_back(static_cast<char>((value >> shift) & 0xFFu));
}

// A PNG chunk: the data's length, the 4-letter type, the data, and the CRC-32 (zlib's, the PNG
// one) of type and data.
void append_png_chunk(std::string& png, const char* type, const std::string& data) {
  if (data.size() > 0x7FFFFFFFu) {
    throw std::invalid_argument("PNG: a chunk of " + std::to_string(data.size()) +
                                " bytes is over the format's 2^31 - 1");
  }
  append_big_endian32(png, static_cast<uint32_t>(data.size()));
  const size_t start = png.size();
  png.append(type, 4);
  png.append(data);
  uLong crc = ::crc32(0L, Z_NULL, 0);
  crc = ::crc32(crc, reinterpret_cast<const Bytef*>(png.data() + start), static_cast<uInt>(png.size() - start));
  append_big_endian32(png, static_cast<uint32_t>(crc));
}

struct Rgb {
  uint8_t red, green, blue;
};

constexpr Rgb kWhite{255, 255, 255};
constexpr Rgb kDarkBlue{8, 48, 107};  // the darkest of ColorBrewer's "Blues"
constexpr Rgb kGridGrey{211, 211, 211};
constexpr Rgb kNanRed{220, 20, 60};
constexpr int64_t kMaxHeatmapSide = 16384;

Rgb weight_colour(float weight) {
  if (std::isnan(weight)) return kNanRed;
  const float t = std::clamp(weight, 0.0f, 1.0f);
  const auto mix = [t](uint8_t low, uint8_t high) {
    return static_cast<uint8_t>(std::lround(static_cast<float>(low) + t * (static_cast<float>(high) - low)));
  };
  return {mix(kWhite.red, kDarkBlue.red), mix(kWhite.green, kDarkBlue.green), mix(kWhite.blue, kDarkBlue.blue)};
}

void paint(std::vector<uint8_t>& pixels, size_t pixel, Rgb colour) {
  pixels[3 * pixel] = colour.red;
  pixels[3 * pixel + 1] = colour.green;
  pixels[3 * pixel + 2] = colour.blue;
}

double now_seconds() {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}

std::string host_name() {
  char name[256] = {0};
  if (::gethostname(name, sizeof(name) - 1) != 0 || name[0] == '\0') return "localhost";
  return name;
}

// The name TensorFlow's EventsWriter and tensorboardX give (TensorBoard reads any file whose name
// holds "tfevents"), with the pid so that two processes on one host never share a file.
std::string event_file_name() {
  char seconds[32];
  std::snprintf(seconds, sizeof(seconds), "%010lld", static_cast<long long>(std::time(nullptr)));
  return std::string("events.out.tfevents.") + seconds + "." + host_name() + "." + std::to_string(::getpid()) + ".nmt";
}

tensorboard::Event stamped_event(int64_t step) {
  tensorboard::Event event;
  event.set_wall_time(now_seconds());
  event.set_step(step);
  return event;
}

std::runtime_error damaged_record(const fs::path& file, size_t offset, const std::string& problem) {
  return std::runtime_error(file.string() + ": the record at byte offset " + std::to_string(offset) + " " + problem +
                            "; the event file is damaged");
}

// The values of one event as EventRecords, in the order they appear.
void append_records(const tensorboard::Event& event, std::vector<EventRecord>& records) {
  EventRecord stamp;
  stamp.wall_time = event.wall_time();
  stamp.step = event.step();
  if (event.what_case() == tensorboard::Event::kFileVersion) {
    stamp.kind = "file_version";
    stamp.data = event.file_version();
    records.push_back(std::move(stamp));
    return;
  }
  if (event.what_case() != tensorboard::Event::kSummary) return;
  for (const tensorboard::Summary::Value& value : event.summary().value()) {
    EventRecord record = stamp;
    record.tag = value.tag();
    switch (value.value_case()) {
      case tensorboard::Summary::Value::kSimpleValue:
        record.kind = "scalar";
        record.value = value.simple_value();
        break;
      case tensorboard::Summary::Value::kImage:
        record.kind = "image";
        record.data = value.image().encoded_image_string();
        break;
      case tensorboard::Summary::Value::kTensor:
        if (value.metadata().plugin_data().plugin_name() != "text" || value.tensor().string_val_size() == 0) continue;
        record.kind = "text";
        record.data = value.tensor().string_val(0);
        break;
      default:
        continue;
    }
    records.push_back(std::move(record));
  }
}

}  // namespace

uint32_t crc32c(std::string_view data) {
  uint32_t crc = 0xFFFFFFFFu;
  for (const char c : data) crc = kCrc32cTable[(crc ^ static_cast<uint8_t>(c)) & 0xFFu] ^ (crc >> 8);
  return crc ^ 0xFFFFFFFFu;
}

uint32_t masked_crc32c(std::string_view data) {
  const uint32_t crc = crc32c(data);
  return ((crc >> 15) | (crc << 17)) + kMaskDelta;
}

std::string tfrecord(std::string_view payload) {
  std::string record;
  record.reserve(kRecordHeaderBytes + payload.size() + kRecordFooterBytes);
  append_little_endian(record, payload.size(), 8);
  append_little_endian(record, masked_crc32c(record), 4);  // the CRC of the 8 length bytes so far
  record.append(payload);
  append_little_endian(record, masked_crc32c(payload), 4);
  return record;
}

std::string encode_png(const std::vector<uint8_t>& pixels, int width, int height, int channels) {
  if (width <= 0 || height <= 0) {
    throw std::invalid_argument("PNG: an image of " + std::to_string(width) + " x " + std::to_string(height) +
                                " pixels; both sides must be at least 1");
  }
  if (channels != 1 && channels != 3) {
    throw std::invalid_argument("PNG: " + std::to_string(channels) + " channels; use 1 (grayscale) or 3 (RGB)");
  }
  const size_t row_bytes = static_cast<size_t>(width) * static_cast<size_t>(channels);
  if (pixels.size() != row_bytes * static_cast<size_t>(height)) {
    throw std::invalid_argument("PNG: " + std::to_string(pixels.size()) + " bytes of pixels for " +
                                std::to_string(width) + " x " + std::to_string(height) + " x " +
                                std::to_string(channels) + "; they must match");
  }
  // Each row after a filter-type byte, 0 (None): the rows as they are (PNG specification, 9.2).
  std::string rows;
  rows.reserve(static_cast<size_t>(height) * (row_bytes + 1));
  for (int y = 0; y < height; ++y) {
    rows.push_back('\0');
    rows.append(reinterpret_cast<const char*>(pixels.data()) + static_cast<size_t>(y) * row_bytes, row_bytes);
  }
  uLongf compressed_size = ::compressBound(static_cast<uLong>(rows.size()));
  std::string compressed(compressed_size, '\0');
  const int status =
      ::compress2(reinterpret_cast<Bytef*>(&compressed[0]), &compressed_size,
                  reinterpret_cast<const Bytef*>(rows.data()), static_cast<uLong>(rows.size()), Z_DEFAULT_COMPRESSION);
  if (status != Z_OK) throw std::runtime_error("PNG: zlib's compress2 failed (status " + std::to_string(status) + ")");
  compressed.resize(compressed_size);

  std::string header;  // IHDR: width, height, bit depth 8, colour type, compression, filter, interlace
  append_big_endian32(header, static_cast<uint32_t>(width));
  append_big_endian32(header, static_cast<uint32_t>(height));
  header.push_back(8);
  header.push_back(channels == 1 ? 0 : 2);  // colour type 0 grayscale, 2 truecolour (RGB)
  header.append(3, '\0');

  std::string png("\x89PNG\r\n\x1a\n", 8);
  append_png_chunk(png, "IHDR", header);
  append_png_chunk(png, "IDAT", compressed);
  append_png_chunk(png, "IEND", "");
  return png;
}

std::vector<uint8_t> heatmap_pixels(const std::vector<std::vector<float>>& weights, int cell, int& width, int& height) {
  if (weights.empty() || weights.front().empty()) throw std::invalid_argument("heatmap: the attention matrix is empty");
  const size_t columns = weights.front().size();
  for (size_t row = 0; row < weights.size(); ++row) {
    if (weights[row].size() != columns) {
      throw std::invalid_argument("heatmap: row " + std::to_string(row) + " has " +
                                  std::to_string(weights[row].size()) + " weights and row 0 has " +
                                  std::to_string(columns) + "; every row needs one per source token");
    }
  }
  if (cell < 1) throw std::invalid_argument("heatmap: cells of " + std::to_string(cell) + " pixels; use at least 1");
  // Each cell and the line after it, plus the line before the first (checked before multiplying).
  const auto side = [cell](size_t cells) {
    return cells > static_cast<size_t>(kMaxHeatmapSide) ? kMaxHeatmapSide + 1
                                                        : static_cast<int64_t>(cells) * (int64_t{cell} + 1) + 1;
  };
  const int64_t full_width = side(columns);
  const int64_t full_height = side(weights.size());
  if (full_width > kMaxHeatmapSide || full_height > kMaxHeatmapSide) {
    throw std::invalid_argument("heatmap: " + std::to_string(weights.size()) + " x " + std::to_string(columns) +
                                " cells of " + std::to_string(cell) + " pixels exceed " +
                                std::to_string(kMaxHeatmapSide) + " pixels a side; use smaller cells");
  }
  width = static_cast<int>(full_width);
  height = static_cast<int>(full_height);

  std::vector<uint8_t> pixels(static_cast<size_t>(width) * static_cast<size_t>(height) * 3);
  for (size_t pixel = 0; pixel < pixels.size() / 3; ++pixel) paint(pixels, pixel, kGridGrey);
  for (size_t row = 0; row < weights.size(); ++row) {
    for (size_t column = 0; column < columns; ++column) {
      const Rgb colour = weight_colour(weights[row][column]);
      const size_t top = 1 + row * static_cast<size_t>(cell + 1);
      const size_t left = 1 + column * static_cast<size_t>(cell + 1);
      for (size_t y = top; y < top + static_cast<size_t>(cell); ++y) {
        for (size_t x = left; x < left + static_cast<size_t>(cell); ++x) {
          paint(pixels, y * static_cast<size_t>(width) + x, colour);
        }
      }
    }
  }
  return pixels;
}

EventWriter::EventWriter(const fs::path& directory) {
  std::error_code error;
  fs::create_directories(directory, error);
  std::error_code ignored;
  if (error || !fs::is_directory(directory, ignored)) {
    const std::string reason = error ? error.message() : std::strerror(ENOTDIR);
    throw std::runtime_error(directory.string() + ": cannot create the TensorBoard directory (" + reason + "); " +
                             kDirectoryHint);
  }
  // O_EXCL: never append to another writer's file. A taken name gets a counter after ".nmt",
  // so that it sorts after the first file, in the order TensorBoard reads a directory's files.
  const std::string name = event_file_name();
  for (int attempt = 0;; ++attempt) {
    path_ = directory / (attempt == 0 ? name : name + "." + std::to_string(attempt));
    descriptor_ = ::open(path_.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_APPEND | O_CLOEXEC, 0644);
    if (descriptor_ >= 0) break;
    const int reason = errno;
    if (reason != EEXIST || attempt == kMaxNameAttempts) {
      throw std::runtime_error(path_.string() + ": cannot create the TensorBoard event file (" + std::strerror(reason) +
                               "); " + kDirectoryHint);
    }
  }
  try {
    tensorboard::Event event = stamped_event(0);
    event.set_file_version(kFileVersion);
    write_event(event.SerializeAsString());
  } catch (...) {
    ::close(descriptor_);  // the destructor does not run for a constructor that throws
    throw;
  }
}

EventWriter::~EventWriter() {
  if (descriptor_ >= 0) ::close(descriptor_);
}

void EventWriter::scalar(const std::string& tag, int64_t step, double value) {
  tensorboard::Event event = stamped_event(step);
  tensorboard::Summary::Value* summary_value = event.mutable_summary()->add_value();
  summary_value->set_tag(tag);
  summary_value->set_simple_value(static_cast<float>(value));
  write_event(event.SerializeAsString());
}

void EventWriter::image(const std::string& tag, int64_t step, const std::string& png, int width, int height,
                        int channels) {
  tensorboard::Event event = stamped_event(step);
  tensorboard::Summary::Value* summary_value = event.mutable_summary()->add_value();
  summary_value->set_tag(tag);
  tensorboard::Summary::Image* picture = summary_value->mutable_image();
  picture->set_height(height);
  picture->set_width(width);
  picture->set_colorspace(channels);  // 1 grayscale, 3 RGB: the same numbers as summary.proto's
  picture->set_encoded_image_string(png);
  write_event(event.SerializeAsString());
}

// As tensorboard/plugins/text/summary_v2.py's text_pb writes a Python string: the text plugin's
// metadata (its content, TextPluginData{version: 0}, serializes to no bytes) and a rank-0
// DT_STRING tensor, which the dashboard renders as Markdown. (tensorboardX writes shape [1],
// which the dashboard shows as a one-cell table instead.)
void EventWriter::text(const std::string& tag, int64_t step, const std::string& markdown) {
  tensorboard::Event event = stamped_event(step);
  tensorboard::Summary::Value* summary_value = event.mutable_summary()->add_value();
  summary_value->set_tag(tag);
  summary_value->mutable_metadata()->mutable_plugin_data()->set_plugin_name("text");
  tensorboard::TensorProto* tensor = summary_value->mutable_tensor();
  tensor->set_dtype(tensorboard::DT_STRING);
  tensor->mutable_tensor_shape();  // present and without dimensions: a scalar
  tensor->add_string_val(markdown);
  write_event(event.SerializeAsString());
}

// One write loop for the whole record, straight to the descriptor: the kernel has every byte
// before this returns, so a killed process leaves whole records (and at most one cut short by a
// failing write, which read_events and TensorBoard stop at).
void EventWriter::write_event(const std::string& serialized_event) {
  const std::string record = tfrecord(serialized_event);
  if (const std::string reason = write_fully(descriptor_, record.data(), record.size()); !reason.empty()) {
    throw std::runtime_error(path_.string() + ": cannot write a TensorBoard event (" + reason +
                             "); free some disk space, or run with --tensorboard no");
  }
  ++events_;
}

namespace {

// Calls `visit` with each whole record's Event and payload, in order; see read_events.
template <typename Visit>
void for_each_event(const fs::path& file, Visit visit) {
  const std::string bytes = read_file(file.string());
  size_t offset = 0;
  while (bytes.size() - offset >= kRecordHeaderBytes) {
    const char* record = bytes.data() + offset;
    const uint64_t length = read_little_endian(record, 8);
    if (masked_crc32c(std::string_view(record, 8)) != read_little_endian(record + 8, 4)) {
      throw damaged_record(file, offset, "fails the CRC check of its length");
    }
    const size_t available = bytes.size() - offset - kRecordHeaderBytes;
    if (available < kRecordFooterBytes || length > available - kRecordFooterBytes) break;  // cut short: the end
    const std::string_view payload(record + kRecordHeaderBytes, static_cast<size_t>(length));
    if (masked_crc32c(payload) != read_little_endian(record + kRecordHeaderBytes + length, 4)) {
      throw damaged_record(file, offset, "fails the CRC check of its payload");
    }
    tensorboard::Event event;
    if (length > static_cast<uint64_t>(INT_MAX) || !event.ParseFromArray(payload.data(), static_cast<int>(length))) {
      throw damaged_record(file, offset, "does not parse as an Event");
    }
    visit(event, payload);
    offset += kRecordHeaderBytes + static_cast<size_t>(length) + kRecordFooterBytes;
  }
}

}  // namespace

std::vector<EventRecord> read_events(const fs::path& file) {
  std::vector<EventRecord> records;
  for_each_event(file, [&](const tensorboard::Event& event, std::string_view) { append_records(event, records); });
  return records;
}

size_t drop_events_after(const fs::path& directory, int64_t step) {
  std::error_code error;
  if (!fs::is_directory(directory, error)) return 0;
  size_t dropped = 0;
  std::string first_damage;
  for (const auto& entry : fs::directory_iterator(directory)) {
    if (!entry.is_regular_file() || entry.path().filename().string().rfind("events.out.tfevents.", 0) != 0) continue;
    std::string kept;
    size_t later = 0;
    try {
      for_each_event(entry.path(), [&](const tensorboard::Event& event, std::string_view payload) {
        if (event.what_case() != tensorboard::Event::kFileVersion && event.step() > step) {
          ++later;
        } else {
          kept += tfrecord(payload);
        }
      });
    } catch (const std::runtime_error& damaged) {  // left as it is; the others are trimmed
      if (first_damage.empty()) first_damage = damaged.what();
      continue;
    }
    if (later == 0) continue;
    // Through a name without "tfevents", which TensorBoard would read as an event file if a kill
    // left it behind.
    const fs::path trimmed = directory / (".nmt-trim." + std::to_string(::getpid()));
    write_file_atomic(trimmed.string(), kept, Durability::kNoSync);
    fs::rename(trimmed, entry.path());
    dropped += later;
  }
  if (!first_damage.empty()) throw std::runtime_error(first_damage);
  return dropped;
}

}  // namespace nmt
