// Checkpoints as data: the safetensors reader and writer (util/safetensors.h), the optimizer's
// records (train/optimizer_state.h), and the converter of version 1 checkpoints, LibTorch archives
// (inference/legacy_checkpoint.h), with the archives an attacker would send. Every crafted file is
// made here: a version 1 checkpoint by LibTorch's own archive writer, as this program wrote them
// before, then changed entry by entry.
#include <torch/torch.h>
#include <zlib.h>
#include <catch2/catch.hpp>

#include <nlohmann/json.hpp>

#include <cstdint>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "bench/version1_format.h"
#include "cli_helpers.h"
#include "config/train_config.h"
#include "inference/checkpoint_format.h"
#include "inference/legacy_checkpoint.h"
#include "inference/model.h"
#include "train/checkpoint.h"
#include "train/fused_adam.h"
#include "train/optimizer_state.h"
#include "util/io.h"
#include "util/runtime.h"
#include "util/safetensors.h"
#include "util/zip_reader.h"

using namespace nmt;
using namespace nmt::testing;
using nmt::bench::version1_checkpoint;

namespace {

// ---- Zip files made entry by entry ----------------------------------------------------------------

using Entries = std::vector<std::pair<std::string, std::string>>;

Entries zip_entries(const std::string& zip) {
  ZipLimits limits;
  limits.may_deflate = [](const std::string& name) { return name.find("/code/") != std::string::npos; };
  Entries entries;
  for (const ZipEntry& entry : read_zip_directory(zip, limits))
    entries.emplace_back(entry.name, zip_entry_bytes(zip, entry));
  return entries;
}

void put16(std::string& out, uint64_t value) {
  for (int i = 0; i < 2; ++i) out += static_cast<char>(value >> (8 * i) & 0xFF);
}
void put32(std::string& out, uint64_t value) {
  for (int i = 0; i < 4; ++i) out += static_cast<char>(value >> (8 * i) & 0xFF);
}

// A zip of stored entries (each with its CRC), or deflated ones where `deflate` says so. Each
// directory record points at the local header `aliases` names for it (by index), or its own.
std::string make_zip(const Entries& entries, const std::map<size_t, size_t>& aliases = {},
                     const std::vector<std::string>& deflate = {}) {
  std::string zip, directory;
  std::vector<uint64_t> offsets;
  std::vector<std::string> stored;
  std::vector<bool> deflated;
  for (const auto& [name, bytes] : entries) {
    const bool compress = std::find(deflate.begin(), deflate.end(), name) != deflate.end();
    std::string data = bytes;
    if (compress) {
      data.resize(compressBound(bytes.size()) + 64);
      z_stream stream{};
      deflateInit2(&stream, 9, Z_DEFLATED, -MAX_WBITS, 8, Z_DEFAULT_STRATEGY);
      stream.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(bytes.data()));
      stream.avail_in = static_cast<uInt>(bytes.size());
      stream.next_out = reinterpret_cast<Bytef*>(data.data());
      stream.avail_out = static_cast<uInt>(data.size());
      REQUIRE(::deflate(&stream, Z_FINISH) == Z_STREAM_END);  // the buffer holds it all
      data.resize(stream.total_out);
      deflateEnd(&stream);
    }
    offsets.push_back(zip.size());
    stored.push_back(data);
    deflated.push_back(compress);
    const auto crc = static_cast<uint32_t>(crc32(0, reinterpret_cast<const Bytef*>(bytes.data()), bytes.size()));
    put32(zip, 0x04034b50), put16(zip, 20), put16(zip, 0), put16(zip, compress ? 8 : 0), put32(zip, 0);
    put32(zip, crc), put32(zip, data.size()), put32(zip, bytes.size()), put16(zip, name.size()), put16(zip, 0);
    zip += name + data;
  }
  for (size_t i = 0; i < entries.size(); ++i) {
    const size_t at = aliases.count(i) ? aliases.at(i) : i;
    const std::string& name = entries[i].first;
    const std::string& bytes = entries[at].second;
    const auto crc = static_cast<uint32_t>(crc32(0, reinterpret_cast<const Bytef*>(bytes.data()), bytes.size()));
    put32(directory, 0x02014b50), put16(directory, 20), put16(directory, 20), put16(directory, 0);
    put16(directory, deflated[at] ? 8 : 0), put32(directory, 0), put32(directory, crc);
    put32(directory, stored[at].size()), put32(directory, bytes.size()), put16(directory, name.size());
    put16(directory, 0), put16(directory, 0), put16(directory, 0), put16(directory, 0), put32(directory, 0);
    put32(directory, offsets[at]);
    directory += name;
  }
  const uint64_t start = zip.size();
  zip += directory;
  put32(zip, 0x06054b50), put16(zip, 0), put16(zip, 0), put16(zip, entries.size()), put16(zip, entries.size());
  put32(zip, directory.size()), put32(zip, start), put16(zip, 0);
  return zip;
}

