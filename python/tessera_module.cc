// SPDX-License-Identifier: Apache-2.0
// The Python module `tessera`: Session (keyword arguments named like train_gcn's flags) and
// Graph (NumPy arrays held by reference, never copied or converted: a wrong dtype, shape or a
// non-contiguous array is a ValueError naming the argument). C++ std::invalid_argument arrives
// as ValueError and std::runtime_error as RuntimeError, with the same message.
#include <pybind11/functional.h>
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <span>
#include <stdexcept>
#include <string>
#include <variant>

#include "python/bindings.h"
#include "tessera/tessera.h"

namespace tessera_python {
namespace {

PyGraph make_graph(std::int64_t num_nodes, const py::object& edge_index, const py::object& indptr,
                   const py::object& indices, const py::array& x, const py::object& y,
                   const py::object& targets, const py::array& train_idx,
                   const py::object& valid_idx, const py::object& test_idx,
                   std::int64_t num_classes, const std::string& name) {
  PyGraph g;
  tessera::GraphView& v = g.view;
  v.name = name;
  v.num_nodes = num_nodes;
  auto keep = [&](const py::object& o) -> py::array {
    if (!py::isinstance<py::array>(o)) {
      value_error("expected a numpy array, got " + py::str(py::type::of(o)).cast<std::string>());
    }
    g.keep.push_back(o.cast<py::array>());
    return g.keep.back();
  };
  if (!edge_index.is_none()) {
    py::array e = keep(edge_index);
    const auto all = view_of<std::int64_t>(e, 2, "edge_index", "int64");
    if (e.shape(0) != 2) {
      value_error("edge_index: expected shape (2, E), got (" + std::to_string(e.shape(0)) + ", " +
                  std::to_string(e.shape(1)) + ")");
    }
    const auto edges = static_cast<std::size_t>(e.shape(1));
    v.src = all.first(edges);
    v.dst = all.subspan(edges, edges);
  }
  if (!indptr.is_none()) v.indptr = view_of<std::int64_t>(keep(indptr), 1, "indptr", "int64");
  if (!indices.is_none()) v.indices = view_of<std::int64_t>(keep(indices), 1, "indices", "int64");
  py::array features = keep(x);
  v.features = view_of<float>(features, 2, "x", "float32");
  v.num_features = features.shape(1);
  if (features.shape(0) != num_nodes) {
    value_error("x: expected num_nodes = " + std::to_string(num_nodes) + " rows, got " +
                std::to_string(features.shape(0)));
  }
  if (!y.is_none()) v.labels = view_of<std::int64_t>(keep(y), 1, "y", "int64");
  if (!targets.is_none()) {
    py::array t = keep(targets);
    v.targets = view_of<float>(t, 2, "targets", "float32");
    v.num_tasks = t.shape(1);
  }
  v.num_classes = num_classes;
  v.train_idx = view_of<std::int64_t>(keep(train_idx), 1, "train_idx", "int64");
  if (!valid_idx.is_none()) v.valid_idx = view_of<std::int64_t>(keep(valid_idx), 1, "valid_idx", "int64");
  if (!test_idx.is_none()) v.test_idx = view_of<std::int64_t>(keep(test_idx), 1, "test_idx", "int64");
  return g;
}

}  // namespace

// Options from keyword arguments named like the options (the option table: include/tessera/
// options.h; --hidden-channels is hidden_channels=...). A value of the wrong Python type is a
// ValueError naming the option; range and choice checks run when the Session starts.
tessera::Options options_from(const py::kwargs& kwargs) {
  tessera::Options o;
  std::map<std::string, const tessera::OptionInfo*> known;
  for (const tessera::OptionInfo& info : tessera::option_infos()) known[info.name] = &info;
  for (const auto& [key, value] : kwargs) {
    const std::string name = py::str(key);
    const auto it = known.find(name);
    if (it == known.end()) value_error("unknown option '" + name + "'");
    const std::string& type = it->second->type;
    tessera::OptionValue v;
    try {
      if (type == "bool") {
        if (!py::isinstance<py::bool_>(value)) throw py::cast_error();
        v = value.cast<bool>();
      } else if (type == "int") {
        if (py::isinstance<py::bool_>(value) || !py::isinstance<py::int_>(value))
          throw py::cast_error();
        const bool negative = value.cast<py::int_>() < py::int_(0);
        v = negative ? tessera::OptionValue(value.cast<std::int64_t>())
                     : tessera::OptionValue(value.cast<std::uint64_t>());
      } else if (type == "float") {
        if (py::isinstance<py::bool_>(value) ||
            !(py::isinstance<py::float_>(value) || py::isinstance<py::int_>(value)))
          throw py::cast_error();
        v = value.cast<double>();
      } else {
        if (!py::isinstance<py::str>(value)) throw py::cast_error();
        v = value.cast<std::string>();
      }
    } catch (const py::cast_error&) {
      value_error("option '" + name + "': cannot use a value of type " +
                  py::str(py::type::of(value)).cast<std::string>() + " (expected " + type + ")");
    }
    tessera::set_option(o, name, v);
  }
  return o;
}

namespace {

py::object to_python(const tessera::OptionValue& value) {
  return std::visit([](const auto& v) -> py::object { return py::cast(v); }, value);
}

// inspect.signature(tessera.Session): every option as a keyword-only argument with its default.
py::object session_signature() {
  const py::module_ inspect = py::module_::import("inspect");
  const py::object parameter = inspect.attr("Parameter");
  py::list parameters;
  for (const tessera::OptionInfo& info : tessera::option_infos()) {
    parameters.append(parameter(info.name, parameter.attr("KEYWORD_ONLY"),
                                py::arg("default") = to_python(info.default_value)));
  }
  return inspect.attr("Signature")(parameters);
}

// The docstring's option list: one line per option.
std::string session_doc() {
  std::string doc =
      "One rank's handle on a training job over MPI_COMM_WORLD. Keyword arguments are the "
      "options of train_gcn's flags with '_' for '-':\n";
  for (const tessera::OptionInfo& info : tessera::option_infos())
    doc += "  " + info.name + " (" + info.type + ", default " + info.default_text +
           "): " + info.help + "\n";
  return doc;
}

}  // namespace

py::array_t<float> to_numpy(tessera::Matrix m) {
  return to_numpy(std::move(m.data), {m.rows, m.cols});
}

py::array_t<std::int64_t> to_numpy(std::vector<std::int64_t> v) {
  const auto n = static_cast<py::ssize_t>(v.size());
  return to_numpy(std::move(v), {n});
}

namespace {

py::dict to_dict(const tessera::EpochStats& e) {
  py::dict d;
  d["run"] = e.run;
  d["epoch"] = e.epoch;
  d["loss"] = e.loss;
  d["evaluated"] = e.evaluated;
  d["train"] = e.train_metric;
  d["valid"] = e.valid_metric;
  d["test"] = e.test_metric;
  d["epoch_s"] = e.epoch_s;
  d["eval_s"] = e.eval_s;
  d["comm_s"] = e.comm_s;
  d["bytes_sent"] = e.bytes_sent;
  d["bytes_raw"] = e.bytes_raw;
  return d;
}

py::dict to_dict(const tessera::RunStats& r) {
  py::dict d;
  d["run"] = r.run;
  d["seed"] = r.seed;
  d["highest_train"] = r.highest_train;
  d["best_valid"] = r.best_valid;                    // OGB's Highest Valid
  d["train_at_best_valid"] = r.train_at_best_valid;  // OGB's Final Train
  d["test_at_best_valid"] = r.test_at_best_valid;    // OGB's Final Test
  d["best_epoch"] = r.best_epoch;
  d["epochs"] = r.epochs;
  d["final_train"] = r.final_train;
  d["final_valid"] = r.final_valid;
  d["final_test"] = r.final_test;
  d["final_loss"] = r.final_loss;
  d["epoch_s_median"] = r.epoch_s_median;
  d["bytes_per_epoch"] = r.bytes_per_epoch;
  return d;
}

// Session.train: the GIL released while C++ trains; after every epoch the GIL is taken to check
// for signals (Ctrl-C) and to call on_epoch. A pending KeyboardInterrupt, an exception of
// on_epoch or a False it returns asks every rank to stop after this epoch (so no rank is left
// waiting in a collective); the exception is raised once training has ended.
py::dict train(tessera::Session& s, const py::object& on_epoch) {
  std::optional<py::error_already_set> failure;
  const tessera::OnEpoch callback = [&](const tessera::EpochStats& e) {
    py::gil_scoped_acquire gil;
    if (failure) return false;
    if (PyErr_CheckSignals() != 0) {
      failure.emplace();  // takes the KeyboardInterrupt
      return false;
    }
    if (on_epoch.is_none()) return true;
    try {
      const py::object go_on = on_epoch(to_dict(e));
      return go_on.is_none() || PyObject_IsTrue(go_on.ptr()) == 1;
    } catch (py::error_already_set& error) {
      failure.emplace(std::move(error));
      return false;
    }
  };
  tessera::TrainResult result;
  {
    py::gil_scoped_release release;
    result = s.train(callback);
  }
  if (failure) throw std::move(*failure);
  py::list runs;
  for (const tessera::RunStats& r : result.runs) runs.append(to_dict(r));
  py::dict out;
  out["runs"] = runs;
  out["stopped"] = result.stopped;
  out["early_stopped"] = result.early_stopped;
  out["stop_epoch"] = result.stop_epoch;
  out["checkpoint"] = result.checkpoint;
  out["resumed_from"] = result.resumed_from;
  return out;
}

}  // namespace

}  // namespace tessera_python

