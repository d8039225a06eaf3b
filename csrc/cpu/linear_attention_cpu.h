// CPU reference of causal linear attention with per-head decay (the recurrent form).
#pragma once

#include "common/problem.h"

namespace culina::cpu {

// Runs the recurrence S_t = g_h S_(t-1) + k_t^T v_t, o_t = scale q_t S_t for every (batch,
// head), spreading the B*H independent sequences over `threads` workers (0: one per core).
void linear_attention(const Problem& problem, int threads = 0);

}  // namespace culina::cpu