std::string& entry_named(Entries& entries, const std::string& tail) {
  for (auto& [name, bytes] : entries) {
    if (name.size() >= tail.size() && name.compare(name.size() - tail.size(), tail.size(), tail) == 0) return bytes;
  }
  FAIL("no entry " << tail);
  throw std::logic_error("unreachable");
}

// A small trained run's checkpoint with an optimizer state that has taken steps.
struct Trained {
  TrainingCheckpoint checkpoint;
  std::unique_ptr<FusedAdam> optimizer;
};

Trained trained_checkpoint() {
  static const fs::path model = work_directory() / "checkpoint_format_model";
  if (!fs::exists(model / "last.ckpt")) REQUIRE(run_nmt(tiny_train_arguments(model.string(), 4, 4)).status == 0);
  Trained trained;
  trained.checkpoint = load_training_checkpoint((model / "last.ckpt").string(), torch::kCPU);
  trained.optimizer =
      std::make_unique<FusedAdam>(trained.checkpoint.model.network->parameters(), torch::optim::AdamOptions(0.002));
  restore_optimizer(trained.checkpoint, (model / "last.ckpt").string(), *trained.optimizer);
  return trained;
}

std::string convert_error(const std::string& bytes) {
  try {
    convert_legacy_checkpoint(bytes);
  } catch (const std::runtime_error& error) {
    return error.what();
  }
  return "(converted)";
}

std::string parse_error(const std::string& bytes) {
  try {
    TensorFile::parse(bytes);
  } catch (const std::runtime_error& error) {
    return error.what();
  }
  return "(parsed)";
}

// A safetensors file of `header` (JSON) and `data`.
std::string safetensors_file(const std::string& header, const std::string& data = "") {
  std::string file;
  for (int i = 0; i < 8; ++i) file += static_cast<char>(header.size() >> (8 * i) & 0xFF);
  return file + header + data;
}

}  // namespace

TEST_CASE("safetensors: what is written reads back exactly, each tensor aligned to its element size", "[checkpoint]") {
  TensorFile file;
  file.add("weights", torch::randn({3, 5}));
  file.add("counts", torch::tensor({int64_t{1}, int64_t{-7}, int64_t{1} << 40}));
  file.add("int8", torch::tensor({-128, 0, 127}, torch::kInt8));
  file.add_bytes("text", std::string("any bytes\0\xff", 11));
  file.add("empty", torch::empty({0, 4}));
  file.add("scalar", torch::tensor(2.5, torch::kFloat64));
  file.set_metadata("step", "12");
  const std::string bytes = file.serialize();
  const TensorFile read = TensorFile::parse(bytes);
  CHECK(read.metadata("step") == "12");
  CHECK(read.tensors().size() == 6);
  for (const auto& [name, tensor] : file.tensors()) {
    INFO(name);
    CHECK(torch::equal(read.tensor(name), tensor));
    CHECK(read.tensor(name).sizes() == tensor.sizes());
  }
  CHECK(read.bytes("text") == std::string("any bytes\0\xff", 11));
  // The layout: the data starts at a multiple of 8, each tensor at a multiple of its element size.
  uint64_t header = 0;
  for (int i = 7; i >= 0; --i) header = header << 8 | static_cast<unsigned char>(bytes[static_cast<size_t>(i)]);
  CHECK((8 + header) % 8 == 0);
  const nlohmann::json entries = nlohmann::json::parse(bytes.substr(8, header));
  for (const auto& [name, entry] : entries.items()) {
    if (name == "__metadata__") continue;
    INFO(name);
    CHECK(entry["data_offsets"][0].get<uint64_t>() % file.tensor(name).element_size() == 0);
  }
  CHECK_THROWS_WITH(read.tensor("absent"), Catch::Contains("tensor absent is missing"));
}

