// The server's side of a weight transfer (rlx.h, "weight transfer"; the wire format is
// weights_wire.h). Everything that blocks runs on the receiver's own thread: joining the channel,
// and each transfer into a fresh model. The caller (a policy server's event loop, through
// bun:ffi) only starts a transfer, polls it between decode steps and takes the model once it has
// arrived whole, so serving never waits on the network.
//
// Memory: the received model, one staging copy, until the caller swaps it in and frees the old
// (with LoRA: staging copies of the adapters, copied into the served model when taken).
// A transfer refused at the header, or whose checksum does not match what arrived, leaves the
// channel usable; one that failed mid-way (a dead trainer, a timeout) leaves it broken.
#include <condition_variable>
#include <optional>
#include <thread>

#include "weights_wire.h"
#if defined(RLX_CUDA)
#include <c10/cuda/CUDAFunctions.h>
#endif

#if defined(RLX_C10D)

namespace rlx {
namespace {

// A transfer this end refused, or read whole and found corrupted: the channel stays usable.
struct Refused : std::runtime_error {
  using std::runtime_error::runtime_error;
};

struct Job {
  const Model* served;  // stays alive until the transfer is taken (rlx_receiver_start)
  ModelConfig cfg;
  at::ScalarType dtype;
  int dtype_code;
  at::Device device;
  int64_t version;
  std::shared_ptr<Model> into;  // a retired model of the same shape to receive into, or null
};

// A transfer that arrived whole: a new model, or a LoRA model's adapters (undefined where unsent).
struct Received {
  std::unique_ptr<Model> model;
  std::vector<at::Tensor> adapters;
  const Model* served = nullptr;
};

enum class Phase { Joining, Idle, Busy, Ready, Failed };

struct State {
  std::mutex mu;
  std::condition_variable cv;
  Phase phase = Phase::Joining;
  bool closing = false;
  std::string where;   // the channel's store, for messages
  std::string error;   // the last failure
  std::string broken;  // why the channel cannot be used again; empty while it can
  std::optional<Job> job;
  std::optional<Received> received;
  std::unique_ptr<Group> group;
};

void recv(Group& g, at::Tensor& t, int tag) {
  std::vector<at::Tensor> v{t};
  g.pg->recv(v, 0, tag)->wait();
}

void send(Group& g, const at::Tensor& t, int tag) {
  std::vector<at::Tensor> v{t};
  g.pg->send(v, 0, tag)->wait();
}

// What the header announces, checked against what this server expects; kGo or why not.
int64_t check_header(const int64_t* v, const Job& job, const wire::Contents& what, int64_t bytes) {
  if (v[wire::kMagicAt] != wire::kMagic || v[wire::kBucketAt] < 8 || v[wire::kBucketAt] % 8 != 0) return wire::kBadHeader;
  if (v[wire::kVersionAt] != job.version) return wire::kOtherVersion;
  if (v[wire::kDtypeAt] != job.dtype_code) return wire::kOtherDtype;
  if (v[wire::kContentAt] != what.content) return wire::kOtherContent;
  if (v[wire::kParamsAt] != static_cast<int64_t>(what.shapes.size()) || v[wire::kBytesAt] != bytes) return wire::kOtherBytes;
  return wire::kGo;
}

Received receive(Group& g, const Job& job) {
  at::NoGradGuard no_grad;
  const auto longs = at::TensorOptions().dtype(at::kLong).device(g.device);
  auto header = at::zeros({wire::kHeaderLen}, longs);
  recv(g, header, wire::kHeaderTag);
  const auto h = header.cpu();
  const int64_t* v = h.data_ptr<int64_t>();
  const auto what = wire::contents(*job.served, job.dtype);
  const auto count = static_cast<int64_t>(what.shapes.size());
  // A delta's manifest (every tensor's sum, and whether it is sent) follows the header.
  const int64_t sent_count = v[wire::kSentAt];
  std::vector<uint64_t> sums_P(count, 0);
  std::vector<bool> send_P(count, true);
  if (v[wire::kMagicAt] == wire::kMagic && sent_count < v[wire::kParamsAt] && v[wire::kParamsAt] > 0) {
    auto manifest = at::zeros({2 * v[wire::kParamsAt]}, longs);
    recv(g, manifest, wire::kManifestTag);
    const auto m = manifest.cpu();
    for (int64_t p = 0; p < count && v[wire::kParamsAt] == count; ++p) {
      sums_P[p] = static_cast<uint64_t>(m.data_ptr<int64_t>()[p]);
      send_P[p] = m.data_ptr<int64_t>()[count + p] != 0;
    }
  }
  const auto all_sizes = what.bytes();
  std::vector<size_t> sent;
  std::vector<int64_t> sizes;
  int64_t total = 0;
  for (int64_t p = 0; p < count; ++p)
    if (send_P[p]) sent.push_back(p), sizes.push_back(all_sizes[p]), total += all_sizes[p];
  const int64_t reason = check_header(v, job, what, total);
  send(g, at::tensor(std::vector<int64_t>{reason, job.version, job.dtype_code, total}, at::kLong).to(g.device),
       wire::kAckTag);
  if (reason != wire::kGo)
    throw Refused("refused the transfer: " + std::string(wire::reason_text(reason)) + " (the trainer sent version " +
                  std::to_string(v[wire::kVersionAt]) + ", dtype code " + std::to_string(v[wire::kDtypeAt]) + ", " +
                  std::to_string(v[wire::kBytesAt]) + " bytes; this server expects version " +
                  std::to_string(job.version) + ", dtype code " + std::to_string(job.dtype_code) + ", " +
                  std::to_string(total) + " bytes)");

  // Where the tensors land: a model's parameters (into a retired model when the caller gave one:
  // its pages are already mapped, and a fresh one's would fault in under the socket copies, the
  // larger part of a transfer's time on a VM), or staging tensors for the adapters sent.
  Received out;
  out.served = job.served;
  std::vector<at::Tensor> targets;
  if (what.content == wire::kWeights) {
    if (job.into) out.model.reset(new Model(std::move(*job.into)));
    else out.model = build_model(job.cfg, job.dtype, job.device, 0, false);
    targets = wire::content_tensors(*out.model, what.content);
  } else {
    out.adapters.resize(count);
    for (size_t p : sent) out.adapters[p] = at::empty_like(job.served->lora.params[p].second);
    targets = out.adapters;
  }
  std::vector<at::Tensor> bytes_P(count);
  for (size_t p : sent) bytes_P[p] = wire::as_bytes(targets[p]);
  const bool direct = g.device == job.device;
  const auto messages = wire::plan(sizes, v[wire::kBucketAt]);
  // Each message's receive is posted before the previous one is checked and scattered, so the
  // network and this thread's copies overlap (the sender keeps two messages in flight too).
  struct Pending {
    const wire::Message* msg;
    at::Tensor body;
    bool staged;
    c10::intrusive_ptr<c10d::Work> work;
  };
  auto post = [&](size_t k) {
    const auto& msg = messages[k];
    Pending p{&msg, {}, !(msg.pieces.size() == 1 && direct), {}};
    const auto& first = msg.pieces[0];
    p.body = p.staged ? at::empty({msg.bytes}, at::TensorOptions().dtype(at::kByte).device(g.device))
                      : bytes_P[sent[first.param]].narrow(0, first.offset, first.bytes);
    std::vector<at::Tensor> v{p.body};
    p.work = g.pg->recv(v, 0, wire::kFirstMessageTag + static_cast<int>(k));
    return p;
  };
  uint64_t checksum = 0;
  auto finish = [&](Pending& p) {
    p.work->wait();
    if (p.staged) {
      int64_t at = 0;
      for (const auto& piece : p.msg->pieces) {
        bytes_P[sent[piece.param]].narrow(0, piece.offset, piece.bytes).copy_(p.body.narrow(0, at, piece.bytes));
        at += piece.bytes;
      }
    }
    checksum = wire::fold(checksum, wire::message_sum(p.body), p.msg->bytes);
  };
  std::optional<Pending> previous;
  for (size_t k = 0; k < messages.size(); ++k) {
    auto current = post(k);
    if (previous) finish(*previous);
    previous = std::move(current);
  }
  if (previous) finish(*previous);
  auto trailer = at::zeros({2}, longs);
  recv(g, trailer, wire::kFirstMessageTag + static_cast<int>(messages.size()));
  const auto t = trailer.cpu();
  if (static_cast<uint64_t>(t.data_ptr<int64_t>()[0]) != checksum)
    throw Refused("version " + std::to_string(job.version) + " arrived, but its checksum differs from the trainer's: "
                  "the received weights were dropped and the old ones kept");
  if (t.data_ptr<int64_t>()[1] != wire::manifest_hash(what, job.dtype_code))
    throw Refused("version " + std::to_string(job.version) + " arrived, but the trainer's parameter names or shapes "
                  "differ from this server's model: the received weights were dropped");

  // The tensors not sent stay as the served model has them: they must be what the trainer has.
  const auto served = wire::content_tensors(*job.served, what.content);
  for (int64_t p = 0; p < count; ++p) {
    if (send_P[p]) continue;
    const auto kept = wire::as_bytes(served[p].contiguous());
    if (wire::message_sum(kept) != sums_P[p])
      throw Refused("version " + std::to_string(job.version) + " arrived as a delta, but this server's " +
                    what.shapes[p].first + " (not sent: unchanged on the trainer) differs from the trainer's: the "
                    "received weights were dropped (the server did not take the transfer before; restart it)");
    if (out.model) targets[p].copy_(served[p]);
  }
#if defined(RLX_CUDA)
  if (job.device.is_cuda()) c10::cuda::device_synchronize();  // the caller's thread uses it next
#endif
  return out;
}

void run(std::shared_ptr<State> s, std::string backend, std::string address, int port, int64_t timeout_ms) {
  try {
    auto g = join_group(backend, "tcp", address, port, 1, 2, timeout_ms);
    std::lock_guard<std::mutex> lock(s->mu);
    s->group = std::move(g);
    s->phase = s->job ? Phase::Busy : Phase::Idle;
  } catch (...) {
    std::lock_guard<std::mutex> lock(s->mu);
    s->error = s->broken = "cannot join the weight channel " + s->where + ": " + message_of(std::current_exception());
    s->phase = Phase::Failed;
    return;
  }
  while (true) {
    std::optional<Job> job;
    {
      std::unique_lock<std::mutex> lock(s->mu);
      s->cv.wait(lock, [&] { return s->closing || s->job.has_value(); });
      if (s->closing) return;
      job.swap(s->job);
      s->phase = Phase::Busy;
    }
    std::optional<Received> received;
    std::string error, broken;
    try {
      received = receive(*s->group, *job);
    } catch (const Refused& e) {
      error = e.what();
    } catch (...) {
      error = broken = "receiving version " + std::to_string(job->version) + " over the weight channel " + s->where +
                       " failed: " + message_of(std::current_exception());
    }
    std::lock_guard<std::mutex> lock(s->mu);
    s->received = std::move(received);
    s->phase = s->received ? Phase::Ready : Phase::Failed;
    s->error = error;
    s->broken = broken;
    if (!broken.empty()) return;
  }
}

int code_of(at::ScalarType dtype) {
  for (int code : {RLX_F32, RLX_BF16, RLX_F16, RLX_F64})
    if (dtype_from_code(code) == dtype) return code;
  throw ArgError("a served model's dtype must be f32, bf16, f16 or f64");
}

}  // namespace

struct Receiver {
  std::shared_ptr<State> state;
  std::thread thread;
};

}  // namespace rlx

