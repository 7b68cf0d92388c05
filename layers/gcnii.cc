// SPDX-License-Identifier: Apache-2.0
// The layer kind "gcnii" (Chen et al. 2020, "Simple and Deep Graph Convolutional Networks"), the
// model of their Planetoid experiments and of PyG's GCN2Conv example: a dense input layer
// h0 = ReLU(X W_0 + b_0), then L - 2 GCNII layers
//   h_{l+1} = ReLU(s_l ((1 - beta_l) I + beta_l W_l)),  s_l = (1 - alpha) Â h_l + alpha h0,
//   beta_l = log(lambda / l + 1)
// (initial residual alpha, identity mapping beta_l, Â = D^-1/2 (A + I) D^-1/2, no bias), and a
// dense output layer h_{L-1} W_{L-1} + b_{L-1}. Model applies dropout to every layer's input and
// hands the GCNII layers h0 and its gradient (Conv::set_initial).
// A GCNII layer computes with m = Â h + (alpha / (1 - alpha)) h0 = s / (1 - alpha) and
// W' = (1 - beta) I + beta W, out = act((1 - alpha) m W'): one SpMM, one axpy and one GEMM over
// the N rows. Its backward, from d_pre = d_out act'(out):
//   d_W += (1 - alpha) beta m^T d_pre,  d_m = (1 - alpha) d_pre W'^T,
//   d_x = Â^T d_m,  d_h0 += (alpha / (1 - alpha)) d_m.
#include <cmath>

#include "core/error.h"
#include "layers/conv_common.h"
#include "layers/layer_kind.h"

namespace tessera {

namespace {

bool is_gcnii_layer(const LayerShape& shape) { return !shape.first() && shape.hidden(); }

// An f32 (rows, cols) backward workspace: `kept` itself when it is f32 (what it held was read),
// else `own`; resized.
Tensor& f32_workspace(Tensor& kept, Tensor& own, std::int64_t rows, std::int64_t cols) {
  Tensor& workspace = kept.dtype() == DType::F32 ? kept : own;
  workspace.resize(rows, cols, kept.device());
  return workspace;
}

// beta_l of GCNII layer l (l >= 1: the model's layer index, the dense input layer being 0).
float identity_beta(const LayerShape& shape) {
  return static_cast<float>(
      std::log(static_cast<double>(shape.hyper.gcnii_lambda) / shape.layer + 1.0));
}

// The dense first and last layers: out = act(x W + b).
class DenseConv final : public Conv {
 public:
  DenseConv(const LayerShape& shape, std::span<const std::int64_t> at)
      : shape_(shape),
        weight_at_(static_cast<std::size_t>(at[0])),
        bias_at_(static_cast<std::size_t>(at[1])) {}

  void forward(Tensor& out, const Tensor& x, std::span<const float> params, Activation act,
               Propagator&) override {
    copy_param(weight_, params.subspan(weight_at_, weight_size()), shape_.f_in, shape_.f_out,
               x.device());
    check_conv_args("GCNII dense", x, weight_, bias_size());
    out.resize(x.rows(), shape_.f_out, x.device());
    gemm(out, x, false, weight_, false);
    bias_act_forward(out, out, params.subspan(bias_at_, bias_size()), act);
  }

  void backward(Tensor* d_x, std::span<float> grads, const Tensor& d_out, const Tensor& x,
                const Tensor& out, std::span<const float>, Activation act, Propagator&,
                Tensor& workspace) override {
    check_shape(d_out, x.rows(), shape_.f_out, "GCNII dense d_out");
    const WorkspaceLoan loan(d_pre_, workspace);
    const Tensor& d_pre =
        bias_act_grad(d_pre_, grads.subspan(bias_at_, bias_size()), d_out, out, act);
    const std::span<float> d_w = grads.subspan(weight_at_, weight_size());
    copy_param(d_weight_, d_w, shape_.f_in, shape_.f_out, x.device());
    gemm(d_weight_, x, true, d_pre, false, 1.0f, 1.0f);  // += x^T d_pre
    copy_grad(d_w, d_weight_);
    if (d_x == nullptr) return;
    d_x->resize(x.rows(), shape_.f_in, x.device());
    gemm(*d_x, d_pre, false, weight_, true);  // d_pre W^T
  }

