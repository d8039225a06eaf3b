// What the CPU kernel's tests hold it to: the gated recurrence and its gradients in float64,
// written here without the kernel's code, and tensors placed in memory through strides the way
// the kernel reads them (either layout, or a view whose rows lie further apart).
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <random>
#include <vector>

#include "common/dtype.h"
#include "common/problem.h"

namespace culina::reference {

// Sequences for every head: padded (every length equal: a [B, H, T, D]-indexed batch) or packed
// (one batch entry holding the sequences one after another, with cu_seqlens). The float64
// values live in canonical [B, H, T, width] arrays; the states are [sequences, H, Dk, Dv].
struct Shape {
  int64_t heads, dk, dv;
  std::vector<int64_t> lengths;
  bool packed;

  int64_t sequences() const { return int64_t(lengths.size()); }
  int64_t batch() const { return packed ? 1 : sequences(); }
  int64_t tokens() const {  // T of the tensors
    if (!packed) return lengths[0];
    int64_t sum = 0;
    for (int64_t n : lengths) sum += n;
    return sum;
  }
  // Token of sequence n's first token in its batch entry.
  int64_t start(int64_t n) const {
    int64_t sum = 0;
    for (int64_t m = 0; packed && m < n; ++m) sum += lengths[m];
    return sum;
  }
  int64_t batch_of(int64_t n) const { return packed ? 0 : n; }
  // Canonical index of token t of sequence n, head h, feature 0, in rows of `width`.
  int64_t index(int64_t n, int64_t h, int64_t t, int64_t width) const {
    return ((batch_of(n) * heads + h) * tokens() + start(n) + t) * width;
  }
  int64_t elements(int64_t width) const { return batch() * heads * tokens() * width; }
  int64_t states() const { return sequences() * heads * dk * dv; }
};

struct Inputs {
  std::vector<double> q, k, v, d_out;  // canonical [B, H, T, D]
  std::vector<double> s0, d_final;     // [sequences, H, Dk, Dv]; empty: absent
  std::vector<double> decay;           // per head; empty: none
  std::vector<double> gamma;           // per head, natural log; empty: none
  std::vector<double> gates;           // canonical [B, H, T], natural log; empty: none
  double scale = 1.0;

