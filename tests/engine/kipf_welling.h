// SPDX-License-Identifier: Apache-2.0
// Kipf & Welling's GCN setup on Cora (2 layers, 16 hidden, dropout 0.5 on the input and the
// hidden layer, lr 0.01, weight decay 5e-4, 200 epochs, row-normalised features), shared by the
// tests that train it.
#pragma once

#include "engine/train_config.h"

namespace tessera::test {

inline TrainConfig kipf_welling_config() {
  TrainConfig c;
  c.model = "gcn";
  c.num_layers = 2;
  c.hidden_channels = 16;
  c.dropout = 0.5f;
  c.input_dropout = 0.5f;
  c.lr = 0.01f;
  c.weight_decay = 5e-4f;
  c.epochs = 200;
  c.normalize_features = true;
  return c;
}

}  // namespace tessera::test