  void release() override { d_pre_ = Tensor(); }

 private:
  std::size_t weight_size() const { return static_cast<std::size_t>(shape_.f_in * shape_.f_out); }
  std::size_t bias_size() const { return static_cast<std::size_t>(shape_.f_out); }

  LayerShape shape_;
  std::size_t weight_at_, bias_at_;
  Tensor weight_, d_weight_;  // (F_in, F_out) copies of the parameters and their gradients
  Tensor d_pre_;              // the lent workspace during backward
};

// A GCNII layer (F, F) between the dense ones.
class Gcn2Conv final : public Conv {
 public:
  Gcn2Conv(const LayerShape& shape, std::span<const std::int64_t> at)
      : shape_(shape),
        weight_at_(static_cast<std::size_t>(at[0])),
        alpha_(shape.hyper.gcnii_alpha),
        beta_(identity_beta(shape)) {
    TESSERA_CHECK(alpha_ >= 0.0f && alpha_ < 1.0f, InvalidArgument,
                  "GCNII alpha must be in [0, 1), got ", alpha_);
    TESSERA_CHECK(shape.hyper.gcnii_lambda > 0.0f, InvalidArgument,
                  "GCNII lambda must be > 0, got ", shape.hyper.gcnii_lambda);
    TESSERA_CHECK(shape.f_in == shape.f_out, InvalidArgument,
                  "a GCNII layer maps the hidden width to itself, got ", shape.f_in, " -> ",
                  shape.f_out);
  }

  void set_initial(const Tensor* h0, Tensor* d_h0) override {
    h0_ = h0;
    d_h0_ = d_h0;
  }

  void forward(Tensor& out, const Tensor& x, std::span<const float> params, Activation act,
               Propagator& propagator) override {
    const std::int64_t n = x.rows(), f = shape_.f_in;
    TESSERA_CHECK(h0_ != nullptr, InvalidArgument, "GCNII layer ", shape_.layer,
                  " has no initial representation h0 (Conv::set_initial)");
    check_shape(x, n, f, "GCNII x");
    check_shape(*h0_, n, f, "GCNII h0");
    ready_ = false;
    copy_param(weight_, params.subspan(weight_at_, weight_size()), f, f, x.device());
    mixed_weight(x.device());
    // m (N, F) = Â h + alpha / (1 - alpha) h0, kept in bf16 under bf16 aggregation (h rounded
    // into m's tensor for the propagator, m made in out's memory, then read rounded by the GEMM,
    // as propagate_linear_forward does).
    const bool bf16 = keeps_sums_in_bf16(mixed_, /*aggregates_first=*/true, propagator);
    Tensor& sums = bf16 ? out : mixed_;
    sums.resize(n, f, x.device());
    propagator.forward(sums, bf16 ? bf16_operand(mixed_, x) : x, shape_.layer);  // Â h
    if (alpha_ > 0.0f) axpy(sums, alpha_ / (1.0f - alpha_), *h0_);
    if (bf16) keep_bf16(mixed_, sums);
    out.resize(n, f, x.device());
    gemm(out, mixed_, false, weight_prime_, false, 1.0f - alpha_, 0.0f);
    if (act != Activation::None) bias_act_forward(out, out, {}, act);
    ready_ = true;
  }

  void backward(Tensor* d_x, std::span<float> grads, const Tensor& d_out, const Tensor& x,
                const Tensor& out, std::span<const float>, Activation act, Propagator& propagator,
                Tensor& workspace) override {
    const std::int64_t n = x.rows(), f = shape_.f_in;
    check_shape(d_out, n, f, "GCNII d_out");
    TESSERA_CHECK(ready_, InvalidArgument,
                  "GCNII backward needs a forward before it (one backward per forward)");
    ready_ = false;
    const WorkspaceLoan loan(d_pre_, workspace);
    const Tensor& d_pre = bias_act_grad(d_pre_, {}, d_out, out, act);
    const std::span<float> d_w = grads.subspan(weight_at_, weight_size());
    copy_param(d_weight_, d_w, f, f, x.device());
    gemm(d_weight_, mixed_, true, d_pre, false, (1.0f - alpha_) * beta_, 1.0f);
    copy_grad(d_w, d_weight_);
    Tensor own;  // d_m (N, F), in m's memory (read above) unless m is bf16
    Tensor& d_mixed = f32_workspace(mixed_, own, n, f);
    gemm(d_mixed, d_pre, false, weight_prime_, true, 1.0f - alpha_, 0.0f);
    if (alpha_ > 0.0f && d_h0_ != nullptr) axpy(*d_h0_, alpha_ / (1.0f - alpha_), d_mixed);
    if (d_x == nullptr) return;
    d_x->resize(n, f, x.device());
    propagator.backward(*d_x, d_mixed, shape_.layer);
  }

