#include "common/kernel_dispatch.h"

#include <cstdint>

namespace culina {
namespace {

// Rows move in 16-byte words; the fp32 states are written as float pairs.
bool aligned(const void* ptr, uintptr_t bytes) { return reinterpret_cast<uintptr_t>(ptr) % bytes == 0; }

// Every row of a tensor of `element_bytes` elements starts on a 16-byte boundary: its first
// element, and strides of whole 16-byte words.
template <typename Pointer>
bool aligned_rows(const Rows<Pointer>& rows, int64_t element_bytes) {
  const Strides& s = rows.strides;
  return aligned(rows.data, 16) && s.batch * element_bytes % 16 == 0 && s.head * element_bytes % 16 == 0 &&
         s.token * element_bytes % 16 == 0;
}

// The pairs cuda/mma_path.cu launches: 16-bit rows as stored; float32 rows rounded to bf16 as
// they load, in passes without the gates' gradient terms (whose partner rows the kernels read as
// stored; the torch route rounds the backward's rows once rather than at each of its three
// passes' loads, BENCHMARKS.md).
bool tensor_core_elements(Elements e, const Pass& pass) {
  if (e.compute == e.storage) return e.compute != DType::kFloat32;
  return e.storage == DType::kFloat32 && e.compute == DType::kBFloat16 && !pass.gate_dots.data;
}

// Head sizes the tensor-core kernels pad to 64, 128, 192 or 256 features in 16-byte words.
bool tensor_core_head_size(int64_t d) { return d >= 16 && d <= kMaxHeadDim && d % 8 == 0; }

bool takes_every_pass(Elements, const Pass&) { return true; }

}  // namespace

bool tensor_core_takes(Elements elements, const Pass& pass) {
  const int64_t bytes = elements.storage == DType::kFloat32 ? 4 : 2;
  return tensor_core_elements(elements, pass) && tensor_core_head_size(pass.dk) && tensor_core_head_size(pass.dv) &&
         aligned_rows(pass.q, bytes) && aligned_rows(pass.k, bytes) && aligned_rows(pass.v, bytes) &&
         aligned_rows(pass.out, bytes) && aligned(pass.initial_state, 8) && aligned(pass.final_state, 8) &&
         (!pass.gate_dots.data || aligned_rows(pass.partner, bytes));
}

const std::vector<FamilyRule>& kernel_families() {
  static const std::vector<FamilyRule> families = {
      // The tensor-core plan with its state pass and (dk up to 128, and 256) its walk on wgmma: the same passes taken.
      {KernelFamily::kHopper, "hopper", "sm_90a", 0, 90, tensor_core_takes},
      {KernelFamily::kTensorCore, "tensor-core", "sm_80+", 80, 0, tensor_core_takes},
      {KernelFamily::kGeneric, "generic", "any", 0, 0, takes_every_pass},
  };
  return families;
}

std::vector<const FamilyRule*> families_for(DeviceCode code, Elements elements, const Pass& pass,
                                            const std::vector<FamilyRule>& table) {
  std::vector<const FamilyRule*> out;
  for (const FamilyRule& rule : table) {
    const bool runs = rule.only_binary_version ? code.arch_specific_version == rule.only_binary_version
                                               : code.binary_version >= rule.min_binary_version;
    if (runs && rule.takes(elements, pass)) out.push_back(&rule);
  }
  return out;
}

}  // namespace culina
