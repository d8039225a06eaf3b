// The CPU backward, gate_dots included, against float64 sums (float64_reference.h), which a
// finite-difference check of the float64 forward validates in turn; gated, in both layouts and
// strided views, padded and packed.
#include <gtest/gtest.h>

#include <cmath>
#include <ostream>
#include <stdexcept>
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
  Placement in_place, out_place;  // q, k, v, d_out and the gates; dq, dk, dv
  DType dtype = DType::kFloat32;
  Gating gating{};
  bool with_states = false, offsets_64 = false;
};

std::string describe(const Case& c) {
  const char* dtypes[] = {"fp32", "fp16", "bf16"};
  std::string name = std::string(dtypes[int(c.dtype)]) + "_H" + std::to_string(c.shape.heads) + "_Dk" +
                     std::to_string(c.shape.dk) + "_Dv" + std::to_string(c.shape.dv) +
                     (c.shape.packed ? "_packed" : "_padded");
  for (int64_t n : c.shape.lengths) name += "_" + std::to_string(n);
  name += c.in_place.tokens_first ? "_BTHD" : "_BHTD";
  name += c.in_place.pad || c.out_place.pad ? "_views" : "";
  name += c.gating.decay ? "_decay" : "";
  name += c.gating.gamma ? "_gamma" : "";
  name += c.gating.gates ? "_gates" : "";
  return name + (c.with_states ? "_states" : "") + (c.offsets_64 ? "_i64" : "");
}

std::string case_name(const ::testing::TestParamInfo<Case>& info) { return describe(info.param); }
void PrintTo(const Case& c, std::ostream* os) { *os << describe(c); }

class CpuBackward : public ::testing::TestWithParam<Case> {};

constexpr double kGateDotsTolerance = 1e-5;

TEST_P(CpuBackward, MatchesFloat64Sums) {
  const Case& c = GetParam();
  const Shape& s = c.shape;
  const reference::Inputs in = reference::random_inputs(s, c.dtype, c.gating, c.with_states, 42);
  reference::Setup setup(s, in, c.dtype, c.in_place, c.offsets_64);
  reference::Tensor dq(s, c.out_place, s.dk, c.dtype), dk(s, c.out_place, s.dk, c.dtype),
      dv(s, c.out_place, s.dv, c.dtype);
  std::vector<float> ds0(s.states(), std::nanf(""));
  reference::Tensor gate_dots(s, c.out_place, 1, DType::kFloat32, std::vector<double>(s.elements(1)));  // zeroed
  Gradients g;
  g.d_out = setup.d_out.in();
  g.d_final_state = c.with_states ? setup.d_final.data() : nullptr;
  g.dq = dq.out(), g.dk = dk.out(), g.dv = dv.out(), g.d_initial_state = ds0.data();
  g.gate_dots = gate_dots.out_floats();
  cpu::linear_attention_backward(setup.problem, g, 3);

  const reference::Grads want = reference::backward(s, in);
  EXPECT_LT(reference::relative_error(dq.values(), want.dq), reference::tolerance(c.dtype)) << "dq";
  EXPECT_LT(reference::relative_error(dk.values(), want.dk), reference::tolerance(c.dtype)) << "dk";
  EXPECT_LT(reference::relative_error(dv.values(), want.dv), reference::tolerance(c.dtype)) << "dv";
  EXPECT_LT(reference::relative_error(reference::doubles(ds0), want.ds0), 1e-5) << "d initial state";
  // From dq's and dk's fp32 values: as close in 16 bits as in fp32, where the rounded dq and dk
  // miss by the dtype's tolerance.
  EXPECT_LT(reference::relative_error(gate_dots.values(), want.gate_dots), kGateDotsTolerance) << "gate dots";
  EXPECT_TRUE(dq.padding_untouched() && dk.padding_untouched() && dv.padding_untouched() &&
              gate_dots.padding_untouched())
      << "the kernel wrote outside a gradient's rows";
}

