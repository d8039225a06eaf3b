// The kernel dispatch table (csrc/common/kernel_dispatch.h) for made-up devices and passes: the
// binary version of the code a device runs, dtypes, head sizes, alignment, and a family built for
// one architecture only.
#include <gtest/gtest.h>

#include <cstdint>
#include <string>
#include <vector>

#include "common/kernel_dispatch.h"

namespace culina {
namespace {

alignas(16) char kBuffer[64];

// A pass of 16-byte aligned [B, H, T, D] rows (nothing is read: the table looks at addresses).
Pass pass_of(int64_t dk, int64_t dv, int offset_bytes = 0, int64_t token_stride = -1) {
  const void* data = kBuffer + offset_bytes;
  const Strides qk{4 * 64 * dk, 64 * dk, token_stride < 0 ? dk : token_stride};
  const Strides vo{4 * 64 * dv, 64 * dv, dv};
  Pass pass;
  pass.q = pass.k = InRows{data, qk};
  pass.v = InRows{data, vo};
  pass.out = OutRows{const_cast<void*>(data), vo};
  pass.dk = dk;
  pass.dv = dv;
  return pass;
}

std::vector<std::string> names(const std::vector<const FamilyRule*>& families) {
  std::vector<std::string> out;
  for (const FamilyRule* family : families) out.push_back(family->name);
  return out;
}

using Names = std::vector<std::string>;

// Rows computed as stored.
constexpr Elements kBf16{DType::kBFloat16, DType::kBFloat16};
constexpr Elements kFp16{DType::kFloat16, DType::kFloat16};
constexpr Elements kFp32{DType::kFloat32, DType::kFloat32};
// float32 rows rounded to bf16 as they load (PyTorch's "medium" float32 matmul precision).
constexpr Elements kFp32InBf16{DType::kFloat32, DType::kBFloat16};

TEST(KernelDispatch, TensorCoresWhereTheDeviceRunsSm80CodeOrNewer) {
  for (int binary : {80, 86, 89, 90, 100, 120})
    EXPECT_EQ(names(families_for({binary}, kBf16, pass_of(128, 128))), (Names{"tensor-core", "generic"}))
        << binary;
  // A 7.5 device, or a newer one that runs only sm_75 code of this build, has no tensor-core kernels.
  for (int binary : {0, 70, 75})
    EXPECT_EQ(names(families_for({binary}, kFp16, pass_of(128, 128))), (Names{"generic"})) << binary;
}

TEST(KernelDispatch, Float32RunsTheGenericKernelUnlessComputedInBf16) {
  EXPECT_EQ(names(families_for({90}, kFp32, pass_of(64, 64))), (Names{"generic"}));
  EXPECT_EQ(names(families_for({90}, kFp32InBf16, pass_of(64, 64))), (Names{"tensor-core", "generic"}));
  // The kernels round float32 to bf16 only; fp16 compute of float32 rows has none.
  EXPECT_EQ(names(families_for({90}, Elements{DType::kFloat32, DType::kFloat16}, pass_of(64, 64))), (Names{"generic"}));
  EXPECT_EQ(names(families_for({75}, kFp32InBf16, pass_of(64, 64))), (Names{"generic"}));
  // The gates' gradient terms read 16-bit partner rows only.
  alignas(16) static float dots[1];
  Pass with_dots = pass_of(64, 64);
  with_dots.gate_dots = Rows<float*>{dots, {}};
  with_dots.partner = with_dots.q;
  EXPECT_EQ(names(families_for({90}, kFp32InBf16, with_dots)), (Names{"generic"}));
  EXPECT_EQ(names(families_for({90}, kBf16, with_dots)), (Names{"tensor-core", "generic"}));
}

TEST(KernelDispatch, HeadSizesSixteenToTwoFiftySixByEightTakeTheTensorCores) {
  for (int64_t d = 1; d <= kMaxHeadDim; ++d) {
    const bool tensor = d >= 16 && d % 8 == 0;
    EXPECT_EQ(names(families_for({90}, kBf16, pass_of(d, 64))).front(), tensor ? "tensor-core" : "generic")
        << "dk " << d;
    EXPECT_EQ(names(families_for({90}, kBf16, pass_of(64, d))).front(), tensor ? "tensor-core" : "generic")
        << "dv " << d;
  }
}

TEST(KernelDispatch, RowsOffSixteenByteBoundariesTakeTheGenericKernel) {
  EXPECT_EQ(names(families_for({90}, kBf16, pass_of(128, 128, 2))), (Names{"generic"}));
  EXPECT_EQ(names(families_for({90}, kBf16, pass_of(128, 128, 0, 132))), (Names{"generic"}));
  EXPECT_EQ(names(families_for({90}, kBf16, pass_of(128, 128, 0, 136))), (Names{"tensor-core", "generic"}));
  // float32 rows: a token stride of 132 elements is 528 bytes, whole 16-byte words; 130 is not.
  EXPECT_EQ(names(families_for({90}, kFp32InBf16, pass_of(128, 128, 0, 132))), (Names{"tensor-core", "generic"}));
  EXPECT_EQ(names(families_for({90}, kFp32InBf16, pass_of(128, 128, 0, 130))), (Names{"generic"}));
}

TEST(KernelDispatch, AFamilyForOneArchitectureRunsOnlyWhereThatCodeRuns) {
  const std::vector<FamilyRule> table = {
      {KernelFamily::kTensorCore, "sm_100a family", "sm_100a", 0, 100, tensor_core_takes},
      kernel_families()[1],
      kernel_families().back(),
  };
  EXPECT_EQ(names(families_for({100, 100}, kBf16, pass_of(128, 128), table)),
            (Names{"sm_100a family", "tensor-core", "generic"}));
  // Portable code for 10.0 alone (no sm_100a in the build, or switched off), or another target's.
  for (DeviceCode code : {DeviceCode{100, 0}, DeviceCode{90, 90}, DeviceCode{120, 0}})
    EXPECT_EQ(names(families_for(code, kBf16, pass_of(128, 128), table)), (Names{"tensor-core", "generic"}))
        << code.binary_version << " " << code.arch_specific_version;
}

TEST(KernelDispatch, HopperKernelsWhereTheDeviceRunsSm90aCode) {
  EXPECT_EQ(names(families_for({90, 90}, kBf16, pass_of(128, 128))), (Names{"hopper", "tensor-core", "generic"}));
  EXPECT_EQ(names(families_for({90, 90}, kFp16, pass_of(96, 64))), (Names{"hopper", "tensor-core", "generic"}));
  // sm_90 code without sm_90a (a build without 9.0a, or the arch-specific kernels switched off),
  // and every other device, run the portable families.
  for (DeviceCode code : {DeviceCode{90, 0}, DeviceCode{80, 0}, DeviceCode{100, 0}, DeviceCode{120, 0}})
    EXPECT_EQ(names(families_for(code, kBf16, pass_of(128, 128))), (Names{"tensor-core", "generic"}))
        << code.binary_version;
  // What the tensor-core family does not take, the Hopper family does not either.
  EXPECT_EQ(names(families_for({90, 90}, kFp32, pass_of(128, 128))), (Names{"generic"}));
  EXPECT_EQ(names(families_for({90, 90}, kBf16, pass_of(100, 128))), (Names{"generic"}));
}

}  // namespace
}  // namespace culina
