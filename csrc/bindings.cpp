// The culina._C module: thin pybind11 glue. Python (culina/_api.py) checks the arguments and
// describes each distinct problem once (Description); a call hands over that description and,
// by keyword, its raw addresses and scalars; this file only unpacks them and calls a back end.
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <algorithm>
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
using culina::Elements;
using culina::Problem;

namespace {

// (batch, head, token) element strides of one tensor, as Python passes them.
using StrideTriple = std::array<int64_t, 3>;

culina::Strides strides_of(const StrideTriple& s) { return culina::Strides{s[0], s[1], s[2]}; }

// Stands in for the gates where only token_gated() matters: the workspace size depends on the
// shape and on whether the gates vary with the token, never on their values.
const float kGatesPlaceholder = 0.0f;

// culina._C.Description: the extension's image of one checked culina._api.Problem, made once per
// distinct problem (_api.describe caches it): shape, element types, packing and the strides of every
// tensor but do's (the gradient arrives with its own). A call adds only its addresses and
// scalars (runnable, below). Python's check_problem owns the argument checks, cu_seqlens'
// included. On this side the bindings check only the contract: num_seqs, seqlen_bits and B = 1
// here, offsets given exactly when packed in runnable; the CPU reference, the one C++ reader of
// host offsets, checks their values.
struct Description {
  Problem shape;  // no addresses, no scale, no decay
  culina::Strides dq, dk, dv, gate_dots;
  bool token_gated = false;

  Description(const std::array<int64_t, 5>& dims, int dtype, int compute, int64_t num_seqs, int seqlen_bits,
              bool token_gated, const StrideTriple& q, const StrideTriple& k, const StrideTriple& v, const StrideTriple& g,
              const StrideTriple& out, const StrideTriple& dq_rows, const StrideTriple& dk_rows,
              const StrideTriple& dv_rows, const StrideTriple& gate_dots_rows)
      : dq(strides_of(dq_rows)), dk(strides_of(dk_rows)), dv(strides_of(dv_rows)),
        gate_dots(strides_of(gate_dots_rows)), token_gated(token_gated) {
    if (dtype < 0 || dtype > 2) throw std::invalid_argument("dtype: the code must be 0, 1 or 2");
    if (compute != dtype && !(DType(dtype) == DType::kFloat32 && DType(compute) == DType::kBFloat16))
      throw std::invalid_argument("compute: " + std::to_string(compute) + " with dtype " + std::to_string(dtype) +
                                  "; pass the dtype's own code, or 2 (bfloat16) for float32 (0)");
    if (num_seqs < 0) throw std::invalid_argument("num_seqs is " + std::to_string(num_seqs) + "; pass 0 or more");
    if (num_seqs > 0 && dims[0] != 1)
      throw std::invalid_argument("packed sequences need dims (1, H, total_T, Dk, Dv), but B is " +
                                  std::to_string(dims[0]));
    if (num_seqs > 0 && seqlen_bits != 32 && seqlen_bits != 64)
      throw std::invalid_argument("packed sequences need seqlen_bits 32 or 64, got " + std::to_string(seqlen_bits));
    shape.batch = dims[0];
    shape.heads = dims[1];
    shape.seq_len = dims[2];
    shape.dk = dims[3];
    shape.dv = dims[4];
    shape.elements = Elements{DType(dtype), DType(compute)};
    shape.num_seqs = num_seqs;
    shape.seqlen_bits = num_seqs > 0 ? seqlen_bits : 0;
    shape.q.strides = strides_of(q);
    shape.k.strides = strides_of(k);
    shape.v.strides = strides_of(v);
    shape.gates.strides = strides_of(g);
    shape.out.strides = strides_of(out);
  }