  // The backward reads x for its shape only, which m shares.
  const Tensor* input_stand_in() const override { return &mixed_; }

  void release() override {
    mixed_ = Tensor();
    d_pre_ = Tensor();
  }

 private:
  std::size_t weight_size() const { return static_cast<std::size_t>(shape_.f_in * shape_.f_out); }

  // weight_prime_ = (1 - beta) I + beta W, on `device`.
  void mixed_weight(Device device) {
    const std::int64_t f = shape_.f_in;
    if (identity_.numel() != f * f || identity_.device() != device) {
      Tensor eye = Tensor::zeros(f, f);
      for (std::int64_t i = 0; i < f; ++i) eye.f32()[i * f + i] = 1.0f;
      identity_ = eye.to(device);
    }
    weight_prime_.resize(f, f, device);
    weight_prime_.zero();
    axpy(weight_prime_, beta_, weight_);
    axpy(weight_prime_, 1.0f - beta_, identity_);
  }

  LayerShape shape_;
  std::size_t weight_at_;
  float alpha_, beta_;
  const Tensor* h0_ = nullptr;
  Tensor* d_h0_ = nullptr;
  bool ready_ = false;
  Tensor weight_, d_weight_;  // (F, F) copies of W and its gradient
  Tensor identity_;           // (F, F) I
  Tensor weight_prime_;       // (F, F) (1 - beta) I + beta W
  Tensor mixed_;              // (N, F) m (f32, or bf16: keeps_sums_in_bf16); the backward's d_m
  Tensor d_pre_;              // the lent workspace during backward
};

std::vector<ParamDecl> gcnii_params(const LayerShape& shape) {
  if (is_gcnii_layer(shape))  // PyG's GCN2Conv: one Glorot weight, no bias
    return {{"weight", shape.f_in, shape.f_out, true, ParamInit::Glorot, 0}};
  return {{"weight", shape.f_in, shape.f_out, true, ParamInit::Glorot, 0, /*dense=*/true},
          {"bias", 1, shape.f_out, false, ParamInit::Zeros, 0}};
}

std::unique_ptr<Conv> make_gcnii_conv(const LayerShape& shape, std::span<const std::int64_t> at) {
  if (is_gcnii_layer(shape)) return std::make_unique<Gcn2Conv>(shape, at);
  return std::make_unique<DenseConv>(shape, at);
}

// The dense layers read their input; the GCNII layers only its shape.
bool gcnii_reads_input(std::int64_t, std::int64_t) { return true; }

// The dense layers exchange nothing; a GCNII layer sends h forward for Â h and d_m back for
// Â^T d_m (its input always has a gradient: even the first GCNII layer's comes from h0's layer).
HaloWidths gcnii_halo_widths(const LayerShape& shape) {
  if (!is_gcnii_layer(shape)) return {};
  return {shape.f_in, shape.f_in};
}

}  // namespace

extern const LayerKind kGcniiLayer;
const LayerKind kGcniiLayer = {
    .name = "gcnii",
    .help =
        "GCNII (Chen et al. 2020): a dense input layer h0, then ReLU(((1 - a) Â h + a h0) "
        "((1 - b_l) I + b_l W)), b_l = log(lambda / l + 1), then a dense output layer: trains "
        "at 64 layers (--gcnii-alpha, --gcnii-lambda; --num-layers counts the dense ones)",
    .op = &kGcnOperator,
    .residual = false,
    .initial_residual = true,
    .gemms = 1,
    .backward_reads_input = gcnii_reads_input,
    .halo_widths = gcnii_halo_widths,
    .params = gcnii_params,
    .make = make_gcnii_conv,
};
const ModelKind ModelKind::Gcnii{kGcniiLayer};

}  // namespace tessera