TEST_CASE("safetensors: a malformed or hostile file is refused with what is wrong, never read past", "[checkpoint]") {
  const std::string f32 = R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}})";
  const std::string eight(8, '\1');
  CHECK(parse_error(safetensors_file(f32, eight)) == "(parsed)");
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"abc", "too short"},
      {std::string("\xff\xff\xff\xff\xff\xff\xff\x7f{}", 10), "runs past the file"},
      {safetensors_file(f32, eight).substr(0, 20), "runs past the file"},
      {safetensors_file("[1,2]"), "not a JSON object"},
      {safetensors_file("{\"a\":"), "not valid JSON"},
      {safetensors_file(
           R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}})",
           eight),
       "names a twice"},
      {safetensors_file(
           R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},"b":{"dtype":"F32","shape":[1],"data_offsets":[4,8]}})",
           eight),
       "overlap"},
      {safetensors_file(R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[4,8]}})", eight), "a gap"},
      {safetensors_file(f32, eight + "xx"), "belong to none"},
      {safetensors_file(R"({"a":{"dtype":"F32","shape":[3],"data_offsets":[0,8]}})", eight), "need 12 bytes"},
      {safetensors_file(R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,80]}})", eight), "outside the file"},
      {safetensors_file(R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[8,0]}})", eight), "outside the file"},
      {safetensors_file(R"({"a":{"dtype":"F32","shape":[4294967296,4294967296],"data_offsets":[0,8]}})", eight),
       "more elements than the file has bytes"},
      {safetensors_file(R"({"a":{"dtype":"F32","shape":[-2],"data_offsets":[0,8]}})", eight), "non-negative integer"},
      {safetensors_file(R"({"a":{"dtype":"F32","shape":[2.0],"data_offsets":[0,8]}})", eight), "non-negative integer"},
      {safetensors_file(R"({"a":{"dtype":"PICKLE","shape":[2],"data_offsets":[0,8]}})", eight), "dtype 'PICKLE'"},
      {safetensors_file(R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8],"x":1}})", eight), "exactly dtype"},
      {safetensors_file(R"({"a":{"dtype":"F32","shape":[[2]],"data_offsets":[0,8]}})", eight), "nests deeper"},
      {safetensors_file(R"({"__metadata__":{"k":1}})"), "metadata k is not a string"},
      {safetensors_file(std::string(200000, '[') + std::string(200000, ']')), "nests deeper"},
      {safetensors_file("{\"a\":" + std::string(200000, '[') + std::string(200000, ']') + "}"), "nests deeper"},
  };
  for (const auto& [bytes, message] : cases) {
    INFO(message);
    CHECK_THAT(parse_error(bytes), Catch::Contains(message));
  }
  // A changed byte of data is found by the checksum the writer adds.
  TensorFile file;
  file.add("a", torch::randn({64}));
  std::string bytes = file.serialize();
  bytes[bytes.size() - 5] = static_cast<char>(bytes[bytes.size() - 5] ^ 0x01);
  CHECK_THAT(parse_error(bytes), Catch::Contains("fails its checksum"));
}

