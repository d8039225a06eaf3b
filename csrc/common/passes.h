// The recurrent passes both back ends run: the forward is one, the backward three.
//
// With a_t the forget gate of token t (common/problem.h), a forward pass (adjoint = false)
// over tokens t = 0..T-1 of every sequence and head runs
//   S_t = a_t S_(t-1) + k_t^T v_t,  S_(-1) = S0,  out_t = scale q_t S_t,  final = S_(T-1).
// An adjoint pass (adjoint = true) visits the tokens in reverse and carries the gradient of the
// state instead, as H = a A so that nothing is divided by a gate: with H_in = S0,
//   A_t = H_in + scale k_t^T v_t,  out_t = q_t A_t,  H_out = a_t A_t,  final = the last H_out.
// Both, chunked (n tokens per chunk, i and j its tokens in the pass's order, log2 gates l_i):
// with c_i the chunk's cumulative log2 gate up to token i, inclusive for a forward pass and
// exclusive for an adjoint one, and L the chunk's total,
//   out_i = scale sum_(j<=i) 2^(c_i - c_j) (q_i.k_j) v_j + w 2^(c_i) q_i H_c,
//   H_(c+1) = 2^L H_c + u sum_j 2^(L - c_j) k_j^T v_j,
// with w = scale, u = 1 for a forward pass and w = 1, u = scale for an adjoint one. A constant
// gate g has c_i = (i + 1) log2 g forward and i log2 g adjoint.
//
// With do the gradient of out and dS_T that of the final state, the backward is
//   dq = forward (q' = do, k' = v, v' = k, S0' = S0^T)
//   dk = adjoint (q' = v, k' = do, v' = q, S0' = dS_T^T)
//   dv = adjoint (q' = k, k' = q, v' = do, S0' = dS_T), whose final state is dS0.
// The dk pass's state is the dv pass's transposed (k' and v' swapped, S0' transposed), token by
// token, so a back end may reuse the dv pass's states in the dk pass. Every pass has the problem's
// gates, token by token. Where the gates' gradient is wanted
// (Gradients::gate_dots), the dq pass adds q_t.dq_t and the dk pass -k_t.dk_t to token t's
// element, each from its output's fp32 values before they are rounded.
#pragma once

#include <array>

#include "common/problem.h"

namespace culina {

struct Pass {
  InRows q;    // [.., dk] rows
  InRows k;    // [.., dk] rows
  InRows v;    // [.., dv] rows
  OutRows out; // [.., dv] rows
  int64_t dk = 0, dv = 0;
  // S0 per (sequence, head): [dk][dv], or [dv][dk] when initial_transposed; may be null.
  const float* initial_state = nullptr;
  bool initial_transposed = false;
  float* final_state = nullptr;  // [dk][dv] per (sequence, head); may be null
  bool adjoint = false;
  // Where set (gate_dots.data): dot_sign times the dot of each output row with the same
  // token's row of `partner` ([.., dv] rows), added to the token's element of gate_dots.
  Rows<float*> gate_dots;
  InRows partner;
  float dot_sign = 0.0f;
};

inline Pass forward_pass(const Problem& p) {
  return Pass{p.q, p.k, p.v, p.out, p.dk, p.dv, p.initial_state, false, p.final_state, false};
}

inline std::array<Pass, 3> backward_passes(const Problem& p, const Gradients& g) {
  return {Pass{g.d_out, p.v, p.k, g.dq, p.dv, p.dk, p.initial_state, true, nullptr, false, g.gate_dots, p.q, 1.0f},
          Pass{p.v, g.d_out, p.q, g.dk, p.dv, p.dk, g.d_final_state, true, nullptr, true, g.gate_dots, p.k, -1.0f},
          Pass{p.k, p.q, g.d_out, g.dv, p.dk, p.dv, g.d_final_state, false, g.d_initial_state, true}};
}

}  // namespace culina
