// The CPU backward (and the packed-sequence forward) against float64 sums written here, which
// a finite-difference check of a float64 forward validates in turn.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <stdexcept>
#include <string>
#include <vector>

#include "common/dtype.h"
#include "cpu/linear_attention_cpu.h"

namespace culina {
namespace {

// A batch of sequences for every head: padded (all `lengths` equal, [B,H,T,D]) or packed
// ([1,H,total,D] with cu_seqlens); the states are [sequences,H,Dk,Dv] either way.
struct Layout {
  int64_t heads, dk, dv;
  std::vector<int64_t> lengths;
  bool packed;

  int64_t sequences() const { return int64_t(lengths.size()); }
  int64_t total() const {
    int64_t sum = 0;
    for (int64_t n : lengths) sum += n;
    return sum;
  }
  int64_t start(int64_t n) const {
    int64_t sum = 0;
    for (int64_t m = 0; m < n; ++m) sum += lengths[m];
    return sum;
  }
  // Array row of row t of sequence n, head h.
  int64_t row(int64_t n, int64_t h, int64_t t) const {
    return packed ? h * total() + start(n) + t : (n * heads + h) * lengths[0] + t;
  }
  int64_t rows() const { return heads * total(); }
  int64_t states() const { return sequences() * heads * dk * dv; }
};

struct Inputs {
  std::vector<double> q, k, v, d_out, s0, d_final;  // s0 / d_final empty when absent
  std::vector<double> decay;                       // one per head
  double scale;
};

struct Grads {
  std::vector<double> dq, dk, dv, ds0;
};

// out and final state of the recurrence S_t = g S_(t-1) + k_t^T v_t, o_t = scale q_t S_t.
void reference_forward(const Layout& l, const Inputs& in, std::vector<double>& out, std::vector<double>& final_state) {
  out.assign(l.rows() * l.dv, 0.0);
  final_state.assign(l.states(), 0.0);
  for (int64_t n = 0; n < l.sequences(); ++n)
    for (int64_t h = 0; h < l.heads; ++h) {
      const int64_t si = (n * l.heads + h) * l.dk * l.dv;
      std::vector<double> s(l.dk * l.dv, 0.0);
      if (!in.s0.empty()) std::copy_n(in.s0.begin() + si, s.size(), s.begin());
      for (int64_t t = 0; t < l.lengths[n]; ++t) {
        const int64_t r = l.row(n, h, t);
        for (int64_t i = 0; i < l.dk; ++i)
          for (int64_t j = 0; j < l.dv; ++j) {
            double& e = s[i * l.dv + j];
            e = in.decay[h] * e + in.k[r * l.dk + i] * in.v[r * l.dv + j];
            out[r * l.dv + j] += in.scale * in.q[r * l.dk + i] * e;
          }
      }
      std::copy(s.begin(), s.end(), final_state.begin() + si);
    }
}

// The loss whose gradients the backward computes: sum(out * d_out) + sum(final * d_final).
double loss(const Layout& l, const Inputs& in) {
  std::vector<double> out, final_state;
  reference_forward(l, in, out, final_state);
  double sum = 0.0;
  for (size_t i = 0; i < out.size(); ++i) sum += out[i] * in.d_out[i];
  if (!in.d_final.empty())
    for (size_t i = 0; i < final_state.size(); ++i) sum += final_state[i] * in.d_final[i];
  return sum;
}

// The gradients as explicit sums over pairs of rows:
//   dq_t = scale (sum_(s<=t) g^(t-s) (do_t.v_s) k_s + g^(t+1) do_t S0^T)
//   dk_s = scale sum_(t>=s) g^(t-s) (v_s.do_t) q_t + g^(T-1-s) v_s dS_T^T
//   dv_s = scale sum_(t>=s) g^(t-s) (q_t.k_s) do_t + g^(T-1-s) k_s dS_T
//   dS0  = scale sum_t g^(t+1) q_t^T do_t + g^T dS_T
Grads reference_backward(const Layout& l, const Inputs& in) {
  Grads g{std::vector<double>(l.rows() * l.dk), std::vector<double>(l.rows() * l.dk),
          std::vector<double>(l.rows() * l.dv), std::vector<double>(l.states())};
  auto dot = [](const double* a, const double* b, int64_t n) {
    double sum = 0.0;
    for (int64_t i = 0; i < n; ++i) sum += a[i] * b[i];
    return sum;
  };
  for (int64_t n = 0; n < l.sequences(); ++n)
    for (int64_t h = 0; h < l.heads; ++h) {
      const int64_t len = l.lengths[n], si = (n * l.heads + h) * l.dk * l.dv;
      const double decay = in.decay[h];
      for (int64_t t = 0; t < len; ++t) {
        const int64_t rt = l.row(n, h, t);
        for (int64_t s = 0; s <= t; ++s) {
          const int64_t rs = l.row(n, h, s);
          const double w = in.scale * std::pow(decay, double(t - s));
          const double do_v = dot(&in.d_out[rt * l.dv], &in.v[rs * l.dv], l.dv);
          const double q_k = dot(&in.q[rt * l.dk], &in.k[rs * l.dk], l.dk);
          for (int64_t i = 0; i < l.dk; ++i) {
            g.dq[rt * l.dk + i] += w * do_v * in.k[rs * l.dk + i];
            g.dk[rs * l.dk + i] += w * do_v * in.q[rt * l.dk + i];
          }
          for (int64_t j = 0; j < l.dv; ++j) g.dv[rs * l.dv + j] += w * q_k * in.d_out[rt * l.dv + j];
        }
        for (int64_t i = 0; i < l.dk; ++i)
          for (int64_t j = 0; j < l.dv; ++j) {
            const double w_in = in.scale * std::pow(decay, double(t + 1));
            if (!in.s0.empty()) g.dq[rt * l.dk + i] += w_in * in.d_out[rt * l.dv + j] * in.s0[si + i * l.dv + j];
            g.ds0[si + i * l.dv + j] += w_in * in.q[rt * l.dk + i] * in.d_out[rt * l.dv + j];
            if (in.d_final.empty()) continue;
            const double w_out = std::pow(decay, double(len - 1 - t));
            g.dk[rt * l.dk + i] += w_out * in.v[rt * l.dv + j] * in.d_final[si + i * l.dv + j];
            g.dv[rt * l.dv + j] += w_out * in.k[rt * l.dk + i] * in.d_final[si + i * l.dv + j];
          }
      }
      if (!in.d_final.empty())
        for (int64_t e = 0; e < l.dk * l.dv; ++e) g.ds0[si + e] += std::pow(decay, double(len)) * in.d_final[si + e];
    }
  return g;
}

// Values exactly representable in `dtype`, so the reference sees what the kernel reads.
double representable(float x, DType dtype) {
  switch (dtype) {
    case DType::kFloat16: return to_float(from_float<Half>(x));
    case DType::kBFloat16: return to_float(from_float<BFloat16>(x));
    case DType::kFloat32: break;
  }
  return x;
}

std::vector<double> random_values(size_t n, std::mt19937& gen, DType dtype) {
  std::normal_distribution<float> dist(0.0f, 0.5f);
  std::vector<double> x(n);
  for (auto& e : x) e = representable(dist(gen), dtype);
  return x;
}

Inputs random_inputs(const Layout& l, DType dtype, bool with_decay, bool with_states, unsigned seed) {
  std::mt19937 gen(seed);
  Inputs in;
  in.q = random_values(l.rows() * l.dk, gen, dtype);
  in.k = random_values(l.rows() * l.dk, gen, dtype);
  in.v = random_values(l.rows() * l.dv, gen, dtype);
  in.d_out = random_values(l.rows() * l.dv, gen, dtype);
  if (with_states) {
    in.s0 = random_values(l.states(), gen, DType::kFloat32);
    in.d_final = random_values(l.states(), gen, DType::kFloat32);
  }
  for (int64_t h = 0; h < l.heads; ++h) in.decay.push_back(with_decay ? float(0.95 - 0.1 * (h % 3)) : 1.0);
  in.scale = 1.0 / std::sqrt(double(l.dk));
  return in;
}

// An array in the kernel's storage format.
struct Buffer {
  std::vector<unsigned char> bytes;
  DType dtype;