TEST_CASE("Adam's state as checkpoint records: restored exactly, refused for another model", "[checkpoint]") {
  torch::manual_seed(3);
  torch::Tensor first = torch::randn({3, 4}, torch::requires_grad());
  torch::Tensor idle = torch::randn({2}, torch::requires_grad());
  FusedAdam optimizer({first, idle}, torch::optim::AdamOptions(0.25).betas({0.8, 0.95}).eps(1e-7));
  for (int step = 0; step < 3; ++step) {
    optimizer.zero_grad();
    (first * first).sum().backward();  // `idle` has no gradient: no state
    optimizer.step();
  }
  TensorFile file;
  write_adam_state(file, optimizer);
  const TensorFile read = TensorFile::parse(file.serialize());

  torch::Tensor first_copy = first.detach().clone().requires_grad_();
  torch::Tensor idle_copy = idle.detach().clone().requires_grad_();
  torch::optim::Adam restored({first_copy, idle_copy}, torch::optim::AdamOptions(0.001));
  read_adam_state(read, restored);
  REQUIRE(restored.state().size() == 1);
  const auto& ours = static_cast<const torch::optim::AdamParamState&>(*optimizer.state().at(adam_state_key(first)));
  const auto& theirs =
      static_cast<const torch::optim::AdamParamState&>(*restored.state().at(adam_state_key(first_copy)));
  CHECK(theirs.step() == 3);
  CHECK(torch::equal(theirs.exp_avg(), ours.exp_avg()));
  CHECK(torch::equal(theirs.exp_avg_sq(), ours.exp_avg_sq()));
  const auto& options = static_cast<const torch::optim::AdamOptions&>(restored.param_groups()[0].options());
  CHECK(options.lr() == 0.25);
  CHECK(std::get<1>(options.betas()) == 0.95);
  CHECK(options.eps() == 1e-7);
  // The next step is the one the first optimizer takes.
  for (auto* opt : std::vector<torch::optim::Optimizer*>{&optimizer, &restored}) opt->zero_grad();
  (first * first).sum().backward();
  (first_copy * first_copy).sum().backward();
  optimizer.step();
  restored.step();
  CHECK(torch::allclose(first, first_copy, 0, 1e-7));

  torch::optim::Adam other({first_copy}, torch::optim::AdamOptions(0.001));  // one parameter, not two
  CHECK_THROWS_WITH(read_adam_state(read, other), Catch::Contains("group 0 has 2 parameters and the model's 1"));
  torch::Tensor wrong = torch::zeros({4, 3}, torch::requires_grad());
  torch::optim::Adam misfit({wrong, idle_copy}, torch::optim::AdamOptions(0.001));
  CHECK_THROWS_WITH(read_adam_state(read, misfit), Catch::Contains("does not fit its parameter"));
}

TEST_CASE("a version 1 checkpoint converts to the same configuration, weights, progress and optimizer state",
          "[checkpoint]") {
  Trained trained = trained_checkpoint();
  const std::string legacy = version1_checkpoint(trained.checkpoint, trained.optimizer.get());
  REQUIRE(is_legacy_checkpoint(legacy));
  const std::string path = (work_directory() / "version1.ckpt").string();
  write_file_atomic(path, legacy);

  // Loaded as a training checkpoint, converted as it loads.
  TrainingCheckpoint loaded = load_training_checkpoint(path, torch::kCPU);
  CHECK(config_entries(loaded.config) == config_entries(trained.checkpoint.config));
  CHECK(loaded.progress.step == trained.checkpoint.progress.step);
  CHECK(loaded.progress.best_score == trained.checkpoint.progress.best_score);
  CHECK(loaded.progress.learning_rate == trained.checkpoint.progress.learning_rate);
  CHECK(torch::equal(loaded.random_state, trained.checkpoint.random_state));
  const auto expected = trained.checkpoint.model.network->named_parameters();
  const auto got = loaded.model.network->named_parameters();
  REQUIRE(got.size() == expected.size());
  for (const auto& item : expected) {
    INFO(item.key());
    CHECK(torch::equal(got[item.key()], item.value()));
  }
  FusedAdam optimizer(loaded.model.network->parameters(), torch::optim::AdamOptions(0.5));
  restore_optimizer(loaded, path, optimizer);
  const auto first = trained.checkpoint.model.network->parameters().front();
  const auto& before =
      static_cast<const torch::optim::AdamParamState&>(*trained.optimizer->state().at(adam_state_key(first)));
  const auto& after = static_cast<const torch::optim::AdamParamState&>(
      *optimizer.state().at(adam_state_key(loaded.model.network->parameters().front())));
  CHECK(after.step() == before.step());
  CHECK(torch::equal(after.exp_avg_sq(), before.exp_avg_sq()));
  const auto lr = [](torch::optim::Optimizer& of) {
    return static_cast<const torch::optim::AdamOptions&>(of.param_groups()[0].options()).lr();
  };
  CHECK(lr(optimizer) == lr(*trained.optimizer));

  // Its entries rewritten as they are (stored, not deflated) still convert: the check is of
  // content, not of one writer's bytes.
  CHECK(convert_error(make_zip(zip_entries(legacy))) == "(converted)");
}

