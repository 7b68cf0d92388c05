// SPDX-License-Identifier: Apache-2.0
// tessera::Options: every setting of a training job, declared once in TESSERA_OPTIONS below.
// That one declaration is where everything about an option comes from: the fields of Options,
// train_gcn's flags and --help, the Python keyword arguments (Session(num_layers=...)), the
// checks a value must pass, the summary JSON and the checkpoint identity (the settings a
// checkpoint must match to resume). The defaults are those of OGB's full-batch GCN examples
// (3 layers, 256 hidden, dropout 0.5, lr 0.01, 500 epochs), one run. Values are checked when a
// Session starts; a bad one throws std::invalid_argument naming the flag.
//
// An entry is X(name, type, default, cli, check, record, help):
//   name     the field, the Python keyword and the summary key; the flag is --name with '-'
//            for '_' (num_layers: --num-layers)
//   type     bool, int, std::int64_t, std::uint64_t, float, double or std::string
//   cli      Flag(switches...)            --name VALUE (a bool: --name alone), and any switches
//            Switches(Switch("--a", "v"), ...)  flags that each set a value, and no --name
//            ApiOnly("why")               not on the command line
//   check    Any(), AtLeast(v), Above(v), Within(lo, hi), HalfOpen(lo, hi) (lo <= x < hi),
//            Finite(), OneOf(registry) (a name from a registry), Custom(fn) (engine/
//            train_config.cc), WhenAdaptive(check) (only with --codec adaptive),
//            RefusedBy(modes, "why") (a --parallel mode refuses a value other than the
//            default), All(check, ...); floating-point values must always be finite
//   record   Identity()  in the summary and the checkpoint identity; IdentityUnlessDefault()
//            the same, in the identity only when set (checkpoints written before the option
//            existed resume under its default); IdentityUnless("v")  the same, in the identity
//            only when not v (checkpoints written before the option existed, when runs had v,
//            resume under v); Summary()  in the summary;
//            IdentityIfAdaptive()  both, with --codec adaptive only; ReportedAs("key")  the run
//            writes what it used under "key"; NotRecorded("why")
//   help     what --help and the Python docstring say
// The names inside cli, check and record are read by engine/option_table.cc only.
// Adding an option: one entry here; then read it where it takes effect.
#pragma once

#include <cstdint>
#include <stdexcept>
#include <string>
#include <utility>
#include <variant>
#include <vector>

#include "tessera/export.h"