std::vector<Case> cases() {
  const Placement heads_first{false, 0}, tokens_first{true, 0}, fused_projection{true, 40}, wide{false, 3};
  const std::vector<Case> layouts = {
      {{3, 8, 12, {17, 17}, false}, heads_first, heads_first},     // odd T, Dk != Dv
      {{1, 1, 1, {5}, false}, tokens_first, tokens_first},         // D = 1
      {{2, 16, 40, {33}, false}, fused_projection, wide},          // Dk 16, Dv 40, views
      {{1, 256, 256, {3}, false}, heads_first, heads_first},       // D = 256
      {{2, 3, 256, {4, 4}, false}, tokens_first, heads_first},
      {{2, 6, 7, {5, 0, 17, 1}, true}, tokens_first, tokens_first},  // packed, with an empty sequence
      {{2, 16, 40, {70, 3}, true}, fused_projection, wide},
      {{1, 64, 32, {70, 3}, true}, heads_first, heads_first},
  };
  const Gating gatings[] = {{false, false, false}, {true, false, false}, {false, false, true}, {true, true, true}};
  std::vector<Case> out;
  for (Case c : layouts)
    for (DType dtype : {DType::kFloat32, DType::kFloat16, DType::kBFloat16})
      for (const Gating& gating : gatings)
        for (bool states : {false, true}) {
          c.dtype = dtype, c.gating = gating, c.with_states = states, c.offsets_64 = false;
          out.push_back(c);
        }
  Case gamma_only = layouts[6];
  gamma_only.dtype = DType::kFloat32, gamma_only.gating = {false, true, false}, gamma_only.with_states = true;
  out.push_back(gamma_only);
  Case offsets_64 = layouts[5];
  offsets_64.dtype = DType::kBFloat16, offsets_64.gating = {true, true, true}, offsets_64.with_states = true;
  offsets_64.offsets_64 = true;
  out.push_back(offsets_64);
  return out;
}

INSTANTIATE_TEST_SUITE_P(Shapes, CpuBackward, ::testing::ValuesIn(cases()), case_name);

// The explicit sums are the gradients of the float64 forward: central differences of the loss
// on tiny gated shapes, padded and packed.
TEST(ReferenceGradients, MatchFiniteDifferences) {
  for (const Shape& s : {Shape{2, 3, 2, {4, 4}, false}, Shape{1, 2, 3, {3, 0, 5}, true}}) {
    reference::Inputs in = reference::random_inputs(s, DType::kFloat32, {true, true, true}, true, 9);
    const reference::Grads want = reference::backward(s, in);
    const double h = 1e-6;
    auto check = [&](std::vector<double>& x, const std::vector<double>& grad, const char* name) {
      for (size_t i = 0; i < x.size(); ++i) {
        const double saved = x[i];
        x[i] = saved + h;
        const double up = reference::loss(s, in);
        x[i] = saved - h;
        const double down = reference::loss(s, in);
        x[i] = saved;
        EXPECT_NEAR((up - down) / (2 * h), grad[i], 1e-6) << name << "[" << i << "]";
      }
    };
    check(in.q, want.dq, "dq");
    check(in.k, want.dk, "dk");
    check(in.v, want.dv, "dv");
    check(in.s0, want.ds0, "dS0");
    check(in.gates, reference::gates_gradient(s, in, want.gate_dots), "dg");
  }
}

