// TensorBoard event files (util/tensorboard.h): the CRC-32C and TFRecord framing TensorFlow
// checks, the events read back, a file cut or damaged, the PNG images and the attention heat map.
// The CRC values are RFC 3720's (appendix B.4) and worked out by hand in the comments.
#include <unistd.h>
#include <zlib.h>
#include <catch2/catch.hpp>

#include <chrono>
#include <cmath>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <limits>
#include <regex>
#include <stdexcept>
#include <string>
#include <vector>

#include "util/io.h"
#include "util/tensorboard.h"
#include "util/tensorboard_event.pb.h"

using namespace nmt;
namespace fs = std::filesystem;

namespace {

using Matrix = std::vector<std::vector<float>>;

fs::path scratch(const std::string& name) {
  const fs::path dir = fs::temp_directory_path() / ("nmt_tensorboard_" + std::to_string(::getpid())) / name;
  fs::remove_all(dir);
  fs::create_directories(dir);
  return dir;
}

void write_bytes(const fs::path& path, const std::string& bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  REQUIRE(out.good());
}

uint64_t little_endian(const std::string& bytes, size_t offset, int count) {
  uint64_t value = 0;
  for (int i = 0; i < count; ++i) value |= static_cast<uint64_t>(static_cast<uint8_t>(bytes[offset + i])) << (8 * i);
  return value;
}

uint32_t big_endian32(const std::string& bytes, size_t offset) {
  uint32_t value = 0;
  for (size_t i = 0; i < 4; ++i) value = (value << 8) | static_cast<uint8_t>(bytes[offset + i]);
  return value;
}

// The byte offsets at which each TFRecord of `bytes` starts.
std::vector<size_t> record_offsets(const std::string& bytes) {
  std::vector<size_t> offsets;
  for (size_t offset = 0; offset < bytes.size(); offset += 12 + little_endian(bytes, offset, 8) + 4) {
    offsets.push_back(offset);
  }
  return offsets;
}

// TensorFlow's Mask and Unmask (tensorflow/core/lib/hash/crc32c.h), as its own test uses them.
uint32_t mask(uint32_t crc) { return ((crc >> 15) | (crc << 17)) + 0xa282ead8u; }

uint32_t unmask(uint32_t masked) {
  const uint32_t rotated = masked - 0xa282ead8u;
  return (rotated >> 17) | (rotated << 15);
}

struct PngChunk {
  std::string type;
  std::string data;
  uint32_t crc = 0;
};

// The chunks after the PNG signature.
std::vector<PngChunk> png_chunks(const std::string& png) {
  std::vector<PngChunk> chunks;
  size_t offset = 8;
  while (offset + 12 <= png.size()) {
    const uint32_t length = big_endian32(png, offset);
    REQUIRE(offset + 12 + length <= png.size());
    chunks.push_back(
        {png.substr(offset + 4, 4), png.substr(offset + 8, length), big_endian32(png, offset + 8 + length)});
    offset += 12 + length;
  }
  CHECK(offset == png.size());
  return chunks;
}

uint32_t zlib_crc32(const std::string& bytes) {
  return static_cast<uint32_t>(
      ::crc32(::crc32(0L, Z_NULL, 0), reinterpret_cast<const Bytef*>(bytes.data()), static_cast<uInt>(bytes.size())));
}

// Checks `png` is a PNG of `width` x `height` with `channels`, and that its IDAT inflates to
// `pixels` row by row, each row after a filter byte 0.
void check_png(const std::string& png, const std::vector<uint8_t>& pixels, int width, int height, int channels) {
  REQUIRE(png.substr(0, 8) == std::string("\x89PNG\r\n\x1a\n", 8));
  const std::vector<PngChunk> chunks = png_chunks(png);
  REQUIRE(chunks.size() == 3);
  for (const PngChunk& chunk : chunks) CHECK(chunk.crc == zlib_crc32(chunk.type + chunk.data));
  CHECK(chunks[0].type == "IHDR");
  REQUIRE(chunks[0].data.size() == 13);
  CHECK(big_endian32(chunks[0].data, 0) == static_cast<uint32_t>(width));
  CHECK(big_endian32(chunks[0].data, 4) == static_cast<uint32_t>(height));
  CHECK(chunks[0].data[8] == 8);                        // bit depth
  CHECK(chunks[0].data[9] == (channels == 1 ? 0 : 2));  // colour type: grayscale or RGB
  CHECK(chunks[0].data.substr(10) == std::string(3, '\0'));
  CHECK(chunks[1].type == "IDAT");
  CHECK(chunks[2].type == "IEND");
  CHECK(chunks[2].data.empty());

  std::string expected;
  const size_t row_bytes = static_cast<size_t>(width) * static_cast<size_t>(channels);
  for (int y = 0; y < height; ++y) {
    expected.push_back('\0');
    expected.append(reinterpret_cast<const char*>(pixels.data()) + y * row_bytes, row_bytes);
  }
  std::string inflated(expected.size() + 16, '\0');
  uLongf inflated_size = inflated.size();
  REQUIRE(::uncompress(reinterpret_cast<Bytef*>(&inflated[0]), &inflated_size,
                       reinterpret_cast<const Bytef*>(chunks[1].data.data()), chunks[1].data.size()) == Z_OK);
  inflated.resize(inflated_size);
  CHECK(inflated == expected);
}

// The RGB of pixel (x, y) of an image `width` pixels wide.
std::vector<int> rgb_at(const std::vector<uint8_t>& pixels, int width, int x, int y) {
  const size_t at = 3 * (static_cast<size_t>(y) * width + x);
  return {pixels[at], pixels[at + 1], pixels[at + 2]};
}

double seconds_since_1970() {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}

// The raw Event messages of an event file whose records are whole, for fields read_events does
// not return.
std::vector<nmt::tensorboard::Event> raw_events(const fs::path& file) {
  const std::string bytes = read_file(file.string());
  std::vector<nmt::tensorboard::Event> events;
  for (const size_t offset : record_offsets(bytes)) {
    nmt::tensorboard::Event event;
    REQUIRE(event.ParseFromString(bytes.substr(offset + 12, little_endian(bytes, offset, 8))));
    events.push_back(event);
  }
  return events;
}

}  // namespace