  // The shape-only problem the workspace queries take.
  Problem sizing() const {
    Problem p = shape;
    if (token_gated) p.gates.data = &kGatesPlaceholder;
    return p;
  }
};

// The names of a call's values (Call below), each interned once: keyword arguments would cost
// pybind11 a new str per name on every call.
struct Keys {
  static PyObject* intern(const char* name) {
    PyObject* key = PyUnicode_InternFromString(name);
    if (!key) throw py::error_already_set();
    return key;
  }
  PyObject* const q = intern("q");
  PyObject* const k = intern("k");
  PyObject* const v = intern("v");
  PyObject* const scale = intern("scale");
  PyObject* const decay = intern("decay");
  PyObject* const initial_state = intern("initial_state");
  PyObject* const gamma = intern("gamma");
  PyObject* const g = intern("g");
  PyObject* const cu_seqlens = intern("cu_seqlens");
  PyObject* const device = intern("device");
  PyObject* const threads = intern("threads");
  PyObject* const stream = intern("stream");
  PyObject* const workspace = intern("workspace");
  PyObject* const workspace_bytes = intern("workspace_bytes");
  PyObject* const out = intern("out");
  PyObject* const final_state = intern("final_state");
  PyObject* const d_out = intern("do");
  PyObject* const d_out_strides = intern("do_strides");
  PyObject* const d_final_state = intern("d_final_state");
  PyObject* const dq = intern("dq");
  PyObject* const dk = intern("dk");
  PyObject* const dv = intern("dv");
  PyObject* const d_initial_state = intern("d_initial_state");
  PyObject* const gate_dots = intern("gate_dots");
  PyObject* const d_gates = intern("d_g");
  PyObject* const d_gates_strides = intern("d_g_strides");
  PyObject* const d_gamma = intern("d_gamma");
  PyObject* const gate_ends = intern("gate_ends");
  PyObject* const keep_for_backward = intern("keep_for_backward");
  PyObject* const kept = intern("kept");
  PyObject* const kept_bytes = intern("kept_bytes");
};

// Made on the first call (C++ runs it once, whichever threads call); interned strs live as
// long as the interpreter, so the table is never freed.
const Keys& keys() {
  static const Keys* const interned = new Keys;
  return *interned;
}

// One call's values by name: the dict culina/_api.py's launch builds, read as it is. A name the
// entry point does not read is refused, so a misspelt key cannot pass for an absent value.
class Call {
 public:
  explicit Call(py::dict values) : values_(std::move(values)) {}

  // An address or a count; `fallback` where the name is absent (0: no such tensor).
  template <typename T = uintptr_t>
  T get(PyObject* key, T fallback = 0) {
    PyObject* value = find(key);
    return value ? py::cast<T>(py::handle(value)) : fallback;
  }
  template <typename T>
  T need(PyObject* key) {
    PyObject* value = find(key);
    if (!value)
      throw std::invalid_argument("call: '" + py::str(key).cast<std::string>() + "' is missing; pass it");
    return py::cast<T>(py::handle(value));
  }
  std::optional<std::vector<float>> decay() {
    PyObject* value = find(keys().decay);
    if (!value || value == Py_None) return std::nullopt;
    return py::cast<std::vector<float>>(py::handle(value));
  }
  // After the last read: every key was one the entry point takes.
  void check_all_read() const {
    if (size_t(PyDict_Size(values_.ptr())) == read_.size()) return;
    for (auto item : values_)
      if (std::find(read_.begin(), read_.end(), item.first.ptr()) == read_.end())
        throw std::invalid_argument("call: '" + py::str(item.first).cast<std::string>() +
                                    "' is not a value this entry point takes; remove it");
  }

 private:
  PyObject* find(PyObject* key) {
    PyObject* value = PyDict_GetItemWithError(values_.ptr(), key);
    if (!value && PyErr_Occurred()) throw py::error_already_set();
    if (value) read_.push_back(key);
    return value;
  }

