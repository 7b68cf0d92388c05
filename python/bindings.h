// SPDX-License-Identifier: Apache-2.0
// What the Python module's source files share (python/tessera_module.cc: Session, Graph and
// the options; python/distributed_graph_module.cc: DistributedGraph): NumPy views with their
// checks, the Graph object, options from keyword arguments and arrays handed back to NumPy.
#pragma once

#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "tessera/tessera.h"

namespace tessera_python {

namespace py = pybind11;

[[noreturn]] inline void value_error(const std::string& text) { throw py::value_error(text); }

// A read-only view of `array` as T, or ValueError: exact dtype, C-contiguous, `ndim` dimensions.
template <class T>
inline std::span<const T> view_of(const py::array& array, int ndim, const char* name,
                                  const char* dtype_name) {
  if (!py::dtype::of<T>().is(array.dtype())) {
    value_error(std::string(name) + ": expected dtype " + dtype_name + ", got " +
                py::str(array.dtype()).cast<std::string>());
  }
  if (array.ndim() != ndim) {
    value_error(std::string(name) + ": expected a " + std::to_string(ndim) + "-D array, got " +
                std::to_string(array.ndim()) + "-D");
  }
  if (!(array.flags() & py::array::c_style)) {
    value_error(std::string(name) +
                ": the array is not C-contiguous (pass numpy.ascontiguousarray(...))");
  }
  return {static_cast<const T*>(array.data()), static_cast<std::size_t>(array.size())};
}

// A Graph: the GraphView plus the arrays it points into, kept alive by this object.
struct PyGraph {
  tessera::GraphView view;
  std::vector<py::array> keep;
};

// Options from keyword arguments named like the options (ValueError for a wrong type).
tessera::Options options_from(const py::kwargs& kwargs);

// A NumPy array that owns `values` (moved, not copied) with the given shape.
template <class T>
py::array_t<T> to_numpy(std::vector<T> values, std::vector<py::ssize_t> shape) {
  auto* data = new std::vector<T>(std::move(values));
  py::capsule owner(data, [](void* p) { delete static_cast<std::vector<T>*>(p); });
  return py::array_t<T>(std::move(shape), data->data(), owner);
}
py::array_t<float> to_numpy(tessera::Matrix m);
py::array_t<std::int64_t> to_numpy(std::vector<std::int64_t> v);

// The DistributedGraph class of the module.
void bind_distributed_graph(py::module_& m);

}  // namespace tessera_python