TEST_CASE("the converter refuses code, foreign pickles and zip tricks in a version 1 checkpoint", "[checkpoint]") {
  Trained trained = trained_checkpoint();
  const std::string legacy = version1_checkpoint(trained.checkpoint, nullptr);
  Entries entries = zip_entries(legacy);
  const auto changed = [&](const std::string& tail, const std::string& bytes) {
    Entries copy = entries;
    entry_named(copy, tail) = bytes;
    return make_zip(copy);
  };

  SECTION("class code beyond attribute declarations: LibTorch would run a __setstate__") {
    const std::string code = entry_named(entries, "code/__torch__.py");
    const std::string setstate = code +
                                 "  def __setstate__(self: __torch__.Module, state: Tuple[str]) -> None:\n"
                                 "    print(\"ran\")\n";
    CHECK_THAT(convert_error(changed("code/__torch__.py", setstate)),
               Catch::Contains("holds code this program never writes") && Catch::Contains("def __setstate__"));
    CHECK_THAT(convert_error(changed("code/__torch__.py", "import os\n" + code)),
               Catch::Contains("does not define the one class"));
  }
  SECTION("pickles that crashed LibTorch's unpickler, or call what our archives never call") {
    for (const std::string& pickle : {std::string("\x80\x02R.", 4), std::string("\x80\x02"
                                                                                "b.",
                                                                                4)}) {
      CHECK_THAT(convert_error(changed("data.pkl", pickle)), Catch::Contains("from an empty stack"));
    }
    const std::string system = std::string(
                                   "\x80\x02"
                                   "cos\nsystem\n(X",
                                   15) +
                               std::string("\x04\0\0\0", 4) + "truetR.";
    CHECK_THAT(convert_error(changed("data.pkl", system)), Catch::Contains("names os.system"));
    const std::string reduce_dict = std::string(
                                        "\x80\x02"
                                        "ccollections\nOrderedDict\n(X",
                                        29) +
                                    std::string("\x01\0\0\0", 4) + "atR.";
    CHECK_THAT(convert_error(changed("data.pkl", reduce_dict)),
               Catch::Contains("with arguments this program never writes"));
    CHECK_THAT(convert_error(changed("data.pkl", "\x80\x02)" + std::string(100, '\x85') + ".")),
               Catch::Contains("nests deeper"));
    CHECK_THAT(convert_error(changed("data.pkl", std::string("\x80\x02K\x01", 4))),
               Catch::Contains("ends in the middle"));
    CHECK_THAT(convert_error(changed("data.pkl", std::string("\x80\x02h\x05.", 5))),
               Catch::Contains("memo entry it never wrote"));
    CHECK_THAT(convert_error(changed("data.pkl", std::string("\x80\x02\x93.", 4))), Catch::Contains("opcode 0x93"));
    CHECK_THAT(convert_error(changed("constants.pkl", std::string("\x80\x02(K\x01t.", 7))),
               Catch::Contains("constants.pkl holds constants"));
  }
  SECTION("a tensor over more elements than its storage holds") {
    std::string pickle = entry_named(entries, "data.pkl");
    // The first storage record ('storage', torch.ByteStorage, key, 'cpu', count) of the configuration.
    const std::string storage_tuple = std::string(
        "X\x03\x00\x00\x00"
        "cpu",
        8);
    const size_t at = pickle.find(storage_tuple);
    REQUIRE(at != std::string::npos);
    // After 'cpu': the storage's element count (BININT2 or BININT); each byte halved, so that it
    // is smaller and the tensor over it reaches past its end.
    size_t count_at = at + storage_tuple.size();
    if (pickle[count_at] == 'q') count_at += 2;  // BINPUT of 'cpu' first
    if (pickle[count_at] == 'r') count_at += 5;  // LONG_BINPUT
    REQUIRE((pickle[count_at] == 'M' || pickle[count_at] == 'J'));
    pickle[count_at + 1] = static_cast<char>(static_cast<unsigned char>(pickle[count_at + 1]) >> 1);
    pickle[count_at + 2] = static_cast<char>(static_cast<unsigned char>(pickle[count_at + 2]) >> 1);
    CHECK_THAT(convert_error(changed("data.pkl", pickle)), Catch::Contains("more elements than its storage"));
  }
  SECTION("zip tricks: duplicates, overlaps, compression, foreign records") {
    Entries duplicated = entries;
    for (int i = 0; i < 4000; ++i) duplicated.push_back(entries[1]);
    CHECK_THAT(convert_error(make_zip(duplicated)), Catch::Contains("two zip entries are named"));
    Entries renamed = entries;
    std::map<size_t, size_t> aliases;
    for (size_t i = 0; i < 100; ++i) {
      renamed.emplace_back(
          entries.front().first.substr(0, entries.front().first.find('/')) + "/data/9" + std::to_string(100000 + i),
          entries[1].second);
      aliases[renamed.size() - 1] = 1;  // all at the second entry's bytes
    }
    CHECK_THAT(convert_error(make_zip(renamed, aliases)), Catch::Contains("overlaps or precedes"));
    const std::string data0 = entries.front().first.substr(0, entries.front().first.find('/')) + "/data/0";
    CHECK_THAT(convert_error(make_zip(entries, {}, {data0})),
               Catch::Contains("is compressed, which this file may not be"));
    Entries extra = entries;
    extra.emplace_back(entries.front().first.substr(0, entries.front().first.find('/')) + "/code/__torch__/evil.py",
                       "class Module(Module):\n");
    CHECK_THAT(convert_error(make_zip(extra)), Catch::Contains("which this program's archives never hold"));
    Entries bomb = entries;
    std::string& code = entry_named(bomb, "code/__torch__.py");
    code += std::string(2 << 20, ' ');
    CHECK_THAT(
        convert_error(make_zip(bomb, {}, {bomb[0].first.substr(0, bomb[0].first.find('/')) + "/code/__torch__.py"})),
        Catch::Contains("inflates to more than this file may hold"));
  }
  SECTION("damage: a changed byte, a cut file") {
    std::string flipped = legacy;
    flipped[flipped.size() / 2] = static_cast<char>(flipped[flipped.size() / 2] ^ 0x10);
    CHECK_THAT(convert_error(flipped), Catch::Contains("fails its checksum") || Catch::Contains("zip"));
    CHECK_THAT(convert_error(legacy.substr(0, legacy.size() / 2)), Catch::Contains("no zip directory"));
  }
}