using namespace rlx;

RLX_API rlx_receiver* rlx_receiver_open(const char* backend, const char* address, int port, int64_t timeout_ms) {
  RLX_TRY(nullptr, {
    require(backend && address, "rlx_receiver_open: backend and address must not be null");
    check_group_args(backend, "tcp", address, 1, 2, timeout_ms);
    require(port > 0 && port < 65536, "the weight channel's port must be in 1..65535, got " + std::to_string(port));
    auto r = std::make_unique<Receiver>();
    r->state = std::make_shared<State>();
    r->state->where = "tcp://" + std::string(address) + ":" + std::to_string(port);
    r->thread = std::thread(run, r->state, std::string(backend), std::string(address), port, timeout_ms);
    register_handle(r.get(), Kind::Receiver);
    return reinterpret_cast<rlx_receiver*>(r.release());
  })
}

RLX_API int rlx_receiver_start(rlx_receiver* receiver, rlx_model* like, rlx_model* into, int64_t version) {
  RLX_TRY(-1, {
    auto& s = *get<Receiver>(receiver, Kind::Receiver)->state;
    auto& m = whole_model(like, "rlx_receiver_start");
    require(!(into && m.lora.rank), "rlx_receiver_start: a LoRA model's adapters are received beside it: into = NULL");
    std::shared_ptr<Model> target;
    if (into != nullptr) {
      auto& t = whole_model(into, "rlx_receiver_start (into)");
      require(&t != &m && t.dtype == m.dtype && t.device == m.device && t.lora.rank == 0 &&
                  wire::param_shapes(t) == wire::param_shapes(m),
              "rlx_receiver_start: `into` must be another model of the served model's shape, dtype and device");
    }
    std::lock_guard<std::mutex> lock(s.mu);
    if (!s.broken.empty())
      throw std::runtime_error("the weight channel cannot be used again (" + s.broken + "); restart the run (--resume)");
    require(!s.job && (s.phase == Phase::Joining || s.phase == Phase::Idle || s.phase == Phase::Failed),
            "a transfer is in progress on this channel, or received and not taken");
    if (into != nullptr) {  // the receiver owns it from here: its handle is no longer valid
      auto* t = get<Model>(into, Kind::Model);
      unregister_handle(t, Kind::Model);
      target.reset(t);
    }
    s.job = Job{&m, m.cfg, m.dtype, code_of(m.dtype), m.device, version, std::move(target)};
    if (s.phase != Phase::Joining) s.phase = Phase::Busy;
    s.cv.notify_all();
    return 0;
  })
}

