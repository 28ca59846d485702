// The wire format of a weight transfer (rlx.h, "weight transfer"), shared by the trainer's side
// (weights_send.cpp) and the server's (weights_recv.cpp), so that both cut the parameters into the
// same messages and compute the same checksum.
//
// One transfer on a channel (a two-rank group: the trainer rank 0, the server rank 1), by tag:
//   0          header  int64[8]: magic, version, bytes, dtype, bucket_bytes, parameters, 0, 0
//   1          ack     int64[4] from the server: a reason code (0 = go on), the version it expects,
//                      its dtype, its bytes. A refusal ends the transfer there, on both sides.
//   2 .. k+1   the k messages (plan below)
//   k + 2      trailer int64[2]: the checksum of every message, the hash of names, shapes and dtype
// The server swaps in the received weights only once the trailer matches what arrived.
#pragma once
#include "dist.h"
#include "model.h"

namespace rlx::wire {

constexpr int64_t kMagic = 0x726c787765696768;  // "rlxweigh"
constexpr int kHeaderTag = 0, kAckTag = 1, kFirstMessageTag = 2;
enum Header : int { kMagicAt, kVersionAt, kBytesAt, kDtypeAt, kBucketAt, kParamsAt, kHeaderLen = 8 };
enum Ack : int { kReasonAt, kWantVersionAt, kWantDtypeAt, kWantBytesAt, kAckLen };
enum Reason : int64_t { kGo = 0, kOtherVersion = 1, kOtherDtype = 2, kOtherBytes = 3, kBadHeader = 4 };

// Bytes [offset, offset + bytes) of parameter `param`.
struct Piece {
  size_t param;
  int64_t offset, bytes;
};
// What one send carries: a piece of one large parameter (sent from and received into the
// parameter's own memory), or several small parameters whole (through a staging buffer).
struct Message {
  std::vector<Piece> pieces;
  int64_t bytes = 0;
};

// Cuts the parameters' bytes, in order, into messages of at most `bucket` bytes: a parameter of at
// least kOwnMessageBytes goes in messages of its own (split when larger than `bucket`), sent from
// and received into its own memory; smaller ones (norms, biases) are batched whole.
constexpr int64_t kOwnMessageBytes = 1 << 20;
std::vector<Message> plan(const std::vector<int64_t>& param_bytes, int64_t bucket);

// The names and whole shapes of the model's parameters in their fixed order (a model sharded
// "full" holds only slices: their shapes come from its shard layout).
std::vector<std::pair<std::string, std::vector<int64_t>>> param_shapes(const Model& m);

// FNV-1a of every name and shape, and the dtype code: both ends' models must agree on it.
int64_t manifest_hash(const std::vector<std::pair<std::string, std::vector<int64_t>>>& params, int dtype);

// The message's checksum: sum over its 8-byte words w_i (the last one zero-padded) of
// w_i (2 i + 1), mod 2^64, so a word changed, lost or moved changes it. Any device.
uint64_t message_sum(const at::Tensor& bytes);

// Folds one message's sum into the transfer's checksum (order matters).
inline uint64_t fold(uint64_t checksum, uint64_t message, int64_t bytes) {
  return checksum * 1000003ULL + message + static_cast<uint64_t>(bytes);
}

// A contiguous tensor's memory as flat bytes (a view: writing it writes the tensor).
at::Tensor as_bytes(const at::Tensor& t);

const char* reason_text(int64_t reason);

}  // namespace rlx::wire
