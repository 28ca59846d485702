// The trainer's side of a weight transfer (rlx.h, "weight transfer"; the wire format is
// weights_wire.h): after an optimizer step, the weights converted to the servers' dtype (or with
// LoRA the adapters) go to every channel at once, message by message; with RLX_SEND_CHANGED only
// the tensors whose bytes changed since each server's last transfer.
//
// What the sender holds beyond the model: one tensor converted to the wire dtype at a time
// (none when it already is: a parameter's own memory is sent), two staging buffers for batches of
// small parameters, and at most two messages in flight. A model sharded "full" gathers one parameter at a
// time, never the whole model.
//
// A channel that fails (its server died, refused the transfer, or stopped receiving past the
// timeout) is named and left out of the rest of the transfer; the others finish it. Its group
// refuses later calls: the caller decides whether the run goes on without that server.
#include <deque>

#include "shard.h"
#include "weights_wire.h"

#if defined(RLX_C10D)

namespace rlx {
namespace {

struct Channel {
  Group* g;
  int index;
  std::string error;  // empty while it works
};

// The channels of one transfer and the sends still in flight on them.
class Fanout {
 public:
  Fanout(std::vector<Channel> channels) : channels_(std::move(channels)) {}

  std::vector<Channel>& channels() { return channels_; }

  void fail(Channel& c, const std::string& what, std::exception_ptr e) {
    if (!c.error.empty()) return;
    c.error = "channel " + std::to_string(c.index) + ": " + what + " failed: " + message_of(e);
    c.g->failure = c.error;
  }

  // Starts sending t (kept alive until sent) on every working channel.
  void send(const at::Tensor& t, int tag, const std::string& what) {
    InFlight f{{}, t, what};
    for (auto& c : channels_) {
      if (!c.error.empty()) continue;
      try {
        std::vector<at::Tensor> v{t};
        f.works.emplace_back(&c, c.g->pg->send(v, 1, tag));
      } catch (...) {
        fail(c, what, std::current_exception());
      }
    }
    in_flight_.push_back(std::move(f));
  }

  // Waits for the oldest sends until at most `messages` are in flight.
  void drain(size_t messages) {
    while (in_flight_.size() > messages) {
      auto& f = in_flight_.front();
      for (auto& [c, work] : f.works) {
        try {
          work->wait();
        } catch (...) {
          fail(*c, f.what, std::current_exception());
        }
      }
        in_flight_.pop_front();
    }
  }

  // Each working channel's server's answer to the header; a refusal fails that channel.
  void read_acks(int64_t version) {
    for (auto& c : channels_) {
      if (!c.error.empty()) continue;
      auto ack = at::zeros({wire::kAckLen}, at::TensorOptions().dtype(at::kLong).device(c.g->device));
      try {
        std::vector<at::Tensor> v{ack};
        c.g->pg->recv(v, 1, wire::kAckTag)->wait();
      } catch (...) {
        fail(c, "the server's answer to the header", std::current_exception());
        continue;
      }
      auto a = ack.cpu();
      const int64_t* v = a.data_ptr<int64_t>();
      if (v[wire::kReasonAt] == wire::kGo) continue;
      c.error = "channel " + std::to_string(c.index) + ": the server refused version " + std::to_string(version) + ": " +
                wire::reason_text(v[wire::kReasonAt]) + " (it expects version " + std::to_string(v[wire::kWantVersionAt]) +
                ", dtype code " + std::to_string(v[wire::kWantDtypeAt]) + ", " + std::to_string(v[wire::kWantBytesAt]) +
                " bytes)";
    }
  }

 private:
  struct InFlight {
    std::vector<std::pair<Channel*, c10::intrusive_ptr<c10d::Work>>> works;
    at::Tensor keep;
    std::string what;
  };
  std::vector<Channel> channels_;
  std::deque<InFlight> in_flight_;
};

at::Tensor whole_param(Model& m, size_t index) {
  const auto& [name, t] = m.params[index];
  return is_sliced(m) ? gather_param(m, name) : t;  // the gather is collective
}

// The tensors whose bytes (their sums) differ from what some channel's server last took whole:
// all of them for a channel without a last transfer.
std::vector<bool> changed(const std::vector<Channel>& channels, const std::vector<uint64_t>& sums_P) {
  std::vector<bool> send_P(sums_P.size(), false);
  for (size_t p = 0; p < sums_P.size(); ++p)
    for (const auto& c : channels)
      if (c.g->sent_sums.size() != sums_P.size() || c.g->sent_sums[p] != sums_P[p]) send_P[p] = true;
  return send_P;
}

}  // namespace
}  // namespace rlx

using namespace rlx;