TEST_CASE("tensorboard: crc32c gives the check values of RFC 3720", "[tensorboard]") {
  CHECK(crc32c("") == 0u);
  CHECK(crc32c("123456789") == 0xE3069283u);  // the CRC catalogue's check value for CRC-32C
  // RFC 3720 appendix B.4: 32 bytes of zeros, of ones, and ascending 0 to 31.
  CHECK(crc32c(std::string(32, '\0')) == 0x8A9136AAu);
  CHECK(crc32c(std::string(32, '\xFF')) == 0x62A8AB43u);
  std::string ascending;
  for (int i = 0; i < 32; ++i) ascending.push_back(static_cast<char>(i));
  CHECK(crc32c(ascending) == 0x46DD794Eu);
}

TEST_CASE("tensorboard: the masked crc32c rotates the crc right by 15 bits and adds TensorFlow's constant",
          "[tensorboard]") {
  // 0xE3069283 >> 15 = 0x0001C60D, << 17 (32 bits) = 0x25060000: rotated 0x2507C60D;
  // plus 0xA282EAD8 = 0xC78AB0E5.
  CHECK(masked_crc32c("123456789") == 0xC78AB0E5u);
  // TensorFlow's crc32c_test (CRC.Mask): masking changes the CRC, masking twice too, and
  // unmasking gives it back.
  const uint32_t crc = crc32c("foo");
  CHECK(masked_crc32c("foo") == mask(crc));
  CHECK(mask(crc) != crc);
  CHECK(mask(mask(crc)) != crc);
  CHECK(unmask(mask(crc)) == crc);
  CHECK(unmask(unmask(mask(mask(crc)))) == crc);
}

TEST_CASE("tensorboard: a TFRecord frames its payload with its length and two masked CRCs", "[tensorboard]") {
  for (const std::string& payload : {std::string(), std::string("abc"), std::string(300, 'x')}) {
    const std::string record = tfrecord(payload);
    REQUIRE(record.size() == 12 + payload.size() + 4);
    CHECK(little_endian(record, 0, 8) == payload.size());
    CHECK(little_endian(record, 8, 4) == masked_crc32c(record.substr(0, 8)));
    CHECK(record.substr(12, payload.size()) == payload);
    CHECK(little_endian(record, 12 + payload.size(), 4) == masked_crc32c(payload));
  }
  // The CRC of no bytes is 0, so an empty payload's masked CRC is the constant alone.
  CHECK(little_endian(tfrecord(""), 12, 4) == 0xa282ead8u);
}

