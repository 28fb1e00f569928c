// A cluster snapshot's bytes (see snapshot_codec.h).
#include "cluster/snapshot_codec.h"

#define XXH_INLINE_ALL
#include <xxhash.h>

#include <algorithm>
#include <cctype>
#include <cstring>

#include "cluster/field_text.h"
#include "common/little_endian.h"

namespace shingled::cluster {
namespace {

constexpr char kManifestMagic[] = "shingled-snapshot 1";
constexpr size_t kRecordHead = 1 + 2 + 4;

XXH3_state_t* new_hash() {
  XXH3_state_t* s = XXH3_createState();
  XXH3_64bits_reset(s);
  return s;
}

}  // namespace

std::string encode_manifest(const SnapshotManifest& m) {
  std::string out = std::string(kManifestMagic) + "\n";
  out += "id=" + m.id + "\n";
  out += "node=" + m.node + "\n";
  out += "created=" + std::to_string(m.created) + "\n";
  out += "records=" + std::to_string(m.records) + "\n";
  out += "chunks=" + std::to_string(m.chunks) + "\n";
  out += "bytes=" + std::to_string(m.bytes) + "\n";
  out += "checksum=" + std::to_string(m.checksum) + "\n";
  out += "first_needed=" + std::to_string(m.first_needed) + "\n";
  out += "first_chunk_sequence=" + std::to_string(m.first_chunk_sequence) + "\n";
  return out;
}

bool decode_manifest(std::string_view text, SnapshotManifest& out, std::string& error) {
  out = SnapshotManifest{};
  unsigned seen = 0;
  const bool read = read_fields(text, kManifestMagic, "not a shingled snapshot manifest (format 1)", "manifest",
                                error, [&](std::string_view key, std::string_view value) {
    if (key == "id" || key == "node") {
      if (value.empty() || value.size() > 128) {
        error = "manifest " + std::string(key) + ": empty or longer than 128 characters";
        return false;
      }
      // The id names the subject its chunks are read from: a '.', '*' or
      // '>' in it would read other subjects' messages as this snapshot's.
      if (key == "id" && !std::all_of(value.begin(), value.end(), [](char c) {
            return std::isalnum(static_cast<unsigned char>(c)) || c == '-' || c == '_';
          })) {
        error = "manifest id: only letters, digits, '-' and '_' may name its chunks' subject";
        return false;
      }
      (key == "id" ? out.id : out.node) = std::string(value);
      seen |= key == "id" ? 1 : 2;
      return true;
    }
    uint64_t* field = key == "created"        ? &out.created
                      : key == "records"      ? &out.records
                      : key == "chunks"       ? &out.chunks
                      : key == "bytes"        ? &out.bytes
                      : key == "checksum"     ? &out.checksum
                      : key == "first_needed" ? &out.first_needed
                      : key == "first_chunk_sequence" ? &out.first_chunk_sequence
                                              : nullptr;
    if (field == nullptr) return true;  // a later format's addition
    if (!parse_whole(value, *field)) {
      error = "manifest " + std::string(key) + ": not a whole number";
      return false;
    }
    seen |= 4;
    return true;
  });
  if (!read) return false;
  if ((seen & 3) != 3 || out.first_needed == 0) {
    error = "manifest without its id, node or first needed sequence";
    return false;
  }
  return true;
}

SnapshotWriter::SnapshotWriter(EmitFn emit, size_t chunk_bytes)
    : emit_(std::move(emit)), chunk_bytes_(chunk_bytes), hash_state_(new_hash()) {}

SnapshotWriter::~SnapshotWriter() { XXH3_freeState(static_cast<XXH3_state_t*>(hash_state_)); }

uint64_t SnapshotWriter::checksum() const { return XXH3_64bits_digest(static_cast<XXH3_state_t*>(hash_state_)); }

bool SnapshotWriter::add(uint8_t type, std::string_view key, std::string_view value) {
  if (key.empty() || key.size() > kSnapshotMaxKey || value.size() > kSnapshotMaxValue) return false;
  const size_t need = kRecordHead + key.size() + value.size();
  if (!current_.empty() && current_.size() + need > chunk_bytes_ && !emit_current()) return false;
  if (current_.empty()) {
    current_.resize(8);
    store_le64(reinterpret_cast<uint8_t*>(current_.data()), chunks_);
  }
  uint8_t head[kRecordHead];
  head[0] = type;
  store_le16(head + 1, uint16_t(key.size()));
  store_le32(head + 3, uint32_t(value.size()));
  current_.append(reinterpret_cast<const char*>(head), kRecordHead);
  current_.append(key);
  current_.append(value);
  ++records_;
  return true;
}

bool SnapshotWriter::emit_current() {
  XXH3_64bits_update(static_cast<XXH3_state_t*>(hash_state_), current_.data(), current_.size());
  bytes_ += current_.size();
  ++chunks_;
  const bool ok = emit_(current_);
  current_.clear();
  return ok;
}

bool SnapshotWriter::finish() { return current_.empty() || emit_current(); }

bool read_snapshot_chunk(std::string_view chunk, uint64_t expected_index, const SnapshotRecordFn& fn,
                         std::string& error) {
  const auto* p = reinterpret_cast<const uint8_t*>(chunk.data());
  if (chunk.size() < 8 || load_le64(p) != expected_index) {
    error = "snapshot chunk " + std::to_string(expected_index) + ": missing or out of order";
    return false;
  }
  for (size_t at = 8; at < chunk.size();) {
    if (chunk.size() - at < kRecordHead) {
      error = "snapshot chunk " + std::to_string(expected_index) + ": a record cut short";
      return false;
    }
    const uint8_t type = p[at];
    const size_t klen = load_le16(p + at + 1), vlen = load_le32(p + at + 3);
    at += kRecordHead;
    if (klen == 0 || klen > kSnapshotMaxKey || chunk.size() - at < klen + vlen) {
      error = "snapshot chunk " + std::to_string(expected_index) + ": a record's lengths do not fit";
      return false;
    }
    if (!fn(type, chunk.substr(at, klen), chunk.substr(at + klen, vlen))) {
      error = "snapshot chunk " + std::to_string(expected_index) + ": a record was refused";
      return false;
    }
    at += klen + vlen;
  }
  return true;
}

SnapshotChecker::SnapshotChecker() : hash_state_(new_hash()) {}
SnapshotChecker::~SnapshotChecker() { XXH3_freeState(static_cast<XXH3_state_t*>(hash_state_)); }

void SnapshotChecker::add(std::string_view chunk) {
  XXH3_64bits_update(static_cast<XXH3_state_t*>(hash_state_), chunk.data(), chunk.size());
  bytes_ += chunk.size();
  ++chunks_;
}

bool SnapshotChecker::matches(const SnapshotManifest& m, std::string& error) const {
  const uint64_t sum = XXH3_64bits_digest(static_cast<XXH3_state_t*>(hash_state_));
  if (chunks_ == m.chunks && bytes_ == m.bytes && sum == m.checksum) return true;
  error = "snapshot " + m.id + " does not match its manifest (" + std::to_string(chunks_) + " chunks, " +
          std::to_string(bytes_) + " bytes read; the manifest says " + std::to_string(m.chunks) + " and " +
          std::to_string(m.bytes) + ", or its checksum differs)";
  return false;
}

}  // namespace shingled::cluster