  // The natural log of token t's forget gate (common/problem.h).
  double log_gate(const Shape& s, int64_t n, int64_t h, int64_t t) const {
    double sum = decay.empty() ? 0.0 : std::log(decay[h]);
    if (!gamma.empty()) sum += gamma[h];
    if (!gates.empty()) sum += gates[s.index(n, h, t, 1)];
    return sum;
  }
};

// out and the final state, token by token: S_t = a_t S_(t-1) + k_t^T v_t, o_t = scale q_t S_t.
inline void forward(const Shape& s, const Inputs& in, std::vector<double>& out, std::vector<double>& final_state) {
  out.assign(s.elements(s.dv), 0.0);
  final_state.assign(s.states(), 0.0);
  for (int64_t n = 0; n < s.sequences(); ++n)
    for (int64_t h = 0; h < s.heads; ++h) {
      const int64_t si = (n * s.heads + h) * s.dk * s.dv;
      std::vector<double> state(s.dk * s.dv, 0.0);
      if (!in.s0.empty()) std::copy_n(in.s0.begin() + si, state.size(), state.begin());
      for (int64_t t = 0; t < s.lengths[n]; ++t) {
        const double a = std::exp(in.log_gate(s, n, h, t));
        const int64_t qk = s.index(n, h, t, s.dk), vo = s.index(n, h, t, s.dv);
        for (int64_t i = 0; i < s.dk; ++i)
          for (int64_t j = 0; j < s.dv; ++j) {
            double& e = state[i * s.dv + j];
            e = a * e + in.k[qk + i] * in.v[vo + j];
            out[vo + j] += in.scale * in.q[qk + i] * e;
          }
      }
      std::copy(state.begin(), state.end(), final_state.begin() + si);
    }
}

// The loss whose gradients the backward computes: sum(out * d_out) + sum(final * d_final).
inline double loss(const Shape& s, const Inputs& in) {
  std::vector<double> out, final_state;
  forward(s, in, out, final_state);
  double sum = 0.0;
  for (size_t i = 0; i < out.size(); ++i) sum += out[i] * in.d_out[i];
  for (size_t i = 0; i < in.d_final.size(); ++i) sum += final_state[i] * in.d_final[i];
  return sum;
}

struct Grads {
  std::vector<double> dq, dk, dv, ds0;
  std::vector<double> gate_dots;  // canonical [B, H, T]: q_t.dq_t - k_t.dk_t
};

// The gradients as explicit sums over pairs of tokens, with G_t the cumulative log gate of
// tokens 0..t (so a token's weight on a later one t is the gates of the tokens after it up to
// t: w_ts = e^(G_t - G_s)):
//   dq_t = scale (sum_(s<=t) w_ts (do_t.v_s) k_s + e^(G_t) do_t S0^T)
//   dk_s = scale sum_(t>=s) w_ts (v_s.do_t) q_t + e^(G_(T-1) - G_s) v_s dS_T^T
//   dv_s = scale sum_(t>=s) w_ts (q_t.k_s) do_t + e^(G_(T-1) - G_s) k_s dS_T
//   dS0  = scale sum_t e^(G_t) q_t^T do_t + e^(G_(T-1)) dS_T
// and the loss's gradient with respect to G_t (the gates' gradient is its reverse cumulative
// sum, gates_gradient): gate_dots_t = q_t.dq_t - k_t.dk_t.
inline Grads backward(const Shape& s, const Inputs& in) {
  Grads g{std::vector<double>(s.elements(s.dk)), std::vector<double>(s.elements(s.dk)),
          std::vector<double>(s.elements(s.dv)), std::vector<double>(s.states()),
          std::vector<double>(s.elements(1))};
  auto dot = [](const double* a, const double* b, int64_t n) {
    double sum = 0.0;
    for (int64_t i = 0; i < n; ++i) sum += a[i] * b[i];
    return sum;
  };
  for (int64_t n = 0; n < s.sequences(); ++n)
    for (int64_t h = 0; h < s.heads; ++h) {
      const int64_t len = s.lengths[n], si = (n * s.heads + h) * s.dk * s.dv;
      std::vector<double> cumulative(len);
      for (int64_t t = 0; t < len; ++t) cumulative[t] = (t ? cumulative[t - 1] : 0.0) + in.log_gate(s, n, h, t);
      const double total = len ? cumulative[len - 1] : 0.0;
      for (int64_t t = 0; t < len; ++t) {
        const int64_t qt = s.index(n, h, t, s.dk), vt = s.index(n, h, t, s.dv);
        for (int64_t u = 0; u <= t; ++u) {
          const int64_t qu = s.index(n, h, u, s.dk), vu = s.index(n, h, u, s.dv);
          const double w = in.scale * std::exp(cumulative[t] - cumulative[u]);
          const double do_v = dot(&in.d_out[vt], &in.v[vu], s.dv);
          const double q_k = dot(&in.q[qt], &in.k[qu], s.dk);
          for (int64_t i = 0; i < s.dk; ++i) {
            g.dq[qt + i] += w * do_v * in.k[qu + i];
            g.dk[qu + i] += w * do_v * in.q[qt + i];
          }
          for (int64_t j = 0; j < s.dv; ++j) g.dv[vu + j] += w * q_k * in.d_out[vt + j];
        }
        const double w_in = in.scale * std::exp(cumulative[t]), w_out = std::exp(total - cumulative[t]);
        for (int64_t i = 0; i < s.dk; ++i)
          for (int64_t j = 0; j < s.dv; ++j) {
            if (!in.s0.empty()) g.dq[qt + i] += w_in * in.d_out[vt + j] * in.s0[si + i * s.dv + j];
            g.ds0[si + i * s.dv + j] += w_in * in.q[qt + i] * in.d_out[vt + j];
            if (in.d_final.empty()) continue;
            g.dk[qt + i] += w_out * in.v[vt + j] * in.d_final[si + i * s.dv + j];
            g.dv[vt + j] += w_out * in.k[qt + i] * in.d_final[si + i * s.dv + j];
          }
      }
      if (!in.d_final.empty())
        for (int64_t e = 0; e < s.dk * s.dv; ++e) g.ds0[si + e] += std::exp(total) * in.d_final[si + e];
    }
  for (int64_t n = 0; n < s.sequences(); ++n)
    for (int64_t h = 0; h < s.heads; ++h)
      for (int64_t t = 0; t < s.lengths[n]; ++t) {
        const int64_t qt = s.index(n, h, t, s.dk);
        g.gate_dots[s.index(n, h, t, 1)] = dot(&in.q[qt], &g.dq[qt], s.dk) - dot(&in.k[qt], &g.dk[qt], s.dk);
      }
  return g;
}

// The loss's gradient with respect to the gates (canonical [B, H, T]) from gate_dots (Grads):
// G_s holds gate t for every s >= t, and the final state of a sequence holds it through
// e^(G_(T-1)), whose derivative adds <dS_T, S_T>.
inline std::vector<double> gates_gradient(const Shape& s, const Inputs& in, const std::vector<double>& gate_dots) {
  std::vector<double> out, final_state, d_gates(s.elements(1));
  forward(s, in, out, final_state);
  for (int64_t n = 0; n < s.sequences(); ++n)
    for (int64_t h = 0; h < s.heads; ++h) {
      const int64_t si = (n * s.heads + h) * s.dk * s.dv;
      double sum = 0.0;
      for (int64_t e = 0; e < s.dk * s.dv && !in.d_final.empty(); ++e) sum += in.d_final[si + e] * final_state[si + e];
      for (int64_t t = s.lengths[n] - 1; t >= 0; --t) {
        sum += gate_dots[s.index(n, h, t, 1)];
        d_gates[s.index(n, h, t, 1)] = sum;
      }
    }
  return d_gates;
}

// Which parts of the forget gate a case has (common/problem.h).
struct Gating {
  bool decay, gamma, gates;
};

// Values exactly representable in `dtype`, so the reference sees what the kernel reads.
inline double representable(float x, DType dtype) {
  switch (dtype) {
    case DType::kFloat16: return to_float(from_float<Half>(x));
    case DType::kBFloat16: return to_float(from_float<BFloat16>(x));
    case DType::kFloat32: break;
  }
  return x;
}

inline std::vector<double> random_values(size_t n, std::mt19937& gen, DType dtype) {
  std::normal_distribution<float> dist(0.0f, 0.5f);
  std::vector<double> x(n);
  for (auto& e : x) e = representable(dist(gen), dtype);
  return x;
}

// Gates far enough from 1 (e^-0.8 .. 1 per token) that a gate applied to the wrong token moves
// the result well past the tolerances.
inline Inputs random_inputs(const Shape& s, DType dtype, Gating gating, bool with_states, unsigned seed) {
  std::mt19937 gen(seed);
  Inputs in;
  in.q = random_values(s.elements(s.dk), gen, dtype);
  in.k = random_values(s.elements(s.dk), gen, dtype);
  in.v = random_values(s.elements(s.dv), gen, dtype);
  in.d_out = random_values(s.elements(s.dv), gen, dtype);
  if (with_states) {
    in.s0 = random_values(s.states(), gen, DType::kFloat32);
    in.d_final = random_values(s.states(), gen, DType::kFloat32);
  }
  for (int64_t h = 0; gating.decay && h < s.heads; ++h) in.decay.push_back(float(0.95 - 0.1 * (h % 3)));
  for (int64_t h = 0; gating.gamma && h < s.heads; ++h) in.gamma.push_back(float(-0.02 - 0.05 * (h % 4)));
  std::uniform_real_distribution<float> gate(-0.8f, 0.0f);
  if (gating.gates)
    for (int64_t i = 0; i < s.elements(1); ++i) in.gates.push_back(gate(gen));
  in.scale = 1.0 / std::sqrt(double(s.dk));
  return in;
}

// How a [B, H, T, width] tensor lies in memory: heads first ([B, H, T, D]) or tokens first
// (flash-linear-attention's [B, T, H, D]), with `pad` unused elements after each token's rows
// (a view into a wider tensor, such as q out of a fused q/k/v projection).
struct Placement {
  bool tokens_first;
  int64_t pad;
};

inline Strides strides_of(const Shape& s, Placement place, int64_t width) {
  Strides at;
  if (place.tokens_first) {
    at.head = width;
    at.token = s.heads * width + place.pad;
    at.batch = s.tokens() * at.token;
  } else {
    at.token = width + place.pad;
    at.head = s.tokens() * at.token;
    at.batch = s.heads * at.head;
  }
  return at;
}

// A tensor in the kernel's storage: canonical values scattered through strides, every element
// outside the tensor's rows NaN (a kernel that reads one fails, one that writes one is caught).
class Tensor {
 public:
  Tensor(const Shape& s, Placement place, int64_t width, DType dtype, const std::vector<double>& values)
      : shape_(s), width_(width), dtype_(dtype), at_(strides_of(s, place, width)),
        bytes_(size_t(s.batch() * at_.batch) * element_bytes()) {
    const double nan = std::numeric_limits<double>::quiet_NaN();
    for (int64_t i = 0; i < s.batch() * at_.batch; ++i) store(i, nan);
    for (int64_t i = 0; i < s.elements(width); ++i) store(offset(i), values[i]);
  }
  Tensor(const Shape& s, Placement place, int64_t width, DType dtype)
      : Tensor(s, place, width, dtype, std::vector<double>(s.elements(width), std::nan(""))) {}