TEST_CASE("tensorboard: a written event file reads back with the file version first and then every event in order",
          "[tensorboard]") {
  const fs::path dir = scratch("read_back") / "runs" / "first";  // parents created too
  const double before = seconds_since_1970();
  const std::vector<uint8_t> pixels = {0, 64, 128, 255, 32, 16};
  const std::string png = encode_png(pixels, 3, 2, 1);
  fs::path file;
  {
    EventWriter writer(dir);
    file = writer.path();
    writer.scalar("train/loss", 10, 2.5);
    writer.scalar("dev/bleu", 20, 31.25);
    writer.image("dev/attention/0", 20, png, 3, 2, 1);
    writer.text("dev/samples", 20, "| source | hypothesis |\n| --- | --- |\n| a | b |");
    writer.scalar("train/loss", 30, -0.125);
  }
  const double after = seconds_since_1970();
  REQUIRE(file.parent_path() == dir);
  const std::vector<EventRecord> records = read_events(file);
  REQUIRE(records.size() == 6);
  CHECK(records[0].kind == "file_version");
  CHECK(records[0].data == "brain.Event:2");
  CHECK(records[0].step == 0);
  CHECK(records[0].tag.empty());
  const std::vector<std::string> kinds = {"scalar", "scalar", "image", "text", "scalar"};
  const std::vector<std::string> tags = {"train/loss", "dev/bleu", "dev/attention/0", "dev/samples", "train/loss"};
  const std::vector<int64_t> steps = {10, 20, 20, 20, 30};
  for (size_t i = 0; i < kinds.size(); ++i) {
    CHECK(records[i + 1].kind == kinds[i]);
    CHECK(records[i + 1].tag == tags[i]);
    CHECK(records[i + 1].step == steps[i]);
  }
  // Values that a float holds exactly, as TensorBoard's simple_value is a float.
  CHECK(records[1].value == 2.5);
  CHECK(records[2].value == 31.25);
  CHECK(records[5].value == -0.125);
  CHECK(records[3].data == png);
  CHECK(records[4].data == "| source | hypothesis |\n| --- | --- |\n| a | b |");
  for (size_t i = 0; i < records.size(); ++i) {
    CHECK(records[i].wall_time >= std::floor(before));
    CHECK(records[i].wall_time <= after + 1);
    if (i > 0) {
      CHECK(records[i].wall_time >= records[i - 1].wall_time);
    }
  }
}

TEST_CASE("tensorboard: images and texts carry the fields TensorBoard's image and text dashboards read",
          "[tensorboard]") {
  const fs::path dir = scratch("fields");
  fs::path file;
  {
    EventWriter writer(dir);
    file = writer.path();
    writer.image("attention", 1, encode_png(std::vector<uint8_t>(4 * 3 * 3, 200), 4, 3, 3), 4, 3, 3);
    writer.text("samples", 1, "*hello*");
  }
  const std::vector<nmt::tensorboard::Event> events = raw_events(file);
  REQUIRE(events.size() == 3);
  REQUIRE(events[1].summary().value_size() == 1);
  const nmt::tensorboard::Summary::Image& image = events[1].summary().value(0).image();
  CHECK(image.width() == 4);
  CHECK(image.height() == 3);
  CHECK(image.colorspace() == 3);  // RGB
  // As tensorboard/plugins/text/summary_v2.py's text_pb: the text plugin, one string, rank 0.
  const nmt::tensorboard::Summary::Value& text = events[2].summary().value(0);
  CHECK(text.metadata().plugin_data().plugin_name() == "text");
  CHECK(text.tensor().dtype() == nmt::tensorboard::DT_STRING);
  CHECK(text.tensor().tensor_shape().dim_size() == 0);
  REQUIRE(text.tensor().string_val_size() == 1);
  CHECK(text.tensor().string_val(0) == "*hello*");
}

TEST_CASE("tensorboard: every event is in the file as soon as the call that writes it returns", "[tensorboard]") {
  // No buffer in the process: what another reader sees now, a SIGKILL could not take back.
  EventWriter writer(scratch("unbuffered"));
  CHECK(read_events(writer.path()).size() == 1);
  for (int step = 1; step <= 5; ++step) {
    writer.scalar("train/loss", step, step);
    const std::vector<EventRecord> records = read_events(writer.path());
    REQUIRE(records.size() == static_cast<size_t>(step) + 1);
    CHECK(records.back().step == step);
  }
}

