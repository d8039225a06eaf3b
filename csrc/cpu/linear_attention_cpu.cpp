#include "cpu/linear_attention_cpu.h"

#include <algorithm>
#include <atomic>
#include <thread>
#include <vector>

#include "common/dtype.h"

namespace culina::cpu {
namespace {

template <typename T>
void run_sequence(const Problem& p, int64_t bh, std::vector<float>& state, std::vector<float>& row) {
  const int64_t dk = p.dk, dv = p.dv, t_len = p.seq_len;
  const T* q = static_cast<const T*>(p.q) + bh * t_len * dk;
  const T* k = static_cast<const T*>(p.k) + bh * t_len * dk;
  const T* v = static_cast<const T*>(p.v) + bh * t_len * dv;
  T* out = static_cast<T*>(p.out) + bh * t_len * dv;
  const float g = p.decay_of(bh % p.heads);

  if (p.initial_state) {
    std::copy_n(p.initial_state + bh * dk * dv, dk * dv, state.begin());
  } else {
    std::fill(state.begin(), state.end(), 0.0f);
  }
  std::vector<float> vt(dv);
  for (int64_t t = 0; t < t_len; ++t) {
    for (int64_t j = 0; j < dv; ++j) vt[j] = to_float(v[t * dv + j]);
    std::fill(row.begin(), row.end(), 0.0f);
    for (int64_t i = 0; i < dk; ++i) {
      const float ki = to_float(k[t * dk + i]);
      const float qi = to_float(q[t * dk + i]);
      float* s = state.data() + i * dv;
      for (int64_t j = 0; j < dv; ++j) {
        s[j] = g * s[j] + ki * vt[j];
        row[j] += qi * s[j];
      }
    }
    for (int64_t j = 0; j < dv; ++j) out[t * dv + j] = from_float<T>(p.scale * row[j]);
  }
  if (p.final_state) std::copy(state.begin(), state.end(), p.final_state + bh * dk * dv);
}

template <typename T>
void run_all(const Problem& p, int threads) {
  const int64_t sequences = p.batch * p.heads;
  std::atomic<int64_t> next{0};
  auto worker = [&] {
    std::vector<float> state(p.dk * p.dv), row(p.dv);
    for (int64_t bh = next++; bh < sequences; bh = next++) run_sequence<T>(p, bh, state, row);
  };
  const int64_t count = std::min<int64_t>(sequences, threads);
  std::vector<std::thread> pool;
  for (int64_t i = 1; i < count; ++i) pool.emplace_back(worker);
  worker();
  for (auto& thread : pool) thread.join();
}

}  // namespace

void linear_attention(const Problem& problem, int threads) {
  if (threads <= 0) threads = std::max(1u, std::thread::hardware_concurrency());
  switch (problem.dtype) {
    case DType::kFloat32: return run_all<float>(problem, threads);
    case DType::kFloat16: return run_all<Half>(problem, threads);
    case DType::kBFloat16: return run_all<BFloat16>(problem, threads);
  }
}

}  // namespace culina::cpu
