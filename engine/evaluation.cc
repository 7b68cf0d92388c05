// SPDX-License-Identifier: Apache-2.0
// Split metrics over ranks (engine/evaluation.h) with the evaluators of datasets/evaluator.h.
#include "engine/evaluation.h"

#include <algorithm>
#include <array>
#include <numeric>

#include "comm/message_tags.h"
#include "core/kernels.h"
#include "datasets/evaluator.h"

namespace tessera {
namespace {

// Class predictions (argmax) of the listed rows against their labels.
AccuracyCounts split_counts(const Tensor& logits, const std::vector<std::int64_t>& labels,
                            const std::vector<NodeId>& rows) {
  std::vector<std::int64_t> y_true(rows.size()), y_pred(rows.size());
  const std::int64_t c = logits.cols();
  for (std::size_t i = 0; i < rows.size(); ++i) {
    const float* row = logits.row<float>(rows[i]);
    y_true[i] = labels[rows[i]];
    y_pred[i] = std::max_element(row, row + c) - row;
  }
  return accuracy_counts(y_true, y_pred);
}

// Mean ROC-AUC over all ranks' listed rows: ROC-AUC does not decompose, so rank 0 gathers the
// (targets, scores) rows of every rank, computes it and broadcasts the value.
double split_rocauc(Communicator& comm, const Tensor& logits, const Tensor& targets,
                    const std::vector<NodeId>& rows) {
  const auto n = static_cast<std::int64_t>(rows.size());
  const std::int64_t t = targets.cols();
  Tensor local(n, 2 * t);  // (n, 2T): targets then scores
  for (std::int64_t i = 0; i < n; ++i) {
    std::copy_n(targets.row<float>(rows[i]), t, local.row<float>(i));
    std::copy_n(logits.row<float>(rows[i]), t, local.row<float>(i) + t);
  }
  const int k = comm.size();
  std::vector<std::int64_t> counts(static_cast<std::size_t>(k), 0);
  counts[static_cast<std::size_t>(comm.rank())] = n;
  comm.all_reduce_max(counts);
  const std::int64_t total = std::accumulate(counts.begin(), counts.end(), std::int64_t{0});
  double value = 0.0;
  if (comm.rank() == 0) {
    Tensor all(total, 2 * t);
    std::copy_n(local.f32(), local.numel(), all.f32());
    std::vector<std::unique_ptr<Request>> requests;
    std::int64_t offset = n;
    for (int r = 1; r < k; ++r) {
      const std::size_t row_bytes = static_cast<std::size_t>(2 * t) * sizeof(float);
      if (counts[r] > 0) {
        requests.push_back(comm.irecv(
            {reinterpret_cast<std::byte*>(all.row<float>(offset)), counts[r] * row_bytes}, r,
            tags::kRocAucRows));
      }
      offset += counts[r];
    }
    wait_all(requests);
    Tensor y_true(total, t), y_score(total, t);
    for (std::int64_t i = 0; i < total; ++i) {
      std::copy_n(all.row<float>(i), t, y_true.row<float>(i));
      std::copy_n(all.row<float>(i) + t, t, y_score.row<float>(i));
    }
    value = mean_rocauc(y_true, y_score);
  } else if (n > 0) {
    comm.isend({reinterpret_cast<const std::byte*>(local.raw()), local.bytes()}, 0,
               tags::kRocAucRows, TrafficCategory::Setup)
        ->wait();
  }
  comm.broadcast({reinterpret_cast<std::byte*>(&value), sizeof value}, 0, TrafficCategory::Setup);
  return value;
}

// (sum of the loss terms, terms) over the listed rows with the training loss's kernels: the NLL
// of the log-softmax (multi-class), or the binary cross-entropy of every labelled task.
std::array<double, 2> split_loss(const GraphPart& part, const Tensor& logits,
                                 const std::vector<NodeId>& rows) {
  if (rows.empty()) return {0.0, 0.0};
  if (part.dataset.task != TaskType::MultiClass) {
    std::int64_t count = 0;
    const double sum = sigmoid_bce_loss_sum(logits, part.targets, rows, &count);
    return {sum, static_cast<double>(count)};
  }
  Tensor logp(logits.rows(), logits.cols());
  log_softmax_forward(logp, logits);
  return {nll_loss_sum(logp, part.labels, rows), static_cast<double>(rows.size())};
}

}  // namespace

SplitMetrics evaluate_splits(Communicator& comm, const GraphPart& part, const Tensor* logits) {
  static const std::vector<NodeId> kNoRows;
  static const Tensor kNoLogits;
  const Tensor& scores = logits != nullptr ? *logits : kNoLogits;
  const std::vector<NodeId>* splits[3] = {&part.train_rows, &part.valid_rows, &part.test_rows};
  if (logits == nullptr) splits[0] = splits[1] = splits[2] = &kNoRows;
  SplitMetrics m;
  double* values[3] = {&m.train, &m.valid, &m.test};
  const std::array<double, 2> loss = split_loss(part, scores, *splits[1]);
  std::vector<double> counts = {loss[0], loss[1]};  // then (labelled, correct) per split
  if (part.dataset.task != TaskType::MultiClass) {
    for (int i = 0; i < 3; ++i) *values[i] = split_rocauc(comm, scores, part.targets, *splits[i]);
    comm.all_reduce_sum(std::span<double>(counts), TrafficCategory::Setup);
    m.valid_loss = counts[1] > 0 ? counts[0] / counts[1] : 0.0;
    return m;
  }
  for (const std::vector<NodeId>* rows : splits) {
    const AccuracyCounts c = split_counts(scores, part.labels, *rows);
    counts.push_back(static_cast<double>(c.labelled));
    counts.push_back(static_cast<double>(c.correct));
  }
  comm.all_reduce_sum(std::span<double>(counts), TrafficCategory::Setup);
  m.valid_loss = counts[1] > 0 ? counts[0] / counts[1] : 0.0;
  for (int i = 0; i < 3; ++i)
    *values[i] = counts[2 * i + 2] > 0 ? counts[2 * i + 3] / counts[2 * i + 2] : 0.0;
  return m;
}

}  // namespace tessera
