// The gradient all-reduce of a distributed run (distributed.h): what the C++ frontend lacks of
// DistributedDataParallel.
#pragma once

#include <torch/types.h>

#include <cstdint>
#include <mutex>
#include <utility>
#include <vector>

namespace c10d {
class Work;
}  // namespace c10d

namespace nmt {

class Distributed;

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
