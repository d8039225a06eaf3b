#include <gtest/gtest.h>

#include "common/compute_capability.h"
#include "common/cuda_version.h"

namespace culina {
namespace {

TEST(CudaVersion, ParsesMajorMinorAndPatch) {
    EXPECT_EQ(parse_cuda_version("12.9"), (CudaVersion{12, 9}));
    EXPECT_EQ(parse_cuda_version("13"), (CudaVersion{13, 0}));
    EXPECT_EQ(parse_cuda_version(" 13.0.1\n"), (CudaVersion{13, 0}));
}

TEST(CudaVersion, RejectsMalformed) {
    for (const char* bad : {"", "x", "12.", ".9", "12.9.1.1", "-12.9", "0.9", "12,9", "12.9a"}) {
        EXPECT_FALSE(parse_cuda_version(bad).has_value()) << bad;
    }
}

TEST(CudaVersion, DecodesDriverInteger) {
    EXPECT_EQ(CudaVersion::from_driver_int(13000), (CudaVersion{13, 0}));
    EXPECT_EQ(CudaVersion::from_driver_int(12090), (CudaVersion{12, 9}));
    EXPECT_EQ(CudaVersion::from_driver_int(12040), (CudaVersion{12, 4}));
}

TEST(CudaVersion, OrdersByMajorThenMinor) {
    EXPECT_LT((CudaVersion{12, 9}), (CudaVersion{13, 0}));
    EXPECT_LT((CudaVersion{12, 4}), (CudaVersion{12, 10}));
    EXPECT_GE((CudaVersion{13, 0}), (CudaVersion{13, 0}));
}

TEST(ComputeCapability, ParsesDottedAndCompact) {
    EXPECT_EQ(parse_compute_capability("9.0"), (ComputeCapability{9, 0}));
    EXPECT_EQ(parse_compute_capability("86"), (ComputeCapability{8, 6}));
    EXPECT_EQ(parse_compute_capability("120"), (ComputeCapability{12, 0}));
    EXPECT_EQ(parse_compute_capability("12.1"), (ComputeCapability{12, 1}));
}

TEST(ComputeCapability, RejectsMalformed) {
    for (const char* bad : {"", "9", "9.", "9.10", "0.5", "sm_90", "1234", "9.0.0", "a.b"}) {
        EXPECT_FALSE(parse_compute_capability(bad).has_value()) << bad;
    }
}

}  // namespace
}  // namespace culina
