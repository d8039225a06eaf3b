#include "cpu/linear_attention_cpu.h"

#include <algorithm>
#include <atomic>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "common/dtype.h"
#include "common/passes.h"

namespace culina::cpu {
namespace {

// Row range of every sequence (packed: cu_seqlens in host memory, checked once per call).
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

// One pass (common/passes.h) over the rows of one (sequence, head): `first` is the array row
// of its row 0, `state_index` its place in the states.
template <typename T>
void run_sequence(const Problem& p, const Pass& pass, int64_t first, int64_t length, int64_t state_index,
                  float g, std::vector<float>& state, std::vector<float>& row) {
  const int64_t dk = pass.dk, dv = pass.dv;
  const T* q = static_cast<const T*>(pass.q) + first * dk;
  const T* k = static_cast<const T*>(pass.k) + first * dk;
  const T* v = static_cast<const T*>(pass.v) + first * dv;
  T* out = static_cast<T*>(pass.out) + first * dv;

  std::fill(state.begin(), state.end(), 0.0f);
  if (pass.initial_state) {
    const float* init = pass.initial_state + state_index * dk * dv;
    for (int64_t i = 0; i < dk; ++i)
      for (int64_t j = 0; j < dv; ++j) state[i * dv + j] = pass.initial_transposed ? init[j * dk + i] : init[i * dv + j];
  }
  // Forward: S = g S + k^T v, out = scale q S. Adjoint (rows reversed), carrying H = g A:
  // A = H + scale k^T v, out = q A, H = g A.
  const float update = pass.adjoint ? p.scale : 1.0f;
  const float keep = pass.adjoint ? 1.0f : g;
  const float after = pass.adjoint ? g : 1.0f;
  const float out_scale = pass.adjoint ? 1.0f : p.scale;
  std::vector<float> vt(dv);
  for (int64_t step = 0; step < length; ++step) {
    const int64_t t = pass.adjoint ? length - 1 - step : step;
    for (int64_t j = 0; j < dv; ++j) vt[j] = update * to_float(v[t * dv + j]);
    std::fill(row.begin(), row.end(), 0.0f);
    for (int64_t i = 0; i < dk; ++i) {
      const float ki = to_float(k[t * dk + i]);
      const float qi = to_float(q[t * dk + i]);
      float* s = state.data() + i * dv;
      for (int64_t j = 0; j < dv; ++j) {
        const float a = keep * s[j] + ki * vt[j];
        row[j] += qi * a;
        s[j] = after * a;
      }
    }
    for (int64_t j = 0; j < dv; ++j) out[t * dv + j] = from_float<T>(out_scale * row[j]);
  }
  if (pass.final_state) std::copy(state.begin(), state.end(), pass.final_state + state_index * dk * dv);
}

template <typename T>
void run_pass(const Problem& p, const Pass& pass, const std::vector<int64_t>& offsets, int threads) {
  const int64_t items = p.sequences() * p.heads;
  std::atomic<int64_t> next{0};
  auto worker = [&] {
    std::vector<float> state(pass.dk * pass.dv), row(pass.dv);
    for (int64_t item = next++; item < items; item = next++) {
      const int64_t n = item / p.heads, h = item % p.heads;
      // Padded batches keep (n, h) rows together; packed ones keep each head's rows together.
      const int64_t first = p.packed() ? h * p.seq_len + offsets[n] : item * p.seq_len;
      run_sequence<T>(p, pass, first, offsets[n + 1] - offsets[n], item, p.decay_of(h), state, row);
    }
  };
  const int64_t count = std::min<int64_t>(items, threads);
  std::vector<std::thread> pool;
  for (int64_t i = 1; i < count; ++i) pool.emplace_back(worker);
  worker();
  for (auto& thread : pool) thread.join();
}

void run(const Problem& p, const Pass& pass, const std::vector<int64_t>& offsets, int threads) {
  switch (p.dtype) {
    case DType::kFloat32: return run_pass<float>(p, pass, offsets, threads);
    case DType::kFloat16: return run_pass<Half>(p, pass, offsets, threads);
    case DType::kBFloat16: return run_pass<BFloat16>(p, pass, offsets, threads);
  }
}

int worker_count(int threads) { return threads > 0 ? threads : int(std::max(1u, std::thread::hardware_concurrency())); }

}  // namespace

void linear_attention(const Problem& problem, int threads) {
  run(problem, forward_pass(problem), sequence_offsets(problem), worker_count(threads));
}

void linear_attention_backward(const Problem& problem, const Gradients& gradients, int threads) {
  const auto offsets = sequence_offsets(problem);
  for (const Pass& pass : backward_passes(problem, gradients)) run(problem, pass, offsets, worker_count(threads));
}

}  // namespace culina::cpu
