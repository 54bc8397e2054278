// One step's selection in the GPU's fixed-shape beam search (beam_fixed_shape.cpp): from each
// sentence's 2K best extensions, best first, the rules of beam.cpp (which finish, which stay alive,
// when a sentence stops), applied to one sentence by select_sentence. FixedShapeBeam::select (the
// front that takes tensors) runs it for every sentence of a batch: as a loop on the CPU, as one
// kernel with a thread per sentence on a GPU (beam_select.cu), so that the CPU's tests check the
// very rules the GPU runs. This header is plain C++ for both compilers.
#pragma once

#include <cmath>
#include <cstdint>

#include "text/special_tokens.h"

#if defined(__CUDACC__)
#define NMT_HOST_DEVICE __host__ __device__
#else
#define NMT_HOST_DEVICE
#endif

namespace nmt {

// What one step's selection reads and writes, on one device, every array contiguous. B sentences
// of K beams (rows b*K .. b*K+K-1), W candidates each, a pool of `slots` finished hypotheses per
// sentence whose last slot takes what is dropped and is never read.
struct BeamStep {
  int64_t sentences = 0, beam = 0, width = 0, vocab = 0, slots = 0, n_best = 1;
  // Read: [B, W] the candidates' scores (-inf: none) and ids (beam * vocab + token, as float64);
  // [B] each sentence's length cap and lp(cap); [] the length of the hypotheses this step makes;
  // per length, lp(length).
  const double* scores = nullptr;
  const double* ids = nullptr;
  const int64_t* limit = nullptr;
  const double* cap_penalty = nullptr;
  const int64_t* length = nullptr;
  const double* penalty = nullptr;
  // Read and written: [B] stopped, finished count; [B, slots, 3] the pool's normalized score,
  // log-probability and length.
  bool* stopped = nullptr;
  int64_t* finished_count = nullptr;
  double* pool_numbers = nullptr;
  // Written: per candidate [B*W], the row it extends, its token (PAD for EOS) and the pool row
  // (b * slots + slot) its tokens go to; per new row [B*K], its score, the row it continues and its
  // token (a stopped sentence's rows continue themselves with PAD at -inf).
  int64_t* candidate_origin = nullptr;
  int64_t* candidate_token = nullptr;
  int64_t* candidate_pool_row = nullptr;
  double* alive_scores = nullptr;
  int64_t* next_origin = nullptr;
  int64_t* next_token = nullptr;
};

// Sentence b's selection. Of the real extensions of a sentence still going, those ending in EOS or
// at its cap finish if ranked within the top K; the first K others stay alive. The sentence stops
// at its cap, with no alive beam, with K finished, or when no alive beam can beat its n-th best
// finished one (beam.cpp, sentence_done).
NMT_HOST_DEVICE inline void select_sentence(const BeamStep& step, int64_t b) {
  const double none = -HUGE_VAL;
  const int64_t beam = step.beam, width = step.width, slots = step.slots, length = *step.length;
  const double* scores = step.scores + b * width;
  const double* ids = step.ids + b * width;
  const bool was_stopped = step.stopped[b];
  const bool at_cap = step.limit[b] <= length;
  double* pool = step.pool_numbers + b * slots * 3;
  double* alive_scores = step.alive_scores + b * beam;
  int64_t* next_origin = step.next_origin + b * beam;
  int64_t* next_token = step.next_token + b * beam;

  int64_t finished = step.finished_count[b], alive = 0;
  for (int64_t w = 0; w < width; ++w) {
    const auto id = static_cast<int64_t>(ids[w]);
    const int64_t row = b * beam + id / step.vocab, token = id % step.vocab;
    const bool real = scores[w] > none && !was_stopped;
    const bool ends = token == kEosId || at_cap;
    int64_t slot = slots - 1;
    if (real && ends && w < beam) {
      slot = finished++;
      pool[slot * 3 + 0] = scores[w] / step.penalty[length];
      pool[slot * 3 + 1] = scores[w];
      pool[slot * 3 + 2] = static_cast<double>(length);
    } else if (real && !ends && alive < beam) {
      alive_scores[alive] = scores[w];
      next_origin[alive] = row;
      next_token[alive] = token;
      ++alive;
    }
    step.candidate_origin[b * width + w] = row;
    step.candidate_token[b * width + w] = token == kEosId ? kPadId : token;
    step.candidate_pool_row[b * width + w] = b * slots + slot;
  }
  step.finished_count[b] = finished;

  // The n-th best finished score: the one with fewer than n_best scores above it and at least
  // n_best at or above it.
  bool beaten = false;
  if (finished >= step.n_best && alive > 0) {
    double nth = none;
    for (int64_t s = 0; s < finished; ++s) {
      int64_t above = 0, not_below = 0;
      for (int64_t o = 0; o < finished; ++o) {
        above += pool[o * 3] > pool[s * 3];
        not_below += pool[o * 3] >= pool[s * 3];
      }
      if (above < step.n_best && not_below >= step.n_best) nth = pool[s * 3];
    }
    beaten = nth >= alive_scores[0] / step.cap_penalty[b];
  }
  const bool stops = was_stopped || at_cap || alive == 0 || finished >= beam || beaten;
  step.stopped[b] = stops;
  for (int64_t k = stops ? 0 : alive; k < beam; ++k) {  // fewer than K alive: copies of the first at -inf
    alive_scores[k] = none;
    next_origin[k] = stops ? b * beam + k : next_origin[0];
    next_token[k] = stops ? kPadId : next_token[0];
  }
}

#if defined(NMT_WITH_CUDA)
// select_sentence for every sentence, one thread each, queued on `stream` (a cudaStream_t; the
// arrays on its GPU). Throws std::runtime_error when the launch fails.
void select_beams_on_gpu(const BeamStep& step, void* stream);
#endif

}  // namespace nmt
