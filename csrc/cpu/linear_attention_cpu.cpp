#include "cpu/linear_attention_cpu.h"

#include <algorithm>
#include <atomic>
#include <cmath>
#include <stdexcept>
#include <string>
#include <thread>
#include <type_traits>
#include <vector>

#include "common/dtype.h"
#include "common/passes.h"

namespace culina::cpu {
namespace {

// Token range of every sequence as if the batch were packed (padded: n T .. (n+1) T; packed:
// cu_seqlens in host memory, checked once per call).
std::vector<int64_t> sequence_offsets(const Problem& p) {
  std::vector<int64_t> offsets(p.sequences() + 1);
  if (!p.packed()) {
    for (int64_t n = 0; n <= p.batch; ++n) offsets[n] = n * p.seq_len;
    return offsets;
  }
  for (int64_t n = 0; n <= p.num_seqs; ++n)
    offsets[n] = p.seqlen_bits == 64 ? static_cast<const int64_t*>(p.cu_seqlens)[n]
                                     : static_cast<const int32_t*>(p.cu_seqlens)[n];
  for (int64_t n = 0; n < p.num_seqs; ++n)
    if (offsets[n + 1] < offsets[n])
      throw std::invalid_argument("cu_seqlens must not decrease, but entry " + std::to_string(n + 1) + " is " +
                                  std::to_string(offsets[n + 1]) + " after " + std::to_string(offsets[n]));
  if (offsets.front() != 0 || offsets.back() != p.seq_len)
    throw std::invalid_argument("cu_seqlens must run from 0 to the packed length " + std::to_string(p.seq_len) +
                                ", but runs from " + std::to_string(offsets.front()) + " to " +
                                std::to_string(offsets.back()));
  return offsets;
}

// Where one (sequence, head) lies: the batch index and token 0 of its rows (packed: b = 0 and
// the sequence's first token), its head, and its place in the states.
struct Sequence {
  int64_t batch, head, first, length, state_index;
};

// Sequence n's rows of head h, state index n * heads + h: padded, batch n from token 0; packed,
// batch 0 from the sequence's first token (`offsets`: sequence_offsets).
Sequence sequence_of(const Problem& p, const std::vector<int64_t>& offsets, int64_t n, int64_t h) {
  return {p.packed() ? 0 : n, h, p.packed() ? offsets[n] : 0, offsets[n + 1] - offsets[n], n * p.heads + h};
}

// Element (s.batch, s.head, s.first + t) of a tensor with strides `at`, in elements.
int64_t offset(const Strides& at, const Sequence& s, int64_t t) {
  return s.batch * at.batch + s.head * at.head + (s.first + t) * at.token;
}

// The forget gate of token t (common/problem.h): decay x exp(gamma + gate).
float gate(const Problem& p, const Sequence& s, int64_t t) {
  float natural = p.gamma ? p.gamma[s.head] : 0.0f;
  if (p.gates.data) natural += p.gates.data[offset(p.gates.strides, s, t)];
  return p.decay_of(s.head) * std::exp(natural);
}

// x as the kernels multiply it: rounded to R (float: as it is; BFloat16 for float32 rows computed
// in bf16, common/problem.h: Elements).
template <typename R>
float rounded(float x) {
  if constexpr (std::is_same_v<R, float>) return x;
  else return to_float(from_float<R>(x));
}

// One pass (common/passes.h) over the tokens of one (sequence, head): rows stored as T, rounded
// to R as they load and as they are stored (R = float: not rounded).
template <typename T, typename R>
void run_sequence(const Problem& p, const Pass& pass, const Sequence& s, std::vector<float>& state,
                  std::vector<float>& row) {
  const int64_t dk = pass.dk, dv = pass.dv;
  const T* q = static_cast<const T*>(pass.q.data);
  const T* k = static_cast<const T*>(pass.k.data);
  const T* v = static_cast<const T*>(pass.v.data);
  T* out = static_cast<T*>(pass.out.data);

  std::fill(state.begin(), state.end(), 0.0f);
  if (pass.initial_state) {
    const float* init = pass.initial_state + s.state_index * dk * dv;
    for (int64_t i = 0; i < dk; ++i)
      for (int64_t j = 0; j < dv; ++j) state[i * dv + j] = pass.initial_transposed ? init[j * dk + i] : init[i * dv + j];
  }
  // Forward: S = a_t S + k^T v, out = scale q S. Adjoint (tokens reversed), carrying H = a A:
  // A = H + scale k^T v, out = q A, H = a_t A.
  const float update = pass.adjoint ? p.scale : 1.0f;
  const float out_scale = pass.adjoint ? 1.0f : p.scale;
  std::vector<float> vt(dv);
  for (int64_t step = 0; step < s.length; ++step) {
    const int64_t t = pass.adjoint ? s.length - 1 - step : step;
    const float a = gate(p, s, t);
    const float keep = pass.adjoint ? 1.0f : a;
    const float after = pass.adjoint ? a : 1.0f;
    const T* qt = q + offset(pass.q.strides, s, t);
    const T* kt = k + offset(pass.k.strides, s, t);
    const T* vrow = v + offset(pass.v.strides, s, t);
    for (int64_t j = 0; j < dv; ++j) vt[j] = update * rounded<R>(to_float(vrow[j]));
    std::fill(row.begin(), row.end(), 0.0f);
    for (int64_t i = 0; i < dk; ++i) {
      const float ki = rounded<R>(to_float(kt[i]));
      const float qi = rounded<R>(to_float(qt[i]));
      float* st = state.data() + i * dv;
      for (int64_t j = 0; j < dv; ++j) {
        const float added = keep * st[j] + ki * vt[j];
        row[j] += qi * added;
        st[j] = after * added;
      }
    }
    T* ot = out + offset(pass.out.strides, s, t);
    for (int64_t j = 0; j < dv; ++j) ot[j] = from_float<T>(rounded<R>(out_scale * row[j]));
    if (pass.gate_dots.data) {  // from the unrounded row (common/passes.h)
      const T* partner = static_cast<const T*>(pass.partner.data) + offset(pass.partner.strides, s, t);
      double dot = 0.0;
      for (int64_t j = 0; j < dv; ++j) dot += double(out_scale * row[j]) * rounded<R>(to_float(partner[j]));
      pass.gate_dots.data[offset(pass.gate_dots.strides, s, t)] += float(pass.dot_sign * dot);
    }
  }
  if (pass.final_state) std::copy(state.begin(), state.end(), pass.final_state + s.state_index * dk * dv);
}

template <typename T, typename R>
void run_pass(const Problem& p, const Pass& pass, const std::vector<int64_t>& offsets, int threads) {
  const int64_t items = p.sequences() * p.heads;
  std::atomic<int64_t> next{0};
  auto worker = [&] {
    std::vector<float> state(pass.dk * pass.dv), row(pass.dv);
    for (int64_t item = next++; item < items; item = next++) {
      run_sequence<T, R>(p, pass, sequence_of(p, offsets, item / p.heads, item % p.heads), state, row);
    }
  };
  const int64_t count = std::min<int64_t>(items, threads);
  std::vector<std::thread> pool;
  for (int64_t i = 1; i < count; ++i) pool.emplace_back(worker);
  worker();
  for (auto& thread : pool) thread.join();
}

void run(const Problem& p, const Pass& pass, const std::vector<int64_t>& offsets, int threads) {
  switch (p.elements.storage) {
    case DType::kFloat32:
      if (p.elements.compute == DType::kBFloat16) return run_pass<float, BFloat16>(p, pass, offsets, threads);
      return run_pass<float, float>(p, pass, offsets, threads);
    case DType::kFloat16: return run_pass<Half, float>(p, pass, offsets, threads);
    case DType::kBFloat16: return run_pass<BFloat16, float>(p, pass, offsets, threads);
  }
}

int worker_count(int threads) { return threads > 0 ? threads : int(std::max(1u, std::thread::hardware_concurrency())); }

// The gates' gradient from the gate dots (common/problem.h: Gradients::d_gates, d_gamma): per
// (sequence, head), the dots' sums from each token to the sequence's end, in float64.
void gate_gradient(const Problem& p, const Gradients& g, const std::vector<int64_t>& offsets) {
  if (g.d_gamma) std::fill(g.d_gamma, g.d_gamma + p.heads, 0.0);
  for (int64_t n = 0; n < p.sequences(); ++n)
    for (int64_t h = 0; h < p.heads; ++h) {
      const Sequence s = sequence_of(p, offsets, n, h);
      double after = g.gate_ends ? g.gate_ends[s.state_index] : 0.0, head_sum = 0.0;
      for (int64_t t = s.length - 1; t >= 0; --t) {
        after += g.gate_dots.data[offset(g.gate_dots.strides, s, t)];
        if (g.d_gates.data) g.d_gates.data[offset(g.d_gates.strides, s, t)] = float(after);
        head_sum += after;
      }
      if (g.d_gamma) g.d_gamma[h] += head_sum;
    }
}

}  // namespace

void linear_attention(const Problem& problem, int threads) {
  run(problem, forward_pass(problem), sequence_offsets(problem), worker_count(threads));
}

void linear_attention_backward(const Problem& problem, const Gradients& gradients, int threads) {
  const auto offsets = sequence_offsets(problem);
  for (const Pass& pass : backward_passes(problem, gradients)) run(problem, pass, offsets, worker_count(threads));
  if (gradients.d_gates.data || gradients.d_gamma) gate_gradient(problem, gradients, offsets);
}

}  // namespace culina::cpu
