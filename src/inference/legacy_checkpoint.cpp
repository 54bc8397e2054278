#include "inference/legacy_checkpoint.h"

#include <torch/torch.h>

#include <cstdint>
#include <cstring>
#include <map>
#include <memory>
#include <regex>
#include <set>
#include <sstream>
#include <stdexcept>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "inference/checkpoint_format.h"
#include "util/zip_reader.h"

namespace nmt {
namespace {

// ---- The values a pickle of ours builds --------------------------------------------------------

enum class Kind { kNone, kBool, kInt, kFloat, kString, kTuple, kList, kDict, kObject, kGlobal, kStorage, kTensor };

struct Value;
using ValuePtr = std::shared_ptr<Value>;

struct Value {
  Kind kind = Kind::kNone;
  int64_t integer = 0;  // kInt, kBool; kStorage: its element count
  double real = 0;
  std::string text;             // kString; kGlobal: "module.name"; kObject: its class; kStorage: its record's key
  std::vector<ValuePtr> items;  // kTuple, kList
  std::vector<std::pair<ValuePtr, ValuePtr>> entries;  // kDict, in order
  ValuePtr state;                                      // kObject: its attributes (a kDict), from BUILD
  torch::ScalarType type = torch::kFloat;              // kStorage
  ValuePtr storage;                                    // kTensor
  int64_t offset = 0;                                  // kTensor
  std::vector<int64_t> sizes, strides;                 // kTensor
  int depth = 1;        // of nesting: bounded, so that nothing recurses far (destruction included)
  bool sealed = false;  // a part of another value: no longer changed, so no value contains itself
};

constexpr int kMaxDepth = 64;
constexpr size_t kMaxStack = 1 << 20;

struct StorageType {
  const char* name;
  torch::ScalarType type;
};
constexpr StorageType kStorageTypes[] = {
    {"torch.FloatStorage", torch::kFloat}, {"torch.DoubleStorage", torch::kDouble},
    {"torch.HalfStorage", torch::kHalf},   {"torch.BFloat16Storage", torch::kBFloat16},
    {"torch.LongStorage", torch::kLong},   {"torch.IntStorage", torch::kInt},
    {"torch.ShortStorage", torch::kShort}, {"torch.CharStorage", torch::kChar},
    {"torch.ByteStorage", torch::kByte},
};

constexpr const char* kRebuildTensor = "torch._utils._rebuild_tensor_v2";
constexpr const char* kOrderedDict = "collections.OrderedDict";

std::runtime_error refused(const std::string& what) { return std::runtime_error("refused: " + what); }

// A protocol 2 pickle as LibTorch's pickler writes a module's archive, read into Values. Every
// opcode, callable and class this program's archives do not use is refused, and so is anything
// that would read outside the bytes or off an empty stack.
class Unpickler {
 public:
  Unpickler(std::string_view bytes, const std::set<std::string>& classes) : bytes_(bytes), classes_(classes) {}

  ValuePtr run() {
    if (take(2) != std::string_view("\x80\x02", 2)) throw refused("the pickle is not of protocol 2");
    while (true) {
      const auto opcode = static_cast<unsigned char>(take(1)[0]);
      switch (opcode) {
        case 'c':
          push_global();
          break;
        case 'q':
          memoize(fixed(1));
          break;
        case 'r':
          memoize(fixed(4));
          break;
        case 'h':
          recall(fixed(1));
          break;
        case 'j':
          recall(fixed(4));
          break;
        case '(':
          marks_.push_back(stack_.size());
          break;
        case ')':
          push(make(Kind::kTuple));
          break;
        case '}':
          push(make(Kind::kDict));
          break;
        case ']':
          push(make(Kind::kList));
          break;
        case 't':
          push_tuple(pop_to_mark());
          break;
        case 0x85:
          push_tuple(pop_items(1));
          break;
        case 0x86:
          push_tuple(pop_items(2));
          break;
        case 0x87:
          push_tuple(pop_items(3));
          break;
        case 'X': {
          ValuePtr value = make(Kind::kString);
          value->text = std::string(take(fixed(4)));
          push(value);
          break;
        }
        case 'K':
          push_integer(static_cast<int64_t>(fixed(1)));
          break;
        case 'M':
          push_integer(static_cast<int64_t>(fixed(2)));
          break;
        case 'J':
          push_integer(static_cast<int32_t>(fixed(4)));
          break;
        case 0x8a:
          push_long();
          break;
        case 'G':
          push_float();
          break;
        case 0x88:
          push_bool(true);
          break;
        case 0x89:
          push_bool(false);
          break;
        case 'N':
          push(make(Kind::kNone));
          break;
        case 0x81:
          new_object();
          break;
        case 'Q':
          persistent_id();
          break;
        case 'R':
          reduce();
          break;
        case 's':
          set_items(pop_items(2));
          break;
        case 'u':
          set_items(pop_to_mark());
          break;
        case 'a':
          append(pop_items(1));
          break;
        case 'e':
          append(pop_to_mark());
          break;
        case 'b':
          build();
          break;
        case '.':
          if (stack_.size() != 1 || !marks_.empty()) throw refused("the pickle ends with other than one value");
          return stack_.front();
        default: {
          char hex[8];
          std::snprintf(hex, sizeof(hex), "0x%02x", opcode);
          throw refused(std::string("pickle opcode ") + hex + ", which this program's archives never hold");
        }
      }
    }
  }