  py::dict values_;
  std::vector<PyObject*> read_;
};

// The description with the call's inputs, scalars, packed offsets and, on a GPU, workspace.
Problem runnable(const Description& d, Call& call) {
  const Keys& key = keys();
  Problem p = d.shape;
  p.q.data = reinterpret_cast<const void*>(call.get(key.q));
  p.k.data = reinterpret_cast<const void*>(call.get(key.k));
  p.v.data = reinterpret_cast<const void*>(call.get(key.v));
  if (!p.q.data || !p.k.data || !p.v.data) throw std::invalid_argument("q, k and v need addresses (0 given)");
  p.initial_state = reinterpret_cast<const float*>(call.get(key.initial_state));
  p.gamma = reinterpret_cast<const float*>(call.get(key.gamma));
  p.gates.data = reinterpret_cast<const float*>(call.get(key.g));
  p.cu_seqlens = reinterpret_cast<const void*>(call.get(key.cu_seqlens));
  if (bool(p.cu_seqlens) != p.packed())
    throw std::invalid_argument("cu_seqlens: the description has num_seqs " + std::to_string(p.num_seqs) +
                                " but the call " + (p.cu_seqlens ? "passes" : "lacks") +
                                " offsets; pass cu_seqlens exactly when num_seqs >= 1");
  p.scale = call.need<float>(key.scale);
  if (auto decay = call.decay()) {
    if (int64_t(decay->size()) != p.heads) throw std::invalid_argument("decay needs one value per head");
    p.decay = std::move(*decay);
  }
  p.workspace = reinterpret_cast<void*>(call.get(key.workspace));
  p.workspace_bytes = call.get<size_t>(key.workspace_bytes);
  return p;
}

// Where a call runs: the CPU reference (no device, or -1) with `threads` workers (0: one per
// core), or the kernels on that CUDA device, on `stream`.
struct Placement {
  int device, threads;
  uintptr_t stream;

