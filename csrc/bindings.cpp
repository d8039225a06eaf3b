// The culina._C module: thin pybind11 glue. Python (culina/_api.py) validates arguments and
// hands over raw addresses; this file only unpacks them and calls a back end.
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "common/dlpack.h"
#include "common/problem.h"
#include "cpu/linear_attention_cpu.h"
#include "cuda/api.h"
#include "nvml/nvml_query.h"

namespace py = pybind11;
using culina::DType;
using culina::Problem;

namespace {

// (batch, head, token) element strides of one tensor, as Python passes them.
using StrideTriple = std::array<int64_t, 3>;

culina::Strides strides_of(const StrideTriple& s) { return culina::Strides{s[0], s[1], s[2]}; }

// The order of an entry point's strides list: one (batch, head, token) triple per tensor.
struct StridesOrder {
  size_t count;
  const char* names;
};
constexpr StridesOrder kForwardStrides{5, "q, k, v, out, gates"};
constexpr StridesOrder kBackwardStrides{8, "q, k, v, do, dq, dk, dv, gates"};

void check_strides(const std::vector<StrideTriple>& strides, const StridesOrder& order) {
  if (strides.size() != order.count)
    throw std::invalid_argument("strides: expected " + std::to_string(order.count) +
                                " (batch, head, token) triples, for " + order.names + "; got " +
                                std::to_string(strides.size()));
}

// Stands in for gamma where only gated() matters: the workspace size depends on the shape and
// on whether the problem is gated, never on the gate values.
const float kGatedPlaceholder = 0.0f;

Problem make_problem(std::vector<int64_t> dims, int dtype, float scale, std::optional<std::vector<float>> decay,
                     uintptr_t cu_seqlens = 0, int64_t num_seqs = 0, int seqlen_bits = 0) {
  if (dims.size() != 5) throw std::invalid_argument("dims must be (B, H, T, Dk, Dv)");
  if (dtype < 0 || dtype > 2) throw std::invalid_argument("dtype code must be 0, 1 or 2");
  Problem p;
  p.batch = dims[0];
  p.heads = dims[1];
  p.seq_len = dims[2];
  p.dk = dims[3];
  p.dv = dims[4];
  p.dtype = DType(dtype);
  p.scale = scale;
  if (decay) {
    if (int64_t(decay->size()) != p.heads) throw std::invalid_argument("decay needs one value per head");
    p.decay = std::move(*decay);
  }
  if (num_seqs < 0) throw std::invalid_argument("num_seqs is " + std::to_string(num_seqs) + "; pass 0 or more");
  if (num_seqs > 0 && p.batch != 1)
    throw std::invalid_argument("packed sequences need dims (1, H, total_T, Dk, Dv), but B is " +
                                std::to_string(p.batch));
  if (cu_seqlens && (num_seqs == 0 || (seqlen_bits != 32 && seqlen_bits != 64)))
    throw std::invalid_argument("cu_seqlens needs num_seqs >= 1 and seqlen_bits 32 or 64, got num_seqs " +
                                std::to_string(num_seqs) + " and seqlen_bits " + std::to_string(seqlen_bits));
  p.cu_seqlens = reinterpret_cast<const void*>(cu_seqlens);
  p.num_seqs = num_seqs;
  p.seqlen_bits = seqlen_bits;
  return p;
}

// The shape-only problem the size and path queries take.
Problem shape_problem(std::vector<int64_t> dims, int dtype, int64_t num_seqs, bool gated) {
  Problem p = make_problem(std::move(dims), dtype, 1.0f, {}, 0, num_seqs);
  if (gated) p.gamma = &kGatedPlaceholder;
  return p;
}

// A problem to run: the inputs' addresses and strides (q, k, v first in `strides`; the gates'
// triple last, read only when gates is set), the gates, and packed sequences' offsets.
Problem make_runnable_problem(uintptr_t q, uintptr_t k, uintptr_t v, uintptr_t initial_state,
                              std::vector<int64_t> dims, int dtype, float scale,
                              std::optional<std::vector<float>> decay, uintptr_t gamma, uintptr_t gates,
                              const std::vector<StrideTriple>& strides, uintptr_t cu_seqlens, int64_t num_seqs,
                              int seqlen_bits) {
  if (num_seqs > 0 && !cu_seqlens)
    throw std::invalid_argument("num_seqs is " + std::to_string(num_seqs) + " but cu_seqlens is absent; pass both");
  if (!q || !k || !v) throw std::invalid_argument("q, k and v need addresses (0 given)");
  Problem p = make_problem(std::move(dims), dtype, scale, std::move(decay), cu_seqlens, num_seqs, seqlen_bits);
  p.q = {reinterpret_cast<const void*>(q), strides_of(strides[0])};
  p.k = {reinterpret_cast<const void*>(k), strides_of(strides[1])};
  p.v = {reinterpret_cast<const void*>(v), strides_of(strides[2])};
  p.initial_state = reinterpret_cast<const float*>(initial_state);
  p.gamma = reinterpret_cast<const float*>(gamma);
  if (gates) p.gates = {reinterpret_cast<const float*>(gates), strides_of(strides.back())};
  return p;
}

Problem make_forward_problem(uintptr_t q, uintptr_t k, uintptr_t v, uintptr_t out, uintptr_t initial_state,
                             uintptr_t final_state, std::vector<int64_t> dims, int dtype, float scale,
                             std::optional<std::vector<float>> decay, uintptr_t gamma, uintptr_t gates,
                             const std::vector<StrideTriple>& strides, uintptr_t cu_seqlens, int64_t num_seqs,
                             int seqlen_bits) {
  check_strides(strides, kForwardStrides);
  if (!out) throw std::invalid_argument("the forward needs out (0 given)");
  Problem p = make_runnable_problem(q, k, v, initial_state, std::move(dims), dtype, scale, std::move(decay), gamma,
                                    gates, strides, cu_seqlens, num_seqs, seqlen_bits);
  p.out = {reinterpret_cast<void*>(out), strides_of(strides[3])};
  p.final_state = reinterpret_cast<float*>(final_state);
  return p;
}

// gate_dots (0: not wanted) has its own strides, after the list's (common/problem.h: Gradients).
culina::Gradients make_gradients(uintptr_t d_out, uintptr_t d_final_state, uintptr_t dq, uintptr_t dk,
                                 uintptr_t dv, uintptr_t d_initial_state, const std::vector<StrideTriple>& strides,
                                 uintptr_t gate_dots, const StrideTriple& gate_dots_strides) {
  if (!d_out || !dq || !dk || !dv) throw std::invalid_argument("the backward needs do, dq, dk and dv (0 given)");
  culina::Gradients g;
  if (gate_dots) g.gate_dots = {reinterpret_cast<float*>(gate_dots), strides_of(gate_dots_strides)};
  g.d_out = {reinterpret_cast<const void*>(d_out), strides_of(strides[3])};
  g.d_final_state = reinterpret_cast<const float*>(d_final_state);
  g.dq = {reinterpret_cast<void*>(dq), strides_of(strides[4])};
  g.dk = {reinterpret_cast<void*>(dk), strides_of(strides[5])};
  g.dv = {reinterpret_cast<void*>(dv), strides_of(strides[6])};
  g.d_initial_state = reinterpret_cast<float*>(d_initial_state);
  return g;
}

// Shape, strides, dtype, device and address of a "dltensor" capsule, without consuming it:
// the producer's capsule destructor still owns the memory.
py::dict dlpack_info(py::capsule capsule) {
  if (std::string(capsule.name() ? capsule.name() : "") != "dltensor")
    throw std::invalid_argument("expected an unconsumed DLPack capsule named 'dltensor'");
  const DLTensor& t = static_cast<DLManagedTensor*>(capsule.get_pointer())->dl_tensor;
  py::list shape, strides;
  for (int i = 0; i < t.ndim; ++i) shape.append(t.shape[i]);
  if (t.strides)
    for (int i = 0; i < t.ndim; ++i) strides.append(t.strides[i]);
  py::dict info;
  info["shape"] = py::tuple(shape);
  info["strides"] = t.strides ? py::object(py::tuple(strides)) : py::object(py::none());
  info["dtype_code"] = int(t.dtype.code);
  info["dtype_bits"] = int(t.dtype.bits);
  info["dtype_lanes"] = int(t.dtype.lanes);
  info["device_type"] = int(t.device.device_type);
  info["device_id"] = int(t.device.device_id);
  info["address"] = reinterpret_cast<uintptr_t>(t.data) + t.byte_offset;
  return info;
}

py::dict device_dict(const culina::gpu::DeviceInfo& d) {
  py::dict info;
  info["ordinal"] = d.ordinal;
  info["name"] = d.name;
  info["capability"] = py::make_tuple(d.major, d.minor);
  info["supported"] = d.supported;
  info["binary_version"] = d.binary_version;
  info["error"] = d.error;
  return info;
}

py::object nvml_report() {
  const auto report = culina::nvml::query_nvml();
  if (!report) return py::none();
  py::list gpus;
  for (const auto& gpu : report->gpus) {
    py::dict info;
    info["index"] = gpu.index;
    info["name"] = gpu.name;
    info["uuid"] = gpu.uuid;
    info["capability"] = gpu.capability ? py::object(py::make_tuple(gpu.capability->first, gpu.capability->second))
                                        : py::object(py::none());
    gpus.append(info);
  }
  py::dict out;
  out["driver_cuda_version"] = report->driver_cuda_version;
  out["gpus"] = gpus;
  return out;
}

void define_module(py::module_& m) {
  m.doc() = "culina's compiled core: CPU reference and CUDA kernels for causal linear attention";
  // register_exception installs the C++ -> Python translator too (a bare py::exception only makes
  // the type, so UnsupportedDevice arrived as a plain RuntimeError), and keeps the type in
  // pybind11's call-once storage, which is safe without the GIL, not in a static py::object.
  py::register_exception<culina::gpu::UnsupportedDevice>(m, "UnsupportedDevice", PyExc_RuntimeError);

  m.def("dlpack_info", &dlpack_info, py::arg("capsule"));
  m.def(
      "cpu_forward",
      [](uintptr_t q, uintptr_t k, uintptr_t v, uintptr_t out, uintptr_t initial_state, uintptr_t final_state,
         std::vector<int64_t> dims, int dtype, float scale, std::optional<std::vector<float>> decay,
         uintptr_t gamma, uintptr_t gates, const std::vector<StrideTriple>& strides, int threads,
         uintptr_t cu_seqlens, int64_t num_seqs, int seqlen_bits) {
        const Problem p = make_forward_problem(q, k, v, out, initial_state, final_state, std::move(dims), dtype,
                                               scale, std::move(decay), gamma, gates, strides, cu_seqlens, num_seqs,
                                               seqlen_bits);
        py::gil_scoped_release release;
        culina::cpu::linear_attention(p, threads);
      },
      py::arg("q"), py::arg("k"), py::arg("v"), py::arg("out"), py::arg("initial_state"), py::arg("final_state"),
      py::arg("dims"), py::arg("dtype"), py::arg("scale"), py::arg("decay"), py::arg("gamma"), py::arg("gates"),
      py::arg("strides"), py::arg("threads") = 0, py::arg("cu_seqlens") = 0, py::arg("num_seqs") = 0,
      py::arg("seqlen_bits") = 0);
  m.def(
      "cpu_backward",
      [](uintptr_t q, uintptr_t k, uintptr_t v, uintptr_t d_out, uintptr_t initial_state, uintptr_t d_final_state,
         uintptr_t dq, uintptr_t dk, uintptr_t dv, uintptr_t d_initial_state, std::vector<int64_t> dims, int dtype,
         float scale, std::optional<std::vector<float>> decay, uintptr_t gamma, uintptr_t gates,
         const std::vector<StrideTriple>& strides, int threads, uintptr_t cu_seqlens, int64_t num_seqs,
         int seqlen_bits, uintptr_t gate_dots, const StrideTriple& gate_dots_strides) {
        check_strides(strides, kBackwardStrides);
        const Problem p = make_runnable_problem(q, k, v, initial_state, std::move(dims), dtype, scale,
                                                std::move(decay), gamma, gates, strides, cu_seqlens, num_seqs,
                                                seqlen_bits);
        const culina::Gradients g = make_gradients(d_out, d_final_state, dq, dk, dv, d_initial_state, strides,
                                                   gate_dots, gate_dots_strides);
        py::gil_scoped_release release;
        culina::cpu::linear_attention_backward(p, g, threads);
      },
      py::arg("q"), py::arg("k"), py::arg("v"), py::arg("do"), py::arg("initial_state"), py::arg("d_final_state"),
      py::arg("dq"), py::arg("dk"), py::arg("dv"), py::arg("d_initial_state"), py::arg("dims"), py::arg("dtype"),
      py::arg("scale"), py::arg("decay"), py::arg("gamma"), py::arg("gates"), py::arg("strides"),
      py::arg("threads") = 0, py::arg("cu_seqlens") = 0, py::arg("num_seqs") = 0, py::arg("seqlen_bits") = 0,
      py::arg("gate_dots") = 0, py::arg("gate_dots_strides") = StrideTriple{0, 0, 0});
  m.def(
      "gpu_workspace_bytes",
      [](std::vector<int64_t> dims, int dtype, int device, int64_t num_seqs, bool gated) {
        return culina::gpu::workspace_bytes(shape_problem(std::move(dims), dtype, num_seqs, gated), device);
      },
      py::arg("dims"), py::arg("dtype"), py::arg("device"), py::arg("num_seqs") = 0, py::arg("gated") = false);
  m.def(
      "gpu_backward_workspace_bytes",
      [](std::vector<int64_t> dims, int dtype, int device, int64_t num_seqs, bool gated) {
        return culina::gpu::backward_workspace_bytes(shape_problem(std::move(dims), dtype, num_seqs, gated), device);
      },
      py::arg("dims"), py::arg("dtype"), py::arg("device"), py::arg("num_seqs") = 0, py::arg("gated") = false);
  m.def(
      "gpu_forward",
      [](uintptr_t q, uintptr_t k, uintptr_t v, uintptr_t out, uintptr_t initial_state, uintptr_t final_state,
         std::vector<int64_t> dims, int dtype, float scale, std::optional<std::vector<float>> decay,
         uintptr_t gamma, uintptr_t gates, const std::vector<StrideTriple>& strides, int device, uintptr_t stream,
         uintptr_t workspace, size_t workspace_bytes, uintptr_t cu_seqlens, int64_t num_seqs, int seqlen_bits) {
        Problem p = make_forward_problem(q, k, v, out, initial_state, final_state, std::move(dims), dtype, scale,
                                         std::move(decay), gamma, gates, strides, cu_seqlens, num_seqs, seqlen_bits);
        p.workspace = reinterpret_cast<void*>(workspace);
        p.workspace_bytes = workspace_bytes;
        py::gil_scoped_release release;
        culina::gpu::linear_attention(p, device, stream);
      },
      py::arg("q"), py::arg("k"), py::arg("v"), py::arg("out"), py::arg("initial_state"), py::arg("final_state"),
      py::arg("dims"), py::arg("dtype"), py::arg("scale"), py::arg("decay"), py::arg("gamma"), py::arg("gates"),
      py::arg("strides"), py::arg("device"), py::arg("stream"), py::arg("workspace"), py::arg("workspace_bytes"),
      py::arg("cu_seqlens") = 0, py::arg("num_seqs") = 0, py::arg("seqlen_bits") = 0);
  m.def(
      "gpu_backward",
      [](uintptr_t q, uintptr_t k, uintptr_t v, uintptr_t d_out, uintptr_t initial_state, uintptr_t d_final_state,
         uintptr_t dq, uintptr_t dk, uintptr_t dv, uintptr_t d_initial_state, std::vector<int64_t> dims, int dtype,
         float scale, std::optional<std::vector<float>> decay, uintptr_t gamma, uintptr_t gates,
         const std::vector<StrideTriple>& strides, int device, uintptr_t stream, uintptr_t workspace,
         size_t workspace_bytes, uintptr_t cu_seqlens, int64_t num_seqs, int seqlen_bits, uintptr_t gate_dots,
         const StrideTriple& gate_dots_strides) {
        check_strides(strides, kBackwardStrides);
        Problem p = make_runnable_problem(q, k, v, initial_state, std::move(dims), dtype, scale, std::move(decay),
                                          gamma, gates, strides, cu_seqlens, num_seqs, seqlen_bits);
        p.workspace = reinterpret_cast<void*>(workspace);
        p.workspace_bytes = workspace_bytes;
        const culina::Gradients g = make_gradients(d_out, d_final_state, dq, dk, dv, d_initial_state, strides,
                                                   gate_dots, gate_dots_strides);
        py::gil_scoped_release release;
        culina::gpu::linear_attention_backward(p, g, device, stream);
      },
      py::arg("q"), py::arg("k"), py::arg("v"), py::arg("do"), py::arg("initial_state"), py::arg("d_final_state"),
      py::arg("dq"), py::arg("dk"), py::arg("dv"), py::arg("d_initial_state"), py::arg("dims"), py::arg("dtype"),
      py::arg("scale"), py::arg("decay"), py::arg("gamma"), py::arg("gates"), py::arg("strides"), py::arg("device"),
      py::arg("stream"), py::arg("workspace"), py::arg("workspace_bytes"), py::arg("cu_seqlens") = 0,
      py::arg("num_seqs") = 0, py::arg("seqlen_bits") = 0, py::arg("gate_dots") = 0,
      py::arg("gate_dots_strides") = StrideTriple{0, 0, 0});
  m.def(
      "kernel_path",
      [](int device, int dtype, int64_t dk, int64_t dv) {
        return culina::gpu::kernel_path(shape_problem({1, 1, 1, dk, dv}, dtype, 0, false), device);
      },
      py::arg("device"), py::arg("dtype"), py::arg("dk"), py::arg("dv"));
  m.def("built_with_cuda", &culina::gpu::built_with_cuda);
  m.def("compiled_arch_list", &culina::gpu::compiled_arch_list);
  m.def("driver_version", &culina::gpu::driver_version);
  m.def("nvml_report", &nvml_report);
  m.def("device_count", &culina::gpu::device_count);
  m.def("device", [](int ordinal) { return device_dict(culina::gpu::device(ordinal)); }, py::arg("ordinal"));
  m.def("devices", [] {
    py::list out;
    for (const auto& d : culina::gpu::devices()) out.append(device_dict(d));
    return out;
  });
  m.attr("MAX_HEAD_DIM") = culina::kMaxHeadDim;
  m.attr("MAX_HEADS") = culina::kMaxHeads;
}

}  // namespace

// Free-threaded Python (3.13t, 3.14t) may run this module without the GIL: every entry point
// is safe to call from many threads at once. The CPU reference and the kernels keep no state
// between calls (each call's workers and buffers are its own; the caller owns the arrays); the
// one cache, launch.cu's per-device facts, is filled and read under its mutex; the driver entry
// points are a C++ function-local static (initialised once, thread-safely); the device switch
// saves and restores the calling thread's own CUDA context; the NVML query keeps nothing (NVML's
// init and shutdown are reference-counted and thread-safe). Calls that write one output array at
// once race on it, as they would with any library.
// pybind11 before 2.13 lacks mod_gil_not_used; such a build makes 3.13t/3.14t re-enable the GIL.
#if PYBIND11_VERSION_HEX >= 0x020D0000
PYBIND11_MODULE(_C, m, py::mod_gil_not_used()) { define_module(m); }
#else
PYBIND11_MODULE(_C, m) { define_module(m); }
#endif