RLX_API int rlx_weights_send(rlx_model* model, rlx_group* const* channels, int n, int dtype, int64_t version,
                             int64_t bucket_bytes, int flags, int32_t* failed, int64_t* sent_bytes) {
  RLX_TRY(-1, {
    auto& m = get_model(model);
    require(n >= 0 && (n == 0 || (channels != nullptr && failed != nullptr)),
            "rlx_weights_send: n channels >= 0, with the channels and a failed[n] array");
    require(bucket_bytes >= 8 && bucket_bytes % 8 == 0,
            "bucket_bytes must be a positive multiple of 8, got " + std::to_string(bucket_bytes));
    require((flags & ~RLX_SEND_CHANGED) == 0, "rlx_weights_send: unknown flags " + std::to_string(flags));
    const auto dt = dtype_from_code(dtype);
    const auto what = wire::contents(m, dt);
    const bool gathers = what.content == wire::kWeights && is_sliced(m);
    const bool changed_only = flags & RLX_SEND_CHANGED;
    require(!(changed_only && gathers),
            "sending only the changed tensors needs whole parameters, and this model is sharded \"full\": "
            "turn the delta off (inference.transfer_delta = \"none\")");
    at::NoGradGuard no_grad;
    if (sent_bytes) *sent_bytes = 0;
    if (n == 0) {
      // another rank of a model sharded "full": its part in the sender's gathers, in their order
      if (gathers)
        for (size_t p = 0; p < m.params.size(); ++p) whole_param(m, p);
      return 0;
    }
    std::vector<Channel> list;
    for (int i = 0; i < n; ++i) {
      auto& g = get_group(channels[i]);
      require(g.world == 2 && g.rank == 0, "channel " + std::to_string(i) + " is not a weight channel's sending end "
                                           "(a two-rank group joined as rank 0), it is " + who(g));
      require(list.empty() || g.device == list[0].g->device, "every channel must use one backend");
      list.push_back(Channel{&g, i, ""});
      failed[i] = 0;
    }
    const auto device = list[0].g->device;
    const auto tensors = wire::content_tensors(m, what.content);
    size_t have = SIZE_MAX;
    at::Tensor current;  // the bytes of tensor `have`, at the wire dtype on the channels' device
    auto bytes_of = [&](size_t p) {
      if (have != p) {
        const auto t = what.content == wire::kWeights ? whole_param(m, p) : tensors[p];
        current = wire::as_bytes(t.to(device, what.dtype).contiguous()), have = p;
      }
      return current;
    };
    std::vector<uint64_t> sums_P;
    if (changed_only)
      for (size_t p = 0; p < tensors.size(); ++p) sums_P.push_back(wire::message_sum(bytes_of(p)));
    const auto send_P = changed_only ? changed(list, sums_P) : std::vector<bool>(tensors.size(), true);
    std::vector<size_t> sent;  // the tensors sent, in order
    std::vector<int64_t> sizes;
    int64_t total = 0;
    const auto all_sizes = what.bytes();
    for (size_t p = 0; p < tensors.size(); ++p)
      if (send_P[p]) sent.push_back(p), sizes.push_back(all_sizes[p]), total += all_sizes[p];

    if (sent_bytes) *sent_bytes = total;
    Fanout out(std::move(list));
    const auto messages = wire::plan(sizes, bucket_bytes);
    auto longs = [&](std::vector<int64_t> v) { return at::tensor(v, at::kLong).to(device); };
    const auto count = static_cast<int64_t>(tensors.size());
    out.send(longs({wire::kMagic, version, total, dtype, bucket_bytes, count, what.content,
                    static_cast<int64_t>(sent.size())}),
             wire::kHeaderTag, "the header");
    if (sent.size() < tensors.size()) {
      std::vector<int64_t> manifest;
      for (size_t p = 0; p < tensors.size(); ++p) manifest.push_back(static_cast<int64_t>(sums_P[p]));
      for (size_t p = 0; p < tensors.size(); ++p) manifest.push_back(send_P[p] ? 1 : 0);
      out.send(longs(manifest), wire::kManifestTag, "the manifest");
    }
    out.drain(0);
    out.read_acks(version);

    uint64_t checksum = 0;
    // Batched small tensors go through two staging buffers in turn: at most two messages are
    // in flight, and the one before last is done before its buffer is filled again.
    // Each is as large as the largest batch, not the bucket: a 64 MiB buffer for the few MiB of a
    // small model's norms and projections made its transfer ten times slower.
    at::Tensor staging[2];
    int64_t batch_bytes = 0;
    for (const auto& msg : messages)
      if (msg.pieces.size() > 1) batch_bytes = std::max(batch_bytes, msg.bytes);
    for (size_t k = 0; k < messages.size(); ++k) {
      const auto& msg = messages[k];
      out.drain(1);
      at::Tensor body;
      if (msg.pieces.size() == 1) {
        const auto& piece = msg.pieces[0];
        body = bytes_of(sent[piece.param]).narrow(0, piece.offset, piece.bytes);
      } else {
        auto& buffer = staging[k % 2];
        if (!buffer.defined()) buffer = at::empty({batch_bytes}, at::TensorOptions().dtype(at::kByte).device(device));
        body = buffer.narrow(0, 0, msg.bytes);
        int64_t at = 0;
        for (const auto& piece : msg.pieces) {
          body.narrow(0, at, piece.bytes).copy_(bytes_of(sent[piece.param]).narrow(0, piece.offset, piece.bytes));
          at += piece.bytes;
        }
      }
      checksum = wire::fold(checksum, wire::message_sum(body), msg.bytes);
      out.send(body, wire::kFirstMessageTag + static_cast<int>(k),
               "message " + std::to_string(k + 1) + " of " + std::to_string(messages.size()));
    }
    out.send(longs({static_cast<int64_t>(checksum), wire::manifest_hash(what, dtype)}),
             wire::kFirstMessageTag + static_cast<int>(messages.size()), "the trailer");
    out.drain(0);

    int failures = 0;
    std::string errors;
    for (auto& c : out.channels()) {
      // what the server holds once it took this transfer: the base of the next delta
      c.g->sent_sums = c.error.empty() ? sums_P : std::vector<uint64_t>{};
      if (c.error.empty()) continue;
      failed[c.index] = 1;
      ++failures;
      errors += (errors.empty() ? "" : "; ") + c.error;
    }
    last_error() = errors;
    return failures;
  })
}

#else  // no c10d backend compiled in

using namespace rlx;

RLX_API int rlx_weights_send(rlx_model*, rlx_group* const* channels, int n, int, int64_t, int64_t, int, int32_t*, int64_t*) {
  RLX_TRY(-1, {
    require(n == 0 || channels != nullptr, "rlx_weights_send: channels is null");
    for (int i = 0; i < n; ++i) get<void>(channels[i], Kind::Group);
    return 0;
  })
}

#endif
