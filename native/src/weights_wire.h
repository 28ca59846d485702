// The wire format of a weight transfer (rlx.h, "weight transfer"), shared by the trainer's side
// (weights_send.cpp) and the server's (weights_recv.cpp), so that both cut the parameters into the
// same messages and compute the same checksum.
//
// What travels: the model's parameters at the served dtype, or with LoRA only its adapters (at
// their own dtype, float32), which the server copies into its served model in place.
//
// One transfer on a channel (a two-rank group: the trainer rank 0, the server rank 1), in order:
//   tag 0      header  int64[8]: magic, version, bytes sent, dtype (the served model's), bucket_bytes,
//                      tensors, content (kWeights or kAdapters), tensors sent
//   tag 2      manifest int64[2 tensors], only when fewer tensors are sent than there are (a delta:
//                      the tensors whose bytes did not change since the server's last transfer stay):
//                      each tensor's sum (message_sum of its bytes) and whether it is sent (1) or not
//   tag 1      ack     int64[4] from the server: a reason code (0 = go on), the version it expects,
//                      its dtype, its bytes. A refusal ends the transfer there, on both sides.
//   tags 3..k+2 the k messages (plan below, over the tensors sent)
//   tag k + 3  trailer int64[2]: the checksum of every message, the hash of names, shapes and dtype
// The server swaps in the received weights only once the trailer matches what arrived and every
// tensor not sent, kept from its served model, has the sum the manifest says.
#pragma once
#include "dist.h"
#include "model.h"

namespace rlx::wire {

constexpr int64_t kMagic = 0x726c787765696768;  // "rlxweigh"
constexpr int kHeaderTag = 0, kAckTag = 1, kManifestTag = 2, kFirstMessageTag = 3;
enum Header : int { kMagicAt, kVersionAt, kBytesAt, kDtypeAt, kBucketAt, kParamsAt, kContentAt, kSentAt, kHeaderLen };
enum Content : int64_t { kWeights = 0, kAdapters = 1 };
enum Ack : int { kReasonAt, kWantVersionAt, kWantDtypeAt, kWantBytesAt, kAckLen };
enum Reason : int64_t { kGo = 0, kOtherVersion = 1, kOtherDtype = 2, kOtherBytes = 3, kBadHeader = 4, kOtherContent = 5 };

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
using Shapes = std::vector<std::pair<std::string, std::vector<int64_t>>>;
Shapes param_shapes(const Model& m);

// What a model's transfer carries: its adapters when it has LoRA, else its parameters; their
// names and shapes, and the dtype they travel at (the adapters' own, or `served` for weights).
struct Contents {
  Content content;
  Shapes shapes;
  at::ScalarType dtype;
  std::vector<int64_t> bytes() const;  // per tensor
};
Contents contents(const Model& m, at::ScalarType served);
// The tensors of those contents in m, in order (undefined for a sliced parameter).
std::vector<at::Tensor> content_tensors(const Model& m, Content content);

// FNV-1a of every name and shape, the dtype code and the content: both ends must agree on it.
int64_t manifest_hash(const Contents& c, int dtype);

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
