// SPDX-License-Identifier: Apache-2.0
// The layer kind "gat" (Velickovic et al. 2018, "Graph Attention Networks"), as PyG's GATConv
// computes it: with H heads of width D, z = x W (N, H·D); per head the source and destination
// terms s_src = <z, a_src>, s_dst = <z, a_dst>; on every edge (v <- u) of A + I the score
// e = LeakyReLU(s_dst[v] + s_src[u], 0.2), alpha = the softmax of e over v's in-edges (then the
// attention dropout), out[v] = Σ_u alpha z[u], concatenated over the heads in hidden layers and
// averaged in the output layer, plus a bias; ELU between the layers (LayerKind::activation).
// Distributed, the rows z and s_src of the halo sources are what the exchange carries (one
// (N + H, H·D + H) tensor, HaloAccess), and their gradients go back the same way: forward
// scores and aggregates the inner rows while the halo rows are in flight, then the boundary
// rows; backward does the boundary rows first, sends the halo rows' gradients, then the rest.
// Kernels: gemm, gat_project, gat_attention_{forward,backward,transpose} (core/kernels.h).
#include <algorithm>
#include <numeric>

#include "core/error.h"
#include "layers/conv_common.h"
#include "layers/layer_kind.h"

namespace tessera {

namespace {

constexpr float kNegativeSlope = 0.2f;  // of the LeakyReLU on the scores (the paper's)
// Chunks of the overlapped row loops: the exchange is polled this many times per pass.
constexpr std::size_t kPollChunks = 16;

int layer_heads(const LayerShape& shape) {
  return shape.hidden() ? shape.hyper.gat_heads : shape.hyper.gat_output_heads;
}

// The width of one head: hidden layers concatenate their heads, the output layer averages them.
std::int64_t head_width(const LayerShape& shape) {
  const int heads = layer_heads(shape);
  TESSERA_CHECK(heads >= 1, InvalidArgument, "GAT layer ", shape.layer,
                ": heads must be >= 1, got ", heads);
  if (!shape.hidden()) return shape.f_out;
  TESSERA_CHECK(shape.f_out % heads == 0, InvalidArgument, "GAT: the hidden width ", shape.f_out,
                " (--hidden-channels) must be a multiple of --heads ", heads,
                " (the heads are concatenated)");
  return shape.f_out / heads;
}

// Runs f(rows) over `rows` in chunks, polling the exchange between them.
template <class F>
void in_chunks(std::span<const NodeId> rows, HaloAccess& halo, F f) {
  const std::size_t chunk = std::max<std::size_t>(1, (rows.size() + kPollChunks - 1) / kPollChunks);
  for (std::size_t begin = 0; begin < rows.size(); begin += chunk) {
    f(rows.subspan(begin, std::min(chunk, rows.size() - begin)));
    halo.poll();
  }
}

// The transposed pattern of the layer's propagator and the row lists, rebuilt when the pattern
// changes (a model may run on several graphs).
struct Transposed {
  const Csr* of = nullptr;
  EdgeOffset nnz = -1;
  Csr at;                           // (N + H, N) A^T
  std::vector<EdgeOffset> edge_of;  // (nnz) position in A of each entry of A^T
  std::vector<NodeId> owned, halo;  // 0..N-1 and N..N+H-1

