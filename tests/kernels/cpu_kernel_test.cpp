// The C++ CPU kernel's forward against the float64 recurrence (float64_reference.h): every part
// of the forget gate alone and together, both layouts and strided views, packed sequences, and
// the 16-bit conversions it relies on.
#include <gtest/gtest.h>

#include <cmath>
#include <ostream>
#include <string>
#include <vector>

#include "common/dtype.h"
#include "cpu/linear_attention_cpu.h"
#include "float64_reference.h"

namespace culina {
namespace {

using reference::Gating;
using reference::Placement;
using reference::Shape;

struct Case {
  Shape shape;
  DType dtype;
  Gating gating;
  bool with_states;
  Placement in_place, out_place;  // q, k, v and the gates; out
  bool offsets_64;
};

std::string place_name(Placement place) {
  return std::string(place.tokens_first ? "BTHD" : "BHTD") + (place.pad ? "pad" + std::to_string(place.pad) : "");
}

std::string describe(const Case& c) {
  const char* dtypes[] = {"fp32", "fp16", "bf16"};
  std::string name = std::string(dtypes[int(c.dtype)]) + "_H" + std::to_string(c.shape.heads) + "_Dk" +
                     std::to_string(c.shape.dk) + "_Dv" + std::to_string(c.shape.dv) +
                     (c.shape.packed ? "_packed" : "_padded");
  for (int64_t n : c.shape.lengths) name += "_" + std::to_string(n);
  name += c.gating.decay ? "_decay" : "";
  name += c.gating.gamma ? "_gamma" : "";
  name += c.gating.gates ? "_gates" : "";
  name += c.with_states ? "_states" : "";
  return name + "_" + place_name(c.in_place) + "_to_" + place_name(c.out_place) + (c.offsets_64 ? "_i64" : "");
}

std::string case_name(const ::testing::TestParamInfo<Case>& info) { return describe(info.param); }
void PrintTo(const Case& c, std::ostream* os) { *os << describe(c); }

class CpuForward : public ::testing::TestWithParam<Case> {};

TEST_P(CpuForward, MatchesTheFloat64Recurrence) {
  const Case& c = GetParam();
  const Shape& s = c.shape;
  const reference::Inputs in = reference::random_inputs(s, c.dtype, c.gating, c.with_states, 1234);
  reference::Setup setup(s, in, c.dtype, c.in_place, c.offsets_64);
  reference::Tensor out(s, c.out_place, s.dv, c.dtype);
  std::vector<float> final_state(s.states(), std::nanf(""));
  setup.problem.out = out.out();
  setup.problem.final_state = final_state.data();
  cpu::linear_attention(setup.problem, 3);

  std::vector<double> want_out, want_final;
  reference::forward(s, in, want_out, want_final);
  EXPECT_LT(reference::relative_error(out.values(), want_out), reference::tolerance(c.dtype)) << "out";
  EXPECT_LT(reference::relative_error(reference::doubles(final_state), want_final), 1e-5) << "final state";
  EXPECT_TRUE(out.padding_untouched()) << "the kernel wrote outside out's rows";
}

std::vector<Case> cases() {
  const std::vector<Shape> shapes = {
      {3, 8, 12, {17, 17}, false},     // odd T, Dk != Dv
      {1, 4, 4, {1}, false},           // one token
      {2, 16, 40, {40}, false},        // Dk 16, Dv 40
      {2, 6, 7, {5, 0, 17, 1}, true},  // packed, with an empty sequence
      {2, 16, 40, {70, 3}, true},
  };
  const Placement heads_first{false, 0}, tokens_first{true, 0};
  // q, k, v out of one fused projection ([B, T, 3 H D]), out into a padded [B, H, T, D + 5].
  const std::pair<Placement, Placement> placements[] = {
      {heads_first, heads_first}, {tokens_first, tokens_first}, {{true, 24}, {false, 5}}};
  std::vector<Case> out;
  for (const Shape& s : shapes)
    for (int parts = 0; parts < 8; ++parts)
      for (bool states : {false, true})
        for (const auto& [in_place, out_place] : placements)
          out.push_back({s, DType::kFloat32, {bool(parts & 1), bool(parts & 2), bool(parts & 4)}, states, in_place,
                         out_place, false});
  for (DType dtype : {DType::kFloat16, DType::kBFloat16})
    for (const Shape& s : {shapes[0], shapes[4]})
      out.push_back({s, dtype, {true, true, true}, true, tokens_first, tokens_first, false});
  out.push_back({shapes[3], DType::kFloat32, {true, true, true}, true, tokens_first, heads_first, true});
  return out;
}

INSTANTIATE_TEST_SUITE_P(Cases, CpuForward, ::testing::ValuesIn(cases()), case_name);

// Tokens from..to of every sequence of a padded batch, as a batch of their own.
std::vector<double> token_range(const Shape& s, const std::vector<double>& x, int64_t width, int64_t from,
                                int64_t to) {
  std::vector<double> out;
  for (int64_t n = 0; n < s.sequences(); ++n)
    for (int64_t h = 0; h < s.heads; ++h)
      out.insert(out.end(), x.begin() + s.index(n, h, from, width), x.begin() + s.index(n, h, to, width));
  return out;
}

// A gated run split in two, the second half starting from the first's final state, gives the
// whole run's outputs.
TEST(CpuForward, FinalStateContinuesTheSequence) {
  const Shape whole{2, 8, 6, {24, 24}, false}, half{2, 8, 6, {12, 12}, false};
  const Placement place{true, 0};
  const reference::Inputs in = reference::random_inputs(whole, DType::kFloat32, {true, true, true}, false, 7);
  reference::Setup all(whole, in, DType::kFloat32, place);
  reference::Tensor whole_out(whole, place, whole.dv, DType::kFloat32);
  all.problem.out = whole_out.out();
  cpu::linear_attention(all.problem);

  reference::Inputs parts[2] = {in, in};
  for (int part = 0; part < 2; ++part) {
    reference::Inputs& x = parts[part];
    const int64_t from = part * 12, to = from + 12;
    x.q = token_range(whole, in.q, whole.dk, from, to);
    x.k = token_range(whole, in.k, whole.dk, from, to);
    x.v = token_range(whole, in.v, whole.dv, from, to);
    x.d_out = token_range(whole, in.d_out, whole.dv, from, to);
    x.gates = token_range(whole, in.gates, 1, from, to);
  }
  std::vector<float> state(half.states());
  reference::Setup first(half, parts[0], DType::kFloat32, place), second(half, parts[1], DType::kFloat32, place);
  reference::Tensor first_out(half, place, half.dv, DType::kFloat32), second_out(half, place, half.dv, DType::kFloat32);
  first.problem.out = first_out.out();
  first.problem.final_state = state.data();
  cpu::linear_attention(first.problem);
  second.problem.out = second_out.out();
  second.problem.initial_state = state.data();
  cpu::linear_attention(second.problem);

  const std::vector<double> want = token_range(whole, whole_out.values(), whole.dv, 12, 24), got = second_out.values();
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < got.size(); ++i) EXPECT_NEAR(got[i], want[i], 1e-5) << i;
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

TEST(CpuForward, SixteenBitInputsRoundTheOutput) {
  std::vector<Half> q = {from_float<Half>(1.0f)}, v = {from_float<Half>(3.0f)};
  std::vector<Half> out(1);
  Problem p;
  p.batch = p.heads = p.seq_len = p.dk = p.dv = 1;
  p.elements = Elements{DType::kFloat16, DType::kFloat16};
  p.scale = 1.0f / 3.0f;
  p.q.data = q.data(), p.k.data = q.data(), p.v.data = v.data(), p.out.data = out.data();
  cpu::linear_attention(p);
  EXPECT_EQ(to_float(out[0]), 1.0f);
}

}  // namespace
}  // namespace culina
