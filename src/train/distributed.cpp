// Distributed: the process group of a run's ranks (Gloo or NCCL) and its collectives, after the
// rendezvous (rendezvous.h); and the distributed options resolved from torchrun's environment.
#include "train/distributed.h"

#include <c10/util/intrusive_ptr.h>
#include <torch/torch.h>
#include <torch/version.h>
#include <torch/csrc/distributed/c10d/ProcessGroupGloo.hpp>
#ifdef USE_C10D_NCCL
#include <torch/csrc/distributed/c10d/ProcessGroupNCCL.hpp>
#endif

#include <chrono>
#include <cstdlib>
#include <cstring>
#include <stdexcept>
#include <type_traits>

#include "train/rendezvous.h"
#include "train/rendezvous_store.h"
#include "util/device_rules.h"
#include "util/private_file.h"

namespace nmt {
namespace {

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

// LibTorch 1.13's Gloo and NCCL groups are ProcessGroups themselves; from 2.0 they are Backends,
// which a ProcessGroup holds, one per device type.
template <typename Group>
c10::intrusive_ptr<c10d::ProcessGroup> process_group(c10::intrusive_ptr<Group> backend,
                                                     const c10::intrusive_ptr<c10d::Store>& store, int rank,
                                                     int world_size, c10::DeviceType device_type) {
#if TORCH_VERSION_MAJOR >= 2
  const auto type = std::is_same_v<Group, c10d::ProcessGroupGloo> ? c10d::ProcessGroup::BackendType::GLOO
                                                                  : c10d::ProcessGroup::BackendType::NCCL;
  auto group = c10::make_intrusive<c10d::ProcessGroup>(store, rank, world_size);
  group->setDefaultBackend(type);
  group->setBackend(device_type, type, backend);
  return group;
#else
  (void)store, (void)rank, (void)world_size, (void)device_type;
  return backend;
#endif
}

// The run's shared secret (rendezvous_store.h): the first line of --rendezvous-secret-file, which
// only its owner may read, else NMT_RENDEZVOUS_SECRET.
std::string rendezvous_secret(const std::string& file) {
  std::string secret, source;
  if (!file.empty()) {
    source = "--rendezvous-secret-file " + file;
    secret = read_private_file(file, source, 4096);
    secret = secret.substr(0, secret.find('\n'));
  } else if (const char* value = std::getenv("NMT_RENDEZVOUS_SECRET"); value != nullptr && *value != '\0') {
    source = "NMT_RENDEZVOUS_SECRET";
    secret = value;
  } else {
    throw std::invalid_argument(
        "the ranks of a run prove a shared secret to each other, and none is given: set NMT_RENDEZVOUS_SECRET "
        "to the same value on every rank (for example export NMT_RENDEZVOUS_SECRET=$(openssl rand -hex 32)) or "
        "pass --rendezvous-secret-file (nmt train --nproc makes one itself)");
  }
  secret.erase(secret.find_last_not_of(" \t\r\n") + 1);
  secret.erase(0, secret.find_first_not_of(" \t"));
  if (secret.size() < 16) {
    throw std::invalid_argument(source + ": the secret has " + std::to_string(secret.size()) +
                                " characters; give at least 16 (openssl rand -hex 32 makes one)");
  }
  return secret;
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
  options.secret = rendezvous_secret(options.secret_file);
}

Distributed::Distributed(const DistributedOptions& options, const torch::Device& device)
    : rank_(options.rank),
      world_size_(options.world_size),
      local_rank_(options.local_rank),
      timeout_seconds_(options.timeout_seconds),
      device_(device),
      rendezvous_(std::make_unique<Rendezvous>(options)) {
  const auto timeout = std::chrono::milliseconds(static_cast<int64_t>(options.timeout_seconds * 1000));
  const c10::intrusive_ptr<c10d::Store> store = rendezvous_->store();
  try {
    if (collective_backend(device) == "nccl") {
#ifdef USE_C10D_NCCL
      auto nccl_options = c10d::ProcessGroupNCCL::Options::create();
      nccl_options->timeout = timeout;
      group_ = process_group(c10::make_intrusive<c10d::ProcessGroupNCCL>(store, rank_, world_size_, nccl_options),
                             store, rank_, world_size_, c10::DeviceType::CUDA);
#else
      throw std::invalid_argument(
          "--device cuda with several ranks needs NCCL, and this LibTorch was built without it: use a "
          "CUDA build of LibTorch, or --device cpu (Gloo)");
#endif
    } else {
      auto gloo_options = c10d::ProcessGroupGloo::Options::create(timeout);
      if (const char* interface = std::getenv("GLOO_SOCKET_IFNAME"); interface != nullptr && *interface != '\0') {
        gloo_options->devices.push_back(c10d::ProcessGroupGloo::createDeviceForInterface(interface));
      } else if (is_loopback_host(options.master_addr)) {
        gloo_options->devices.push_back(c10d::ProcessGroupGloo::createDeviceForHostname("127.0.0.1"));
      } else {
        gloo_options->devices.push_back(c10d::ProcessGroupGloo::createDefaultDevice());
      }
      group_ = process_group(c10::make_intrusive<c10d::ProcessGroupGloo>(store, rank_, world_size_, gloo_options),
                             store, rank_, world_size_, c10::DeviceType::CPU);
    }
  } catch (const std::invalid_argument&) {
    throw;  // the rendezvous, unwound, stops the heartbeat
  } catch (const std::exception& error) {
    const std::string missing = rendezvous_->missing_ranks();
    throw std::runtime_error("rank " + std::to_string(rank_) + ": the process group of " + std::to_string(world_size_) +
                             " ranks did not form within " + std::to_string(static_cast<int>(options.timeout_seconds)) +
                             " s" + (missing.empty() ? "" : "; rank(s) " + missing + " never joined") + " (" +
                             first_line(error.what()) + ")");
  }
}

Distributed::~Distributed() = default;

std::string Distributed::backend() const { return collective_backend(device_); }

void Distributed::publish(const std::string& key, const std::string& value) { rendezvous_->publish(key, value); }

std::string Distributed::wait_for(const std::string& key, int from) { return rendezvous_->wait_for(key, from); }

void Distributed::announce_step(int64_t step) { rendezvous_->announce_step(step); }

void Distributed::fail(const std::string& what, const std::string& cause) { rendezvous_->fail(what, cause); }

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

void Distributed::finish() { rendezvous_->finish(); }

}  // namespace nmt