TEST_CASE("tensorboard: event files are named as TensorFlow names them and a second writer gets a file of its own",
          "[tensorboard]") {
  const fs::path dir = scratch("names");
  EventWriter first(dir);
  EventWriter second(dir);
  CHECK(first.path() != second.path());
  const std::regex name(R"(events\.out\.tfevents\.\d{10}\.[^/]+\.(\d+)\.nmt(\.\d+)?)");
  for (const EventWriter* writer : {&first, &second}) {
    std::smatch match;
    const std::string file = writer->path().filename().string();
    REQUIRE(std::regex_match(file, match, name));
    CHECK(match[1].str() == std::to_string(::getpid()));
    CHECK(read_events(writer->path()).size() == 1);
  }
}

TEST_CASE("tensorboard: a file cut inside its last record still reads back every record before it", "[tensorboard]") {
  const fs::path dir = scratch("cut");
  fs::path file;
  {
    EventWriter writer(dir);
    file = writer.path();
    for (int step = 1; step <= 3; ++step) writer.scalar("train/loss", step, 0.5 * step);
  }
  const std::string bytes = read_file(file.string());
  const std::vector<size_t> offsets = record_offsets(bytes);
  REQUIRE(offsets.size() == 4);
  const fs::path cut = dir / "events.out.tfevents.cut";
  // Every length from the last record's start (where it ends cleanly) to one byte short of whole.
  for (size_t length = offsets.back(); length < bytes.size(); ++length) {
    write_bytes(cut, bytes.substr(0, length));
    const std::vector<EventRecord> records = read_events(cut);
    REQUIRE(records.size() == 3);
    CHECK(records[2].step == 2);
    CHECK(records[2].value == 1.0);
  }
  write_bytes(cut, bytes);
  CHECK(read_events(cut).size() == 4);
}

TEST_CASE("tensorboard: a flipped byte in a record is reported as a CRC error naming the record's offset",
          "[tensorboard]") {
  const fs::path dir = scratch("flipped");
  fs::path file;
  {
    EventWriter writer(dir);
    file = writer.path();
    writer.scalar("train/loss", 1, 1.0);
    writer.scalar("train/loss", 2, 2.0);
  }
  const std::string bytes = read_file(file.string());
  const std::vector<size_t> offsets = record_offsets(bytes);
  REQUIRE(offsets.size() == 3);
  const size_t second = offsets[1];
  const fs::path damaged = dir / "events.out.tfevents.damaged";

  std::string payload_flipped = bytes;
  payload_flipped[second + 12 + 3] ^= 0x01;
  write_bytes(damaged, payload_flipped);
  CHECK_THROWS_WITH(read_events(damaged), Catch::Contains(damaged.string()) &&
                                              Catch::Contains("byte offset " + std::to_string(second)) &&
                                              Catch::Contains("CRC check of its payload"));

  std::string length_flipped = bytes;
  length_flipped[second] ^= 0x04;
  write_bytes(damaged, length_flipped);
  CHECK_THROWS_WITH(read_events(damaged), Catch::Contains("byte offset " + std::to_string(second)) &&
                                              Catch::Contains("CRC check of its length"));
}

TEST_CASE("tensorboard: encode_png writes a PNG whose IDAT inflates to the rows after filter bytes", "[tensorboard]") {
  std::vector<uint8_t> rgb;
  for (int i = 0; i < 3 * 2 * 3; ++i) rgb.push_back(static_cast<uint8_t>(i * 13));
  check_png(encode_png(rgb, 3, 2, 3), rgb, 3, 2, 3);
  const std::vector<uint8_t> gray = {0, 255, 7, 8, 9, 10};
  check_png(encode_png(gray, 2, 3, 1), gray, 2, 3, 1);
  check_png(encode_png({42}, 1, 1, 1), {42}, 1, 1, 1);
}

TEST_CASE("tensorboard: encode_png refuses sizes and channels that do not match the pixels", "[tensorboard]") {
  const std::vector<uint8_t> six(6, 0);
  CHECK_THROWS_AS(encode_png(six, 0, 6, 1), std::invalid_argument);
  CHECK_THROWS_AS(encode_png(six, 3, -2, 1), std::invalid_argument);
  CHECK_THROWS_AS(encode_png(six, 3, 1, 2), std::invalid_argument);
  CHECK_THROWS_AS(encode_png(six, 3, 1, 4), std::invalid_argument);
  CHECK_THROWS_AS(encode_png(six, 3, 3, 1), std::invalid_argument);
  CHECK_THROWS_AS(encode_png(six, 1, 1, 3), std::invalid_argument);
  CHECK_NOTHROW(encode_png(six, 2, 1, 3));
}

