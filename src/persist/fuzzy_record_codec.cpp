// Encodes and decodes the stored value of one fuzzy digest (fuzzy_record_codec.h
// has the layout). Pure and allocation-light; it must never accept a value
// whose length disagrees with its own header.
#include "persist/fuzzy_record_codec.h"

#include <cstring>

#include "common/little_endian.h"

namespace shingled {

bool encode_fuzzy_record(const FuzzyRecord& record, std::string& out) {
  out.clear();
  if (record.n_flags < 1 || record.n_flags > kFuzzyRecordMaxFlags) return false;
  // Sized once and filled through a pointer: this runs for every change the
  // persistence thread drains (a byte-wise push_back cost ~5k instructions).
  out.resize(fuzzy_record_value_bytes(record.n_flags, record.has_shingles));
  auto* p = reinterpret_cast<uint8_t*>(out.data());
  *p++ = kFuzzyRecordFormat;
  *p++ = record.n_flags;
  for (size_t i = 0; i < record.n_flags; ++i) {
    store_le32(p, record.flags[i].flag);
    p += 4;
    store_le32(p, uint32_t(record.flags[i].value));
    p += 4;
  }
  store_le32(p, record.first_write);
  store_le32(p + 4, record.last_write);
  p += 8;
  *p++ = record.has_shingles ? 1 : 0;
  if (record.has_shingles) {
    for (uint64_t sh : record.shingles) {
      store_le64(p, sh);
      p += 8;
    }
  }
  return true;
}

bool decode_fuzzy_record(std::string_view key, std::string_view value, FuzzyRecord& record,
                         std::string& error) {
  if (key.size() != kFuzzyDigestBytes) {
    error = "fuzzy record key is " + std::to_string(key.size()) + " bytes, expected " +
            std::to_string(kFuzzyDigestBytes);
    return false;
  }
  if (value.size() < 2) {
    error = "fuzzy record value is " + std::to_string(value.size()) +
            " bytes, too short for its header (2)";
    return false;
  }
  const auto* p = reinterpret_cast<const uint8_t*>(value.data());
  if (p[0] != kFuzzyRecordFormat) {
    error = "fuzzy record format byte is " + std::to_string(p[0]) + ", expected " +
            std::to_string(kFuzzyRecordFormat);
    return false;
  }
  const size_t n = p[1];
  if (n < 1 || n > kFuzzyRecordMaxFlags) {
    error = "fuzzy record has " + std::to_string(n) + " flags, expected 1.." +
            std::to_string(kFuzzyRecordMaxFlags);
    return false;
  }
  const size_t shingle_flag_at = fuzzy_record_value_bytes(n, false) - 1;
  if (value.size() <= shingle_flag_at) {
    error = "fuzzy record value is " + std::to_string(value.size()) + " bytes, truncated: " +
            std::to_string(n) + " flags need at least " +
            std::to_string(shingle_flag_at + 1);
    return false;
  }
  const uint8_t shingle_flag = p[shingle_flag_at];
  if (shingle_flag > 1) {
    error = "fuzzy record shingle flag is " + std::to_string(shingle_flag) + ", expected 0 or 1";
    return false;
  }
  const size_t expected = fuzzy_record_value_bytes(n, shingle_flag == 1);
  if (value.size() != expected) {
    error = "fuzzy record value is " + std::to_string(value.size()) + " bytes, expected " +
            std::to_string(expected) + " for " + std::to_string(n) + " flags " +
            (shingle_flag ? "with" : "without") + " shingles";
    return false;
  }

  std::memcpy(record.digest, key.data(), kFuzzyDigestBytes);
  record.n_flags = uint8_t(n);
  const uint8_t* q = p + 2;
  for (size_t i = 0; i < kFuzzyRecordMaxFlags; ++i) {
    if (i < n) {
      record.flags[i].flag = load_le32(q);
      record.flags[i].value = int32_t(load_le32(q + 4));
      q += 8;
    } else {
      record.flags[i].flag = 0;
      record.flags[i].value = 0;
    }
  }
  record.first_write = load_le32(q);
  record.last_write = load_le32(q + 4);
  q += 9;  // the two times and the shingle flag
  record.has_shingles = shingle_flag == 1;
  for (size_t i = 0; i < kFuzzyRecordShingles; ++i) {
    record.shingles[i] = record.has_shingles ? load_le64(q + 8 * i) : 0;
  }
  return true;
}

}  // namespace shingled

namespace shingled {

void merge_fuzzy_values(std::string_view stored, std::string_view value, std::string& out) {
  out.assign(value);
  if (value.size() < 2 || stored.size() < 2) return;
  const auto* v = reinterpret_cast<const uint8_t*>(value.data());
  const auto* s = reinterpret_cast<const uint8_t*>(stored.data());
  if (v[0] != kFuzzyRecordFormat || s[0] != kFuzzyRecordFormat) return;
  const size_t vn = v[1];
  const size_t sn = s[1];
  if (vn < 1 || vn > kFuzzyRecordMaxFlags || sn < 1 || sn > kFuzzyRecordMaxFlags) return;
  if (value.size() != fuzzy_record_value_bytes(vn, false)) return;  // has its own shingles
  if (stored.size() != fuzzy_record_value_bytes(sn, true)) return;  // nothing to keep
  out.back() = 1;  // the shingle flag is the last byte of a value without shingles
  out.append(stored.substr(fuzzy_record_value_bytes(sn, false)));
}

}  // namespace shingled