  explicit Placement(Call& call)
      : device(call.get<int>(keys().device, -1)),
        threads(call.get<int>(keys().threads)),
        stream(call.get(keys().stream)) {}
  bool gpu() const { return device >= 0; }
};

void forward(const Description& d, py::dict values) {
  const Keys& key = keys();
  Call call(std::move(values));
  Problem p = runnable(d, call);
  p.out.data = reinterpret_cast<void*>(call.get(key.out));
  if (!p.out.data) throw std::invalid_argument("the forward needs out (0 given)");
  p.final_state = reinterpret_cast<float*>(call.get(key.final_state));
  p.keep_for_backward = call.get<bool>(key.keep_for_backward, false);
  const Placement at(call);
  call.check_all_read();
  py::gil_scoped_release release;
  if (at.gpu())
    culina::gpu::linear_attention(p, at.device, at.stream);
  else
    culina::cpu::linear_attention(p, at.threads);
}

// do has its own strides, do_strides; gate_dots (absent or 0: not wanted) the description's, d_g
// its own, d_g_strides (common/problem.h: Gradients).
void backward(const Description& d, py::dict values) {
  const Keys& key = keys();
  Call call(std::move(values));
  const Problem p = runnable(d, call);
  culina::Gradients grads;
  grads.d_out = {reinterpret_cast<const void*>(call.get(key.d_out)),
                 strides_of(call.need<StrideTriple>(key.d_out_strides))};
  grads.d_final_state = reinterpret_cast<const float*>(call.get(key.d_final_state));
  grads.dq = {reinterpret_cast<void*>(call.get(key.dq)), d.dq};
  grads.dk = {reinterpret_cast<void*>(call.get(key.dk)), d.dk};
  grads.dv = {reinterpret_cast<void*>(call.get(key.dv)), d.dv};
  if (!grads.d_out.data || !grads.dq.data || !grads.dk.data || !grads.dv.data)
    throw std::invalid_argument("the backward needs do, dq, dk and dv (0 given)");
  grads.d_initial_state = reinterpret_cast<float*>(call.get(key.d_initial_state));
  grads.gate_dots = {reinterpret_cast<float*>(call.get(key.gate_dots)), d.gate_dots};
  grads.d_gates.data = reinterpret_cast<float*>(call.get(key.d_gates));
  if (grads.d_gates.data) grads.d_gates.strides = strides_of(call.need<StrideTriple>(key.d_gates_strides));
  grads.d_gamma = reinterpret_cast<double*>(call.get(key.d_gamma));
  grads.gate_ends = reinterpret_cast<const double*>(call.get(key.gate_ends));
  if ((grads.d_gates.data || grads.d_gamma) && !grads.gate_dots.data)
    throw std::invalid_argument("the gates' gradient (d_g, d_gamma) is summed from gate_dots, which the call must "
                                "give too (0 given)");
  grads.kept = reinterpret_cast<void*>(call.get(key.kept));
  grads.kept_bytes = call.get<size_t>(key.kept_bytes);
  const Placement at(call);
  call.check_all_read();
  py::gil_scoped_release release;
  if (at.gpu())
    culina::gpu::linear_attention_backward(p, grads, at.device, at.stream);
  else
    culina::cpu::linear_attention_backward(p, grads, at.threads);
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
  info["arch_specific_version"] = d.arch_specific_version;
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
  // The problem's description, built once per distinct problem from keywords (culina/_api.py:
  // describe); every entry point below takes it first and its call's values by keyword.
  py::class_<Description>(m, "Description")
      .def(py::init<const std::array<int64_t, 5>&, int, int, int64_t, int, bool, const StrideTriple&, const StrideTriple&,
                    const StrideTriple&, const StrideTriple&, const StrideTriple&, const StrideTriple&,
                    const StrideTriple&, const StrideTriple&, const StrideTriple&>(),
           py::kw_only(), py::arg("dims"), py::arg("dtype"), py::arg("compute"), py::arg("num_seqs"), py::arg("seqlen_bits"),
           py::arg("token_gated"), py::arg("q"), py::arg("k"), py::arg("v"), py::arg("g"), py::arg("out"),
           py::arg("dq"), py::arg("dk"), py::arg("dv"), py::arg("gate_dots"));
  // call: the dict of the call's values by name (Call above; culina/_api.py: launch).
  // Both: q, k, v, scale; initial_state, gamma, g, cu_seqlens, decay; where it runs: device
  // (absent or -1: the CPU reference, with `threads` workers) or a CUDA device with stream,
  // workspace and workspace_bytes (the queries below). forward: out, final_state;
  // keep_for_backward (its workspace kept_workspace_bytes large). backward: do, do_strides, dq,
  // dk, dv; d_final_state, d_initial_state, gate_dots; d_g with d_g_strides, d_gamma and
  // gate_ends (the gates' gradient, from gate_dots); kept and kept_bytes (that forward's
  // workspace, unchanged).
  m.def("forward", &forward, py::arg("description"), py::arg("call"));
  m.def("backward", &backward, py::arg("description"), py::arg("call"));
  m.def(
      "forward_workspace_bytes",
      [](const Description& d, int device) { return culina::gpu::workspace_bytes(d.sizing(), device); },
      py::arg("description"), py::arg("device"));
  m.def(
      "backward_workspace_bytes",
      [](const Description& d, int device) { return culina::gpu::backward_workspace_bytes(d.sizing(), device); },
      py::arg("description"), py::arg("device"));
  m.def(
      "kept_workspace_bytes",
      [](const Description& d, int device) { return culina::gpu::kept_workspace_bytes(d.sizing(), device); },
      py::arg("description"), py::arg("device"));
  m.def(
      "kernel_path",
      [](int device, int dtype, int64_t dk, int64_t dv, int compute) {
        const StrideTriple unread{0, 0, 0};
        const Description d({1, 1, 1, dk, dv}, dtype, compute, 0, 0, false, unread, unread, unread, unread, unread,
                            unread, unread, unread, unread);
        return culina::gpu::kernel_path(d.sizing(), device);
      },
      py::arg("device"), py::arg("dtype"), py::arg("dk"), py::arg("dv"), py::arg("compute"));
  m.def("built_with_cuda", &culina::gpu::built_with_cuda);
  m.def("compiled_arch_list", &culina::gpu::compiled_arch_list);
  m.def("driver_version", &culina::gpu::driver_version);
  m.def("nvml_report", &nvml_report);
  m.def("device_count", &culina::gpu::device_count);
  m.def("set_arch_specific_kernels", &culina::gpu::set_arch_specific_kernels, py::arg("enabled"));
  m.def("arch_specific_kernels", &culina::gpu::arch_specific_kernels);
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