TEST_CASE("tensorboard: a heat map paints each weight as a cell between grey grid lines", "[tensorboard]") {
  const int cell = 4;
  const Matrix weights = {{0.0f, 1.0f, 0.5f}, {2.0f, -1.0f, std::nanf("")}};
  int width = 0;
  int height = 0;
  const std::vector<uint8_t> pixels = heatmap_pixels(weights, cell, width, height);
  CHECK(width == 3 * (cell + 1) + 1);
  CHECK(height == 2 * (cell + 1) + 1);
  REQUIRE(pixels.size() == static_cast<size_t>(width) * height * 3);
  const std::vector<int> grey = rgb_at(pixels, width, 0, 0);
  const std::vector<int> white = {255, 255, 255};
  const std::vector<int> dark_blue = rgb_at(pixels, width, 1 + (cell + 1), 1);
  // The top-left pixel of the cell (row, column).
  const auto cell_pixel = [&](int row, int column) {
    return rgb_at(pixels, width, 1 + column * (cell + 1), 1 + row * (cell + 1));
  };
  CHECK(grey[0] == grey[1]);
  CHECK(grey[1] == grey[2]);
  CHECK(grey[0] > 150);
  CHECK(grey[0] < 255);
  CHECK(cell_pixel(0, 0) == white);
  CHECK(dark_blue[2] > dark_blue[0]);  // blue
  CHECK(dark_blue[0] + dark_blue[1] + dark_blue[2] < 255);
  for (int channel = 0; channel < 3; ++channel) {
    CHECK(cell_pixel(0, 2)[channel] < white[channel]);
    CHECK(cell_pixel(0, 2)[channel] > dark_blue[channel]);
  }
  CHECK(cell_pixel(1, 0) == dark_blue);  // 2 clamped to 1
  CHECK(cell_pixel(1, 1) == white);      // -1 clamped to 0
  CHECK(cell_pixel(1, 2) != white);
  CHECK(cell_pixel(1, 2) != dark_blue);
  CHECK(cell_pixel(1, 2)[0] > cell_pixel(1, 2)[2]);  // NaN: red, not a weight's colour
  // A whole cell in one colour, then the grid line after it.
  for (int y = 1; y <= cell; ++y) {
    for (int x = 1 + (cell + 1); x <= 2 * (cell + 1) - 1; ++x) CHECK(rgb_at(pixels, width, x, y) == dark_blue);
  }
  for (int y = 0; y < height; ++y) CHECK(rgb_at(pixels, width, cell + 1, y) == grey);
  for (int x = 0; x < width; ++x) CHECK(rgb_at(pixels, width, x, height - 1) == grey);
  CHECK_NOTHROW(encode_png(pixels, width, height, 3));
}

TEST_CASE("tensorboard: a heat map refuses an empty or ragged matrix and cells under one pixel", "[tensorboard]") {
  int width = 0;
  int height = 0;
  const Matrix one_weight = {std::vector<float>{0.5f}};
  CHECK_THROWS_AS(heatmap_pixels(Matrix(), 4, width, height), std::invalid_argument);
  CHECK_THROWS_AS(heatmap_pixels(Matrix(1), 4, width, height), std::invalid_argument);  // one empty row
  CHECK_THROWS_AS(heatmap_pixels(Matrix{{0.5f, 0.5f}, {1.0f}}, 4, width, height), std::invalid_argument);
  CHECK_THROWS_AS(heatmap_pixels(one_weight, 0, width, height), std::invalid_argument);
  CHECK_THROWS_AS(heatmap_pixels(one_weight, std::numeric_limits<int>::max(), width, height), std::invalid_argument);
  CHECK_NOTHROW(heatmap_pixels(one_weight, 1, width, height));
  CHECK(width == 3);
  CHECK(height == 3);
}

TEST_CASE("tensorboard: an event directory that cannot be created throws a message naming the path", "[tensorboard]") {
  const fs::path dir = scratch("unwritable");
  const fs::path regular_file = dir / "not_a_directory";
  write_bytes(regular_file, "x");
  const fs::path wanted = regular_file / "runs";
  CHECK_THROWS_WITH(EventWriter(wanted), Catch::Contains(wanted.string()) && Catch::Contains("--tensorboard no"));
  CHECK_THROWS_AS(EventWriter(regular_file), std::runtime_error);
}