 private:
  std::string_view take(uint64_t count) {
    if (count > bytes_.size() - position_) throw refused("the pickle ends in the middle of a value");
    const std::string_view part = bytes_.substr(position_, count);
    position_ += count;
    return part;
  }
  uint64_t fixed(int width) {
    const std::string_view part = take(static_cast<uint64_t>(width));
    uint64_t value = 0;
    for (int i = width - 1; i >= 0; --i) value = value << 8 | static_cast<unsigned char>(part[static_cast<size_t>(i)]);
    return value;
  }
  std::string line() {
    const size_t end = bytes_.find('\n', position_);
    if (end == std::string_view::npos || end - position_ > 200) throw refused("a pickle GLOBAL without its name");
    std::string text(bytes_.substr(position_, end - position_));
    position_ = end + 1;
    return text;
  }

  static ValuePtr make(Kind kind) {
    auto value = std::make_shared<Value>();
    value->kind = kind;
    return value;
  }
  void push(ValuePtr value) {
    if (stack_.size() >= kMaxStack) throw refused("the pickle's stack grows past any archive of ours");
    stack_.push_back(std::move(value));
  }
  ValuePtr pop() {
    if (stack_.empty() || (!marks_.empty() && stack_.size() == marks_.back())) {
      throw refused("a pickle opcode takes a value from an empty stack");
    }
    ValuePtr value = std::move(stack_.back());
    stack_.pop_back();
    return value;
  }
  const ValuePtr& top() const {
    if (stack_.empty()) throw refused("a pickle opcode needs a value on an empty stack");
    return stack_.back();
  }
  std::vector<ValuePtr> pop_items(size_t count) {
    std::vector<ValuePtr> items(count);
    for (size_t i = count; i-- > 0;) items[i] = pop();
    return items;
  }
  std::vector<ValuePtr> pop_to_mark() {
    if (marks_.empty()) throw refused("a pickle opcode needs a MARK that is not there");
    const size_t mark = marks_.back();
    marks_.pop_back();
    std::vector<ValuePtr> items(stack_.begin() + static_cast<std::ptrdiff_t>(mark), stack_.end());
    stack_.resize(mark);
    return items;
  }
  // `child` becomes a part of `parent`, which must not be a part of anything yet.
  static void adopt(Value& parent, const ValuePtr& child) {
    if (child.get() == &parent) throw refused("a pickled value contains itself");
    child->sealed = true;
    parent.depth = std::max(parent.depth, child->depth + 1);
    if (parent.depth > kMaxDepth) throw refused("the pickle nests deeper than any archive of ours");
  }
  void memoize(uint64_t index) {
    if (memo_.size() >= kMaxStack && memo_.count(index) == 0) throw refused("the pickle's memo grows too large");
    memo_[index] = top();
  }
  void recall(uint64_t index) {
    const auto found = memo_.find(index);
    if (found == memo_.end()) throw refused("the pickle reads a memo entry it never wrote");
    push(found->second);
  }
  void push_tuple(const std::vector<ValuePtr>& items) {
    ValuePtr tuple = make(Kind::kTuple);
    for (const ValuePtr& item : items) adopt(*tuple, item);
    tuple->items = items;
    push(tuple);
  }
  void push_integer(int64_t integer) {
    ValuePtr value = make(Kind::kInt);
    value->integer = integer;
    push(value);
  }
  void push_long() {
    const uint64_t width = fixed(1);
    if (width > 8) throw refused("a pickled integer wider than 64 bits");
    const std::string_view part = take(width);
    uint64_t value = 0;
    for (size_t i = width; i-- > 0;) value = value << 8 | static_cast<unsigned char>(part[i]);
    if (width > 0 && width < 8 && (static_cast<unsigned char>(part[width - 1]) & 0x80)) {
      value |= ~uint64_t{0} << (8 * width);  // negative: extend the sign
    }
    push_integer(static_cast<int64_t>(value));
  }
  void push_float() {
    const std::string_view part = take(8);
    uint64_t bits = 0;
    for (char byte : part) bits = bits << 8 | static_cast<unsigned char>(byte);  // big-endian
    ValuePtr value = make(Kind::kFloat);
    std::memcpy(&value->real, &bits, sizeof(bits));
    push(value);
  }
  void push_bool(bool flag) {
    ValuePtr value = make(Kind::kBool);
    value->integer = flag;
    push(value);
  }
  void push_global() {
    const std::string module = line();
    const std::string name = module + "." + line();
    bool known = classes_.count(name) != 0 || name == kRebuildTensor || name == kOrderedDict;
    for (const StorageType& storage : kStorageTypes) known = known || name == storage.name;
    if (!known) throw refused("the pickle names " + name.substr(0, 80) + ", which this program's archives never use");
    ValuePtr value = make(Kind::kGlobal);
    value->text = name;
    push(value);
  }
  void new_object() {
    const ValuePtr arguments = pop(), type = pop();
    if (type->kind != Kind::kGlobal || classes_.count(type->text) == 0 || arguments->kind != Kind::kTuple ||
        !arguments->items.empty()) {
      throw refused("the pickle makes an object of something other than a class of its archive");
    }
    ValuePtr object = make(Kind::kObject);
    object->text = type->text;
    push(object);
  }
  // ('storage', torch.XStorage, key, location, element count): a tensor's bytes, data/KEY.
  void persistent_id() {
    const ValuePtr id = pop();
    const auto is = [](const ValuePtr& value, Kind kind) { return value->kind == kind; };
    if (!is(id, Kind::kTuple) || id->items.size() != 5 || !is(id->items[0], Kind::kString) ||
        id->items[0]->text != "storage" || !is(id->items[1], Kind::kGlobal) || !is(id->items[2], Kind::kString) ||
        !is(id->items[3], Kind::kString) || !is(id->items[4], Kind::kInt) || id->items[4]->integer < 0) {
      throw refused("a pickled persistent id that is not a storage");
    }
    ValuePtr storage = make(Kind::kStorage);
    bool typed = false;
    for (const StorageType& type : kStorageTypes) {
      if (id->items[1]->text == type.name) storage->type = type.type, typed = true;
    }
    if (!typed) throw refused("a storage of type " + id->items[1]->text.substr(0, 80));
    storage->text = id->items[2]->text;
    storage->integer = id->items[4]->integer;
    push(storage);
  }
  void reduce() {
    const ValuePtr arguments = pop(), callable = pop();
    if (callable->kind != Kind::kGlobal || arguments->kind != Kind::kTuple) {
      throw refused("the pickle calls something other than a function");
    }
    const std::vector<ValuePtr>& args = arguments->items;
    if (callable->text == kOrderedDict && args.empty()) {
      push(make(Kind::kDict));
      return;
    }
    if (callable->text != kRebuildTensor || args.size() != 6 || args[0]->kind != Kind::kStorage ||
        args[1]->kind != Kind::kInt || args[2]->kind != Kind::kTuple || args[3]->kind != Kind::kTuple ||
        args[4]->kind != Kind::kBool || args[5]->kind != Kind::kDict || !args[5]->entries.empty()) {
      throw refused("the pickle calls " + callable->text.substr(0, 80) + " with arguments this program never writes");
    }
    ValuePtr tensor = make(Kind::kTensor);
    tensor->storage = args[0];
    tensor->offset = args[1]->integer;
    for (const auto& [list, out] : {std::pair{args[2], &tensor->sizes}, {args[3], &tensor->strides}}) {
      for (const ValuePtr& item : list->items) {
        if (item->kind != Kind::kInt || item->integer < 0) throw refused("a tensor's size or stride is not a count");
        out->push_back(item->integer);
      }
    }
    check_tensor_bounds(*tensor);
    adopt(*tensor, args[0]);
    push(tensor);
  }
  // Every element a tensor can reach lies in its storage.
  static void check_tensor_bounds(const Value& tensor) {
    if (tensor.sizes.size() != tensor.strides.size() || tensor.sizes.size() > 8 || tensor.offset < 0) {
      throw refused("a tensor's sizes and strides do not match");
    }
    int64_t last = tensor.offset;  // the highest element index reached
    int64_t count = 1;             // and the elements, at most the storage's: no stride of 0 repeats one
    bool empty = false;
    for (size_t i = 0; i < tensor.sizes.size(); ++i) {
      if (tensor.sizes[i] == 0) empty = true;
      if (__builtin_mul_overflow(count, tensor.sizes[i], &count) || count > tensor.storage->integer) {
        throw refused("a tensor has more elements than its storage");
      }
      int64_t reach = 0;
      if (tensor.sizes[i] > 0 && (__builtin_mul_overflow(tensor.sizes[i] - 1, tensor.strides[i], &reach) ||
                                  __builtin_add_overflow(last, reach, &last))) {
        throw refused("a tensor's sizes overflow");
      }
    }
    if (!empty && last >= tensor.storage->integer) throw refused("a tensor reaches past the end of its storage");
  }
  void set_items(const std::vector<ValuePtr>& items) {
    const ValuePtr& dict = top();
    if (dict->kind != Kind::kDict || dict->sealed || items.size() % 2 != 0) {
      throw refused("the pickle sets items of something other than a new dict");
    }
    for (size_t i = 0; i < items.size(); i += 2) {
      adopt(*dict, items[i]);
      adopt(*dict, items[i + 1]);
      dict->entries.emplace_back(items[i], items[i + 1]);
    }
  }
  void append(const std::vector<ValuePtr>& items) {
    const ValuePtr& list = top();
    if (list->kind != Kind::kList || list->sealed)
      throw refused("the pickle appends to something other than a new list");
    for (const ValuePtr& item : items) adopt(*list, item);
    list->items.insert(list->items.end(), items.begin(), items.end());
  }
  void build() {
    const ValuePtr state = pop();
    const ValuePtr& object = top();
    if (object->kind != Kind::kObject || object->state || object->sealed || state->kind != Kind::kDict) {
      throw refused("the pickle sets the state of something other than a new object of its archive");
    }
    adopt(*object, state);
    object->state = state;
  }

