// SPDX-License-Identifier: Apache-2.0
// HaloExchange over the Communicator: one message per peer and direction, received in place
// (forward: straight into the peer's halo block; backward: into a (num_send, F) buffer that is
// then added into the owners' rows), or framed as blocks of encoded rows. Tags carry the layer
// and direction (comm/message_tags.h), so a stray message of another layer can never be taken
// for this one.
#include "comm/halo_exchange.h"

#include <algorithm>
#include <chrono>
#include <string>
#include <utility>

#include "comm/adaptive_bits.h"
#include "comm/error_feedback.h"
#include "comm/message_tags.h"
#include "core/error.h"
#include "core/kernels.h"

namespace tessera {
namespace {

double now_s() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

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
                           std::span<const GlobalId> owned_ids, std::span<const GlobalId> halo_ids,
                           const ExchangeCodecs& codecs)
    : comm_(comm), plan_(plan), halo_ids_(halo_ids), codecs_(codecs) {
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
  identity_rows_ = DeviceIndexList(identity_);
  TESSERA_CHECK(codecs.num_layers >= 1, InvalidArgument, "halo exchange: num_layers ",
                codecs.num_layers);
  if (codecs.adaptive)
    adaptive_ = std::make_unique<AdaptiveBits>(plan, codecs.num_layers, codecs.bit_budget);
  if (codecs.error_feedback) feedback_ = std::make_unique<ErrorFeedback>();
}

HaloExchange::~HaloExchange() = default;

void HaloExchange::reset_residuals() {
  if (feedback_) feedback_->reset();
}

std::string HaloExchange::replan() {
  return adaptive_ ? adaptive_->replan(comm_, tags::kBitPlan) : std::string();
}

void HaloExchange::set_receiver_weights(std::span<const double> halo_weight) {
  TESSERA_CHECK(static_cast<std::int64_t>(halo_weight.size()) == plan_.num_halo(),
                InvalidArgument, "halo exchange: ", halo_weight.size(),
                " receiver weights for ", plan_.num_halo(), " halo rows");
  if (adaptive_) adaptive_->set_receiver_weights(comm_, halo_weight, tags::kReceiverWeights);
}

void HaloExchange::begin(double start) {
  active_ = true;
  complete_ = requests_.empty();
  start_time_ = start;
  done_time_ = now_s();
  times_.exposed_s += done_time_ - start;
}

bool HaloExchange::encoded(int direction) const {
  return codecs_.adaptive ||
         (direction == 0 ? codecs_.forward : codecs_.backward) != CodecKind::None;
}

HaloExchange::Route HaloExchange::route(int direction, int layer) const {
  TESSERA_CHECK(!encoded(direction) || (layer >= 0 && layer < codecs_.num_layers), Internal,
                "halo exchange: layer ", layer, " of ", codecs_.num_layers);
  if (direction == 0) {
    return Route{0,
                 codecs_.forward,
                 RngPurpose::CodecForward,
                 TrafficCategory::HaloForward,
                 tags::halo_forward(layer),
                 layer,
                 plan_.send_offsets,
                 plan_.send_rows,
                 send_ids_,
                 plan_.recv_offsets};
  }
  return Route{1,
               codecs_.backward,
               RngPurpose::CodecBackward,
               TrafficCategory::HaloBackward,
               tags::halo_backward(layer),
               layer,
               plan_.recv_offsets,
               std::span<const NodeId>(identity_).first(static_cast<std::size_t>(plan_.num_halo())),
               halo_ids_,
               plan_.send_offsets};
}

void HaloExchange::blocks(const Route& route, int p, bool outgoing,
                          std::vector<MessageBlock>& out) const {
  out.clear();
  const std::vector<std::int64_t>& offsets = outgoing ? route.out_offsets : route.in_offsets;
  const std::int64_t begin = offsets[p], count = offsets[p + 1] - begin;
  if (count == 0) return;
  if (adaptive_) return adaptive_->blocks(route.direction, route.layer, p, outgoing, out);
  out.push_back({route.codec, begin, count, {}});
}

void HaloExchange::post_raw(const Route& route, const Tensor& send, Tensor& receive) {
  for (int p = 0; p < plan_.num_peers(); ++p) {
    const std::int64_t count = route.in_offsets[p + 1] - route.in_offsets[p];
    if (count > 0) {
      requests_.push_back(
          comm_.irecv(row_bytes_of(receive, route.in_offsets[p], count), p, route.tag));
    }
  }
  for (int p = 0; p < plan_.num_peers(); ++p) {
    const std::int64_t count = route.out_offsets[p + 1] - route.out_offsets[p];
    if (count > 0) {
      requests_.push_back(comm_.isend(row_bytes_of(send, route.out_offsets[p], count), p, route.tag,
                                      route.category));
    }
  }
}

void HaloExchange::post_with_feedback(const Route& route, const Tensor& source) {
  // The route's rows where the source's device reads them: the send rows, or the identity
  // (rows already in message order: gathered ones, or the gradients of the backward).
  const Device device = source.device();
  const bool in_order = route.rows.data() == identity_.data();
  TESSERA_CHECK(in_order || route.rows.data() == plan_.send_rows.data(), Internal,
                "error feedback: rows that are neither the send rows nor in message order");
  const std::span<const NodeId> rows =
      in_order ? identity_rows_.on(device).first(route.rows.size()) : send_rows_.on(device);
  const Tensor& meant = feedback_->with_residual(route.direction, route.layer, source, rows);
  Route gathered = route;  // the rows are in message order now
  gathered.rows = std::span<const NodeId>(identity_).first(route.rows.size());
  post_encoded(gathered, meant);
  // What the peers will decode, for the next residual.
  Tensor& decoded = feedback_->decoded();
  for (int p = 0; p < plan_.num_peers(); ++p) {
    blocks(gathered, p, true, blocks_);
    std::size_t at = out_at_[p];
    for (const MessageBlock& block : blocks_) {
      const std::size_t bytes = block_bytes(block, meant.cols());
      decode_block(block, std::span<const std::byte>(message_bytes(0)).subspan(at, bytes), decoded,
                   "error feedback", false);
      at += bytes;
    }
  }
  feedback_->update(route.direction, route.layer);
}

void HaloExchange::post_encoded(const Route& route, const Tensor& source) {
  const std::int64_t f = source.cols();
  const int k = plan_.num_peers();
  // The messages live where the rows do: a GPU encodes into and decodes from GPU memory.
  bytes_device_ = source.device();
  auto layout = [&](bool outgoing, std::vector<std::size_t>& at) {
    at.assign(static_cast<std::size_t>(k) + 1, 0);
    for (int p = 0; p < k; ++p) {
      blocks(route, p, outgoing, blocks_);
      at[p + 1] = at[p];
      for (const MessageBlock& block : blocks_) at[p + 1] += block_bytes(block, f);
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
  if (adaptive_) adaptive_->note_width(route.direction, route.layer, f);
  for (int p = 0; p < k; ++p) {
    blocks(route, p, true, blocks_);
    std::size_t at = out_at_[p];
    for (const MessageBlock& block : blocks_) {
      const std::size_t bytes = block_bytes(block, f);
      encode_block(route, block, out_bytes.subspan(at, bytes), source, noise);
      at += bytes;
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

void HaloExchange::encode_block(const Route& route, const MessageBlock& block,
                                std::span<std::byte> bytes, const Tensor& source,
                                const CodecNoise& noise) {
  const std::int64_t f = source.cols();
  write_message_header(bytes, bytes_device_, block.codec, block.count, f);
  std::span<const NodeId> rows = route.rows.subspan(block.begin, block.count);
  std::span<const GlobalId> ids = route.ids.subspan(block.begin, block.count);
  if (!block.positions.empty()) {  // a scattered block: gather its rows and ids
    block_rows_.resize(block.positions.size());
    block_ids_.resize(block.positions.size());
    for (std::size_t i = 0; i < block.positions.size(); ++i) {
      block_rows_[i] = route.rows[block.positions[i]];
      block_ids_[i] = route.ids[block.positions[i]];
    }
    rows = block_rows_;
    ids = block_ids_;
  }
  std::span<float> ranges;
  if (adaptive_) {
    ranges_.resize(static_cast<std::size_t>(block.count));
    ranges = ranges_;
  }
  encode_rows(block.codec, bytes.subspan(kMessageHeaderBytes), source, rows, ids, noise, ranges);
  if (adaptive_) adaptive_->add_ranges(route.direction, route.layer, block, ranges_);
}

void HaloExchange::decode_block(const MessageBlock& block, std::span<const std::byte> bytes,
                                Tensor& dest, const std::string& where, bool check_header) {
  const std::int64_t f = dest.cols();
  if (check_header) read_message_header(bytes, dest.device(), block.count, f, block.codec, where);
  bytes = bytes.subspan(kMessageHeaderBytes);
  if (block.positions.empty()) {
    decode_rows(block.codec, dest, block.begin, block.count, bytes);
    return;
  }
  // A scattered block: decoded packed, then placed on its rows, where dest lives (host or GPU).
  block_decoded_.resize_within(block.count, f, dest.device());
  decode_rows(block.codec, block_decoded_, 0, block.count, bytes);
  block_rows_.resize(block.positions.size());
  for (std::size_t i = 0; i < block.positions.size(); ++i)
    block_rows_[i] = static_cast<NodeId>(block.positions[i]);
  scatter_rows(dest, block_decoded_, block_rows_);
}

void HaloExchange::decode_received(const Route& route, Tensor& dest, const char* what) {
  const double start = now_s();
  const std::int64_t f = dest.cols();
  for (int p = 0; p < plan_.num_peers(); ++p) {
    blocks(route, p, false, blocks_);
    const std::string where = detail::concat(what, " from rank ", p, ", layer ", route.layer);
    std::size_t at = in_at_[p];
    for (const MessageBlock& block : blocks_) {
      const std::size_t bytes = block_bytes(block, f);
      decode_block(block, std::span<const std::byte>(message_bytes(1)).subspan(at, bytes), dest,
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
  if (size != kKeepSize) return message_buffer(bytes, size, bytes_device_);
  return {static_cast<std::byte*>(bytes.raw()), static_cast<std::size_t>(bytes.rows())};
}

void HaloExchange::start(const Route& route, const Tensor& source, Tensor& receive) {
  if (!encoded(route.direction)) return post_raw(route, source, receive);
  if (feedback_) return post_with_feedback(route, source);
  post_encoded(route, source);
}

void HaloExchange::reserve(std::int64_t width, Device device, std::int64_t spare_rows) {
  send_buffer_ = Tensor(std::max(plan_.num_send(), spare_rows), width, DType::F32, device);
}

Tensor HaloExchange::idle_rows(std::int64_t rows, std::int64_t cols, Device device) {
  TESSERA_CHECK(!active_, Internal, "HaloExchange::idle_rows while an exchange is in flight");
  send_buffer_.resize_within(rows, cols, device);
  return Tensor::borrow(send_buffer_.raw(), rows, cols, DType::F32, device);
}

void HaloExchange::start_forward(const Tensor& x, Tensor& halo, int layer) {
  TESSERA_CHECK(!active_, Internal, "halo exchange started while another is in flight");
  const double start_s = now_s();
  const std::int64_t f = x.cols();
  halo.resize_within(plan_.num_halo(), f, x.device());
  requests_.clear();
  forward_layer_ = layer;
  if (encoded(0) && x.dtype() == DType::F32) {
    start(route(0, layer), x, halo);
  } else {  // raw rows, or bf16 ones (widened): gathered into message order first
    send_buffer_.resize_within(plan_.num_send(), f, x.device());
    gather_rows(send_buffer_, x, send_rows_.on(x.device()));
    Route gathered = route(0, layer);
    if (encoded(0)) gathered.rows = std::span<const NodeId>(identity_).first(gathered.rows.size());
    start(gathered, send_buffer_, halo);
  }
  begin(start_s);
}

void HaloExchange::start_backward(const Tensor& d_halo, int layer) {
  TESSERA_CHECK(!active_, Internal, "halo exchange started while another is in flight");
  check_shape(d_halo, plan_.num_halo(), d_halo.cols(), "HaloExchange::start_backward d_halo");
  const double start_s = now_s();
  // receives the gradients of the rows we sent
  send_buffer_.resize_within(plan_.num_send(), d_halo.cols(), d_halo.device());
  requests_.clear();
  backward_layer_ = layer;
  start(route(1, layer), d_halo, send_buffer_);
  begin(start_s);
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
  if (encoded(0)) decode_received(route(0, layer), halo, "halo forward");
}

void HaloExchange::finish_backward(Tensor& d_x) {
  const int layer = backward_layer_;
  wait_all_timed();
  if (encoded(1)) decode_received(route(1, layer), send_buffer_, "halo backward");
  const double start = now_s();
  scatter_add_rows(d_x, send_buffer_, send_rows_.on(d_x.device()));
  times_.exposed_s += now_s() - start;
}

}  // namespace tessera