  Buffer(const std::vector<double>& x, DType t) : bytes(x.size() * (t == DType::kFloat32 ? 4 : 2)), dtype(t) {
    for (size_t i = 0; i < x.size(); ++i) {
      const float f = float(x[i]);
      const uint16_t b = t == DType::kFloat16 ? from_float<Half>(f).bits : from_float<BFloat16>(f).bits;
      if (t == DType::kFloat32) std::memcpy(&bytes[i * 4], &f, 4);
      else std::memcpy(&bytes[i * 2], &b, 2);
    }
  }
  std::vector<double> values() const {
    const size_t width = dtype == DType::kFloat32 ? 4 : 2;
    std::vector<double> x(bytes.size() / width);
    for (size_t i = 0; i < x.size(); ++i) {
      float f;
      uint16_t b;
      if (dtype == DType::kFloat32) std::memcpy(&f, &bytes[i * 4], 4);
      else std::memcpy(&b, &bytes[i * 2], 2);
      if (dtype == DType::kFloat16) f = to_float(Half{b});
      if (dtype == DType::kBFloat16) f = to_float(BFloat16{b});
      x[i] = f;
    }
    return x;
  }
  void* data() { return bytes.data(); }
};

std::vector<float> floats(const std::vector<double>& x) { return std::vector<float>(x.begin(), x.end()); }

std::vector<double> doubles(const std::vector<float>& x) { return std::vector<double>(x.begin(), x.end()); }

double relative_error(const std::vector<double>& got, const std::vector<double>& want) {
  double num = 0.0, den = 0.0;
  for (size_t i = 0; i < got.size(); ++i) {
    num += (got[i] - want[i]) * (got[i] - want[i]);
    den += want[i] * want[i];
  }
  return den == 0.0 ? std::sqrt(num) : std::sqrt(num / den);
}

double tolerance(DType dtype) {
  switch (dtype) {
    case DType::kFloat16: return 4e-3;
    case DType::kBFloat16: return 2e-2;
    case DType::kFloat32: break;
  }
  return 1e-5;
}

// A Problem over `l` with cu_seqlens (of `bits`) when packed; `offsets` keeps them alive.
template <typename Offset>
Problem make_problem(const Layout& l, const Inputs& in, DType dtype, std::vector<Offset>& offsets) {
  Problem p;
  p.batch = l.packed ? 1 : l.sequences();
  p.heads = l.heads;
  p.seq_len = l.packed ? l.total() : l.lengths[0];
  p.dk = l.dk, p.dv = l.dv;
  p.dtype = dtype;
  p.scale = float(in.scale);
  for (double g : in.decay) p.decay.push_back(float(g));
  if (l.packed) {
    offsets.clear();
    for (int64_t n = 0; n <= l.sequences(); ++n) offsets.push_back(Offset(l.start(n)));
    p.cu_seqlens = offsets.data();
    p.num_seqs = l.sequences();
    p.seqlen_bits = 8 * sizeof(Offset);
  }
  return p;
}

struct Case {
  Layout layout;
  DType dtype;
  bool with_decay, with_states, offsets_64;
};

std::string case_name(const ::testing::TestParamInfo<Case>& info) {
  const Case& c = info.param;
  const char* dtypes[] = {"fp32", "fp16", "bf16"};
  std::string name = std::string(dtypes[int(c.dtype)]) + "_H" + std::to_string(c.layout.heads) + "_Dk" +
                     std::to_string(c.layout.dk) + "_Dv" + std::to_string(c.layout.dv) +
                     (c.layout.packed ? "_packed" : "_padded");
  for (int64_t n : c.layout.lengths) name += "_" + std::to_string(n);
  return name + (c.with_decay ? "_decay" : "") + (c.with_states ? "_states" : "") + (c.offsets_64 ? "_i64" : "");
}

class CpuBackward : public ::testing::TestWithParam<Case> {};

template <typename Offset>
void check_case(const Case& c) {
  const Layout& l = c.layout;
  const Inputs in = random_inputs(l, c.dtype, c.with_decay, c.with_states, 42);
  std::vector<Offset> offsets;
  Problem p = make_problem(l, in, c.dtype, offsets);
  Buffer q(in.q, c.dtype), k(in.k, c.dtype), v(in.v, c.dtype), d_out(in.d_out, c.dtype);
  const auto s0 = floats(in.s0), d_final = floats(in.d_final);
  p.q = q.data(), p.k = k.data(), p.v = v.data();
  p.initial_state = c.with_states ? s0.data() : nullptr;

  // Forward: out and the final state.
  Buffer out(std::vector<double>(l.rows() * l.dv), c.dtype);
  std::vector<float> final_state(l.states());
  p.out = out.data(), p.final_state = final_state.data();
  cpu::linear_attention(p, 3);
  std::vector<double> want_out, want_final;
  reference_forward(l, in, want_out, want_final);
  EXPECT_LT(relative_error(out.values(), want_out), tolerance(c.dtype)) << "out";
  EXPECT_LT(relative_error(doubles(final_state), want_final), 1e-5) << "final state";

  // Backward.
  Buffer dq(std::vector<double>(in.q.size()), c.dtype), dk(std::vector<double>(in.k.size()), c.dtype),
      dv(std::vector<double>(in.v.size()), c.dtype);
  std::vector<float> ds0(l.states(), std::nanf(""));
  Gradients g;
  g.d_out = d_out.data();
  g.d_final_state = c.with_states ? d_final.data() : nullptr;
  g.dq = dq.data(), g.dk = dk.data(), g.dv = dv.data(), g.d_initial_state = ds0.data();
  p.out = nullptr, p.final_state = nullptr;
  cpu::linear_attention_backward(p, g, 3);
  const Grads want = reference_backward(l, in);
  EXPECT_LT(relative_error(dq.values(), want.dq), tolerance(c.dtype)) << "dq";
  EXPECT_LT(relative_error(dk.values(), want.dk), tolerance(c.dtype)) << "dk";
  EXPECT_LT(relative_error(dv.values(), want.dv), tolerance(c.dtype)) << "dv";
  EXPECT_LT(relative_error(doubles(ds0), want.ds0), 1e-5) << "d initial state";
}

TEST_P(CpuBackward, MatchesFloat64Sums) {
  if (GetParam().offsets_64) check_case<int64_t>(GetParam());
  else check_case<int32_t>(GetParam());
}

std::vector<Case> cases() {
  const std::vector<Layout> layouts = {
      {3, 8, 12, {17, 17}, false},     // odd T, Dk != Dv
      {1, 1, 1, {5}, false},           // D = 1
      {2, 16, 5, {33}, false},
      {1, 256, 256, {3}, false},       // D = 256
      {2, 3, 256, {4, 4}, false},
      {2, 6, 7, {5, 0, 17, 1}, true},  // packed, with an empty sequence
      {1, 64, 32, {70, 3}, true},
  };
  std::vector<Case> out;
  for (const Layout& l : layouts)
    for (DType dtype : {DType::kFloat32, DType::kFloat16, DType::kBFloat16})
      for (bool decay : {false, true})
        for (bool states : {false, true}) out.push_back({l, dtype, decay, states, false});
  out.push_back({layouts[5], DType::kBFloat16, true, true, true});
  return out;
}

INSTANTIATE_TEST_SUITE_P(Shapes, CpuBackward, ::testing::ValuesIn(cases()), case_name);

// The explicit sums above are the gradients of the float64 forward: central differences of
// the loss on tiny shapes, padded and packed.
TEST(ReferenceGradients, MatchFiniteDifferences) {
  for (const Layout& l : {Layout{2, 3, 2, {4, 4}, false}, Layout{1, 2, 3, {3, 0, 5}, true}}) {
    Inputs in = random_inputs(l, DType::kFloat32, true, true, 9);
    const Grads want = reference_backward(l, in);
    const double h = 1e-6;
    auto check = [&](std::vector<double>& x, const std::vector<double>& grad, const char* name) {
      for (size_t i = 0; i < x.size(); ++i) {
        const double saved = x[i];
        x[i] = saved + h;
        const double up = loss(l, in);
        x[i] = saved - h;
        const double down = loss(l, in);
        x[i] = saved;
        EXPECT_NEAR((up - down) / (2 * h), grad[i], 1e-6) << name << "[" << i << "]";
      }
    };
    check(in.q, want.dq, "dq");
    check(in.k, want.dk, "dk");
    check(in.v, want.dv, "dv");
    check(in.s0, want.ds0, "dS0");
  }
}

// The kernel's backward straight against finite differences of its own fp32 forward.
TEST(CpuBackward, MatchesFiniteDifferencesOfTheKernelForward) {
  const Layout l{1, 2, 3, {6}, false};
  Inputs in = random_inputs(l, DType::kFloat32, true, true, 5);
  std::vector<int32_t> offsets;
  Problem p = make_problem(l, in, DType::kFloat32, offsets);
  auto kernel_loss = [&](const Inputs& x) {
    auto q = floats(x.q), k = floats(x.k), v = floats(x.v), s0 = floats(x.s0);
    std::vector<float> out(l.rows() * l.dv), final_state(l.states());
    Problem run = p;
    run.q = q.data(), run.k = k.data(), run.v = v.data(), run.initial_state = s0.data();
    run.out = out.data(), run.final_state = final_state.data();
    cpu::linear_attention(run, 1);
    double sum = 0.0;
    for (size_t i = 0; i < out.size(); ++i) sum += out[i] * x.d_out[i];
    for (size_t i = 0; i < final_state.size(); ++i) sum += final_state[i] * x.d_final[i];
    return sum;
  };
  auto q = floats(in.q), k = floats(in.k), v = floats(in.v), s0 = floats(in.s0), d_out = floats(in.d_out),
       d_final = floats(in.d_final);
  std::vector<float> dq(q.size()), dk(k.size()), dv(v.size()), ds0(s0.size());
  p.q = q.data(), p.k = k.data(), p.v = v.data(), p.initial_state = s0.data();
  Gradients g{d_out.data(), d_final.data(), dq.data(), dk.data(), dv.data(), ds0.data()};
  cpu::linear_attention_backward(p, g, 1);
  const double h = 1e-2;  // fp32 forward: a wide step; the loss is quadratic in each input
  auto check = [&](std::vector<double> Inputs::*member, const std::vector<float>& grad, const char* name) {
    for (size_t i = 0; i < grad.size(); ++i) {
      Inputs up = in, down = in;
      (up.*member)[i] += h;
      (down.*member)[i] -= h;
      EXPECT_NEAR((kernel_loss(up) - kernel_loss(down)) / (2 * h), grad[i], 2e-3) << name << "[" << i << "]";
    }
  };
  check(&Inputs::q, dq, "dq");
  check(&Inputs::k, dk, "dk");
  check(&Inputs::v, dv, "dv");
  check(&Inputs::s0, ds0, "dS0");
}

TEST(CpuForward, RefusesCuSeqlensThatDoNotCoverTheRows) {
  const Layout l{1, 2, 2, {3, 3}, true};
  const Inputs in = random_inputs(l, DType::kFloat32, false, false, 1);
  std::vector<int32_t> offsets;
  Problem p = make_problem(l, in, DType::kFloat32, offsets);
  const auto q = floats(in.q), v = floats(in.v);
  std::vector<float> out(v.size());
  p.q = q.data(), p.k = q.data(), p.v = v.data(), p.out = out.data();
  offsets = {0, 4, 3};
  EXPECT_THROW(cpu::linear_attention(p, 1), std::invalid_argument);
  offsets = {0, 3, 5};
  EXPECT_THROW(cpu::linear_attention(p, 1), std::invalid_argument);
  offsets = {0, 3, 6};
  EXPECT_NO_THROW(cpu::linear_attention(p, 1));
}

}  // namespace
}  // namespace culina
