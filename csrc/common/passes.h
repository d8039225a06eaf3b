// The recurrent passes both back ends run: the forward is one, the backward three.
//
// A forward pass (adjoint = false) over rows t = 0..T-1 of every sequence and head:
//   S_t = g S_(t-1) + k_t^T v_t,  S_(-1) = S0,  out_t = scale q_t S_t,  final = S_(T-1).
// An adjoint pass (adjoint = true) visits the rows in reverse, t' = T-1-t, and carries the
// gradient of the state instead:
//   A_t' = g A_(t'-1) + scale k_t'^T v_t',  A_(-1) = S0 / g,  out_t' = q_t' A_t',  final = g A_(T-1).
// Kernels carry H = g A, so that nothing is divided by g: H_(-1) = S0, out_t' = q (H_(t'-1)
// + scale k^T v) and final = H_(T-1). Chunked, with n rows per chunk and row i inside it:
//   out_i = scale sum_(j<=i) g^(i-j) (q_i.k_j) v_j + w g^i q_i H_c,
//   H_(c+1) = g^n H_c + u sum_j g^(n-1-j) k_j^T v_j,
// with w = scale g, u = 1 for a forward pass and w = 1, u = scale g for an adjoint one.
//
// With do the gradient of out and dS_T that of the final state, the backward is
//   dq = forward (q' = do, k' = v, v' = k, S0' = S0^T)
//   dk = adjoint (q' = v, k' = do, v' = q, S0' = dS_T^T)
//   dv = adjoint (q' = k, k' = q, v' = do, S0' = dS_T), whose final state is dS0.
#pragma once

#include <array>

#include "common/problem.h"

namespace culina {

struct Pass {
  const void* q = nullptr;  // [.., dk] rows
  const void* k = nullptr;  // [.., dk] rows
  const void* v = nullptr;  // [.., dv] rows
  void* out = nullptr;      // [.., dv] rows
  int64_t dk = 0, dv = 0;
  // S0 per (sequence, head): [dk][dv], or [dv][dk] when initial_transposed; may be null.
  const float* initial_state = nullptr;
  bool initial_transposed = false;
  float* final_state = nullptr;  // [dk][dv] per (sequence, head); may be null
  bool adjoint = false;
};

inline Pass forward_pass(const Problem& p) {
  return Pass{p.q, p.k, p.v, p.out, p.dk, p.dv, p.initial_state, false, p.final_state, false};
}

inline std::array<Pass, 3> backward_passes(const Problem& p, const Gradients& g) {
  return {Pass{g.d_out, p.v, p.k, g.dq, p.dv, p.dk, p.initial_state, true, nullptr, false},
          Pass{p.v, g.d_out, p.q, g.dk, p.dv, p.dk, g.d_final_state, true, nullptr, true},
          Pass{p.k, p.q, g.d_out, g.dv, p.dk, p.dv, g.d_final_state, false, g.d_initial_state, true}};
}

}  // namespace culina