  void build(const Csr& a) {
    if (of == &a && nnz == a.nnz()) return;
    const std::int64_t n = a.num_rows(), cols = a.num_cols();
    std::vector<EdgeOffset> ptr(static_cast<std::size_t>(cols) + 1, 0);
    for (const NodeId c : a.indices()) ++ptr[static_cast<std::size_t>(c) + 1];
    std::partial_sum(ptr.begin(), ptr.end(), ptr.begin());
    std::vector<EdgeOffset> next(ptr.begin(), ptr.end() - 1);
    std::vector<NodeId> idx(static_cast<std::size_t>(a.nnz()));
    edge_of.assign(static_cast<std::size_t>(a.nnz()), 0);
    for (NodeId r = 0; r < static_cast<NodeId>(n); ++r) {
      for (EdgeOffset j = a.indptr()[r]; j < a.indptr()[r + 1]; ++j) {
        const EdgeOffset k = next[static_cast<std::size_t>(a.indices()[j])]++;
        idx[static_cast<std::size_t>(k)] = r;
        edge_of[static_cast<std::size_t>(k)] = j;
      }
    }
    at = Csr(cols, n, std::move(ptr), std::move(idx));
    owned.resize(static_cast<std::size_t>(n));
    std::iota(owned.begin(), owned.end(), NodeId{0});
    halo.resize(static_cast<std::size_t>(cols - n));
    std::iota(halo.begin(), halo.end(), static_cast<NodeId>(n));
    of = &a;
    nnz = a.nnz();
  }
};

class GatConv final : public Conv {
 public:
  GatConv(const LayerShape& shape, std::span<const std::int64_t> at)
      : shape_(shape),
        heads_(layer_heads(shape)),
        d_(head_width(shape)),
        weight_at_(static_cast<std::size_t>(at[0])),
        att_src_at_(static_cast<std::size_t>(at[1])),
        bias_at_(static_cast<std::size_t>(at[3])) {
    TESSERA_CHECK(static_cast<std::size_t>(at[2]) == att_src_at_ + static_cast<std::size_t>(hd()),
                  Internal, "GAT: att_dst must follow att_src in the parameters");
    TESSERA_CHECK(shape.hyper.attention_dropout >= 0.0f && shape.hyper.attention_dropout < 1.0f,
                  InvalidArgument, "GAT attention dropout must be in [0, 1), got ",
                  shape.hyper.attention_dropout);
  }

  void set_step(bool training, const CounterRng& rng) override {
    training_ = training;
    rng_ = rng;
  }

  void forward(Tensor& out, const Tensor& x, std::span<const float> params, Activation act,
               Propagator& propagator) override;
  void backward(Tensor* d_x, std::span<float> grads, const Tensor& d_out, const Tensor& x,
                const Tensor& out, std::span<const float> params, Activation act,
                Propagator& propagator, Tensor& workspace) override;

  void release() override {
    for (Tensor* t :
         {&z_, &zs_, &s_dst_, &d_s_dst_, &alpha_, &agg_, &d_pre_, &d_zs_, &d_score_, &d_agg_})
      *t = Tensor();
  }

 private:
  std::int64_t hd() const { return heads_ * d_; }
  bool averaged() const { return !shape_.hidden() && heads_ > 1; }
  HaloAccess& halo_of(Propagator& propagator) const {
    HaloAccess* halo = propagator.halo_access();
    TESSERA_CHECK(halo != nullptr, InvalidArgument,
                  "GAT needs the attention path of its propagator (HaloAccess), which this "
                  "propagator does not offer");
    return *halo;
  }
  AttentionDropout dropout(const HaloAccess& halo) const {
    const float p = shape_.hyper.attention_dropout;
    if (!training_ || p <= 0.0f) return {};
    return {p, &rng_, halo.column_ids()};
  }
  // The (H·D, D) matrix that averages the heads: 1/H at (h·D + k, k), on `device`.
  const Tensor& mean_matrix(Device device) {
    if (mean_.empty() || mean_.device() != device) {
      Tensor host = Tensor::zeros(hd(), d_);
      for (std::int64_t h = 0; h < heads_; ++h)
        for (std::int64_t k = 0; k < d_; ++k)
          host.f32()[(h * d_ + k) * d_ + k] = 1.0f / static_cast<float>(heads_);
      mean_ = host.to(device);
    }
    return mean_;
  }
  // a_src then a_dst (2·H·D), adjacent in the parameters (and likewise their gradients).
  template <class T>
  std::span<T> attention_vectors(std::span<T> buffer) const {
    return buffer.subspan(att_src_at_, static_cast<std::size_t>(2 * hd()));
  }
  Tensor owned_rows(Tensor& t, std::int64_t n) const {
    return Tensor::borrow(t.f32(), n, t.cols(), DType::F32, t.device());
  }