  std::string_view bytes_;
  const std::set<std::string>& classes_;
  uint64_t position_ = 0;
  std::vector<ValuePtr> stack_;
  std::vector<size_t> marks_;
  std::unordered_map<uint64_t, ValuePtr> memo_;
};

// ---- The archive's records -----------------------------------------------------------------

bool is_code_record(const std::string& tail) {
  static const std::regex code(R"(code/__torch__(/___torch_mangle_[0-9]{1,6})?\.py(\.debug_pkl)?)");
  return std::regex_match(tail, code);
}

// The class a code record defines, "__torch__.Module" or "__torch__.___torch_mangle_N.Module",
// after checking that it only declares attributes, as LibTorch writes a module that holds data:
// any other line (a method, an import, a constant) is refused.
std::string check_code(const std::string& tail, const std::string& code) {
  static const std::regex parameters(R"(  __(parameters|buffers|annotations)__ = \[("[^"\\]{1,200}", )*\])");
  static const std::regex attribute(
      R"(  ([A-Za-z_][A-Za-z0-9_]{0,200}|__annotations__\["[^"\\]{1,200}"\])( :| =) )"
      R"((Tensor|int|float|str|bool|Optional\[(Tensor|int|float|str|bool)\]|Tuple\[(float|int)(, (float|int)){0,7}\]|List\[(Tensor|int|float|str|bool)\]|__torch__(\.___torch_mangle_[0-9]{1,6})?\.Module))");
  std::istringstream lines(code);
  std::string line;
  bool header = false;
  while (std::getline(lines, line)) {
    if (!header) {
      if (line != "class Module(Module):") break;
      header = true;
      continue;
    }
    if (line.empty() || std::regex_match(line, parameters) || std::regex_match(line, attribute)) continue;
    throw refused(tail + " holds code this program never writes (\"" + line.substr(0, 60) +
                  "\"): a LibTorch archive is a program, and this one is not ours");
  }
  if (!header) throw refused(tail + " does not define the one class this program writes");
  const std::string stem = tail.substr(5, tail.size() - 5 - 3);  // "__torch__" or "__torch__/___torch_mangle_N"
  return std::regex_replace(stem, std::regex("/"), ".") + ".Module";
}

