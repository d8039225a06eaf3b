// CPU reference of causal linear attention with forget gates (the recurrent form).
#pragma once

#include "common/problem.h"

namespace culina::cpu {

// Runs the recurrence S_t = a_t S_(t-1) + k_t^T v_t, o_t = scale q_t S_t for every (sequence,
// head), with a_t the token's forget gate (common/problem.h; gamma and gates in host memory
// here), spreading the independent sequences over `threads` workers (0: one per core).
void linear_attention(const Problem& problem, int threads = 0);

// The gradients of linear_attention's out (and final state) with respect to q, k, v and the
// initial state, and the gates' terms where gradients.gate_dots is set (common/passes.h gives
// the three passes), with the same workers; then the gates' gradient where asked for
// (gradients.d_gates, d_gamma).
void linear_attention_backward(const Problem& problem, const Gradients& gradients, int threads = 0);

}  // namespace culina::cpu
