// Training on several processes and machines, on torch's c10d: a store for the rendezvous (hosted by
// rank 0 on --master-addr, served only to ranks that prove the run's secret; rendezvous.h), a process group for the
// collectives (Gloo on CPUs; NCCL on CUDA where LibTorch has it), and what the C++ frontend lacks,
// DistributedDataParallel's gradient all-reduce (gradient_reducer.h). The training loop sees them only through
// training_processes.h.
//
// The semantics (docs/distributed.md): every rank cuts each epoch into the
// same batches (make_batches with the same seed); one update takes world-size x accumulate
// consecutive batches, `accumulate` to each rank; the gradients are summed over ranks and divided
// by the target tokens of all of them, so N ranks follow the trajectory of one process with
// --accumulate N. Rank 0 alone validates, logs and writes checkpoints, and tells the others what
// the validation decided through the store.
//
// Failures (rendezvous.h): every rank adds to its heartbeat key in the store once a second. A
// collective that fails (a peer's connection reset) or times out (--dist-timeout), and a wait for
// rank 0 that sees its heartbeat stand still for --dist-timeout, ends the run with a message naming
// the ranks that stopped answering.
#pragma once

#include <torch/types.h>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace c10d {
class ProcessGroup;
class Work;
}  // namespace c10d

namespace nmt {

class Rendezvous;

struct DistributedOptions {
  int nproc = 0;                // --nproc: worker processes that nmt starts on this machine (0 or 1: none)
  int rank = -1;                // --rank, or RANK
  int world_size = 0;           // --world-size, or WORLD_SIZE
  int local_rank = -1;          // --local-rank, or LOCAL_RANK (the rank among this machine's workers)
  std::string master_addr;      // --master-addr, or MASTER_ADDR (127.0.0.1)
  int master_port = 0;          // --master-port, or MASTER_PORT (29500)
  double timeout_seconds = 60;  // --dist-timeout: how long a rank waits for a silent peer
  int check_replicas = 0;       // --check-replicas N: compare the ranks' weights every N updates (0: at validations)
  std::string secret_file;      // --rendezvous-secret-file: the run's secret, on its first line
  std::string secret;           // that file's secret, or NMT_RENDEZVOUS_SECRET (resolve_distributed_options)

  bool enabled() const { return world_size > 1; }
};

// Fills what the options left unset from torchrun's environment variables (RANK, WORLD_SIZE,
// LOCAL_RANK, MASTER_ADDR, MASTER_PORT) and the secret from --rendezvous-secret-file or
// NMT_RENDEZVOUS_SECRET, and checks the result; throws std::invalid_argument naming the option or
// variable. Without RANK or WORLD_SIZE anywhere the run is a single process.
void resolve_distributed_options(DistributedOptions& options);

class Distributed {
 public:
  // The rendezvous (rendezvous.h): rank 0 listens on master_addr:master_port, the others connect
  // within the timeout. Then the process group for `device`.
  Distributed(const DistributedOptions& options, const torch::Device& device);
  ~Distributed();
  Distributed(const Distributed&) = delete;
  Distributed& operator=(const Distributed&) = delete;

  int rank() const { return rank_; }
  int world_size() const { return world_size_; }
  int local_rank() const { return local_rank_; }
  bool is_master() const { return rank_ == 0; }
  double timeout_seconds() const { return timeout_seconds_; }
  std::string backend() const;
  c10d::ProcessGroup& group() { return *group_; }

  // A value for every rank to read (small: vocabularies, progress, a validation's decision).
  void publish(const std::string& key, const std::string& value);
  // Waits for `key`, as long as rank `from`'s heartbeat moves; throws naming `from` when it stands
  // still for the timeout.
  std::string wait_for(const std::string& key, int from);

  // Rank 0's values of `tensors` on every rank (one flat broadcast).
  void broadcast(const std::vector<torch::Tensor>& tensors);
  // Throws std::runtime_error when the ranks' `tensors` are not bit for bit the same.
  void check_same_on_every_rank(const std::vector<torch::Tensor>& tensors, int64_t step);
  // Waits for a collective; on failure throws std::runtime_error naming the ranks that stopped answering.
  void wait(c10d::Work& work, const std::string& what);
  // Before returning from training: rank 0 waits until every rank is done with the store it hosts.
  void finish();

  // The step every rank announces before its update's collective (read when one fails).
  void announce_step(int64_t step);

  // Throws std::runtime_error: `what` failed, with the ranks that stopped answering and `cause`.
  [[noreturn]] void fail(const std::string& what, const std::string& cause);

 private:
  int rank_ = 0, world_size_ = 1, local_rank_ = 0;
  double timeout_seconds_ = 60;
  torch::Device device_ = torch::kCPU;
  c10::intrusive_ptr<c10d::ProcessGroup> group_;
  // Declared after group_: destroyed first, so that the heartbeat stops before the group goes.
  std::unique_ptr<Rendezvous> rendezvous_;
};

}  // namespace nmt