struct Archive {
  const std::string& bytes;
  std::map<std::string, ZipEntry> records;        // by their name after the archive's folder
  std::map<std::string, torch::Tensor> storages;  // read once each

  const torch::Tensor& storage(const Value& value) {
    const auto cached = storages.find(value.text);
    if (cached != storages.end()) {
      if (cached->second.scalar_type() != value.type || cached->second.numel() != value.integer) {
        throw refused("storage " + value.text.substr(0, 20) + " is named with two types or sizes");
      }
      return cached->second;
    }
    const auto found = records.find("data/" + value.text);
    const uint64_t element = c10::elementSize(value.type);
    if (found == records.end() || found->second.size % element != 0 ||
        found->second.size / element != static_cast<uint64_t>(value.integer)) {
      throw refused("storage " + value.text.substr(0, 20) + " has no record of its size");
    }
    torch::Tensor tensor = torch::empty({value.integer}, torch::TensorOptions().dtype(value.type));
    const std::string data = zip_entry_bytes(bytes, found->second);
    if (!data.empty()) std::memcpy(tensor.data_ptr(), data.data(), data.size());
    return storages.emplace(value.text, tensor).first->second;
  }

  torch::Tensor tensor(const Value& value) {
    if (value.kind != Kind::kTensor) throw refused("a value that should be a tensor is not one");
    const torch::Tensor& whole = storage(*value.storage);
    return whole.as_strided(value.sizes, value.strides, value.offset).clone(at::MemoryFormat::Contiguous);
  }
};