  std::vector<double> values() const {
    std::vector<double> x(shape_.elements(width_));
    for (int64_t i = 0; i < int64_t(x.size()); ++i) x[i] = load(offset(i));
    return x;
  }
  // Whether every element outside the tensor's rows is still NaN.
  bool padding_untouched() const {
    std::vector<bool> inside(size_t(shape_.batch() * at_.batch));
    for (int64_t i = 0; i < shape_.elements(width_); ++i) inside[offset(i)] = true;
    for (size_t i = 0; i < inside.size(); ++i)
      if (!inside[i] && !std::isnan(load(int64_t(i)))) return false;
    return true;
  }
  InRows in() const { return {bytes_.data(), at_}; }
  OutRows out() { return {bytes_.data(), at_}; }
  Rows<const float*> floats() const { return {reinterpret_cast<const float*>(bytes_.data()), at_}; }
  Rows<float*> out_floats() { return {reinterpret_cast<float*>(bytes_.data()), at_}; }

 private:
  size_t element_bytes() const { return dtype_ == DType::kFloat32 ? 4 : 2; }
  // Memory offset of canonical element i.
  int64_t offset(int64_t i) const {
    const int64_t d = i % width_, t = i / width_ % shape_.tokens(), h = i / width_ / shape_.tokens() % shape_.heads,
                  b = i / width_ / shape_.tokens() / shape_.heads;
    return b * at_.batch + h * at_.head + t * at_.token + d;
  }
  void store(int64_t at, double x) {
    const float f = float(x);
    const uint16_t half = dtype_ == DType::kFloat16 ? from_float<Half>(f).bits : from_float<BFloat16>(f).bits;
    if (dtype_ == DType::kFloat32) std::memcpy(&bytes_[at * 4], &f, 4);
    else std::memcpy(&bytes_[at * 2], &half, 2);
  }
  double load(int64_t at) const {
    float f;
    uint16_t b;
    if (dtype_ == DType::kFloat32) std::memcpy(&f, &bytes_[at * 4], 4);
    else std::memcpy(&b, &bytes_[at * 2], 2);
    if (dtype_ == DType::kFloat16) f = to_float(Half{b});
    if (dtype_ == DType::kBFloat16) f = to_float(BFloat16{b});
    return f;
  }

