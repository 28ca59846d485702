// The parts of the weight-transfer wire format both ends compute (weights_wire.h).
#include "weights_wire.h"

#include "shard.h"

namespace rlx::wire {

std::vector<Message> plan(const std::vector<int64_t>& param_bytes, int64_t bucket) {
  std::vector<Message> messages;
  Message open;
  auto close = [&] {
    if (!open.pieces.empty()) messages.push_back(std::move(open));
    open = Message{};
  };
  const int64_t own = std::min<int64_t>(bucket, kOwnMessageBytes);
  for (size_t p = 0; p < param_bytes.size(); ++p) {
    const int64_t n = param_bytes[p];
    if (n >= own) {
      close();
      for (int64_t offset = 0; offset < n; offset += bucket) {
        const int64_t len = std::min(bucket, n - offset);
        messages.push_back(Message{{Piece{p, offset, len}}, len});
      }
      continue;
    }
    if (open.bytes + n > bucket) close();
    open.pieces.push_back(Piece{p, 0, n});
    open.bytes += n;
  }
  close();
  return messages;
}

Shapes param_shapes(const Model& m) {
  std::unordered_map<std::string, std::vector<int64_t>> sliced;
  if (is_sliced(m))
    for (const auto& u : m.shards->units)
      for (const auto& f : u.fields)
        if (!f.name.empty()) sliced[f.name] = f.shape;
  Shapes out;
  for (const auto& [name, t] : m.params)
    out.emplace_back(name, t.defined() ? t.sizes().vec() : sliced.at(name));
  return out;
}

Contents contents(const Model& m, at::ScalarType served) {
  if (m.lora.rank == 0) return Contents{kWeights, param_shapes(m), served};
  Shapes shapes;
  for (const auto& [name, t] : m.lora.params) shapes.emplace_back(name, t.sizes().vec());
  return Contents{kAdapters, std::move(shapes), m.lora.params.front().second.scalar_type()};
}

std::vector<int64_t> Contents::bytes() const {
  std::vector<int64_t> out;
  for (const auto& [name, shape] : shapes)
    out.push_back(c10::multiply_integers(shape) * static_cast<int64_t>(c10::elementSize(dtype)));
  return out;
}

std::vector<at::Tensor> content_tensors(const Model& m, Content content) {
  std::vector<at::Tensor> out;
  for (const auto& [name, t] : content == kAdapters ? m.lora.params : m.params) out.push_back(t);
  return out;
}

int64_t manifest_hash(const Contents& c, int dtype) {
  uint64_t h = 1469598103934665603ULL;
  auto mix = [&](const void* data, size_t n) {
    for (size_t i = 0; i < n; ++i) h = (h ^ static_cast<const uint8_t*>(data)[i]) * 1099511628211ULL;
  };
  for (const auto& [name, shape] : c.shapes) {
    mix(name.data(), name.size() + 1);  // with its terminator: names cannot run into each other
    mix(shape.data(), shape.size() * sizeof(int64_t));
    const int64_t end = -1;
    mix(&end, sizeof end);
  }
  mix(&dtype, sizeof dtype);
  mix(&c.content, sizeof c.content);
  return static_cast<int64_t>(h);
}

uint64_t message_sum(const at::Tensor& bytes) {
  const int64_t n = bytes.numel(), words = n / 8, tail = n % 8;
  uint64_t sum = 0;
  if (bytes.is_cuda()) {
    if (words > 0) {
      auto w = bytes.narrow(0, 0, words * 8);
      if (w.storage_offset() % 8 != 0) w = w.clone();
      auto w_W = w.view(at::kLong);
      auto odd_W = at::arange(words, w_W.options()).mul_(2).add_(1);
      sum = static_cast<uint64_t>(w_W.mul(odd_W).sum().item<int64_t>());  // wraps mod 2^64, as below
    }
    if (tail > 0) {
      auto last = bytes.narrow(0, words * 8, tail).cpu();
      uint64_t w = 0;
      std::memcpy(&w, last.data_ptr(), static_cast<size_t>(tail));
      sum += w * (2 * static_cast<uint64_t>(words) + 1);
    }
    return sum;
  }
  // On the CPU, Fletcher's two running sums instead of a multiply per word, in four lanes (words
  // 4k + j) the compiler keeps in one vector register. In lane j, with a += w and b += a over its
  // n_j words, b = sum (n_j - k) w, so sum k w = n_j a - b; and sum_i i w_i = sum_j (4 (n_j a_j -
  // b_j) + j a_j). The checksum is 2 sum i w_i + sum w_i, as on the GPU.
  const auto* p = static_cast<const uint8_t*>(bytes.data_ptr());
  const int64_t rows = words / 4;
  uint64_t a[4] = {0, 0, 0, 0}, b[4] = {0, 0, 0, 0};
  for (int64_t k = 0; k < rows; ++k) {
    uint64_t w[4];
    std::memcpy(w, p + 32 * k, 32);
    for (int j = 0; j < 4; ++j) {
      a[j] += w[j];
      b[j] += a[j];
    }
  }
  uint64_t indexed = 0, plain = 0;
  for (int j = 0; j < 4; ++j) {
    indexed += 4 * (static_cast<uint64_t>(rows) * a[j] - b[j]) + static_cast<uint64_t>(j) * a[j];
    plain += a[j];
  }
  sum = 2 * indexed + plain;
  for (int64_t i = rows * 4; i < words; ++i) {  // the last 0-3 whole words
    uint64_t w;
    std::memcpy(&w, p + 8 * i, 8);
    sum += w * (2 * static_cast<uint64_t>(i) + 1);
  }
  if (tail > 0) {
    uint64_t w = 0;
    std::memcpy(&w, p + 8 * words, static_cast<size_t>(tail));
    sum += w * (2 * static_cast<uint64_t>(words) + 1);
  }
  return sum;
}

at::Tensor as_bytes(const at::Tensor& t) {
  return t.detach().reshape({-1}).view(at::kByte);
}

const char* reason_text(int64_t reason) {
  switch (reason) {
    case kOtherVersion: return "it was told to receive another version";
    case kOtherDtype: return "it serves another dtype";
    case kOtherBytes: return "its model has another size (another architecture)";
    case kBadHeader: return "the header was not a weight transfer's";
    case kOtherContent: return "one end has LoRA adapters and the other does not";
  }
  return "unknown reason";
}

}  // namespace rlx::wire