// The attributes of a pickled object, by name.
std::map<std::string, ValuePtr> attributes(const ValuePtr& object, const std::string& what) {
  if (!object || object->kind != Kind::kObject || !object->state) throw refused(what + " is not an archive");
  std::map<std::string, ValuePtr> named;
  for (const auto& [key, value] : object->state->entries) {
    if (key->kind != Kind::kString) throw refused(what + " has an attribute without a name");
    named[key->text] = value;
  }
  return named;
}

const ValuePtr& attribute(const std::map<std::string, ValuePtr>& named, const std::string& name, Kind kind,
                          const std::string& what) {
  const auto found = named.find(name);
  if (found == named.end() || found->second->kind != kind) throw refused(what + " has no " + name + " of its kind");
  return found->second;
}

// A module's archive (torch::nn::Module::save): its tensors, and its submodules' under "NAME.".
void add_weights(Archive& archive, TensorFile& file, const ValuePtr& object, const std::string& prefix, int depth) {
  if (depth > 16) throw refused("the model's archive nests deeper than any network of ours");
  for (const auto& [name, value] : attributes(object, prefix)) {
    if (value->kind == Kind::kTensor) {
      file.add(prefix + name, archive.tensor(*value));
    } else if (value->kind == Kind::kObject) {
      add_weights(archive, file, value, prefix + name + ".", depth + 1);
    } else {
      throw refused(prefix + name + " in the model's archive is neither a weight nor a module");
    }
  }
}

int64_t scalar_count(Archive& archive, const ValuePtr& value, const std::string& what) {
  if (value->kind == Kind::kInt) return value->integer;
  const torch::Tensor tensor = archive.tensor(*value);
  if (tensor.numel() != 1 || tensor.scalar_type() != torch::kLong) throw refused(what + " is not a count");
  return tensor.item<int64_t>();
}

double real_of(const ValuePtr& value, const std::string& what) {
  if (value->kind == Kind::kFloat) return value->real;
  if (value->kind == Kind::kInt) return static_cast<double>(value->integer);
  throw refused(what + " is not a number");
}

