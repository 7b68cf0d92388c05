// HaloExchange over the Communicator: one message per peer and direction, received in place
// (forward: straight into the peer's halo block; backward: into a (num_send, F) buffer that is
// then added into the owners' rows). Tags carry the layer and direction, so a stray message of
// another layer can never be taken for this one.
#include "comm/halo_exchange.h"

#include <algorithm>
#include <array>
#include <chrono>
#include <cmath>
#include <string>
#include <utility>

#include "comm/bit_plan.h"
#include "core/error.h"
#include "core/kernels.h"

namespace tessera {
namespace {

double now_s() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

int forward_tag(int layer) { return 2 * layer; }
int backward_tag(int layer) { return 2 * layer + 1; }

std::span<std::byte> row_bytes_of(Tensor& t, std::int64_t begin, std::int64_t count) {
  const std::size_t row = static_cast<std::size_t>(t.cols()) * sizeof(float);
  return {static_cast<std::byte*>(t.raw()) + static_cast<std::size_t>(begin) * row,
          static_cast<std::size_t>(count) * row};
}
std::span<const std::byte> row_bytes_of(const Tensor& t, std::int64_t begin, std::int64_t count) {
  const std::size_t row = static_cast<std::size_t>(t.cols()) * sizeof(float);
  return {static_cast<const std::byte*>(t.raw()) + static_cast<std::size_t>(begin) * row,
          static_cast<std::size_t>(count) * row};
}

}  // namespace

HaloExchange::HaloExchange(Communicator& comm, const HaloPlan& plan,
                           std::span<const GlobalId> owned_ids,
                           std::span<const GlobalId> halo_ids, const ExchangeCodecs& codecs)
    : comm_(comm), plan_(plan), owned_ids_(owned_ids), halo_ids_(halo_ids), codecs_(codecs) {
  send_rows_ = DeviceIndexList(plan.send_rows);
  TESSERA_CHECK(plan.num_peers() == comm.size(), InvalidArgument, "halo plan for ",
                plan.num_peers(), " parts used on ", comm.size(), " ranks");
  TESSERA_CHECK(static_cast<std::int64_t>(halo_ids.size()) == plan.num_halo(), InvalidArgument,
                "halo exchange: ", halo_ids.size(), " halo ids for a plan with ", plan.num_halo(),
                " halo rows");
  send_ids_.reserve(plan.send_rows.size());
  for (NodeId row : plan.send_rows) {
    TESSERA_CHECK(row >= 0 && static_cast<std::size_t>(row) < owned_ids.size(), InvalidArgument,
                  "halo exchange: send row ", row, " has no global id");
    send_ids_.push_back(owned_ids[row]);
  }
  identity_.resize(static_cast<std::size_t>(std::max(plan.num_send(), plan.num_halo())));
  for (std::size_t i = 0; i < identity_.size(); ++i) identity_[i] = static_cast<NodeId>(i);
  TESSERA_CHECK(codecs.num_layers >= 1, InvalidArgument, "halo exchange: num_layers ",
                codecs.num_layers);
  // Before the first plan, adaptive rows use the widest width the budget affords.
  const auto start = static_cast<std::uint8_t>(uniform_bits(codecs.bit_budget));
  const std::size_t cells = static_cast<std::size_t>(codecs.num_layers) * plan.num_peers();
  const std::size_t layers = static_cast<std::size_t>(codecs.num_layers);
  for (int d = 0; d < 2; ++d) {
    out_codecs_[d].assign(cells, d == 0 ? codecs.forward : codecs.backward);
    in_codecs_[d] = out_codecs_[d];
    if (!codecs.adaptive) continue;
    const auto n_out = static_cast<std::size_t>(d == 0 ? plan.num_send() : plan.num_halo());
    const auto n_in = static_cast<std::size_t>(d == 0 ? plan.num_halo() : plan.num_send());
    out_bits_[d].assign(layers * n_out, start);
    in_bits_[d].assign(layers * n_in, start);
    row_weight_[d].assign(layers * n_out, 0.0);
    seen_width_[d].assign(layers, 0);
  }
  if (codecs.adaptive) rebuild_groups();
  send_weight_.assign(static_cast<std::size_t>(plan.num_send()), 1.0);
}

void HaloExchange::set_receiver_weights(std::span<const double> halo_weight) {
  TESSERA_CHECK(static_cast<std::int64_t>(halo_weight.size()) == plan_.num_halo(),
                InvalidArgument, "halo exchange: ", halo_weight.size(),
                " receiver weights for ", plan_.num_halo(), " halo rows");
  if (!codecs_.adaptive) return;
  // The reverse of a forward exchange: each halo block goes back to the rank that owns it.
  constexpr int kWeightTag = 9002;
  std::vector<std::unique_ptr<Request>> requests;
  const std::span<double> send_weight(send_weight_);
  for (int p = 0; p < plan_.num_peers(); ++p) {
    if (plan_.send_count(p) > 0) {
      requests.push_back(comm_.irecv(
          std::as_writable_bytes(send_weight.subspan(plan_.send_offsets[p], plan_.send_count(p))),
          p, kWeightTag));
    }
    if (plan_.recv_count(p) > 0) {
      requests.push_back(comm_.isend(
          std::as_bytes(halo_weight.subspan(plan_.recv_offsets[p], plan_.recv_count(p))), p,
          kWeightTag, TrafficCategory::Setup));
    }
  }
  wait_all(requests);
  for (double w : send_weight_) {
    TESSERA_CHECK(std::isfinite(w) && w >= 0.0, InvalidInput,
                  "halo exchange: a peer sent receiver weight ", w);
  }
}

HaloExchange::~HaloExchange() = default;

void HaloExchange::begin(double start) {
  active_ = true;
  complete_ = requests_.empty();
  start_time_ = start;
  done_time_ = now_s();
  times_.exposed_s += done_time_ - start;
}

const Tensor& HaloExchange::with_residual(int direction, int layer, const Tensor& source,
                                          std::span<const NodeId> rows) {
  std::vector<Tensor>& residuals = residuals_[direction];
  if (static_cast<int>(residuals.size()) <= layer) residuals.resize(layer + 1);
  Tensor& residual = residuals[layer];
  const auto n = static_cast<std::int64_t>(rows.size());
  if (residual.rows() != n || residual.cols() != source.cols()) {
    residual = Tensor::zeros(n, source.cols());  // first use, or the width changed
  }
  ef_input_.resize(n, source.cols());
  gather_rows(ef_input_, source, rows);
  axpy(ef_input_, 1.0f, residual);
  return ef_input_;
}

HaloExchange::Route HaloExchange::forward_route(int layer) const {
  TESSERA_CHECK(layer >= 0 && layer < codecs_.num_layers, Internal, "halo exchange: layer ",
                layer, " of ", codecs_.num_layers);
  const std::size_t k = static_cast<std::size_t>(plan_.num_peers()), at = layer * k;
  return Route{0,
               std::span<const CodecKind>(out_codecs_[0]).subspan(at, k),
               std::span<const CodecKind>(in_codecs_[0]).subspan(at, k),
               RngPurpose::CodecForward,
               TrafficCategory::HaloForward,
               forward_tag(layer),
               layer,
               plan_.send_offsets,
               plan_.send_rows,
               send_ids_,
               plan_.recv_offsets};
}

HaloExchange::Route HaloExchange::backward_route(int layer) const {
  TESSERA_CHECK(layer >= 0 && layer < codecs_.num_layers, Internal, "halo exchange: layer ",
                layer, " of ", codecs_.num_layers);
  const std::size_t k = static_cast<std::size_t>(plan_.num_peers()), at = layer * k;
  return Route{1,
               std::span<const CodecKind>(out_codecs_[1]).subspan(at, k),
               std::span<const CodecKind>(in_codecs_[1]).subspan(at, k),
               RngPurpose::CodecBackward,
               TrafficCategory::HaloBackward,
               backward_tag(layer),
               layer,
               plan_.recv_offsets,
               std::span<const NodeId>(identity_).first(static_cast<std::size_t>(plan_.num_halo())),
               halo_ids_,
               plan_.send_offsets};
}

// Error feedback: encodes source rows + residual (already gathered in message order), then
// keeps what the encoding lost as the next residual.
void HaloExchange::post_with_feedback(const Route& route, int direction, const Tensor& source) {
  with_residual(direction, route.layer, source, route.rows);
  Route gathered = route;
  gathered.rows = std::span<const NodeId>(identity_).first(route.rows.size());
  post_encoded(gathered, ef_input_);
  update_residual(direction, route.layer, gathered);
}

void HaloExchange::update_residual(int direction, int layer, const Route& route) {
  // residual = what was meant (ef_input_) - what the peers will decode.
  Tensor& residual = residuals_[direction][layer];
  if (residual.empty()) return;
  ef_decoded_.resize(ef_input_.rows(), ef_input_.cols());
  for (int p = 0; p < plan_.num_peers(); ++p) {
    pieces(route, p, true, pieces_);
    std::size_t at = out_at_[p];
    for (const Piece& piece : pieces_) {
      const std::size_t bytes = piece_bytes(piece, ef_input_.cols());
      decode_piece(piece, std::span<const std::byte>(message_bytes(0)).subspan(at, bytes),
                   ef_decoded_, "error feedback", false);
      at += bytes;
    }
  }
  std::copy_n(ef_input_.f32(), ef_input_.numel(), residual.f32());
  axpy(residual, -1.0f, ef_decoded_);
}

void HaloExchange::post_encoded(const Route& route, const Tensor& source) {
  const std::int64_t f = source.cols();
  const int k = plan_.num_peers();
  // The messages live where the rows do: a GPU encodes into and decodes from GPU memory.
  bytes_device_ = source.device();
  auto layout = [&](bool outgoing, std::vector<std::size_t>& at) {
    at.assign(static_cast<std::size_t>(k) + 1, 0);
    for (int p = 0; p < k; ++p) {
      pieces(route, p, outgoing, pieces_);
      at[p + 1] = at[p];
      for (const Piece& piece : pieces_)
        at[p + 1] += piece_bytes(piece, f);
    }
    return at[k];
  };
  const std::span<std::byte> in_bytes = message_bytes(1, layout(false, in_at_));
  const std::span<std::byte> out_bytes = message_bytes(0, layout(true, out_at_));
  const CodecNoise noise{codecs_.seed, epoch_, static_cast<std::uint64_t>(route.layer),
                         route.purpose};
  for (int p = 0; p < k; ++p) {
    if (in_at_[p + 1] > in_at_[p]) {
      requests_.push_back(
          comm_.irecv(in_bytes.subspan(in_at_[p], in_at_[p + 1] - in_at_[p]), p, route.tag));
    }
  }
  const double encode_start = now_s();
  const int d = route.direction;
  const std::size_t n_out = route.rows.size();
  if (codecs_.adaptive) seen_width_[d][route.layer] = f;
  for (int p = 0; p < k; ++p) {
    pieces(route, p, true, pieces_);
    std::size_t at = out_at_[p];
    for (const Piece& piece : pieces_) {
      const std::size_t bytes = piece_bytes(piece, f);
      std::span<std::byte> block = out_bytes.subspan(at, bytes);
      at += bytes;
      if (bytes_device_.kind == DeviceKind::Cpu) {
        write_message_header(block, piece.codec, piece.count, f);
      } else {  // written on the host, then copied up
        std::array<std::byte, kMessageHeaderBytes> header;
        write_message_header(header, piece.codec, piece.count, f);
        backend(bytes_device_).copy(block.data(), header.data(), header.size());
      }
      std::span<const NodeId> rows = route.rows.subspan(piece.begin, piece.count);
      std::span<const GlobalId> ids = route.ids.subspan(piece.begin, piece.count);
      if (!piece.positions.empty()) {  // a scattered block: gather its rows and ids
        piece_rows_.resize(piece.positions.size());
        piece_ids_.resize(piece.positions.size());
        for (std::size_t i = 0; i < piece.positions.size(); ++i) {
          piece_rows_[i] = route.rows[piece.positions[i]];
          piece_ids_[i] = route.ids[piece.positions[i]];
        }
        rows = piece_rows_;
        ids = piece_ids_;
      }
      std::span<float> ranges;
      if (codecs_.adaptive) {
        ranges_.resize(static_cast<std::size_t>(piece.count));
        ranges = ranges_;
      }
      encode_rows(piece.codec, block.subspan(kMessageHeaderBytes), source, rows, ids, noise,
                  ranges);
      if (!codecs_.adaptive) continue;
      // Variance of a row ∝ width·range²; forward rows weigh by their receiver's aggregation
      // weight, gradients (added into their owners' rows) by 1.
      double* weight = row_weight_[d].data() + static_cast<std::size_t>(route.layer) * n_out;
      for (std::int64_t i = 0; i < piece.count; ++i) {
        const std::int64_t pos = piece.positions.empty() ? piece.begin + i : piece.positions[i];
        const double r = ranges_[static_cast<std::size_t>(i)];
        weight[pos] += (d == 0 ? send_weight_[static_cast<std::size_t>(pos)] : 1.0) * r * r;
      }
    }
  }
  times_.encode_s += now_s() - encode_start;
  for (int p = 0; p < k; ++p) {
    const std::int64_t count = route.out_offsets[p + 1] - route.out_offsets[p];
    if (count == 0) continue;
    requests_.push_back(comm_.isend(
        std::span<const std::byte>(out_bytes).subspan(out_at_[p], out_at_[p + 1] - out_at_[p]),
        p, route.tag, route.category, static_cast<std::uint64_t>(count * f) * sizeof(float)));
  }
}

void HaloExchange::decode_piece(const Piece& piece, std::span<const std::byte> bytes,
                                Tensor& dest, const std::string& where, bool check_header) {
  const std::int64_t f = dest.cols();
  if (check_header && dest.device().kind == DeviceKind::Cpu) {
    read_message_header(bytes, piece.count, f, piece.codec, where);
  } else if (check_header) {  // a message in GPU memory: its header is checked on the host
    std::array<std::byte, kMessageHeaderBytes> header{};
    if (bytes.size() >= header.size())
      backend(dest.device()).copy(header.data(), bytes.data(), header.size());
    read_message_header(header, bytes.size(), piece.count, f, piece.codec, where);
  }
  bytes = bytes.subspan(kMessageHeaderBytes);
  if (piece.positions.empty()) {
    decode_rows(piece.codec, dest, piece.begin, piece.count, bytes);
    return;
  }
  piece_decoded_.resize(piece.count, f);
  decode_rows(piece.codec, piece_decoded_, 0, piece.count, bytes);
  for (std::int64_t i = 0; i < piece.count; ++i) {
    std::copy_n(piece_decoded_.row<float>(i), f, dest.row<float>(piece.positions[i]));
  }
}

void HaloExchange::decode_received(const Route& route, Tensor& dest, const char* what) {
  const double start = now_s();
  const std::int64_t f = dest.cols();
  for (int p = 0; p < plan_.num_peers(); ++p) {
    pieces(route, p, false, pieces_);
    const std::string where = detail::concat(what, " from rank ", p, ", layer ", route.layer);
    std::size_t at = in_at_[p];
    for (const Piece& piece : pieces_) {
      const std::size_t bytes = piece_bytes(piece, f);
      decode_piece(piece, std::span<const std::byte>(message_bytes(1)).subspan(at, bytes), dest,
                   where, true);
      at += bytes;
    }
  }
  const double spent = now_s() - start;
  times_.decode_s += spent;
  times_.exposed_s += spent;
}

std::span<std::byte> HaloExchange::message_bytes(int which, std::size_t size) {
  if (bytes_device_.kind == DeviceKind::Cpu) {
    std::vector<std::byte>& bytes = which == 0 ? out_bytes_ : in_bytes_;
    if (size != kKeepSize) bytes.resize(size);
    return bytes;
  }
  Tensor& bytes = device_bytes_[which];
  if (size != kKeepSize) {
    if (bytes.dtype() != DType::U8 || bytes.device() != bytes_device_)
      bytes = Tensor(0, 1, DType::U8, bytes_device_);
    bytes.resize(static_cast<std::int64_t>(size), 1);
  }
  return {static_cast<std::byte*>(bytes.raw()), static_cast<std::size_t>(bytes.rows())};
}

void HaloExchange::check_host(const Tensor& t, const char* what) const {
  TESSERA_CHECK(t.device().kind == DeviceKind::Cpu, InvalidArgument, "HaloExchange::", what,
                ": adaptive bits and error feedback work on host tensors; a tensor on ",
                to_string(t.device()), " takes a fixed codec");
}

void HaloExchange::start_forward(const Tensor& x, Tensor& halo, int layer) {
  TESSERA_CHECK(!active_, Internal, "halo exchange started while another is in flight");
  const double start = now_s();
  const std::int64_t f = x.cols();
  halo.resize(plan_.num_halo(), f, x.device());
  requests_.clear();
  forward_layer_ = layer;
  const int tag = forward_tag(layer);
  if (codecs_.adaptive || codecs_.forward != CodecKind::None) {
    if (codecs_.adaptive || codecs_.error_feedback) check_host(x, "start_forward");
    if (codecs_.error_feedback) {
      post_with_feedback(forward_route(layer), 0, x);
    } else {
      post_encoded(forward_route(layer), x);
    }
    begin(start);
    return;
  }
  send_buffer_.resize(plan_.num_send(), f, x.device());
  gather_rows(send_buffer_, x, send_rows_.on(x.device()));
  for (int p = 0; p < plan_.num_peers(); ++p) {
    if (plan_.recv_count(p) > 0) {
      requests_.push_back(
          comm_.irecv(row_bytes_of(halo, plan_.recv_offsets[p], plan_.recv_count(p)), p, tag));
    }
  }
  for (int p = 0; p < plan_.num_peers(); ++p) {
    if (plan_.send_count(p) > 0) {
      requests_.push_back(comm_.isend(
          row_bytes_of(std::as_const(send_buffer_), plan_.send_offsets[p], plan_.send_count(p)),
          p, tag, TrafficCategory::HaloForward));
    }
  }
  begin(start);
}
void HaloExchange::start_backward(const Tensor& d_halo, int layer) {
  TESSERA_CHECK(!active_, Internal, "halo exchange started while another is in flight");
  check_shape(d_halo, plan_.num_halo(), d_halo.cols(), "HaloExchange::start_backward d_halo");
  const double start = now_s();
  const std::int64_t f = d_halo.cols();
  // receives the gradients of the rows we sent
  send_buffer_.resize(plan_.num_send(), f, d_halo.device());
  requests_.clear();
  backward_layer_ = layer;
  if (codecs_.adaptive || codecs_.backward != CodecKind::None) {
    if (codecs_.adaptive || codecs_.error_feedback) check_host(d_halo, "start_backward");
    if (codecs_.error_feedback) {
      post_with_feedback(backward_route(layer), 1, d_halo);
    } else {
      post_encoded(backward_route(layer), d_halo);
    }
    begin(start);
    return;
  }
  const int tag = backward_tag(layer);
  for (int p = 0; p < plan_.num_peers(); ++p) {
    if (plan_.send_count(p) > 0) {
      requests_.push_back(comm_.irecv(
          row_bytes_of(send_buffer_, plan_.send_offsets[p], plan_.send_count(p)), p, tag));
    }
  }
  for (int p = 0; p < plan_.num_peers(); ++p) {
    if (plan_.recv_count(p) > 0) {
      requests_.push_back(
          comm_.isend(row_bytes_of(d_halo, plan_.recv_offsets[p], plan_.recv_count(p)), p, tag,
                      TrafficCategory::HaloBackward));
    }
  }
  begin(start);
}

bool HaloExchange::poll() {
  if (!active_ || complete_) return true;
  if (test_all(requests_)) {
    complete_ = true;
    done_time_ = now_s();
  }
  return complete_;
}

void HaloExchange::wait_all_timed() {
  TESSERA_CHECK(active_, Internal, "halo exchange finished without being started");
  if (!complete_) {
    const double wait_start = now_s();
    wait_all(requests_);
    done_time_ = now_s();
    times_.exposed_s += done_time_ - wait_start;
    complete_ = true;
  }
  times_.comm_s += done_time_ - start_time_;
  requests_.clear();
  active_ = false;
}

void HaloExchange::finish_forward(Tensor& halo) {
  const int layer = forward_layer_;
  wait_all_timed();
  if (codecs_.adaptive || codecs_.forward != CodecKind::None) {
    decode_received(forward_route(layer), halo, "halo forward");
  }
}

void HaloExchange::finish_backward(Tensor& d_x) {
  const int layer = backward_layer_;
  wait_all_timed();
  if (codecs_.adaptive || codecs_.backward != CodecKind::None) {
    decode_received(backward_route(layer), send_buffer_, "halo backward");
  }
  const double start = now_s();
  scatter_add_rows(d_x, send_buffer_, send_rows_.on(d_x.device()));
  times_.exposed_s += now_s() - start;
}

}  // namespace tessera
