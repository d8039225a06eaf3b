// The C++ CPU kernel against an independent double-precision loop, plus the 16-bit
// conversions it relies on.
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <vector>

#include "common/dtype.h"
#include "cpu/linear_attention_cpu.h"

namespace culina {
namespace {

struct Shape {
  int64_t b, h, t, dk, dv;
};

// o_t = scale q_t S_t with S_t = g S_(t-1) + k_t^T v_t, written as the closed form
// S_t = g^t S_0 + sum_{s<=t} g^(t-s) k_s^T v_s so that it shares no code path with the kernel.
std::vector<double> closed_form(const Shape& s, const std::vector<float>& q, const std::vector<float>& k,
                                const std::vector<float>& v, const std::vector<float>& decay,
                                const std::vector<float>& s0, float scale) {
  std::vector<double> out(s.b * s.h * s.t * s.dv, 0.0);
  for (int64_t bh = 0; bh < s.b * s.h; ++bh) {
    const double g = decay.empty() ? 1.0 : decay[bh % s.h];
    for (int64_t t = 0; t < s.t; ++t)
      for (int64_t j = 0; j < s.dv; ++j) {
        double acc = 0.0;
        for (int64_t i = 0; i < s.dk; ++i) {
          const double qi = q[(bh * s.t + t) * s.dk + i];
          if (!s0.empty()) acc += qi * std::pow(g, double(t + 1)) * s0[(bh * s.dk + i) * s.dv + j];
          for (int64_t u = 0; u <= t; ++u)
            acc += qi * std::pow(g, double(t - u)) * k[(bh * s.t + u) * s.dk + i] * v[(bh * s.t + u) * s.dv + j];
        }
        out[(bh * s.t + t) * s.dv + j] = scale * acc;
      }
  }
  return out;
}

std::vector<float> random_vector(size_t n, std::mt19937& gen) {
  std::normal_distribution<float> dist(0.0f, 0.5f);
  std::vector<float> x(n);
  for (auto& e : x) e = dist(gen);
  return x;
}

double relative_error(const std::vector<float>& got, const std::vector<double>& want) {
  double num = 0.0, den = 0.0;
  for (size_t i = 0; i < got.size(); ++i) {
    num += (got[i] - want[i]) * (got[i] - want[i]);
    den += want[i] * want[i];
  }
  return std::sqrt(num / den);
}

class CpuKernel : public ::testing::TestWithParam<std::tuple<Shape, bool, bool>> {};

TEST_P(CpuKernel, MatchesClosedForm) {
  const auto [shape, with_decay, with_state] = GetParam();
  std::mt19937 gen(1234);
  const auto q = random_vector(shape.b * shape.h * shape.t * shape.dk, gen);
  const auto k = random_vector(q.size(), gen);
  const auto v = random_vector(shape.b * shape.h * shape.t * shape.dv, gen);
  std::vector<float> decay, s0;
  if (with_decay)
    for (int64_t i = 0; i < shape.h; ++i) decay.push_back(0.7f + 0.1f * float(i % 3));
  if (with_state) s0 = random_vector(shape.b * shape.h * shape.dk * shape.dv, gen);
  std::vector<float> out(v.size(), std::nanf("")), final_state(shape.b * shape.h * shape.dk * shape.dv);

  Problem p;
  p.batch = shape.b, p.heads = shape.h, p.seq_len = shape.t, p.dk = shape.dk, p.dv = shape.dv;
  p.dtype = DType::kFloat32;
  p.scale = 0.25f;
  p.decay = decay;
  p.q = q.data(), p.k = k.data(), p.v = v.data(), p.out = out.data();
  p.initial_state = with_state ? s0.data() : nullptr;
  p.final_state = final_state.data();
  cpu::linear_attention(p, 3);

  EXPECT_LT(relative_error(out, closed_form(shape, q, k, v, decay, s0, 0.25f)), 1e-5);
}

INSTANTIATE_TEST_SUITE_P(Shapes, CpuKernel,
                         ::testing::Combine(::testing::Values(Shape{2, 3, 17, 8, 12}, Shape{1, 1, 1, 4, 4},
                                                              Shape{1, 2, 40, 16, 5}),
                                            ::testing::Bool(), ::testing::Bool()));

TEST(CpuKernel, FinalStateContinuesTheSequence) {
  const Shape s{1, 2, 24, 8, 8};
  std::mt19937 gen(7);
  const auto q = random_vector(s.h * s.t * s.dk, gen), k = random_vector(q.size(), gen);
  const auto v = random_vector(s.h * s.t * s.dv, gen);
  std::vector<float> whole(v.size()), state(s.h * s.dk * s.dv), first(v.size() / 2), second(v.size() / 2);
  Problem p;
  p.batch = 1, p.heads = 2, p.seq_len = s.t, p.dk = s.dk, p.dv = s.dv, p.decay = {0.9f, 0.6f};
  p.q = q.data(), p.k = k.data(), p.v = v.data(), p.out = whole.data();
  cpu::linear_attention(p);
  EXPECT_TRUE(std::isfinite(whole[0]));
  // Same sequences split in two halves per head; halves laid out as their own [1,H,T/2,D] arrays.
  auto half = [&](const std::vector<float>& x, int64_t width, int64_t part) {
    std::vector<float> out;
    for (int64_t h = 0; h < s.h; ++h)
      out.insert(out.end(), x.begin() + (h * s.t + part * s.t / 2) * width,
                 x.begin() + (h * s.t + (part + 1) * s.t / 2) * width);
    return out;
  };
  const auto q0 = half(q, s.dk, 0), k0 = half(k, s.dk, 0), v0 = half(v, s.dv, 0);
  const auto q1 = half(q, s.dk, 1), k1 = half(k, s.dk, 1), v1 = half(v, s.dv, 1);
  p.seq_len = s.t / 2;
  p.q = q0.data(), p.k = k0.data(), p.v = v0.data(), p.out = first.data(), p.final_state = state.data();
  cpu::linear_attention(p);
  p.q = q1.data(), p.k = k1.data(), p.v = v1.data(), p.out = second.data(), p.final_state = nullptr;
  p.initial_state = state.data();
  cpu::linear_attention(p);
  const auto whole_second = half(whole, s.dv, 1);
  for (size_t i = 0; i < second.size(); ++i) EXPECT_NEAR(second[i], whole_second[i], 1e-4f) << i;
}

TEST(Dtype, HalfAndBFloat16RoundTrip) {
  for (float x : {0.0f, 1.0f, -2.5f, 65504.0f, 6.1035156e-05f, 5.9604645e-08f, 0.333251953125f}) {
    EXPECT_EQ(to_float(from_float<Half>(x)), x) << x;
  }
  EXPECT_EQ(from_float<Half>(1.0f).bits, 0x3c00);
  EXPECT_EQ(from_float<Half>(1e6f).bits, 0x7c00);                  // overflow: infinity
  EXPECT_EQ(from_float<Half>(1.0f + 1.0f / 2048).bits, 0x3c00);    // tie rounds to even
  EXPECT_EQ(from_float<BFloat16>(1.0f).bits, 0x3f80);
  EXPECT_EQ(from_float<BFloat16>(1.0f + 1.0f / 256).bits, 0x3f80);  // tie rounds to even
  EXPECT_EQ(from_float<BFloat16>(1.0f + 3.0f / 256).bits, 0x3f82);
  EXPECT_TRUE(std::isnan(to_float(from_float<BFloat16>(std::nanf("")))));
  EXPECT_TRUE(std::isnan(to_float(from_float<Half>(std::nanf("")))));
}

TEST(CpuKernel, SixteenBitInputsRoundTheOutput) {
  std::vector<Half> q = {from_float<Half>(1.0f)}, v = {from_float<Half>(3.0f)};
  std::vector<Half> out(1);
  Problem p;
  p.batch = p.heads = p.seq_len = p.dk = p.dv = 1;
  p.dtype = DType::kFloat16;
  p.scale = 1.0f / 3.0f;
  p.q = q.data(), p.k = q.data(), p.v = v.data(), p.out = out.data();
  cpu::linear_attention(p);
  EXPECT_EQ(to_float(out[0]), 1.0f);
}

}  // namespace
}  // namespace culina