// torch::optim::Adam::save's archive as train/optimizer_state.h's records.
void add_optimizer(Archive& archive, TensorFile& file, const ValuePtr& object) {
  const auto optimizer = attributes(object, "the optimizer state");
  const std::string what = "the optimizer state";
  const auto states = attributes(attribute(optimizer, "state", Kind::kObject, what), what);
  const auto groups = attributes(attribute(optimizer, "param_groups", Kind::kObject, what), what);
  const int64_t group_count = scalar_count(archive, attribute(groups, "param_groups/size", Kind::kTensor, what), what);
  if (group_count < 0 || group_count > 1024) throw refused("the optimizer state's group count");
  set_metadata_number(file, "optimizer.groups", group_count);
  for (int64_t g = 0; g < group_count; ++g) {
    const std::string prefix = "optimizer." + std::to_string(g) + ".";
    const auto group = attributes(attribute(groups, "param_groups/" + std::to_string(g), Kind::kObject, what), what);
    const auto options = attributes(attribute(group, "options", Kind::kObject, what), what);
    const ValuePtr& betas = attribute(options, "betas", Kind::kTuple, what);
    if (betas->items.size() != 2) throw refused("the optimizer's betas");
    set_metadata_number(file, prefix + "lr", real_of(attribute(options, "lr", Kind::kFloat, what), "lr"));
    set_metadata_number(file, prefix + "beta1", real_of(betas->items[0], "beta1"));
    set_metadata_number(file, prefix + "beta2", real_of(betas->items[1], "beta2"));
    set_metadata_number(file, prefix + "eps", real_of(attribute(options, "eps", Kind::kFloat, what), "eps"));
    set_metadata_number(file, prefix + "weight_decay",
                        real_of(attribute(options, "weight_decay", Kind::kFloat, what), "weight_decay"));
    set_metadata_number(file, prefix + "amsgrad", attribute(options, "amsgrad", Kind::kBool, what)->integer);
    const int64_t size = scalar_count(archive, attribute(group, "params/size", Kind::kTensor, what), what);
    if (size < 0 || size > 1 << 20) throw refused("the optimizer state's parameter count");
    set_metadata_number(file, prefix + "size", size);
    for (int64_t j = 0; j < size; ++j) {
      const ValuePtr& key = attribute(group, "params/" + std::to_string(j), Kind::kString, what);
      const auto found = states.find(key->text);
      if (found == states.end()) continue;  // no step taken yet
      const auto state = attributes(found->second, what);
      const std::string param = prefix + std::to_string(j) + ".";
      set_metadata_number(file, param + "step", scalar_count(archive, state.at("step"), "a step count"));
      for (const char* moment : {"exp_avg", "exp_avg_sq", "max_exp_avg_sq"}) {
        const auto value = state.find(moment);
        if (value != state.end()) file.add(param + moment, archive.tensor(*value->second));
      }
    }
  }
}

}  // namespace

bool is_legacy_checkpoint(const std::string& bytes) { return bytes.rfind(std::string("PK\x03\x04", 4), 0) == 0; }