  Shape shape_;
  int64_t width_;
  DType dtype_;
  Strides at_;
  std::vector<unsigned char> bytes_;
};

inline std::vector<float> floats(const std::vector<double>& x) { return std::vector<float>(x.begin(), x.end()); }

inline std::vector<double> doubles(const std::vector<float>& x) { return std::vector<double>(x.begin(), x.end()); }

inline double relative_error(const std::vector<double>& got, const std::vector<double>& want) {
  double num = 0.0, den = 0.0;
  for (size_t i = 0; i < got.size(); ++i) {
    num += (got[i] - want[i]) * (got[i] - want[i]);
    den += want[i] * want[i];
  }
  return den == 0.0 ? std::sqrt(num) : std::sqrt(num / den);
}

inline double tolerance(DType dtype) {
  switch (dtype) {
    case DType::kFloat16: return 4e-3;
    case DType::kBFloat16: return 2e-2;
    case DType::kFloat32: break;
  }
  return 1e-5;
}

// The kernel's view of one case: its tensors in memory and a Problem over them (no outputs
// set). Keep it alive while the Problem runs.
struct Setup {
  Tensor q, k, v, d_out, gates;
  std::vector<float> gamma, s0, d_final;
  std::vector<int32_t> offsets32;
  std::vector<int64_t> offsets64;
  Problem problem;

  Setup(const Shape& s, const Inputs& in, DType dtype, Placement place, bool offsets_64 = false)
      : q(s, place, s.dk, dtype, in.q), k(s, place, s.dk, dtype, in.k), v(s, place, s.dv, dtype, in.v),
        d_out(s, place, s.dv, dtype, in.d_out),
        gates(s, place, 1, DType::kFloat32, in.gates.empty() ? std::vector<double>(s.elements(1)) : in.gates),
        gamma(floats(in.gamma)), s0(floats(in.s0)), d_final(floats(in.d_final)) {
    Problem& p = problem;
    p.batch = s.batch(), p.heads = s.heads, p.seq_len = s.tokens(), p.dk = s.dk, p.dv = s.dv;
    p.elements = Elements{dtype, dtype};
    p.scale = float(in.scale);
    p.decay = floats(in.decay);
    p.gamma = gamma.empty() ? nullptr : gamma.data();
    if (!in.gates.empty()) p.gates = gates.floats();
    p.q = q.in(), p.k = k.in(), p.v = v.in();
    p.initial_state = s0.empty() ? nullptr : s0.data();
    if (s.packed) {
      for (int64_t n = 0; n <= s.sequences(); ++n) {
        const int64_t start = n < s.sequences() ? s.start(n) : s.tokens();
        offsets32.push_back(int32_t(start));
        offsets64.push_back(start);
      }
      p.cu_seqlens = offsets_64 ? static_cast<const void*>(offsets64.data()) : offsets32.data();
      p.num_seqs = s.sequences();
      p.seqlen_bits = offsets_64 ? 64 : 32;
    }
  }
  Setup(const Setup&) = delete;  // the Problem points into the members
  Setup& operator=(const Setup&) = delete;
};

}  // namespace culina::reference