PYBIND11_MODULE(_core, m) {
  using namespace tessera_python;
  m.doc() = "Tessera: distributed full-graph GNN training (run under mpiexec for several ranks)";
  m.attr("__version__") = tessera::version();
  bind_distributed_graph(m);
  m.def(
      "options",
      [] {
        py::list out;
        for (const tessera::OptionInfo& info : tessera::option_infos()) {
          py::dict d;
          d["name"] = info.name;
          d["flag"] = info.flag;
          d["type"] = info.type;
          d["default"] = to_python(info.default_value);
          d["help"] = info.help;
          d["choices"] = info.choices;
          out.append(d);
        }
        return out;
      },
      "Every option Session takes (the option table): name, flag, type, default, help, choices.");

  m.def(
      "blas_cores",
      [] {
        const tessera::BlasCores cores = tessera::blas_cores();
        return py::make_tuple(cores.chosen, cores.better);
      },
      "(chosen, better): the OpenBLAS core this process's GEMMs run, and the OPENBLAS_CORETYPE "
      "value that selects faster kernels on this CPU ('' when none does).");

  py::class_<PyGraph>(m, "Graph",
                      "A dataset held in NumPy arrays (kept by reference, not copied): edges as "
                      "edge_index (2, E) int64 or indptr/indices (CSR over destinations), "
                      "x (N, F) float32, y (N) int64 labels (-1: none) or targets (N, T) "
                      "float32, and int64 split ids.")
      .def(py::init(&make_graph), py::kw_only(), py::arg("num_nodes"),
           py::arg("edge_index") = py::none(), py::arg("indptr") = py::none(),
           py::arg("indices") = py::none(), py::arg("x"), py::arg("y") = py::none(),
           py::arg("targets") = py::none(), py::arg("train_idx"),
           py::arg("valid_idx") = py::none(), py::arg("test_idx") = py::none(),
           py::arg("num_classes") = 0, py::arg("name") = "graph")
      .def_property_readonly("num_nodes", [](const PyGraph& g) { return g.view.num_nodes; })
      .def_property_readonly("name", [](const PyGraph& g) { return g.view.name; });

  py::class_<tessera::Session> session(m, "Session", session_doc().c_str());
  session.attr("__signature__") = session_signature();
  session
      .def(py::init([](const py::kwargs& kwargs) {
        return std::make_unique<tessera::Session>(options_from(kwargs));
      }))
      .def_property_readonly("rank", &tessera::Session::rank)
      .def_property_readonly("size", &tessera::Session::size)
      .def(
          "load",
          [](tessera::Session& s, const std::optional<std::string>& dataset) {
            if (dataset) return s.load(*dataset);
            s.load();
          },
          py::arg("dataset") = py::none(),
          "Loads an OGB raw-layout directory, a Tessera .h5 file or synth:PRESET[:SEED] (none: "
          "the dataset option, else the partition store's, else synth:default).")
      .def(
          "load", [](tessera::Session& s, const PyGraph& g) { s.load(g.view); }, py::arg("graph"),
          "Loads a Graph (read on rank 0, partitioned and sent to every rank).")
      .def_property_readonly("num_nodes", &tessera::Session::num_nodes)
      .def_property_readonly("metric", &tessera::Session::metric)
      .def("train", &train, py::arg("on_epoch") = py::none(),
           "Trains every run; on_epoch(dict) sees each epoch, and returning False ends training "
           "there (on every rank; the outputs are written). The GIL is released while training "
           "runs and Ctrl-C ends it with KeyboardInterrupt after the epoch in progress. Returns "
           "a dict: runs (one dict per run), stopped, early_stopped, stop_epoch, checkpoint, "
           "resumed_from.")
      .def(
          "predict",
          [](tessera::Session& s) {
            const tessera::SplitScores scores = s.predict();
            py::dict out;
            out["train"] = scores.train;
            out["valid"] = scores.valid;
            out["test"] = scores.test;
            return out;
          },
          "Instead of train(), with predict=FILE (a save_model file or a checkpoint): evaluates "
          "its weights on the loaded dataset, writes save_predictions / save_embeddings, and "
          "returns a dict of the train, valid and test metric.")
      .def("report", &tessera::Session::report)
      .def(
          "node_ids", [](const tessera::Session& s) { return to_numpy(s.node_ids()); },
          "The dataset's id of each of this rank's rows (the rows of embeddings() and logits()), "
          "in the order training holds them (see node_order).")
      .def(
          "embeddings",
          [](const tessera::Session& s, int layer) { return to_numpy(s.embeddings(layer)); },
          py::arg("layer"), "This rank's nodes (see node_ids): output of layer `layer`.")
      .def("logits", [](const tessera::Session& s) { return to_numpy(s.logits()); })
      .def("predictions", [](const tessera::Session& s) { return to_numpy(s.predictions()); })
      .def(
          "gather_embeddings",
          [](const tessera::Session& s, int layer) { return to_numpy(s.gather_embeddings(layer)); },
          py::arg("layer"), "Collective: every node's embedding on rank 0 (empty elsewhere).")
      .def(
          "_set_weights",
          [](tessera::Session& s, const py::dict& weights) {
            std::vector<tessera::Parameter> params;
            for (const auto& [key, value] : weights) {
              const std::string name = py::str(key);
              const py::array array = value.cast<py::array>();
              const auto values = view_of<float>(array, 2, name.c_str(), "float32");
              params.push_back(
                  {name, array.shape(0), array.shape(1), {values.begin(), values.end()}});
            }
            py::gil_scoped_release release;
            s.set_weights(params);
          },
          py::arg("weights"))
      .def("weights", [](const tessera::Session& s) {
        py::dict out;
        for (tessera::Parameter& p : s.weights()) {
          out[py::str(p.name)] = to_numpy(tessera::Matrix{p.rows, p.cols, std::move(p.values)});
        }
        return out;
      });
}