TEST_CASE("nmt convert rewrites a model directory in place and leaves a refused file as it was", "[checkpoint]") {
  Trained trained = trained_checkpoint();
  const fs::path model = work_directory() / "convert_model";
  fs::create_directories(model);
  const std::string legacy = version1_checkpoint(trained.checkpoint, trained.optimizer.get());
  write_file_atomic((model / "best.ckpt").string(), legacy);
  write_file_atomic((model / "last.ckpt").string(), legacy);
  const std::string decode = " --input " + kToy + "/dev.src --threads 1";
  const CommandResult before = run_nmt("translate --model " + model.string() + decode);
  REQUIRE(before.status == 0);
  CHECK_THAT(before.output, Catch::Contains("an older checkpoint") && Catch::Contains("nmt convert"));

  const CommandResult converted = run_nmt("convert " + model.string());
  CHECK(converted.status == 0);
  CHECK_THAT(converted.output, Catch::Contains("best.ckpt: converted") && Catch::Contains("last.ckpt: converted"));
  CHECK(!is_legacy_checkpoint(read_file((model / "best.ckpt").string())));
  const CommandResult after = run_nmt("translate --model " + model.string() + decode);
  CHECK(after.status == 0);
  CHECK_THAT(after.output, !Catch::Contains("an older checkpoint"));
  // The same translations, the warnings aside, byte for byte.
  const auto translations = [](const std::string& output) {
    std::vector<std::string> lines;
    for (const std::string& line : split_lines(output)) {
      if (line.find("[warning]") == std::string::npos) lines.push_back(line);
    }
    return lines;
  };
  CHECK(translations(after.output) == translations(before.output));
  CHECK_THAT(run_nmt("convert " + (model / "best.ckpt").string()).output,
             Catch::Contains("already in the current format"));
  // Training resumes from the converted last.ckpt.
  CHECK(run_nmt(tiny_train_arguments(model.string(), 6, 2) + " --resume").status == 0);

  Entries entries = zip_entries(legacy);
  entry_named(entries, "code/__torch__.py") += "  def __setstate__(self, state: str) -> None:\n    pass\n";
  const std::string refused = (model / "crafted.ckpt").string();
  const std::string crafted = make_zip(entries);
  write_file_atomic(refused, crafted);
  const CommandResult result = run_nmt("convert " + refused);
  CHECK(result.status == 1);
  CHECK_THAT(result.output, Catch::Contains(refused) && Catch::Contains("left as it was"));
  CHECK(read_file(refused) == crafted);
  const CommandResult translate = run_nmt("translate --model " + model.string() + " --checkpoint " + refused + decode);
  CHECK(translate.status == 1);
  CHECK_THAT(translate.output, Catch::Contains("holds code this program never writes"));
}