// The kernel's backward straight against finite differences of its own fp32 forward, gated: its
// gates' gradient too (Gradients::d_gates, d_gamma), with the final state's term.
TEST(CpuBackward, MatchesFiniteDifferencesOfTheKernelForward) {
  const Shape s{2, 2, 3, {6}, false};
  const Placement place{true, 0};
  const reference::Inputs in = reference::random_inputs(s, DType::kFloat32, {true, true, true}, true, 5);
  auto kernel_forward = [&](const reference::Inputs& x, std::vector<float>& final_state) {
    reference::Setup run(s, x, DType::kFloat32, place);
    reference::Tensor out(s, place, s.dv, DType::kFloat32);
    final_state.assign(s.states(), 0.0f);
    run.problem.out = out.out(), run.problem.final_state = final_state.data();
    cpu::linear_attention(run.problem, 1);
    return out.values();
  };
  auto kernel_loss = [&](const reference::Inputs& x) {
    std::vector<float> final_state;
    const std::vector<double> o = kernel_forward(x, final_state);
    double sum = 0.0;
    for (size_t i = 0; i < o.size(); ++i) sum += o[i] * x.d_out[i];
    for (size_t i = 0; i < final_state.size(); ++i) sum += final_state[i] * x.d_final[i];
    return sum;
  };
  std::vector<float> final_state;
  kernel_forward(in, final_state);
  std::vector<double> gate_ends(s.sequences() * s.heads);  // <dS_T, S_T> per (sequence, head)
  for (size_t i = 0; i < final_state.size(); ++i) gate_ends[i / (s.dk * s.dv)] += final_state[i] * in.d_final[i];
  reference::Setup setup(s, in, DType::kFloat32, place);
  reference::Tensor dq(s, place, s.dk, DType::kFloat32), dk(s, place, s.dk, DType::kFloat32),
      dv(s, place, s.dv, DType::kFloat32);
  std::vector<float> ds0(s.states());
  reference::Tensor gate_dots(s, place, 1, DType::kFloat32, std::vector<double>(s.elements(1)));
  reference::Tensor d_gates(s, place, 1, DType::kFloat32);
  std::vector<double> d_gamma(s.heads, -1.0);  // overwritten
  Gradients g{setup.d_out.in(), setup.d_final.data(), dq.out(), dk.out(), dv.out(), ds0.data(),
              gate_dots.out_floats(), d_gates.out_floats(), d_gamma.data(), gate_ends.data()};
  cpu::linear_attention_backward(setup.problem, g, 1);
  const double h = 1e-2;  // fp32 forward: a wide step; the loss is quadratic in each input
  auto check = [&](std::vector<double> reference::Inputs::*member, const std::vector<double>& grad, const char* name) {
    for (size_t i = 0; i < grad.size(); ++i) {
      reference::Inputs up = in, down = in;
      (up.*member)[i] += h;
      (down.*member)[i] -= h;
      EXPECT_NEAR((kernel_loss(up) - kernel_loss(down)) / (2 * h), grad[i], 2e-3) << name << "[" << i << "]";
    }
  };
  check(&reference::Inputs::q, dq.values(), "dq");
  check(&reference::Inputs::k, dk.values(), "dk");
  check(&reference::Inputs::v, dv.values(), "dv");
  check(&reference::Inputs::s0, reference::doubles(ds0), "dS0");
  check(&reference::Inputs::gates, reference::gates_gradient(s, in, gate_dots.values()), "dg");
  check(&reference::Inputs::gates, d_gates.values(), "the backward's dg");
  check(&reference::Inputs::gamma, d_gamma, "the backward's dgamma");
}

TEST(CpuForward, RefusesCuSeqlensThatDoNotCoverTheRows) {
  const Shape s{1, 2, 2, {3, 3}, true};
  const reference::Inputs in = reference::random_inputs(s, DType::kFloat32, {false, false, false}, false, 1);
  reference::Setup setup(s, in, DType::kFloat32, {false, 0});
  reference::Tensor out(s, {false, 0}, s.dv, DType::kFloat32);
  setup.problem.out = out.out();
  std::vector<int32_t>& offsets = setup.offsets32;  // the cu_seqlens the Problem points to
  offsets[1] = 4, offsets[2] = 3;
  EXPECT_THROW(cpu::linear_attention(setup.problem, 1), std::invalid_argument);
  offsets[1] = 3, offsets[2] = 5;
  EXPECT_THROW(cpu::linear_attention(setup.problem, 1), std::invalid_argument);
  offsets[2] = 6;
  EXPECT_NO_THROW(cpu::linear_attention(setup.problem, 1));
}

}  // namespace
}  // namespace culina
