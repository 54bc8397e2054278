// How the ranks of a distributed run (distributed.h) find and watch each other: the rendezvous
// (rank 0 hosts the store, rendezvous_store.h, on --master-addr; each rank proves the run's secret
// to it), the small values the ranks hand each other through it (vocabularies, progress, a
// validation's decision), and the heartbeats.
//
// Failures: every rank adds to its heartbeat key in the store once a second. A wait for rank 0 that
// sees its heartbeat stand still for --dist-timeout, and a collective that fails (Distributed::wait),
// end the run with a message naming the ranks that stopped answering.
#pragma once

#include <c10/util/intrusive_ptr.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <thread>

namespace c10d {
class Store;
}  // namespace c10d

namespace nmt {

struct DistributedOptions;
class RendezvousServer;

class Rendezvous {
 public:
  // Rank 0 listens on master_addr:master_port (under torchrun, on a port it names through the
  // agent's store), every rank connects within the timeout and proves the secret; then the heartbeat
  // starts and the rank says it joined. Throws std::runtime_error naming the address and what to
  // check.
  explicit Rendezvous(const DistributedOptions& options);
  ~Rendezvous();  // stops the heartbeat
  Rendezvous(const Rendezvous&) = delete;
  Rendezvous& operator=(const Rendezvous&) = delete;

  c10::intrusive_ptr<c10d::Store> store() const;
  const std::string& master() const { return master_; }  // master_addr:master_port

  // A value for every rank to read (small: vocabularies, progress, a validation's decision).
  void publish(const std::string& key, const std::string& value);
  // Waits for `key`, as long as rank `from`'s heartbeat moves; throws naming `from` when it stands
  // still for the timeout.
  std::string wait_for(const std::string& key, int from);
  // The step every rank announces before its update's collective (read when one fails).
  void announce_step(int64_t step);
  // The ranks that have not said they joined (comma-separated; "" when all have), for a process
  // group that did not form.
  std::string missing_ranks();
  // Before returning from training: rank 0 waits until every rank is done with the store it hosts.
  void finish();

  // Throws std::runtime_error: `what` failed, with the ranks that stopped answering and `cause`.
  [[noreturn]] void fail(const std::string& what, const std::string& cause);

 private:
  // Rank 0's store's port, told to the others through torchrun's agent store (on MASTER_PORT).
  int port_through_agent(const DistributedOptions& options, int port, std::chrono::milliseconds timeout);
  std::string silent_ranks();
  int64_t heartbeat_of(int rank);
  void beat();

  int rank_ = 0, world_size_ = 1;
  std::string master_;
  double timeout_seconds_ = 60;
  std::unique_ptr<RendezvousServer> server_;  // rank 0's; declared first, so that it outlives the stores
  c10::intrusive_ptr<c10d::Store> store_;
  c10::intrusive_ptr<c10d::Store> heartbeat_store_;  // its own connection, for the heartbeat thread
  std::atomic<bool> stop_{false};
  std::thread heartbeat_;
  int64_t step_ = 0;
};

}  // namespace nmt