#define TESSERA_OPTIONS(X)                                                                         \
  /* The data and the model. */                                                                    \
  X(dataset, std::string, "synth:default", Flag(), Any(), Summary(),                               \
    "an OGB raw-layout directory, a Tessera .h5 file or synth:PRESET[:SEED] (presets: default, "   \
    "arxiv-like, products-like); with --partitions and no --dataset, the store's dataset")         \
  X(model, std::string, "gcn", Flag(Switch("--use-sage", "sage")),                                 \
    All(OneOf(layer_kind_names), Custom(check_model)), Identity(),                                 \
    "the layer kind (layers/layer_kinds.cc)")                                                      \
  X(num_layers, int, 3, Flag(), Within(1, 1024), Identity(),                                       \
    "layers of the model (gcnii: its dense input and output layers included, >= 3)")               \
  X(hidden_channels, std::int64_t, 256, Flag(), Within(1, 1 << 20), Identity(),                    \
    "width of the hidden layers")                                                                  \
  X(dropout, float, 0.5f, Flag(), HalfOpen(0, 1), Identity(),                                      \
    "dropout after every hidden layer, in [0, 1)")                                                 \
  X(input_dropout, float, 0.0f, Flag(), HalfOpen(0, 1), Identity(),                                \
    "dropout on the input features, in [0, 1) (Kipf & Welling: the same as --dropout)")            \
  X(batch_norm, bool, false, Flag(),                                                               \
    RefusedBy(kPipelined,                                                                          \
              "needs every layer's statistics over the whole graph, which a chunk "                \
              "does not see; use --parallel graph"),                                               \
    Identity(), "batch normalisation over nodes between layers (as OGB's ogbn-arxiv GCN)")         \
  X(normalize_features, bool, false, Flag(), Any(), Identity(),                                    \
    "divide each feature row by its sum (Kipf & Welling)")                                         \
  X(gcnii_alpha, float, 0.1f, Flag(), HalfOpen(0, 1), IdentityUnlessDefault(),                     \
    "gcnii: weight of the initial residual h0 in every GCNII layer, in [0, 1)")                    \
  X(gcnii_lambda, float, 0.5f, Flag(), Above(0), IdentityUnlessDefault(),                          \
    "gcnii: identity mapping, layer l mixes (1 - b) I + b W with b = log(lambda / l + 1)")         \
  X(heads, int, 8, Flag(), Within(1, 1024), IdentityUnlessDefault(),                               \
    "gat: attention heads of every hidden layer, concatenated (--hidden-channels is their total "  \
    "width, a multiple of --heads)")                                                               \
  X(output_heads, int, 1, Flag(), Within(1, 1024), IdentityUnlessDefault(),                        \
    "gat: attention heads of the output layer, averaged")                                          \
  X(attention_dropout, float, 0.0f, Flag(), HalfOpen(0, 1), IdentityUnlessDefault(),               \
    "gat: dropout on the attention weights of every edge and head, in [0, 1) (GAT paper: 0.6)")    \
  /* The optimiser and the runs. */                                                                \
  X(lr, float, 0.01f, Flag(), Above(0), Identity(), "Adam learning rate")                          \
  X(weight_decay, float, 0.0f, Flag(), AtLeast(0), Identity(),                                     \
    "L2 weight decay on convolution weights (Adam, torch semantics; biases and batch norm are "    \
    "not decayed)")                                                                                \
  X(dense_weight_decay, float, -1.0f, Flag(), Custom(check_dense_weight_decay),                    \
    IdentityUnlessDefault(),                                                                       \
    "L2 weight decay on the dense layers' weights (gcnii's first and last layers, decayed apart "  \
    "from its convolutions in the GCNII paper); -1: --weight-decay")                               \
  X(epochs, int, 500, Flag(), AtLeast(1), Identity(), "training epochs per run")                   \
  X(eval_every, int, 1, Flag(), AtLeast(1), Identity(),                                            \
    "evaluate train/valid/test every N epochs (and at the last)")                                  \
  X(patience, int, 0, Flag(), AtLeast(0), IdentityUnlessDefault(),                                 \
    "early stopping: end a run once N epochs have passed since its best validation metric "        \
    "(checked at every evaluation; 0: never)")                                                     \
  X(patience_on, std::string, "metric", Flag(), OneOf(patience_on_names), IdentityUnlessDefault(), \
    "what --patience watches on the validation rows: metric (accuracy or ROC-AUC, highest) or "    \
    "loss (lowest, as the GCNII paper's code stops)")                                              \
  X(log_steps, int, 1, Flag(), AtLeast(1), Summary(),                                              \
    "print the progress line of every N-th epoch (OGB's --log_steps; evaluation as --eval-every)") \
  X(runs, int, 1, Flag(), AtLeast(1), Identity(),                                                  \
    "independent runs (seeds); mean and std over them are reported")                               \
  X(seed, std::uint64_t, 0, Flag(), Any(), Identity(),                                             \
    "seed of run 0 (initialisation and dropout masks); run r uses seed + r")                       \
  /* Where it runs. */                                                                             \
  X(threads, int, 0, Flag(), AtLeast(0), Summary(),                                                \
    "compute threads per rank (0: OMP_NUM_THREADS if set, else the node's cores divided among "    \
    "its ranks); BLAS is capped to the same count")                                                \
  X(device, std::string, "cpu", Flag(), Custom(check_device), Summary(),                           \
    "cpu, or cuda[:i] in a build with the CUDA backend (every mode: a GPU per rank, or shared "    \
    "with --gpu-comm mpi); a number "                                                              \
    "N is OGB's --device N: cuda:N, or the CPU on a machine without a GPU")                        \
  X(gpu_comm, std::string, "nccl", Flag(), OneOf(gpu_comm_names), Summary(),                       \
    "how GPU ranks exchange halos and gradients: nccl, each rank on a GPU of its own; mpi, "       \
    "staged through host memory over MPI, so that ranks may share a GPU (also where NCCL is "      \
    "missing)")                                                                                    \
  X(parallel, std::string, "graph", Flag(), OneOf(parallel_mode_names), ReportedAs("parallel"),    \
    "how the ranks share the work (engine/modes.cc): graph, one graph part per rank, halos every " \
    "layer; pipeline, one stage of consecutive layers per rank, chunks streamed between stages "   \
    "(GNNPipe); hybrid, ranks = parts x --stages, a pipeline per graph part")                      \
  X(stages, int, 0, Flag(), All(AtLeast(0), RefusedBy(kGraphMode, kStagesUnused)),                 \
    ReportedAs("stages"),                                                                          \
    "pipeline stages (hybrid: per graph part, required; pipeline: 0 or the ranks)")                \
  X(chunks, int, 0, Flag(), All(AtLeast(0), RefusedBy(kGraphMode, kStagesUnused)),                 \
    ReportedAs("chunks"),                                                                          \
    "chunks each graph part is cut into for the pipeline, >= --stages (0: the stages)")            \
  X(memory_budget, double, 0.0, Flag(), AtLeast(0), Summary(),                                     \
    "GiB one rank may use: every mode refuses, before training, a pipeline stage or a graph part " \
    "estimated above it (0: the memory of the node, or of the rank's GPU, shared among the ranks " \
    "that use it)")                                                                                \
  X(parts, int, 0, Flag(), AtLeast(0), ReportedAs("graph_parts"),                                  \
    "graph parts; must equal the ranks (hybrid: ranks / stages) and Slurm's task count (0: not "   \
    "checked)")                                                                                    \
  X(partition, std::string, "metis", Flag(), OneOf(partition_method_names),                        \
    ReportedAs("partition"), "partitioner when rank 0 partitions in process")                      \
  X(partitions, std::string, "", Flag(), Any(), Summary(),                                         \
    "a partition store made by partition_graph: each rank reads only its own part file")           \
  X(partition_file, std::string, "", Flag(),                                                       \
    RefusedBy(kPipelined, "plans the graph parts of --parallel graph; use --parallel graph"),      \
    Summary(),                                                                                     \
    "a plan file made by partition_distributed (PT-Scotch across ranks): the parts follow it; "    \
    "with a Tessera .h5 dataset every rank reads only its own rows and no rank the whole graph")   \
  X(node_order, std::string, "rcm", Flag(), OneOf(node_order_names), IdentityUnless("none"),       \
    "how nodes are renumbered for locality before training, when rank 0 holds the whole graph: "   \
    "rcm (reverse Cuthill-McKee) or none; outputs keep the dataset's ids")                         \
  X(comm_timeout, double, 900.0, Flag(), Finite(), Summary(),                                      \
    "seconds a rank waits for a message or collective before it gives up (<= 0: never)")           \
  /* Halo message codecs. */                                                                       \
  X(codec, std::string, "none", Flag(), All(OneOf(codec_option_names), Custom(check_codec)),       \
    Identity(),                                                                                    \
    "encoding of halo embeddings (comm/codec_table.cc), or adaptive: 2/4/8 bits per row in both "  \
    "directions under --bit-budget")                                                               \
  X(codec_backward, std::string, "", Flag(), Custom(check_codec_backward),                         \
    Identity(backward_codec_name), "encoding of halo gradients (empty: the same as --codec)")      \
  X(aggregate_dtype, std::string, "f32", Flag(),                                                   \
    All(OneOf(aggregate_dtype_names),                                                              \
        RefusedBy(kPipelined,                                                                      \
                  "applies to --parallel graph; the pipeline's chunks aggregate in f32"),          \
        Custom(check_aggregate_dtype)),                                                            \
    IdentityUnlessDefault(),                                                                       \
    "what the aggregations read their rows as: f32, or bf16 (each row rounded to nearest even, "   \
    "summed in f32; half the bytes to gather). CPU ranks, layers without attention")               \
  X(feature_dtype, std::string, "f32", Flag(),                                                     \
    All(OneOf(aggregate_dtype_names),                                                              \
        RefusedBy(kPipelined, "applies to --parallel graph; the pipeline's chunks keep f32 rows"), \
        Custom(check_feature_dtype)),                                                              \
    IdentityUnlessDefault(),                                                                       \
    "how the input features are kept: f32, or bf16 (rounded once after loading to nearest even, "  \
    "half their memory; every kernel widens them exactly). CPU ranks, layers without attention")   \
  X(error_feedback, bool, false, Flag(),                                                           \
    RefusedBy(kPipelined,                                                                          \
              "applies to --parallel graph; the fixed codecs apply to the pipeline "               \
              "streams"),                                                                          \
    Identity(), "add each row's quantisation residual to its next message")                        \
  X(bit_budget, double, 4.0, Flag(), WhenAdaptive(Within(2, 8)), IdentityIfAdaptive(),             \
    "adaptive codec: average bits per value, in [2, 8]")                                           \
  X(replan_every, int, 10, Flag(), WhenAdaptive(AtLeast(1)), IdentityIfAdaptive(),                 \
    "adaptive codec: re-plan the bits every N epochs from the observed row ranges")                \
  /* Checkpoints and stopping. */                                                                  \
  X(checkpoint_dir, std::string, "", Flag(), Any(),                                                \
    NotRecorded("how the run is kept and continued, not what it computes: a run stopped and "      \
                "resumed gives the summary of the uninterrupted one"),                             \
    "write checkpoints to DIR (rank 0) and continue from the newest valid one there")              \
  X(checkpoint_every, int, 0, Flag(), AtLeast(0), NotRecorded("as --checkpoint-dir"),              \
    "epochs between checkpoints (0: only on SIGUSR1/SIGTERM and at the end)")                      \
  X(keep_checkpoints, int, 2, Flag(), AtLeast(1), NotRecorded("as --checkpoint-dir"),              \
    "newest checkpoints kept in --checkpoint-dir")                                                 \
  X(resume, std::string, "auto",                                                                   \
    Switches(Switch("--resume", "require"), Switch("--no-resume", "never")),                       \
    All(OneOf(resume_mode_names), Custom(check_resume)), NotRecorded("as --checkpoint-dir"),       \
    "auto: continue from the newest valid checkpoint in --checkpoint-dir when there is one; "      \
    "require (--resume): fail without one; never (--no-resume): start over, replacing them")       \
  X(handle_signals, bool, false,                                                                   \
    ApiOnly("train_gcn always turns it on; the option lets a host program keep its own signal "    \
            "handling"),                                                                           \
    Any(), Summary(),                                                                              \
    "SIGUSR1 and SIGTERM stop training after the epoch in progress and a checkpoint, instead of "  \
    "ending the process")                                                                          \
  /* Output (rank 0). */                                                                           \
  X(metrics, std::string, "", Flag(), Any(),                                                       \
    NotRecorded("where the run's output goes, not what it did: runs that differ only in their "    \
                "output files give identical summaries"),                                          \
    "write one JSON object per epoch to FILE")                                                     \
  X(summary, std::string, "", Flag(), Any(),                                                       \
    NotRecorded("the summary's own path: runs that differ only in their output files give "        \
                "identical summaries"),                                                            \
    "write a summary JSON object to FILE")                                                         \
  X(save_predictions, std::string, "", Flag(), Custom(check_output_files),                         \
    NotRecorded("an output path"),                                                                 \
    "write every node's class probabilities (softmax; multi-label: a sigmoid per task) under the " \
    "last run's weights, rows in node-id order, to FILE (.npy or .csv)")                           \
  X(save_embeddings, std::string, "", Flag(),                                                      \
    RefusedBy(kPipelined,                                                                          \
              "needs a whole layer's output on the ranks of a part; use --parallel "               \
              "graph"),                                                                            \
    NotRecorded("an output path"),                                                                 \
    "write every node's output of layer --embedding-layer, in node-id order, to FILE (.npy or "    \
    ".csv)")                                                                                       \
  X(embedding_layer, int, -1, Flag(), Custom(check_embedding_layer), Summary(),                    \
    "the layer --save-embeddings writes, in [0, --num-layers) (-1: the last hidden layer)")        \
  X(restore_best, bool, false, Flag(), Any(), IdentityUnlessDefault(),                             \
    "end every run with the weights of its best validation epoch: they are the ones --save-*"      \
    " write (the figures reported are at that epoch either way)")                                  \
  X(save_model, std::string, "", Flag(), Any(), NotRecorded("an output path"),                     \
    "write the last run's weights and the options that define the model to FILE (HDF5), for "      \
    "--predict")                                                                                   \
  X(predict, std::string, "", Flag(),                                                              \
    All(RefusedBy(kPipelined,                                                                      \
                  "runs the whole model on the ranks of each part; use --parallel "                \
                  "graph"),                                                                        \
        Custom(check_predict)),                                                                    \
    NotRecorded("an input path: which model predicted, not a setting of training"),                \
    "instead of training, load the weights of FILE (from --save-model, or a checkpoint), whose "   \
    "options define the model, and evaluate them on --dataset (use with --save-predictions)")      \
  X(verbosity, int, 0, Switches(Switch("--quiet", "1")), Within(0, 2), Summary(),                  \
    "rank 0 on stderr: 0 nothing, 1 the set-up (launch, dataset, partition), 2 also a line per "   \
    "evaluated epoch (train_gcn: 2, --quiet: 1)")

