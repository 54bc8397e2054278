// GradientReducer: the gradients of an update in flat buckets, all-reduced while backward runs.
#include "train/gradient_reducer.h"

#include <c10/util/intrusive_ptr.h>
#include <torch/torch.h>
#include <torch/csrc/distributed/c10d/ProcessGroup.hpp>

#include <chrono>

#include "train/distributed.h"
#include "util/clock.h"

namespace nmt {

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
