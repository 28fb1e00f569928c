// Per-keypair rules and the dynamic keypairs (see key_rules.h).
#include "access/key_rules.h"

#include "wire/base32.h"

namespace shingled {

namespace {
uint64_t id_word(const uint8_t* key_id) {
  uint64_t w;
  std::memcpy(&w, key_id, sizeof w);
  return w;
}
}  // namespace

KeyRules KeyRules::from(const KeyExtensions& ext, const Keypair& kp) {
  KeyRules r;
  r.ops = ext.ops;
  r.expire_unix = ext.expire_unix;
  r.limit_burst = ext.limit_burst;
  r.limit_rate = ext.limit_rate;
  r.forbidden.overrides = ext.forbidden_given;
  for (uint32_t f : ext.forbidden_ids) {
    if (r.forbidden.n < kMaxKeyForbiddenIds) r.forbidden.ids[r.forbidden.n++] = f;
  }
  r.name = ext.name;
  std::vector<uint8_t> id;
  if (base32_decode(keypair_id(kp), id) && id.size() == r.id.size()) std::copy(id.begin(), id.end(), r.id.begin());
  return r;
}

std::string KeyRules::label() const {
  if (!name.empty()) return name;
  static const char* hex = "0123456789abcdef";
  std::string out;
  for (unsigned i = 0; i < 8; ++i) {
    out += hex[id[i] >> 4];
    out += hex[id[i] & 15];
  }
  return "key " + out;
}

bool DynamicKeys::add(DynamicKey key) {
  const uint64_t w = id_word(key.keypair.key_id());
  if (by_id_.count(w) != 0) return false;
  by_id_.emplace(w, keys_.size());
  keys_.push_back(std::move(key));
  return true;
}

const DynamicKey* DynamicKeys::find(const uint8_t* key_id) const {
  if (keys_.empty()) return nullptr;
  auto it = by_id_.find(id_word(key_id));
  return it == by_id_.end() ? nullptr : &keys_[it->second];
}

}  // namespace shingled