namespace tessera {

struct Options {
#define TESSERA_OPTION_FIELD(name, type, value, ...) type name = value;
  TESSERA_OPTIONS(TESSERA_OPTION_FIELD)
#undef TESSERA_OPTION_FIELD
};

// The options at run time, for programs that present them (train_gcn's flags, the Python
// keywords): one entry per TESSERA_OPTIONS entry, in its order.
using OptionValue = std::variant<bool, std::int64_t, std::uint64_t, double, std::string>;

struct OptionInfo {
  std::string name;  // "num_layers"
  std::string flag;  // "--num-layers"; empty when only switches (or nothing) set it
  std::vector<std::pair<std::string, std::string>> switches;  // ("--quiet", "1"): set a value
  std::string cli_absent;  // why it is not on the command line (empty: it is)
  std::string type;        // "bool", "int", "float" or "string"
  std::string help;        // with the choices, when a registry gives them
  std::vector<std::string> choices;
  OptionValue default_value;  // as the type above holds it
  std::string default_text;
  std::string summary_key;   // where the summary records it; empty: it does not
  std::string not_recorded;  // why the summary does not
  bool identity = false;     // part of the checkpoint identity
};

TESSERA_API const std::vector<OptionInfo>& option_infos();
// Sets option `name` from a value of its type ("int" options take any integer in the field's
// range, "float" ones any number): std::invalid_argument naming the option otherwise. Checks
// that need the other options (ranges, choices, modes) run when a Session starts.
TESSERA_API void set_option(Options& options, const std::string& name, const OptionValue& value);
// The same from text as on a command line ("3", "0.5", "on"/"true"/"1", "int4").
TESSERA_API void set_option_text(Options& options, const std::string& name,
                                 const std::string& text);
TESSERA_API OptionValue get_option(const Options& options, const std::string& name);

// What a bad option throws (set_option, check_options, and a Session's start): the message
// names the flag and what is wrong with it. Bad input files throw plain std::invalid_argument.
class TESSERA_API OptionError : public std::invalid_argument {
 public:
  using std::invalid_argument::invalid_argument;
};

// Every check of the options that needs no data and no other rank (ranges, choices, modes and
// combinations) — the ones a Session runs when it starts, done up front: OptionError naming the
// flag. Checks against the ranks, the launch environment and the files come in the Session.
TESSERA_API void check_options(const Options& options);

}  // namespace tessera
