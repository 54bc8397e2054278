// Training on several processes and machines, on torch's c10d: a TCPStore for the rendezvous (hosted
// by rank 0), a process group for the collectives (Gloo on CPUs; NCCL on CUDA where LibTorch has
// it), and what the C++ frontend lacks, DistributedDataParallel's gradient all-reduce
// (GradientReducer below).
//
// The semantics (README, "Training on several processes"): every rank cuts each epoch into the
// same batches (make_batches with the same seed); one update takes world-size x accumulate
// consecutive batches, `accumulate` to each rank; the gradients are summed over ranks and divided
// by the target tokens of all of them, so N ranks follow the trajectory of one process with
// --accumulate N. Rank 0 alone validates, logs and writes checkpoints, and tells the others what
// the validation decided through the store.
//
// Failures: every rank adds to its heartbeat key in the store once a second. A collective that
// fails (a peer's connection reset) or times out (--dist-timeout), and a wait for rank 0 that sees
// its heartbeat stand still for --dist-timeout, ends the run with a message naming the ranks that
// stopped answering.
#pragma once

#include <torch/types.h>

#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

namespace c10d {
class Store;
class ProcessGroup;
class Work;
}  // namespace c10d

namespace nmt {

struct DistributedOptions {
  int nproc = 0;                // --nproc: worker processes that nmt starts on this machine (0 or 1: none)
  int rank = -1;                // --rank, or RANK
  int world_size = 0;           // --world-size, or WORLD_SIZE
  int local_rank = -1;          // --local-rank, or LOCAL_RANK (the rank among this machine's workers)
  std::string master_addr;      // --master-addr, or MASTER_ADDR (127.0.0.1)
  int master_port = 0;          // --master-port, or MASTER_PORT (29500)
  double timeout_seconds = 60;  // --dist-timeout: how long a rank waits for a silent peer
  int check_replicas = 0;       // --check-replicas N: compare the ranks' weights every N updates (0: at validations)

  bool enabled() const { return world_size > 1; }
};

// Fills what the options left unset from torchrun's environment variables (RANK, WORLD_SIZE,
// LOCAL_RANK, MASTER_ADDR, MASTER_PORT) and checks the result; throws std::invalid_argument naming
// the option or variable. Without RANK or WORLD_SIZE anywhere the run is a single process.
void resolve_distributed_options(DistributedOptions& options);

class Distributed {
 public:
  // The rendezvous: rank 0 listens on master_addr:master_port, the others connect within the
  // timeout. Then the process group for `device`.
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
  std::string silent_ranks();
  int64_t heartbeat_of(int rank);
  void beat();

  int rank_ = 0, world_size_ = 1, local_rank_ = 0;
  std::string master_;
  double timeout_seconds_ = 60;
  torch::Device device_ = torch::kCPU;
  c10::intrusive_ptr<c10d::Store> store_;
  c10::intrusive_ptr<c10d::Store> heartbeat_store_;  // its own connection, for the heartbeat thread
  c10::intrusive_ptr<c10d::ProcessGroup> group_;
  std::atomic<bool> stop_{false};
  std::thread heartbeat_;
  int64_t step_ = 0;
};

// DistributedDataParallel's all-reduce, on a Distributed's process group: the gradients are copied
// into a few flat buckets (in the order backward makes them, the output layer first) by hooks on
// the parameters during the last backward of an update, and each bucket's all-reduce starts as
// soon as the bucket is full and every earlier one started (so that every rank starts them in the
// same order), while backward goes on. finish() waits for them and leaves every parameter's
// gradient a view of its reduced bucket. The first bucket carries two more numbers, summed over
// ranks with the gradients: the update's loss sum and a clock (rank 0's elapsed time).
//
// Embedding matrices (`row_sparse`) get gradients only in the rows of the ids an update looks up,
// which every rank knows from the batch plan: each is a bucket of its own holding just those rows
// (for the recipe, under a tenth of the source embedding), and its gradient is zero elsewhere, as
// the dense one would be. An embedding tied to the output layer has dense gradients: not row-sparse.
class GradientReducer {
 public:
  GradientReducer(Distributed& distributed, std::vector<torch::Tensor> parameters, int64_t bucket_bytes,
                  const std::vector<torch::Tensor>& row_sparse = {});
  GradientReducer(const GradientReducer&) = delete;
  GradientReducer& operator=(const GradientReducer&) = delete;
  ~GradientReducer();

  // Before an update: for each row-sparse parameter, the sorted rows the whole update (every rank's
  // batches) looks up.
  void set_rows(const std::vector<torch::Tensor>& rows);
  // Before the last backward of an update (or, on a rank with no batch in it, before finish()):
  // arms the hooks and sets this rank's share of the shared numbers.
  void begin(double loss_sum, double clock);
  // After that backward: completes the buckets whose parameters got no gradient (zeros), waits for
  // every all-reduce, points the gradients at the results. Returns the summed {loss_sum, clock}.
  std::pair<double, double> finish();

  double mean_bytes_per_update() const;  // the dense buckets, and the row-sparse ones on average so far
  size_t bucket_count() const { return buckets_.size(); }
  double wait_seconds() const { return wait_seconds_; }  // spent in finish() waiting, summed over updates

 private:
  struct Slot {
    int64_t bucket = 0;
    torch::Tensor view;  // the parameter's slice of its bucket, shaped as the parameter
    bool ready = false;
    bool row_sparse = false;
    torch::Tensor rows;      // row-sparse: this update's rows
    torch::Tensor written;   // row-sparse: the rows `gradient` holds from the last update
    torch::Tensor gradient;  // row-sparse: the dense gradient the optimizer reads
  };
  void on_gradient(size_t index, const torch::Tensor& gradient);
  void fill(size_t index, const torch::Tensor& earlier, const torch::Tensor& gradient);
  void launch_ready();

  Distributed& distributed_;
  std::vector<torch::Tensor> parameters_;
  std::vector<Slot> slots_;
  std::vector<torch::Tensor> buckets_;
  std::vector<int64_t> pending_;  // per bucket: parameters whose gradient is not in it yet
  std::vector<c10::intrusive_ptr<c10d::Work>> works_;
  std::vector<unsigned> hooks_;
  std::vector<size_t> sparse_order_;  // the row-sparse parameters' indices, in the order of begin()'s rows
  size_t tail_bucket_ = 0;            // the bucket that carries the loss sum and the clock
  double sparse_bytes_ = 0;           // all-reduced in row-sparse buckets, summed over updates
  int64_t updates_ = 0;
  size_t launched_ = 0;
  bool armed_ = false;
  double wait_seconds_ = 0;
  std::mutex mutex_;
};

}  // namespace nmt
