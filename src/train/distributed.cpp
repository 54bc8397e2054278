#include "train/distributed.h"

#include <c10/util/intrusive_ptr.h>
#include <torch/torch.h>
#include <torch/csrc/distributed/c10d/PrefixStore.hpp>
#include <torch/csrc/distributed/c10d/ProcessGroupGloo.hpp>
#include <torch/csrc/distributed/c10d/TCPStore.hpp>
#ifdef USE_C10D_NCCL
#include <torch/csrc/distributed/c10d/ProcessGroupNCCL.hpp>
#endif

#include <chrono>
#include <cstdlib>
#include <stdexcept>

namespace nmt {
namespace {

using Clock = std::chrono::steady_clock;
constexpr auto kHeartbeat = std::chrono::milliseconds(1000);
// How long a heartbeat must stand still for a failure to be put on its rank.
constexpr auto kSilence = 3 * kHeartbeat;

double seconds_since(Clock::time_point start) { return std::chrono::duration<double>(Clock::now() - start).count(); }

// The option's value when it was given, else the environment variable's (checked to be a whole
// number within [low, high]), else `otherwise`.
int option_or_environment(int option, int unset, const char* variable, const char* flag, int low, int high,
                          int otherwise) {
  if (option != unset) return option;
  const char* text = std::getenv(variable);
  if (text == nullptr || *text == '\0') return otherwise;
  char* end = nullptr;
  const long value = std::strtol(text, &end, 10);
  if (*end != '\0' || value < low || value > high) {
    throw std::invalid_argument(std::string(variable) + "=" + text + ": expected a whole number from " +
                                std::to_string(low) + " to " + std::to_string(high) + " (or pass " + flag + ")");
  }
  return static_cast<int>(value);
}

std::string first_line(const std::string& text) { return text.substr(0, text.find('\n')); }

std::string bytes_to_string(const std::vector<uint8_t>& bytes) { return {bytes.begin(), bytes.end()}; }

bool is_loopback(const std::string& address) {
  return address == "localhost" || address.rfind("127.", 0) == 0 || address == "::1";
}

// A 63-bit digest of the tensors' bytes (for comparing replicas, not for security).
int64_t digest(const std::vector<torch::Tensor>& tensors) {
  uint64_t hash = 0x9e3779b97f4a7c15ULL;
  for (const torch::Tensor& tensor : tensors) {
    const torch::Tensor bytes = tensor.detach().to(torch::kCPU).contiguous();
    const auto* data = static_cast<const unsigned char*>(bytes.data_ptr());
    const size_t size = bytes.numel() * bytes.element_size();
    size_t i = 0;
    for (; i + 8 <= size; i += 8) {
      uint64_t word;
      std::memcpy(&word, data + i, 8);
      hash = (hash ^ word) * 0x100000001b3ULL;
      hash ^= hash >> 29;
    }
    for (; i < size; ++i) hash = (hash ^ data[i]) * 0x100000001b3ULL;
  }
  return static_cast<int64_t>(hash >> 1);
}

}  // namespace

void resolve_distributed_options(DistributedOptions& options) {
  options.world_size = option_or_environment(options.world_size, 0, "WORLD_SIZE", "--world-size", 1, 1 << 20, 0);
  options.rank = option_or_environment(options.rank, -1, "RANK", "--rank", 0, 1 << 20, -1);
  if (options.world_size == 0 && options.rank < 0) return;  // one process
  if (options.world_size == 0) {
    throw std::invalid_argument(
        "the rank is set (RANK or --rank) but the world size is not: set WORLD_SIZE or "
        "--world-size too, as torchrun does");
  }
  if (options.rank < 0) options.rank = options.world_size == 1 ? 0 : -1;
  if (options.rank < 0) {
    throw std::invalid_argument("the world size is " + std::to_string(options.world_size) +
                                " but the rank is not set: set RANK or --rank too, as torchrun does");
  }
  if (options.rank >= options.world_size) {
    throw std::invalid_argument("rank " + std::to_string(options.rank) + " is outside the world size " +
                                std::to_string(options.world_size) + ": ranks run from 0 to world size - 1");
  }
  // Without LOCAL_RANK, every rank is taken to be on one machine.
  options.local_rank =
      option_or_environment(options.local_rank, -1, "LOCAL_RANK", "--local-rank", 0, 1 << 20, options.rank);
  if (options.local_rank > options.rank) {
    throw std::invalid_argument("local rank " + std::to_string(options.local_rank) + " is above rank " +
                                std::to_string(options.rank) +
                                ": a machine's ranks are numbered from its first global rank");
  }
  if (options.master_addr.empty()) {
    const char* address = std::getenv("MASTER_ADDR");
    options.master_addr = address != nullptr && *address != '\0' ? address : "127.0.0.1";
  }
  options.master_port = option_or_environment(options.master_port, 0, "MASTER_PORT", "--master-port", 1, 65535, 29500);
  if (!(options.timeout_seconds > 0)) throw std::invalid_argument("--dist-timeout: must be above 0 seconds");
  if (options.check_replicas < 0) throw std::invalid_argument("--check-replicas: must be 0 or more");
}

Distributed::Distributed(const DistributedOptions& options, const torch::Device& device)
    : rank_(options.rank),
      world_size_(options.world_size),
      local_rank_(options.local_rank),
      master_(options.master_addr + ":" + std::to_string(options.master_port)),
      timeout_seconds_(options.timeout_seconds),
      device_(device) {
  const auto timeout = std::chrono::milliseconds(static_cast<int64_t>(options.timeout_seconds * 1000));
  // torchrun's agent hosts a store on MASTER_PORT itself and says so: every rank is then a client,
  // under a prefix of its own per restart, as PyTorch's own workers are.
  const char* agent = std::getenv("TORCHELASTIC_USE_AGENT_STORE");
  const bool agent_store = agent != nullptr && std::string(agent) == "True";
  const char* restart = std::getenv("TORCHELASTIC_RESTART_COUNT");
  const std::string prefix = "nmt/attempt_" + std::string(restart != nullptr ? restart : "0");
  c10d::TCPStoreOptions store_options;
  store_options.port = static_cast<uint16_t>(options.master_port);
  store_options.isServer = rank_ == 0 && !agent_store;
  store_options.numWorkers = world_size_;
  store_options.waitWorkers = false;
  store_options.timeout = timeout;
  try {
    store_ = c10::make_intrusive<c10d::TCPStore>(options.master_addr, store_options);
    store_options.isServer = false;
    heartbeat_store_ = c10::make_intrusive<c10d::TCPStore>(options.master_addr, store_options);
    if (agent_store) {
      store_ = c10::make_intrusive<c10d::PrefixStore>(prefix, store_);
      heartbeat_store_ = c10::make_intrusive<c10d::PrefixStore>(prefix, heartbeat_store_);
    }
  } catch (const std::exception& error) {
    if (rank_ == 0) {
      throw std::runtime_error("rank 0 cannot listen on " + master_ + " (" + first_line(error.what()) +
                               "): the port is in use or the address is not this machine's; pass another "
                               "--master-port (MASTER_PORT) or --master-addr (MASTER_ADDR)");
    }
    throw std::runtime_error("rank " + std::to_string(rank_) + " cannot reach the master (rank 0) at " + master_ +
                             " within " + std::to_string(static_cast<int>(options.timeout_seconds)) + " s (" +
                             first_line(error.what()) +
                             "): start rank 0 there, or check --master-addr/--master-port (MASTER_ADDR, MASTER_PORT)");
  }
  heartbeat_ = std::thread([this] { beat(); });
  store_->set("joined/" + std::to_string(rank_), std::vector<uint8_t>{1});

  try {
    if (device.is_cuda()) {
#ifdef USE_C10D_NCCL
      auto nccl_options = c10d::ProcessGroupNCCL::Options::create();
      nccl_options->timeout = timeout;
      group_ = c10::make_intrusive<c10d::ProcessGroupNCCL>(store_, rank_, world_size_, nccl_options);
#else
      throw std::invalid_argument(
          "--device cuda with several ranks needs NCCL, and this LibTorch was built without it: use a "
          "CUDA build of LibTorch, or --device cpu (Gloo)");
#endif
    } else {
      auto gloo_options = c10d::ProcessGroupGloo::Options::create(timeout);
      if (const char* interface = std::getenv("GLOO_SOCKET_IFNAME"); interface != nullptr && *interface != '\0') {
        gloo_options->devices.push_back(c10d::ProcessGroupGloo::createDeviceForInterface(interface));
      } else if (is_loopback(options.master_addr)) {
        gloo_options->devices.push_back(c10d::ProcessGroupGloo::createDeviceForHostname("127.0.0.1"));
      } else {
        gloo_options->devices.push_back(c10d::ProcessGroupGloo::createDefaultDevice());
      }
      group_ = c10::make_intrusive<c10d::ProcessGroupGloo>(store_, rank_, world_size_, gloo_options);
    }
  } catch (const std::invalid_argument&) {
    stop_ = true;
    heartbeat_.join();
    throw;
  } catch (const std::exception& error) {
    std::string missing;
    try {
      for (int other = 0; other < world_size_; ++other) {
        if (!store_->check({"joined/" + std::to_string(other)})) {
          missing += (missing.empty() ? "" : ", ") + std::to_string(other);
        }
      }
    } catch (const std::exception&) {
      missing = "0 (the master at " + master_ + " is gone)";
    }
    stop_ = true;
    heartbeat_.join();
    throw std::runtime_error("rank " + std::to_string(rank_) + ": the process group of " + std::to_string(world_size_) +
                             " ranks did not form within " + std::to_string(static_cast<int>(options.timeout_seconds)) +
                             " s" + (missing.empty() ? "" : "; rank(s) " + missing + " never joined") + " (" +
                             first_line(error.what()) + ")");
  }
}

Distributed::~Distributed() {
  stop_ = true;
  if (heartbeat_.joinable()) heartbeat_.join();
}

std::string Distributed::backend() const { return device_.is_cuda() ? "nccl" : "gloo"; }

void Distributed::beat() {
  const std::string key = "heartbeat/" + std::to_string(rank_);
  while (!stop_) {
    try {
      heartbeat_store_->add(key, 1);
    } catch (const std::exception&) {
      return;  // the store is gone (rank 0 ended): the main thread finds out on its next call
    }
    for (auto slept = std::chrono::milliseconds(0); slept < kHeartbeat && !stop_;
         slept += std::chrono::milliseconds(50)) {
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
  }
}

int64_t Distributed::heartbeat_of(int rank) { return store_->add("heartbeat/" + std::to_string(rank), 0); }

std::string Distributed::silent_ranks() {
  try {
    std::vector<int64_t> before(world_size_);
    for (int other = 0; other < world_size_; ++other) before[other] = heartbeat_of(other);
    std::this_thread::sleep_for(kSilence);
    std::string silent, behind;
    for (int other = 0; other < world_size_; ++other) {
      if (other == rank_) continue;
      if (heartbeat_of(other) == before[other]) {
        silent += (silent.empty() ? "rank " : ", rank ") + std::to_string(other);
        continue;
      }
      const std::string key = "step/" + std::to_string(other);
      const int64_t step = store_->check({key}) ? std::stoll(bytes_to_string(store_->get(key))) : 0;
      if (step < step_) {
        behind += (behind.empty() ? "" : ", ") + ("rank " + std::to_string(other) + " is still at step " +
                                                  std::to_string(step) + " (alive but stuck)");
      }
    }
    if (!silent.empty()) {
      return silent + " stopped answering (its heartbeat stood still for " +
             std::to_string(std::chrono::duration_cast<std::chrono::seconds>(kSilence).count()) +
             " s: the process ended, was stopped or lost the network)";
    }
    return behind.empty() ? "no rank is silent, so the network between ranks failed" : behind;
  } catch (const std::exception&) {
    return rank_ == 0 ? "the store this rank hosts stopped answering"
                      : "rank 0 (the master at " + master_ + ", which holds the rendezvous store) is gone";
  }
}

void Distributed::fail(const std::string& what, const std::string& cause) {
  throw std::runtime_error("distributed training stopped at step " + std::to_string(step_ + 1) + ", rank " +
                           std::to_string(rank_) + ": " + what + " failed: " + silent_ranks() + " [" +
                           first_line(cause) + "]; the checkpoints rank 0 wrote are complete: --resume continues");
}

void Distributed::publish(const std::string& key, const std::string& value) {
  try {
    store_->set(key, std::vector<uint8_t>(value.begin(), value.end()));
  } catch (const std::exception& error) {
    fail("publishing " + key, error.what());
  }
}

std::string Distributed::wait_for(const std::string& key, int from) {
  const std::string what = "waiting for rank " + std::to_string(from) + " (" + key + ")";
  bool silent = false;
  try {
    int64_t last = heartbeat_of(from);
    auto changed = Clock::now();
    while (!store_->check({key})) {
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
      if (const int64_t beat = heartbeat_of(from); beat != last) {
        last = beat, changed = Clock::now();
      } else if (seconds_since(changed) > timeout_seconds_) {
        silent = true;
        break;
      }
    }
    if (!silent) return bytes_to_string(store_->get(key));
  } catch (const std::exception& error) {  // the store's connection (to rank 0) failed
    fail(what, error.what());
  }
  fail(what, "its heartbeat stood still for " + std::to_string(static_cast<int>(timeout_seconds_)) + " s");
}

void Distributed::announce_step(int64_t step) {
  step_ = step;
  try {
    const std::string value = std::to_string(step);
    store_->set("step/" + std::to_string(rank_), std::vector<uint8_t>(value.begin(), value.end()));
  } catch (const std::exception& error) {
    fail("announcing the step", error.what());
  }
}

void Distributed::wait(c10d::Work& work, const std::string& what) {
  try {
    work.wait();
  } catch (const c10::Error& error) {
    fail(what, error.what_without_backtrace());
  } catch (const std::exception& error) {
    fail(what, error.what());
  }
}

void Distributed::broadcast(const std::vector<torch::Tensor>& tensors) {
  if (tensors.empty()) return;
  torch::NoGradGuard no_grad;
  std::vector<torch::Tensor> flat = {torch::cat([&] {
    std::vector<torch::Tensor> pieces;
    for (const torch::Tensor& tensor : tensors) pieces.push_back(tensor.detach().reshape(-1));
    return pieces;
  }())};
  c10d::BroadcastOptions options;
  options.rootRank = 0;
  wait(*group_->broadcast(flat, options), "the broadcast of rank 0's state");
  int64_t offset = 0;
  for (const torch::Tensor& tensor : tensors) {
    tensor.detach().copy_(flat[0].narrow(0, offset, tensor.numel()).view_as(tensor));
    offset += tensor.numel();
  }
}

void Distributed::check_same_on_every_rank(const std::vector<torch::Tensor>& tensors, int64_t step) {
  const int64_t hash = digest(tensors);
  // The maximum of (h, -h) over ranks is (max h, -min h): equal digests when max == min.
  std::vector<torch::Tensor> extremes = {torch::tensor({hash, -hash}, torch::kLong).to(device_)};
  c10d::AllreduceOptions options;
  options.reduceOp = c10d::ReduceOp::MAX;
  wait(*group_->allreduce(extremes, options), "the comparison of the ranks' weights");
  const torch::Tensor result = extremes[0].cpu();
  if (result[0].item<int64_t>() != -result[1].item<int64_t>()) {
    throw std::runtime_error("after step " + std::to_string(step) +
                             " the ranks' weights differ (they must stay equal): a bug; please report it with the "
                             "command and train.log");
  }
}

void Distributed::finish() {
  try {
    store_->add("done", 1);
    if (rank_ != 0) return;
    const auto start = Clock::now();
    while (store_->add("done", 0) < world_size_ && seconds_since(start) < timeout_seconds_) {
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
  } catch (const std::exception&) {
    // The run is over and its checkpoints written; a rank gone now changes nothing.
  }
}

GradientReducer::GradientReducer(Distributed& distributed, std::vector<torch::Tensor> parameters, int64_t bucket_bytes,
                                 const std::vector<torch::Tensor>& row_sparse)
    : distributed_(distributed), parameters_(std::move(parameters)), slots_(parameters_.size()) {
  TORCH_CHECK(!parameters_.empty(), "GradientReducer: no parameters");
  for (const torch::Tensor& embedding : row_sparse) {
    size_t i = 0;
    while (i < parameters_.size() && !parameters_[i].is_same(embedding)) ++i;
    TORCH_CHECK(i < parameters_.size() && embedding.dim() == 2, "GradientReducer: a row-sparse tensor is no parameter");
    slots_[i].row_sparse = true;
    slots_[i].gradient = torch::zeros_like(embedding).requires_grad_(false);
    slots_[i].rows = torch::empty({0}, torch::TensorOptions(torch::kLong).device(embedding.device()));
    slots_[i].written = slots_[i].rows;
    sparse_order_.push_back(i);
  }
  // Backward makes the gradients of the last layers first: buckets are filled from the end. A
  // row-sparse parameter is a bucket of its own.
  std::vector<std::vector<size_t>> members;
  int64_t bytes = 0;
  bool open = false;  // whether members.back() takes more parameters
  for (size_t i = parameters_.size(); i-- > 0;) {
    if (slots_[i].row_sparse) {
      members.push_back({i});
      open = false;
      continue;
    }
    const int64_t size = parameters_[i].numel() * parameters_[i].element_size();
    if (!open || (bytes > 0 && bytes + size > bucket_bytes)) members.emplace_back(), bytes = 0, open = true;
    members.back().push_back(i);
    bytes += size;
  }
  tail_bucket_ = 0;
  while (slots_[members[tail_bucket_].front()].row_sparse) ++tail_bucket_;  // parameters are never all row-sparse
  for (size_t bucket = 0; bucket < members.size(); ++bucket) {
    for (size_t i : members[bucket]) slots_[i].bucket = static_cast<int64_t>(bucket);
    if (slots_[members[bucket].front()].row_sparse) {
      buckets_.emplace_back();  // made at each update from its rows
      continue;
    }
    int64_t elements = 0;
    for (size_t i : members[bucket]) elements += parameters_[i].numel();
    const bool tail = bucket == tail_bucket_;
    buckets_.push_back(torch::zeros({elements + (tail ? 2 : 0)}, parameters_[0].options().requires_grad(false)));
    int64_t offset = 0;
    for (size_t i : members[bucket]) {
      slots_[i].view = buckets_.back().narrow(0, offset, parameters_[i].numel()).view(parameters_[i].sizes());
      offset += parameters_[i].numel();
    }
  }
  pending_.assign(buckets_.size(), 0);
  for (const Slot& slot : slots_) ++pending_[static_cast<size_t>(slot.bucket)];
  works_.resize(buckets_.size());
  for (size_t i = 0; i < parameters_.size(); ++i) {
    hooks_.push_back(
        parameters_[i].register_hook([this, i](const torch::Tensor& gradient) { on_gradient(i, gradient); }));
  }
}

GradientReducer::~GradientReducer() {
  for (size_t i = 0; i < parameters_.size(); ++i) parameters_[i].remove_hook(hooks_[i]);
}

double GradientReducer::mean_bytes_per_update() const {
  int64_t dense = 0;
  for (const Slot& slot : slots_) {
    if (!slot.row_sparse) dense += slot.view.numel() * slot.view.element_size();
  }
  return static_cast<double>(dense) + (updates_ > 0 ? sparse_bytes_ / static_cast<double>(updates_) : 0.0);
}

void GradientReducer::set_rows(const std::vector<torch::Tensor>& rows) {
  std::lock_guard<std::mutex> lock(mutex_);
  TORCH_CHECK(rows.size() == sparse_order_.size(), "GradientReducer::set_rows: one row list per row-sparse parameter");
  for (size_t k = 0; k < rows.size(); ++k) {
    Slot& slot = slots_[sparse_order_[k]];
    slot.rows = rows[k].to(slot.rows.device());
  }
}

void GradientReducer::begin(double loss_sum, double clock) {
  std::lock_guard<std::mutex> lock(mutex_);
  armed_ = true;
  torch::Tensor& tail = buckets_[tail_bucket_];
  tail.narrow(0, tail.numel() - 2, 2).copy_(torch::tensor({loss_sum, clock}, torch::kDouble));
}

// The gradient of parameter `index` (the sum of the update's backwards: `earlier` is what .grad
// holds from the update's earlier batches) into its bucket. Undefined: no gradient at all.
void GradientReducer::fill(size_t index, const torch::Tensor& earlier, const torch::Tensor& gradient) {
  Slot& slot = slots_[index];
  if (slot.row_sparse) {
    const torch::Tensor total = !gradient.defined() ? earlier : earlier.defined() ? earlier + gradient : gradient;
    const int64_t width = parameters_[index].size(1);
    buckets_[static_cast<size_t>(slot.bucket)] =
        total.defined() ? total.index_select(0, slot.rows).reshape(-1).contiguous()
                        : torch::zeros({slot.rows.size(0) * width}, parameters_[index].options().requires_grad(false));
  } else if (earlier.defined() && gradient.defined()) {
    torch::add_out(slot.view, earlier, gradient);
  } else if (earlier.defined() || gradient.defined()) {
    slot.view.copy_(earlier.defined() ? earlier : gradient);
  } else {
    slot.view.zero_();
  }
  slot.ready = true;
  --pending_[static_cast<size_t>(slot.bucket)];
}

// Runs inside backward, before the gradient is added into the parameter's .grad; earlier batches
// of the update (accumulate > 1) left theirs there. The step's train_step set every .grad to none
// first, so .grad is never a bucket view here.
void GradientReducer::on_gradient(size_t index, const torch::Tensor& gradient) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (!armed_ || slots_[index].ready) return;
  fill(index, parameters_[index].grad(), gradient);
  if (pending_[static_cast<size_t>(slots_[index].bucket)] == 0) launch_ready();
}

void GradientReducer::launch_ready() {
  while (launched_ < buckets_.size() && pending_[launched_] == 0) {
    std::vector<torch::Tensor> tensors = {buckets_[launched_]};
    try {
      works_[launched_] = distributed_.group().allreduce(tensors);
    } catch (const std::exception& error) {
      distributed_.fail("starting the gradient all-reduce", error.what());
    }
    ++launched_;
  }
}

std::pair<double, double> GradientReducer::finish() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    TORCH_CHECK(armed_, "GradientReducer::finish without begin");
    // What got no gradient in this update's last backward: no batch on this rank, or an unused parameter.
    for (size_t i = 0; i < slots_.size(); ++i) {
      if (!slots_[i].ready) fill(i, parameters_[i].grad(), torch::Tensor());
    }
    launch_ready();
  }
  const auto start = Clock::now();
  for (auto& work : works_) distributed_.wait(*work, "the gradient all-reduce");
  wait_seconds_ += seconds_since(start);
  std::lock_guard<std::mutex> lock(mutex_);
  for (size_t i = 0; i < slots_.size(); ++i) {
    Slot& slot = slots_[i];
    if (slot.row_sparse) {
      // Zero outside this update's rows, as the dense gradient would be: clear the last update's.
      slot.gradient.index_fill_(0, slot.written, 0);
      const torch::Tensor& reduced = buckets_[static_cast<size_t>(slot.bucket)];
      slot.gradient.index_copy_(0, slot.rows, reduced.view({slot.rows.size(0), -1}));
      slot.written = slot.rows;
      sparse_bytes_ += static_cast<double>(reduced.numel() * reduced.element_size());
      parameters_[i].mutable_grad() = slot.gradient;
    } else {
      parameters_[i].mutable_grad() = slot.view;
    }
    slot.ready = false;
    ++pending_[static_cast<size_t>(slot.bucket)];
  }
  ++updates_;
  armed_ = false;
  launched_ = 0;
  const torch::Tensor& tail = buckets_[tail_bucket_];
  const torch::Tensor shared = tail.narrow(0, tail.numel() - 2, 2).to(torch::kCPU, torch::kDouble);
  return {shared[0].item<double>(), shared[1].item<double>()};
}

}  // namespace nmt
