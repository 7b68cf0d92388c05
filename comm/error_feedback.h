// SPDX-License-Identifier: Apache-2.0
// ErrorFeedback: the residual memory of a HaloExchange with error feedback. Per direction and
// layer it keeps, for every row of the messages, what the last encoding of that row lost (what
// was meant minus what the peers decode), and adds it to the row's next message, so that the
// rounding errors do not accumulate in the training trajectory. Residuals start at zero, and
// again when a message's shape changes. The residuals live where the rows do (host or GPU):
// every step is a row kernel.
#pragma once

#include <span>
#include <vector>

#include "core/csr.h"
#include "core/tensor.h"

namespace tessera {

class ErrorFeedback {
 public:
  // The message rows source[rows[i]] plus the residual of (direction, layer), in message order;
  // valid until the next call. `rows` must be readable on source's device.
  const Tensor& with_residual(int direction, int layer, const Tensor& source,
                              std::span<const NodeId> rows);
  // Where the sender decodes its own message of the last with_residual (same shape).
  Tensor& decoded();
  // The new residual of (direction, layer): the last with_residual minus decoded().
  void update(int direction, int layer);
  void reset();  // every residual back to zero (a new run)

 private:
  std::vector<Tensor> residuals_[2];  // [direction][layer]
  Tensor input_, decoded_;            // message rows + residual, and their decoding
};

}  // namespace tessera
