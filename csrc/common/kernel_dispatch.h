// The one table from what a pass needs to the kernel families that can run it, best first: the
// code the device runs (the binary version of this build's code it executes: 90 for sm_90 SASS,
// 80 where only sm_80 code or PTX serves), the element types, the head sizes and the rows'
// alignment.
// Host code only, so that tests/kernels checks the choice for made-up devices without a GPU.
// cuda/launch.cu launches the first family whose plan also fits the device (shared memory, the
// caller's workspace); the generic family takes every pass. A family built for one architecture
// alone (sm_90a code runs on compute capability 9.0 exactly, binary version 90) is one more row
// with only_binary_version set, and its kernels one more folder beside cuda/ (cuda/hopper/).
#pragma once

#include <vector>

#include "common/passes.h"

namespace culina {

enum class KernelFamily {
  kTensorCore,  // cuda/mma_path.cu: mma.sync tensor cores, fp16/bf16 (float32 rows rounded), head sizes 16..256 by 8
  kGeneric,     // cuda/chunked_generic.cu: CUDA cores, fp32 math, every dtype and head size
  kHopper,      // cuda/hopper/: the tensor-core plan with its state pass and walk on wgmma (sm_90a code)
};

// The code a device runs from this build: the binary version of the portable code it executes
// (90 for sm_90 SASS, 80 where only sm_80 code or PTX serves, 0: none), and that of the
// arch-specific code it executes (90 where this build holds sm_90a code and the device is
// compute capability 9.0; 0: none, or switched off).
struct DeviceCode {
  int binary_version = 0;
  int arch_specific_version = 0;
};

struct FamilyRule {
  KernelFamily family;
  const char* name;         // what kernel_path and `culina info` call it
  const char* code;         // the code it needs, in words ("sm_80+")
  int min_binary_version;   // the device runs this build's portable code for this target or a newer one
  int only_binary_version;  // 0, or the one arch-specific target its code is built for, which the device must run
  bool (*takes)(Elements elements, const Pass& pass);
};

// Every family, best first.
const std::vector<FamilyRule>& kernel_families();

// The families of `table` (kernel_families() unless a test gives its own) that take `pass` on a
// device that runs `code`, best first; with kernel_families() the generic family, which takes
// every pass, comes last.
std::vector<const FamilyRule*> families_for(DeviceCode code, Elements elements, const Pass& pass,
                                            const std::vector<FamilyRule>& table = kernel_families());

// The tensor-core family's rule, for tests of it: fp16 or bf16 rows computed as stored, or float32
// rows computed in bf16 (passes without gate dots); head sizes 16..256 by 8; rows on 16-byte
// boundaries.
bool tensor_core_takes(Elements elements, const Pass& pass);

}  // namespace culina