RLX_API int rlx_receiver_poll(rlx_receiver* receiver) {
  RLX_TRY(-1, {
    auto& s = *get<Receiver>(receiver, Kind::Receiver)->state;
    std::lock_guard<std::mutex> lock(s.mu);
    switch (s.phase) {
      case Phase::Joining:
      case Phase::Busy: return 0;
      case Phase::Ready: return 1;
      case Phase::Idle: return 2;
      case Phase::Failed: last_error() = s.error; return -1;
    }
    return -1;
  })
}

RLX_API rlx_model* rlx_receiver_take(rlx_receiver* receiver) {
  RLX_TRY(nullptr, {
    auto& s = *get<Receiver>(receiver, Kind::Receiver)->state;
    std::lock_guard<std::mutex> lock(s.mu);
    require(s.phase == Phase::Ready, "no received model to take (poll until it returns 1)");
    require(s.received->model != nullptr, "this transfer carried LoRA adapters: take them with rlx_receiver_take_adapters");
    auto* model = s.received->model.release();
    register_handle(model, Kind::Model);
    s.received.reset();
    s.phase = Phase::Idle;
    return reinterpret_cast<rlx_model*>(model);
  })
}

RLX_API int rlx_receiver_take_adapters(rlx_receiver* receiver, rlx_model* served) {
  RLX_TRY(-1, {
    auto& s = *get<Receiver>(receiver, Kind::Receiver)->state;
    auto& m = whole_model(served, "rlx_receiver_take_adapters");
    std::lock_guard<std::mutex> lock(s.mu);
    require(s.phase == Phase::Ready, "no received adapters to take (poll until it returns 1)");
    require(s.received->model == nullptr, "this transfer carried full weights: take them with rlx_receiver_take");
    require(s.received->served == &m, "rlx_receiver_take_adapters: `served` must be the model the transfer started for");
    at::NoGradGuard no_grad;
    for (size_t p = 0; p < s.received->adapters.size(); ++p)
      if (s.received->adapters[p].defined()) m.lora.params[p].second.copy_(s.received->adapters[p]);
    s.received.reset();
    s.phase = Phase::Idle;
    return 0;
  })
}

