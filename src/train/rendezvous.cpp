// The rendezvous of a distributed run's ranks on a c10d TCPStore, and their heartbeats.
#include "train/rendezvous.h"

#include <torch/torch.h>
#include <torch/csrc/distributed/c10d/TCPStore.hpp>

#include <charconv>
#include <chrono>
#include <cstdlib>
#include <stdexcept>
#include <vector>

#include "train/distributed.h"
#include "train/rendezvous_store.h"
#include "util/clock.h"
#include "util/exit_deadline.h"

namespace nmt {
namespace {

constexpr auto kHeartbeat = std::chrono::milliseconds(1000);
// How long a heartbeat must stand still for a failure to be put on its rank.
constexpr auto kSilence = 3 * kHeartbeat;
// How long the process may take to end after a failure, its destructors included.
constexpr auto kTeardown = std::chrono::seconds(2);

std::string first_line(const std::string& text) { return text.substr(0, text.find('\n')); }

std::string bytes_to_string(const std::vector<uint8_t>& bytes) { return {bytes.begin(), bytes.end()}; }

}  // namespace

Rendezvous::Rendezvous(const DistributedOptions& options)
    : rank_(options.rank),
      world_size_(options.world_size),
      master_(options.master_addr + ":" + std::to_string(options.master_port)),
      timeout_seconds_(options.timeout_seconds) {
  const auto timeout = std::chrono::milliseconds(static_cast<int64_t>(options.timeout_seconds * 1000));
  // torchrun's agent hosts a store of its own on MASTER_PORT and says so: rank 0's store then takes
  // a port of the kernel's choice and names it to the others through the agent's store.
  const char* agent = std::getenv("TORCHELASTIC_USE_AGENT_STORE");
  const bool agent_store = agent != nullptr && std::string(agent) == "True";
  int port = options.master_port;
  if (rank_ == 0) {
    try {
      server_ = std::make_unique<RendezvousServer>(options.master_addr, agent_store ? 0 : port, options.secret);
    } catch (const std::exception& error) {
      throw std::runtime_error("rank 0 " + first_line(error.what()) +
                               ": the port is in use or the address is not this machine's; pass another "
                               "--master-port (MASTER_PORT) or --master-addr (MASTER_ADDR)");
    }
    port = server_->port();
  }
  if (agent_store) port = port_through_agent(options, port, timeout);
  master_ = options.master_addr + ":" + std::to_string(port);
  try {
    store_ = c10::make_intrusive<RendezvousStore>(options.master_addr, port, options.secret, timeout);
    heartbeat_store_ = c10::make_intrusive<RendezvousStore>(options.master_addr, port, options.secret, timeout);
  } catch (const RendezvousRefused& error) {
    throw std::runtime_error("rank " + std::to_string(rank_) + ": " + error.what());
  } catch (const std::exception& error) {
    throw std::runtime_error("rank " + std::to_string(rank_) + " cannot reach the master (rank 0) at " + master_ +
                             " within " + std::to_string(static_cast<int>(options.timeout_seconds)) + " s (" +
                             first_line(error.what()) +
                             "): start rank 0 there, or check --master-addr/--master-port (MASTER_ADDR, MASTER_PORT)");
  }
  heartbeat_ = std::thread([this] { beat(); });
  store_->set("joined/" + std::to_string(rank_), std::vector<uint8_t>{1});
}

int Rendezvous::port_through_agent(const DistributedOptions& options, int port, std::chrono::milliseconds timeout) {
  // Under a prefix of its own per restart, as PyTorch's own workers use the agent's store. What is
  // read there is not trusted: a forged port leads to a server that cannot prove the secret.
  const char* restart = std::getenv("TORCHELASTIC_RESTART_COUNT");
  const std::string key = "nmt/attempt_" + std::string(restart != nullptr ? restart : "0") + "/rendezvous_port";
  c10d::TCPStoreOptions agent_options;
  agent_options.port = static_cast<uint16_t>(options.master_port);
  agent_options.isServer = false;
  agent_options.timeout = timeout;
  try {
    c10d::TCPStore agent(options.master_addr, agent_options);
    if (rank_ == 0) {
      const std::string text = std::to_string(port);
      agent.set(key, std::vector<uint8_t>(text.begin(), text.end()));
      return port;
    }
    const std::string text = bytes_to_string(agent.get(key));
    int value = 0;
    const auto end = text.data() + text.size();
    if (std::from_chars(text.data(), end, value).ptr != end || value < 1 || value > 65535) {
      throw std::runtime_error("it holds no port under " + key);
    }
    return value;
  } catch (const std::exception& error) {
    throw std::runtime_error("rank " + std::to_string(rank_) +
                             " cannot find rank 0's rendezvous through torchrun's store at " + master_ + " within " +
                             std::to_string(static_cast<int>(options.timeout_seconds)) + " s (" +
                             first_line(error.what()) + ")");
  }
}

Rendezvous::~Rendezvous() {
  stop_ = true;
  if (heartbeat_.joinable()) heartbeat_.join();
}

c10::intrusive_ptr<c10d::Store> Rendezvous::store() const { return store_; }

std::string Rendezvous::missing_ranks() {
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
  return missing;
}

void Rendezvous::beat() {
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

int64_t Rendezvous::heartbeat_of(int rank) { return store_->add("heartbeat/" + std::to_string(rank), 0); }

std::string Rendezvous::silent_ranks() {
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
      // A value that is not a step (written by another process) reads as 0, not as an exception.
      int64_t step = 0;
      if (store_->check({key})) {
        const std::string text = bytes_to_string(store_->get(key));
        std::from_chars(text.data(), text.data() + text.size(), step);
      }
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

void Rendezvous::fail(const std::string& what, const std::string& cause) {
  const std::string failed = "distributed training stopped at step " + std::to_string(step_ + 1) + ", rank " +
                             std::to_string(rank_) + ": " + what + " failed: ";
  const std::string after =
      " [" + first_line(cause) + "]; the checkpoints rank 0 wrote are complete: --resume continues";
  // Naming the silent rank asks the store, which a stopped rank 0 or a lost network leaves without
  // an answer until the store's timeout (util/exit_deadline.h); the group's destructor on the way out
  // may wait as long. The run ends with this error either way, within kSilence and kTeardown.
  exit_unless_ended_within(
      std::chrono::duration<double>(kSilence + kTeardown).count(),
      failed + "the rendezvous store did not answer either (rank 0 is stopped, or the network to it is lost)" + after);
  const std::string message = failed + silent_ranks() + after;
  exit_unless_ended_within(std::chrono::duration<double>(kTeardown).count(), message);
  throw std::runtime_error(message);
}

void Rendezvous::publish(const std::string& key, const std::string& value) {
  try {
    store_->set(key, std::vector<uint8_t>(value.begin(), value.end()));
  } catch (const std::exception& error) {
    fail("publishing " + key, error.what());
  }
}

std::string Rendezvous::wait_for(const std::string& key, int from) {
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

void Rendezvous::announce_step(int64_t step) {
  step_ = step;
  try {
    const std::string value = std::to_string(step);
    store_->set("step/" + std::to_string(rank_), std::vector<uint8_t>(value.begin(), value.end()));
  } catch (const std::exception& error) {
    fail("announcing the step", error.what());
  }
}

void Rendezvous::finish() {
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

}  // namespace nmt
