// SPDX-License-Identifier: Apache-2.0
// tessera._core.DistributedGraph: the C++ DistributedGraph (include/tessera/distributed_graph.h)
// over NumPy arrays, which is what tessera.torch hands it (a CPU tensor's .numpy() shares its
// memory: nothing is copied). The aggregations write into the caller's `out` array and read `x`
// in place, with the GIL released while the halo exchange and SpMM run; a bad array (dtype,
// shape, layout, read-only, overlapping) is a ValueError naming the argument. On a GPU graph the
// *_on_device forms take the addresses of the caller's GPU rows instead (tessera.torch checks the
// CUDA tensors' dtype, shape, layout and device; C++ that the memory is the graph's GPU's).
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <cstdint>
#include <string>

#include "python/bindings.h"
#include "tessera/tessera.h"

namespace tessera_python {
namespace {

// `array` as a C-contiguous float32 (rows, cols) matrix, or ValueError naming it.
const float* matrix_of(const py::array& array, std::int64_t rows, const char* name,
                       std::int64_t* cols) {
  const auto values = view_of<float>(array, 2, name, "float32");
  if (array.shape(0) != rows) {
    value_error(std::string(name) + ": expected " + std::to_string(rows) +
                " rows (this rank's num_local), got " + std::to_string(array.shape(0)));
  }
  *cols = array.shape(1);
  return values.data();
}

float* writable_matrix_of(py::array& array, std::int64_t rows, const char* name,
                          std::int64_t* cols) {
  const float* data = matrix_of(array, rows, name, cols);
  if (!array.writeable()) value_error(std::string(name) + ": the array is read-only");
  return const_cast<float*>(data);
}

// The (out, in) pair of an operation on this rank's rows: both (num_local, F) float32
// C-contiguous, `out` writable, the two not overlapping. Returns F.
std::int64_t checked_pair(const tessera::DistributedGraph& g, py::array& out, const py::array& in,
                          const char* out_name, const char* in_name, float** y, const float** x) {
  const std::int64_t n = g.num_local();
  std::int64_t f_in = 0;
  std::int64_t f_out = 0;
  *x = matrix_of(in, n, in_name, &f_in);
  *y = writable_matrix_of(out, n, out_name, &f_out);
  if (f_in != f_out) {
    value_error(std::string(out_name) + ": expected " + std::to_string(f_in) + " columns as " +
                in_name + ", got " + std::to_string(f_out));
  }
  const auto bytes = static_cast<std::size_t>(n * f_in) * sizeof(float);
  const auto* a = reinterpret_cast<const char*>(*x);
  const auto* b = reinterpret_cast<const char*>(*y);
  if (bytes > 0 && a < b + bytes && b < a + bytes) {
    value_error(std::string(out_name) + ": shares memory with " + in_name +
                " (the operation does not run in place)");
  }
  return f_in;
}

// `op(y, x, f)` on the checked pair with the GIL released: forward writes `out` from `x`,
// backward `d_x` from `d_out`.
template <class Op>
void run_on_rows(const tessera::DistributedGraph& g, py::array& out, const py::array& in,
                 bool backward, Op op) {
  float* y = nullptr;
  const float* x = nullptr;
  const std::int64_t f =
      checked_pair(g, out, in, backward ? "d_x" : "out", backward ? "d_out" : "x", &y, &x);
  py::gil_scoped_release release;
  op(y, x, f);
}

tessera::Aggregation parse_op(const std::string& op) {
  try {
    return tessera::parse_aggregation(op);
  } catch (const std::invalid_argument& e) {
    value_error(std::string("op: ") + e.what());
  }
}

// out = A x or d_x = A^T d_out.
void run_aggregation(tessera::DistributedGraph& g, const std::string& op, py::array& out,
                     const py::array& in, int call, bool backward) {
  const tessera::Aggregation aggregation = parse_op(op);
  run_on_rows(g, out, in, backward, [&](float* y, const float* x, std::int64_t f) {
    if (backward) {
      g.aggregate_backward(aggregation, y, x, f, call);
    } else {
      g.aggregate(aggregation, y, x, f, call);
    }
  });
}

void run_dropout(tessera::DistributedGraph& g, py::array& out, const py::array& in, float p,
                 std::uint64_t key, bool backward) {
  run_on_rows(g, out, in, backward, [&](float* y, const float* x, std::int64_t f) {
    if (backward) {
      g.dropout_backward(y, x, f, p, key);
    } else {
      g.dropout(y, x, f, p, key);
    }
  });
}

// The GPU forms: op(y, x) on a GPU graph's rows at the addresses out and x ((num_local, cols)
// float32 on its GPU), with the GIL released.
template <class Op>
void run_on_gpu_rows(const tessera::DistributedGraph& g, std::uintptr_t out, std::uintptr_t x,
                     const char* what, Op op) {
  if (g.device() == "cpu") {
    value_error(std::string(what) + ": this graph's rows are host memory (pass arrays; device=" +
                "cuda puts them on a GPU)");
  }
  py::gil_scoped_release release;
  op(reinterpret_cast<float*>(out), reinterpret_cast<const float*>(x));
}

void all_reduce(tessera::DistributedGraph& g, py::array& values) {
  if (!(values.flags() & py::array::c_style)) {
    value_error("values: the array is not C-contiguous (pass numpy.ascontiguousarray(...))");
  }
  if (!values.writeable()) value_error("values: the array is read-only (it is summed in place)");
  const auto n = static_cast<std::int64_t>(values.size());
  if (py::dtype::of<float>().is(values.dtype())) {
    auto* p = static_cast<float*>(values.mutable_data());
    py::gil_scoped_release release;
    g.all_reduce_sum(p, n);
  } else if (py::dtype::of<double>().is(values.dtype())) {
    auto* p = static_cast<double*>(values.mutable_data());
    py::gil_scoped_release release;
    g.all_reduce_sum(p, n);
  } else {
    value_error("values: expected dtype float32 or float64, got " +
                py::str(values.dtype()).cast<std::string>());
  }
}

// A block of tessera::allocate_rows, freed with the array that views it.
struct Rows {
  void* data;
  std::size_t bytes;
};

}  // namespace

void bind_distributed_graph(py::module_& m) {
  using tessera::DistributedGraph;
  py::class_<DistributedGraph>(
      m, "DistributedGraph",
      "This rank's part of a graph cut into one part per MPI rank, and its aggregations over "
      "the caller's float32 arrays with Tessera's halo exchange (the low-level object under "
      "tessera.torch.DistributedGraph). Keyword arguments are Session's options; those used: "
      "partition, partitions, seed, normalize_features, codec, codec_backward, error_feedback, "
      "num_layers (aggregations per forward pass), comm_timeout, verbosity.")
      .def(py::init([](const py::kwargs& kwargs) {
        const tessera::Options options = options_from(kwargs);
        py::gil_scoped_release release;
        return std::make_unique<DistributedGraph>(options);
      }))
      .def_property_readonly("rank", &DistributedGraph::rank)
      .def_property_readonly("size", &DistributedGraph::size)
      .def_property_readonly("device", &DistributedGraph::device,
                             "Where the rows live: 'cpu' or this rank's GPU, 'cuda:i'.")
      .def("set_stream", &DistributedGraph::set_stream, py::arg("stream"),
           "The caller's CUDA stream (an integer cudaStream_t): later GPU calls start after its "
           "queued work, and its later work runs after their results are written.")
      .def_property_readonly("num_layers",
                             [](const DistributedGraph& g) { return g.options().num_layers; })
      .def(
          "load",
          [](DistributedGraph& g, const std::string& spec) {
            py::gil_scoped_release release;
            g.load(spec);
          },
          py::arg("dataset"),
          "Collective: an OGB raw-layout directory, a Tessera .h5 file or synth:PRESET[:SEED], "
          "cut into one part per rank (or read from the partitions store).")
      .def(
          "load",
          [](DistributedGraph& g, const PyGraph& graph) {
            py::gil_scoped_release release;
            g.load(graph.view);
          },
          py::arg("graph"), "Collective: a Graph (read on rank 0).")
      .def_property_readonly("num_nodes", &DistributedGraph::num_nodes)
      .def_property_readonly("num_local", &DistributedGraph::num_local)
      .def_property_readonly("num_features", &DistributedGraph::num_features)
      .def_property_readonly("num_outputs", &DistributedGraph::num_outputs)
      .def_property_readonly("metric", &DistributedGraph::metric)
      .def(
          "node_ids", [](const DistributedGraph& g) { return to_numpy(g.node_ids()); },
          "The dataset's ids of this rank's rows, in the order the rows are held (renumbered "
          "for locality unless node_order='none', when they increase).")
      .def("features", [](const DistributedGraph& g) { return to_numpy(g.features()); })
      .def(
          "labels", [](const DistributedGraph& g) { return to_numpy(g.labels()); },
          "This rank's labels (-1: none); empty for a multi-label dataset.")
      .def("targets", [](const DistributedGraph& g) { return to_numpy(g.targets()); })
      .def(
          "degrees",
          [](const DistributedGraph& g) {
            std::vector<float> d = g.degrees();
            const auto rows = static_cast<py::ssize_t>(d.size());
            return to_numpy(std::move(d), {rows});
          },
          "This rank's rows' degrees in the whole symmetrised graph (no self loops).")
      .def(
          "split_rows",
          [](const DistributedGraph& g, const std::string& split) {
            try {
              return to_numpy(g.split_rows(split));
            } catch (const std::invalid_argument& e) {
              value_error(e.what());
            }
          },
          py::arg("split"), "This rank's local rows of 'train', 'valid' or 'test'.")
      .def("split_size", &DistributedGraph::split_size, py::arg("split"),
           "Nodes of 'train', 'valid' or 'test' over all ranks.")
      .def(
          "aggregate",
          [](DistributedGraph& g, const std::string& op, py::array out, const py::array& x,
             int call) { run_aggregation(g, op, out, x, call, false); },
          py::arg("op"), py::arg("out"), py::arg("x"), py::arg("call"),
          "Collective: out = A x for op 'gcn', 'mean' or 'sum', both (num_local, F) float32 "
          "C-contiguous; call in [0, num_layers) numbers the aggregation within a pass.")
      .def(
          "aggregate_backward",
          [](DistributedGraph& g, const std::string& op, py::array d_x, const py::array& d_out,
             int call) { run_aggregation(g, op, d_x, d_out, call, true); },
          py::arg("op"), py::arg("d_x"), py::arg("d_out"), py::arg("call"),
          "Collective: d_x = A^T d_out, halo gradients sent to their owners.")
      .def(
          "aggregate_on_device",
          [](DistributedGraph& g, const std::string& op, std::uintptr_t out, std::uintptr_t x,
             std::int64_t cols, int call, bool backward) {
            const tessera::Aggregation aggregation = parse_op(op);
            run_on_gpu_rows(g, out, x, "aggregate_on_device", [&](float* y, const float* in) {
              if (backward) {
                g.aggregate_backward(aggregation, y, in, cols, call);
              } else {
                g.aggregate(aggregation, y, in, cols, call);
              }
            });
          },
          py::arg("op"), py::arg("out"), py::arg("x"), py::arg("cols"), py::arg("call"),
          py::arg("backward"),
          "aggregate (or, backward, aggregate_backward: out = d_x, x = d_out) on a GPU graph: out "
          "and x the addresses of (num_local, cols) float32 rows on its GPU.")
      .def(
          "dropout_on_device",
          [](DistributedGraph& g, std::uintptr_t out, std::uintptr_t x, std::int64_t cols, float p,
             std::uint64_t key, bool backward) {
            run_on_gpu_rows(g, out, x, "dropout_on_device", [&](float* y, const float* in) {
              if (backward) {
                g.dropout_backward(y, in, cols, p, key);
              } else {
                g.dropout(y, in, cols, p, key);
              }
            });
          },
          py::arg("out"), py::arg("x"), py::arg("cols"), py::arg("p"), py::arg("key"),
          py::arg("backward"), "dropout (or its backward) on a GPU graph's rows.")
      .def("set_epoch", &DistributedGraph::set_epoch, py::arg("epoch"),
           "The epoch that keys the codecs' rounding noise and the dropout masks from now on.")
      .def(
          "dropout",
          [](DistributedGraph& g, py::array out, const py::array& x, float p, std::uint64_t key) {
            run_dropout(g, out, x, p, key, false);
          },
          py::arg("out"), py::arg("x"), py::arg("p"), py::arg("key"),
          "out = inverted dropout of x, the mask keyed by (seed, epoch, key, global id, column).")
      .def(
          "dropout_backward",
          [](DistributedGraph& g, py::array d_x, const py::array& d_out, float p,
             std::uint64_t key) { run_dropout(g, d_x, d_out, p, key, true); },
          py::arg("d_x"), py::arg("d_out"), py::arg("p"), py::arg("key"))
      .def("all_reduce_sum", &all_reduce, py::arg("values"),
           "Collective: a float32 or float64 array summed over ranks, in place.")
      .def_property_readonly("bytes_sent", &DistributedGraph::bytes_sent);
  m.def(
      "empty_rows",
      [](std::int64_t rows, std::int64_t cols) {
        if (rows < 0 || cols < 0)
          value_error("empty_rows: expected rows, cols >= 0, got " + std::to_string(rows) + ", " +
                      std::to_string(cols));
        const auto bytes = static_cast<std::size_t>(rows * cols) * sizeof(float);
        auto* block = new Rows{tessera::allocate_rows(bytes), bytes};
        py::capsule owner(block, [](void* p) {
          auto* owned = static_cast<Rows*>(p);
          tessera::free_rows(owned->data, owned->bytes);
          delete owned;
        });
        return py::array_t<float>({rows, cols}, static_cast<float*>(block->data), owner);
      },
      py::arg("rows"), py::arg("cols"),
      "An uninitialised float32 (rows, cols) array in Tessera's host memory (tessera::"
      "allocate_rows: large blocks are reused when freed, with transparent huge pages).");
  m.def(
      "release_cached_rows", [] { return tessera::release_cached_rows(); },
      "Gives the freed large blocks kept for reuse back to the system; returns their bytes.");
}

}  // namespace tessera_python