  LayerShape shape_;
  std::int64_t heads_, d_;
  std::size_t weight_at_, att_src_at_, bias_at_;
  bool training_ = false;
  CounterRng rng_{0, 0, 0, RngPurpose::Dropout};
  bool ready_ = false;
  Transposed t_;
  Tensor weight_, d_weight_;  // (F_in, H·D)
  Tensor mean_;               // (H·D, D) the output layer's head average
  Tensor z_;                  // (N, H·D) x W; the backward's d_z
  Tensor zs_;                 // (N + H, H·D + H) [z, s_src], owned then halo rows
  Tensor s_dst_;              // (N, H)
  Tensor d_s_dst_;            // (N, H)
  Tensor alpha_;              // (nnz, H) the attention weights
  Tensor agg_;                // (N, H·D) averaged output layer: the heads before the mean
  Tensor d_pre_;              // the lent workspace during backward
  Tensor d_zs_;               // (N + H, H·D + H)
  Tensor d_score_;            // (nnz, H)
  Tensor d_agg_;              // (N, H·D) averaged output layer
};

void GatConv::forward(Tensor& out, const Tensor& x, std::span<const float> params, Activation act,
                      Propagator& propagator) {
  HaloAccess& halo = halo_of(propagator);
  const Csr& a = halo.pattern();
  const std::int64_t n = x.rows(), w = hd() + heads_;
  check_shape(x, a.num_rows(), shape_.f_in, "GAT x");
  ready_ = false;
  copy_param(weight_, params.subspan(weight_at_, static_cast<std::size_t>(shape_.f_in * hd())),
             shape_.f_in, hd(), x.device());
  z_.resize(n, hd(), x.device());
  gemm(z_, x, false, weight_, false);
  zs_.resize(a.num_cols(), w, x.device());
  s_dst_.resize(n, heads_, x.device());
  Tensor zs_owned = owned_rows(zs_, n);
  gat_project(zs_owned, s_dst_, z_, attention_vectors(params), static_cast<int>(heads_));
  halo.start_forward(zs_, shape_.layer);
  alpha_.resize(a.nnz(), heads_, x.device());
  Tensor& agg = averaged() ? agg_ : out;
  agg.resize(n, hd(), x.device());
  const AttentionDropout drop = dropout(halo);
  const auto attend = [&](std::span<const NodeId> rows) {
    gat_attention_forward(agg, alpha_, a.view(), zs_, s_dst_, static_cast<int>(heads_),
                          kNegativeSlope, drop, rows);
  };
  in_chunks(halo.inner_rows(), halo, attend);
  halo.finish_forward(zs_);
  attend(halo.boundary_rows());
  if (averaged()) {
    out.resize(n, d_, x.device());
    gemm(out, agg_, false, mean_matrix(x.device()), false);
  }
  bias_act_forward(out, out, params.subspan(bias_at_, static_cast<std::size_t>(shape_.f_out)), act);
  ready_ = true;
}

void GatConv::backward(Tensor* d_x, std::span<float> grads, const Tensor& d_out, const Tensor& x,
                       const Tensor& out, std::span<const float> params, Activation act,
                       Propagator& propagator, Tensor& workspace) {
  HaloAccess& halo = halo_of(propagator);
  const Csr& a = halo.pattern();
  const std::int64_t n = x.rows(), w = hd() + heads_;
  check_shape(d_out, n, shape_.f_out, "GAT d_out");
  TESSERA_CHECK(ready_, InvalidArgument,
                "GAT backward needs a forward before it (one backward per forward)");
  ready_ = false;
  t_.build(a);
  const WorkspaceLoan loan(d_pre_, workspace);
  const Tensor* d_agg = &bias_act_grad(
      d_pre_, grads.subspan(bias_at_, static_cast<std::size_t>(shape_.f_out)), d_out, out, act);
  if (averaged()) {
    d_agg_.resize(n, hd(), x.device());
    gemm(d_agg_, *d_agg, false, mean_matrix(x.device()), true);
    d_agg = &d_agg_;
  }
  const AttentionDropout drop = dropout(halo);
  const int heads = static_cast<int>(heads_);
  d_score_.resize(a.nnz(), heads_, x.device());
  d_s_dst_.resize(n, heads_, x.device());
  const auto attend_back = [&](std::span<const NodeId> rows) {
    gat_attention_backward(d_score_, d_s_dst_, alpha_, a.view(), *d_agg, zs_, s_dst_, heads,
                           kNegativeSlope, drop, rows);
  };
  d_zs_.resize(a.num_cols(), w, x.device());
  const auto to_sources = [&](std::span<const NodeId> rows) {
    gat_attention_transpose(d_zs_, t_.at.view(), t_.edge_of, alpha_, d_score_, *d_agg, heads, rows);
  };
  // The boundary rows first: the halo sources' gradients go back while the rest runs.
  attend_back(halo.boundary_rows());
  to_sources(t_.halo);
  halo.start_backward(d_zs_, shape_.layer);
  in_chunks(halo.inner_rows(), halo, attend_back);
  in_chunks(t_.owned, halo, to_sources);
  halo.finish_backward(d_zs_);
  // Through the projections: d_z, d_att (accumulated), then d_W and d_x.
  gat_project_backward(z_, attention_vectors(grads), owned_rows(d_zs_, n), d_s_dst_,
                       owned_rows(zs_, n), attention_vectors(params), heads);
  const std::span<float> d_w =
      grads.subspan(weight_at_, static_cast<std::size_t>(shape_.f_in * hd()));
  copy_param(d_weight_, d_w, shape_.f_in, hd(), x.device());
  gemm(d_weight_, x, true, z_, false, 1.0f, 1.0f);  // += x^T d_z
  copy_grad(d_w, d_weight_);
  if (d_x == nullptr) return;
  d_x->resize(n, shape_.f_in, x.device());
  gemm(*d_x, z_, false, weight_, true);  // d_z W^T
}

std::vector<ParamDecl> gat_params(const LayerShape& shape) {
  const std::int64_t heads = layer_heads(shape), d = head_width(shape);
  // PyG's GATConv: a Glorot weight (bias-free lin), Glorot (H, D) attention vectors, zero bias.
  return {{"weight", shape.f_in, heads * d, true, ParamInit::Glorot, 0},
          {"att_src", heads, d, true, ParamInit::Glorot, 1},
          {"att_dst", heads, d, true, ParamInit::Glorot, 2},
          {"bias", 1, shape.f_out, false, ParamInit::Zeros, 0}};
}

std::unique_ptr<Conv> make_gat_conv(const LayerShape& shape, std::span<const std::int64_t> at) {
  return std::make_unique<GatConv>(shape, at);
}

bool gat_reads_input(std::int64_t, std::int64_t) { return true; }  // d_W = x^T d_z

// Each halo source's heads and their source terms, H·D + H, forward, and their gradients back at
// every layer (the first one's too: d_W needs the gradients of its own rows' z).
HaloWidths gat_halo_widths(const LayerShape& shape) {
  const std::int64_t width = layer_heads(shape) * head_width(shape) + layer_heads(shape);
  return {width, width};
}

}  // namespace

extern const LayerKind kGatLayer;
const LayerKind kGatLayer = {
    .name = "gat",
    .help =
        "GAT (Velickovic et al. 2018): per-head attention over in-edges and self loops, "
        "softmax(LeakyReLU(a_dst z_v + a_src z_u)) z_u with z = x W, the --heads concatenated "
        "in hidden layers (--hidden-channels is their total width) and the --output-heads "
        "averaged, ELU between layers, --attention-dropout on the weights",
    .op = &kAttentionOperator,
    .residual = false,
    .initial_residual = false,
    .attention = true,
    .activation = Activation::Elu,
    .gemms = 1,
    .backward_reads_input = gat_reads_input,
    .halo_widths = gat_halo_widths,
    .params = gat_params,
    .make = make_gat_conv,
};
const ModelKind ModelKind::Gat{kGatLayer};

}  // namespace tessera