TensorFile convert_legacy_checkpoint(const std::string& bytes) {
  Archive archive{bytes, {}, {}};
  ZipLimits limits;
  limits.may_deflate = [](const std::string& name) {
    const size_t slash = name.find('/');
    return slash != std::string::npos && is_code_record(name.substr(slash + 1));
  };
  const std::vector<ZipEntry> entries = read_zip_directory(archive.bytes, limits);
  static const std::regex known(
      R"(data\.pkl|constants\.pkl|version|\.data/version|byteorder|\.data/serialization_id|data/[0-9]{1,9})");
  const std::string first = entries.front().name;
  const std::string prefix = first.substr(0, first.find('/') + 1);
  std::set<std::string> classes;
  for (const ZipEntry& entry : entries) {
    if (prefix.size() < 2 || entry.name.rfind(prefix, 0) != 0) throw refused("its entries lie in more than one folder");
    const std::string tail = entry.name.substr(prefix.size());
    if (!std::regex_match(tail, known) && !is_code_record(tail)) {
      throw refused("it holds " + entry.name.substr(0, 80) + ", which this program's archives never hold");
    }
    archive.records.emplace(tail, entry);
    if (is_code_record(tail) && tail.size() > 3 && tail.compare(tail.size() - 3, 3, ".py") == 0) {
      classes.insert(check_code(tail, zip_entry_bytes(archive.bytes, entry)));
    }
  }
  const auto record = [&](const std::string& name) {
    const auto found = archive.records.find(name);
    if (found == archive.records.end()) throw refused("it has no " + name);
    return zip_entry_bytes(archive.bytes, found->second);
  };
  // TorchScript constants belong to code; ours has none. The byte order, when stated, is ours.
  if (record("constants.pkl") != std::string("\x80\x02).", 4)) throw refused("constants.pkl holds constants");
  if (archive.records.count("byteorder") != 0 && record("byteorder") != "little") {
    throw refused("its tensors are big-endian");
  }

  const ValuePtr root = Unpickler(record("data.pkl"), classes).run();
  const auto named = attributes(root, "the checkpoint");
  const std::string what = "the checkpoint";
  if (attribute(named, "format", Kind::kString, what)->text != "nmt-rnn-checkpoint") {
    throw std::runtime_error("not an nmt checkpoint");
  }
  if (const int64_t version = attribute(named, "version", Kind::kInt, what)->integer; version != 1) {
    throw std::runtime_error("checkpoint format version " + std::to_string(version) + ", this build reads version " +
                             std::to_string(kCheckpointVersion) + " and converts version 1");
  }
  TensorFile file;
  file.set_metadata("format", kCheckpointFormatName);
  file.set_metadata("version", std::to_string(kCheckpointVersion));
  for (const auto& [from, to] : {std::pair{"config", kConfigRecord},
                                 {"source_vocabulary", kSourceVocabularyRecord},
                                 {"target_vocabulary", kTargetVocabularyRecord}}) {
    const torch::Tensor tensor = archive.tensor(*attribute(named, from, Kind::kTensor, what));
    if (tensor.scalar_type() != torch::kByte || tensor.dim() != 1) throw refused(std::string(from) + " is not bytes");
    file.add(to, tensor);
  }
  for (const char* key : {"step", "epoch", "batch_in_epoch", "validations_without_improvement", "plateau_count"}) {
    if (named.count(key) != 0) set_metadata_number(file, key, attribute(named, key, Kind::kInt, what)->integer);
  }
  if (named.count("has_best") != 0) {
    set_metadata_number(file, "has_best", attribute(named, "has_best", Kind::kBool, what)->integer);
  }
  for (const char* key : {"best_score", "learning_rate"}) {
    if (named.count(key) == 0) continue;
    const torch::Tensor tensor = archive.tensor(*attribute(named, key, Kind::kTensor, what));
    if (tensor.numel() != 1 || tensor.scalar_type() != torch::kDouble)
      throw refused(std::string(key) + " is not a number");
    set_metadata_number(file, key, tensor.item<double>());
  }
  for (const auto& [from, to] :
       {std::pair{"random_state", "nmt.random_state"}, {"cuda_random_state", "nmt.cuda_random_state"}}) {
    if (named.count(from) != 0) file.add(to, archive.tensor(*attribute(named, from, Kind::kTensor, what)));
  }
  if (named.count("compute_type") != 0) {
    const std::string type = attribute(named, "compute_type", Kind::kString, what)->text;
    file.set_metadata("compute_type", type.substr(0, 20));
  }
  if (file.metadata("compute_type") == "int8") {
    // An int8 export: parameter I's records by its place in "parameter_names".
    const torch::Tensor names = archive.tensor(*attribute(named, "parameter_names", Kind::kTensor, what));
    if (names.scalar_type() != torch::kByte || names.dim() != 1) throw refused("parameter_names is not bytes");
    std::istringstream lines(
        std::string(reinterpret_cast<const char*>(names.data_ptr<uint8_t>()), static_cast<size_t>(names.numel())));
    std::string name;
    for (size_t i = 0; std::getline(lines, name); ++i) {
      const std::string index = std::to_string(i), record_name = "model." + name;
      if (named.count("values_" + index) != 0) {
        file.add(record_name + ".int8_values",
                 archive.tensor(*attribute(named, "values_" + index, Kind::kTensor, what)));
        file.add(record_name + ".int8_scales",
                 archive.tensor(*attribute(named, "scales_" + index, Kind::kTensor, what)));
      } else {
        file.add(record_name, archive.tensor(*attribute(named, "parameter_" + index, Kind::kTensor, what)));
      }
    }
  } else {
    add_weights(archive, file, attribute(named, "model", Kind::kObject, what), "model.", 0);
  }
  if (named.count("optimizer") != 0) add_optimizer(archive, file, attribute(named, "optimizer", Kind::kObject, what));
  return file;
}

}  // namespace nmt
