#include "common/kernel_dispatch.h"

#include <cstdint>

namespace culina {
namespace {

// Rows move in 16-byte words; the fp32 states are written as float pairs.
bool aligned(const void* ptr, uintptr_t bytes) { return reinterpret_cast<uintptr_t>(ptr) % bytes == 0; }

// Every row of a tensor starts on a 16-byte boundary: its first element, and strides of whole
// 16-byte words (8 16-bit elements).
template <typename Pointer>
bool aligned_rows(const Rows<Pointer>& rows) {
  const Strides& s = rows.strides;
  return aligned(rows.data, 16) && s.batch % 8 == 0 && s.head % 8 == 0 && s.token % 8 == 0;
}

// Head sizes the tensor-core kernels pad to 64, 128, 192 or 256 features in 16-byte words.
bool tensor_core_head_size(int64_t d) { return d >= 16 && d <= kMaxHeadDim && d % 8 == 0; }

bool takes_every_pass(DType, const Pass&) { return true; }

}  // namespace

bool tensor_core_takes(DType dtype, const Pass& pass) {
  return dtype != DType::kFloat32 && tensor_core_head_size(pass.dk) && tensor_core_head_size(pass.dv) &&
         aligned_rows(pass.q) && aligned_rows(pass.k) && aligned_rows(pass.v) && aligned_rows(pass.out) &&
         aligned(pass.initial_state, 8) && aligned(pass.final_state, 8) &&
         (!pass.gate_dots.data || aligned_rows(pass.partner));
}

const std::vector<FamilyRule>& kernel_families() {
  static const std::vector<FamilyRule> families = {
      {KernelFamily::kTensorCore, "tensor-core", "sm_80+", 80, 0, tensor_core_takes},
      {KernelFamily::kGeneric, "generic", "any", 0, 0, takes_every_pass},
  };
  return families;
}

std::vector<const FamilyRule*> families_for(int binary_version, DType dtype, const Pass& pass,
                                            const std::vector<FamilyRule>& table) {
  std::vector<const FamilyRule*> out;
  for (const FamilyRule& rule : table) {
    const bool code = rule.only_binary_version ? binary_version == rule.only_binary_version
                                               : binary_version >= rule.min_binary_version;
    if (code && rule.takes(dtype, pass)) out.push_back(&rule);
  }
  return out;
}

}  // namespace culina
