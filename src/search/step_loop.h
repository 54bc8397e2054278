// The step loop of the fixed-shape searches (greedy and beam on a GPU): the host queues steps and
// never waits for one.
#pragma once

#include <torch/types.h>

#include <deque>
#include <functional>

#include "search/ensemble.h"
#include "util/cuda_graph.h"
#include "util/runtime.h"

namespace nmt {

// Runs `step` through `graph` at most `max_steps` times, until `all_done` (a bool scalar the step
// writes on the device) is true; returns the steps run. The flag is read two steps late, so the
// host queues the next step while the GPU runs this one: one step more than needed may run, which
// must change nothing. The members' positions in `state` count the steps.
inline int64_t run_fixed_shape_steps(StepGraph& graph, const std::function<void()>& step, const torch::Tensor& all_done,
                                     int64_t max_steps, Ensemble::State& state) {
  std::deque<AsyncRead> done;  // the flag after each of the last two steps
  int64_t steps = 0;
  while (steps < max_steps) {
    if (done.size() == 2) {
      done.front().wait();
      if (done.front().host.item<bool>()) break;
      done.pop_front();
    }
    graph.run(step);
    ++steps;
    for (DecoderState& member : state.members) ++member.position;
    done.push_back(read_async(all_done));
  }
  return steps;
}

}  // namespace nmt