RLX_API int rlx_receiver_free(rlx_receiver* receiver) {
  RLX_TRY(-1, {
    auto* r = get<Receiver>(receiver, Kind::Receiver);
    unregister_handle(r, Kind::Receiver);
    bool blocked;
    {
      std::lock_guard<std::mutex> lock(r->state->mu);
      r->state->closing = true;
      blocked = r->state->phase == Phase::Joining || r->state->phase == Phase::Busy;
    }
    r->state->cv.notify_all();
    // A thread inside a join or a transfer ends at its timeout; it owns what it uses (the state).
    if (blocked) r->thread.detach();
    else r->thread.join();
    delete r;
    return 0;
  })
}

#else  // no c10d backend compiled in

using namespace rlx;

RLX_API rlx_receiver* rlx_receiver_open(const char* backend, const char* address, int, int64_t timeout_ms) {
  RLX_TRY(nullptr, {
    require(backend && address, "rlx_receiver_open: backend and address must not be null");
    check_group_args(backend, "tcp", address, 1, 2, timeout_ms);
    return nullptr;
  })
}
RLX_API int rlx_receiver_start(rlx_receiver* r, rlx_model*, rlx_model*, int64_t) { RLX_TRY(-1, { get<void>(r, Kind::Receiver); return 0; }) }
RLX_API int rlx_receiver_poll(rlx_receiver* r) { RLX_TRY(-1, { get<void>(r, Kind::Receiver); return 0; }) }
RLX_API rlx_model* rlx_receiver_take(rlx_receiver* r) { RLX_TRY(nullptr, { get<void>(r, Kind::Receiver); return nullptr; }) }
RLX_API int rlx_receiver_take_adapters(rlx_receiver* r, rlx_model*) { RLX_TRY(-1, { get<void>(r, Kind::Receiver); return 0; }) }
RLX_API int rlx_receiver_free(rlx_receiver* r) { RLX_TRY(-1, { get<void>(r, Kind::Receiver); return 0; }) }

#endif
