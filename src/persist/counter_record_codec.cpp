// Encodes and decodes the stored form of one shingle counter
// (counter_record_codec.h has the layout). Never accepts a value whose
// length disagrees with its header.
#include "persist/counter_record_codec.h"

#include "common/little_endian.h"

namespace shingled {

namespace {
void put_be(uint8_t* p, uint64_t v, int bytes) {
  for (int i = bytes - 1; i >= 0; --i, v >>= 8) p[i] = uint8_t(v);
}
uint64_t get_be(const uint8_t* p, int bytes) {
  uint64_t v = 0;
  for (int i = 0; i < bytes; ++i) v = v << 8 | p[i];
  return v;
}
}  // namespace

void encode_counter_key(const CounterKey& key, std::string& out) {
  out.resize(kCounterKeyBytes);
  auto* p = reinterpret_cast<uint8_t*>(out.data());
  put_be(p, key.prefix, 8);
  put_be(p + 8, key.shingle, 8);
  put_be(p + 16, key.type, 2);
  p[18] = static_cast<uint8_t>(key.role);
}

bool decode_counter_key(std::string_view bytes, CounterKey& key, std::string& error) {
  if (bytes.size() != kCounterKeyBytes) {
    error = "counter key is " + std::to_string(bytes.size()) + " bytes, expected " +
            std::to_string(kCounterKeyBytes);
    return false;
  }
  const auto* p = reinterpret_cast<const uint8_t*>(bytes.data());
  if (p[18] > static_cast<uint8_t>(CounterRole::unique)) {
    error = "counter key names role " + std::to_string(p[18]) + ", expected 0, 1 or 2";
    return false;
  }
  key.prefix = get_be(p, 8);
  key.shingle = get_be(p + 8, 8);
  key.type = uint16_t(get_be(p + 16, 2));
  key.role = static_cast<CounterRole>(p[18]);
  return true;
}

void encode_counter_value_head(const CounterKey& key, uint64_t home, std::string& out) {
  const bool pair = key.role == CounterRole::pair;
  out.resize(pair ? 9 : 1);
  out[0] = char(kCounterRecordFormat);
  if (pair) store_le64(reinterpret_cast<uint8_t*>(out.data()) + 1, home);
}

void append_counter_slots(const CounterSlot* slots, size_t n, std::string& out) {
  size_t at = out.size();
  out.resize(at + n * kCounterSlotBytes);
  auto* p = reinterpret_cast<uint8_t*>(out.data());
  for (size_t i = 0; i < n; ++i, at += kCounterSlotBytes) {
    store_le32(p + at, slots[i].id);
    store_le64(p + at + 4, slots[i].value);
  }
}

bool counter_value_layout(const CounterKey& key, std::string_view value, uint64_t& home,
                          size_t& slots_at, std::string& error) {
  const auto* p = reinterpret_cast<const uint8_t*>(value.data());
  if (value.empty() || p[0] != kCounterRecordFormat) {
    error = value.empty() ? std::string("counter value is empty")
                          : "counter value format byte is " + std::to_string(p[0]) +
                                ", expected " + std::to_string(kCounterRecordFormat);
    return false;
  }
  const bool pair = key.role == CounterRole::pair;
  slots_at = pair ? 9 : 1;
  if (value.size() < slots_at || (value.size() - slots_at) % kCounterSlotBytes != 0) {
    error = "counter value is " + std::to_string(value.size()) + " bytes, expected " +
            std::to_string(slots_at) + " + a multiple of " + std::to_string(kCounterSlotBytes);
    return false;
  }
  home = pair ? load_le64(p + 1) : key.shingle;
  return true;
}

CounterSlot counter_slot_at(std::string_view value, size_t offset) {
  const auto* p = reinterpret_cast<const uint8_t*>(value.data()) + offset;
  return CounterSlot{load_le32(p), load_le64(p + 4)};
}

}  // namespace shingled
