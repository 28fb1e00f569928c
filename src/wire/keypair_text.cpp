// Server keypairs as text (spec 11.1): decode and check, generate, the
// rspamadm `id`, and the UCL block rspamadm prints. Start-up and CLI only.
// Never puts secret-key material into an error message; wipes decoded copies.
#include "wire/keypair_text.h"
#include "common/hex.h"

#include <sodium.h>

#include <cstring>
#include <string_view>
#include <vector>

#include "wire/base32.h"

namespace shingled {

namespace {

constexpr size_t kBase32KeyChars = 52;  // 32 bytes = 256 bits = 51 characters + 1 bit
constexpr size_t kHexKeyChars = 2 * crypto::kKeySize;


bool is_base32_char(char c) {
  static constexpr std::string_view kAlphabet = "ybndrfg8ejkmcpqxot1uwisza345h769";
  return kAlphabet.find(c) != std::string_view::npos;
}

// "'x' " for the public key; nothing for the secret key, whose characters
// stay out of logs even when they are wrong.
std::string shown_char(char c, bool secret) {
  if (secret) return "";
  const auto u = static_cast<unsigned char>(c);
  if (u >= 0x20 && u < 0x7f) return std::string("'") + c + "' ";
  static constexpr char kDigits[] = "0123456789abcdef";
  return std::string("0x") + kDigits[u >> 4] + kDigits[u & 15] + " ";
}

bool decode_base32_key(const char* name, bool secret, const std::string& text,
                       uint8_t key[crypto::kKeySize], std::string& error) {
  for (size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (is_base32_char(c)) continue;
    error = std::string(name) + ": character " + shown_char(c, secret) + "at offset " +
            std::to_string(i) + " is not rspamd base32";
    error += c >= 'A' && c <= 'Z' ? " (the alphabet is lowercase only)"
                                  : " (alphabet ybndrfg8ejkmcpqxot1uwisza345h769)";
    return false;
  }
  std::vector<uint8_t> raw;
  base32_decode(text, raw);
  const bool ok = raw.size() == crypto::kKeySize;
  if (ok) {
    std::memcpy(key, raw.data(), crypto::kKeySize);
  } else {
    error = std::string(name) + ": " + std::to_string(text.size()) +
            " base32 characters decode to " + std::to_string(raw.size()) + " bytes, want " +
            std::to_string(crypto::kKeySize) + " (" + std::to_string(kBase32KeyChars) +
            " characters)";
  }
  sodium_memzero(raw.data(), raw.size());
  return ok;
}

bool decode_hex_key(const char* name, bool secret, const std::string& text,
                    uint8_t key[crypto::kKeySize], std::string& error) {
  for (size_t i = 0; i < text.size(); ++i) {
    if (hex_value(text[i]) >= 0) continue;
    error = std::string(name) + ": character " + shown_char(text[i], secret) +
            "at offset " + std::to_string(i) + " is not a hex digit";
    return false;
  }
  if (text.size() != kHexKeyChars) {
    error = std::string(name) + ": " + std::to_string(text.size()) + " hex digits, want " +
            std::to_string(kHexKeyChars) + " (" + std::to_string(crypto::kKeySize) + " bytes)";
    return false;
  }
  for (size_t i = 0; i < crypto::kKeySize; ++i) {
    key[i] = static_cast<uint8_t>(hex_value(text[2 * i]) << 4 | hex_value(text[2 * i + 1]));
  }
  return true;
}

}  // namespace

bool decode_keypair(const std::string& pubkey, const std::string& privkey,
                    const std::string& encoding, Keypair& out, std::string& error) {
  bool (*decode)(const char*, bool, const std::string&, uint8_t*, std::string&) = nullptr;
  if (encoding.empty() || encoding == "base32") {
    decode = decode_base32_key;
  } else if (encoding == "hex") {
    decode = decode_hex_key;
  } else {
    error = "keypair encoding \"" + encoding + "\" is not supported (want \"base32\" or \"hex\")";
    return false;
  }
  Keypair kp;
  uint8_t derived[crypto::kKeySize];
  bool ok = decode("pubkey", false, pubkey, kp.public_key, error) &&
            decode("privkey", true, privkey, kp.secret_key, error);
  if (ok) {
    crypto_scalarmult_curve25519_base(derived, kp.secret_key);
    if (sodium_memcmp(derived, kp.public_key, sizeof derived) != 0) {
      error = "pubkey does not belong to privkey: privkey gives public key " +
              base32_encode(derived, sizeof derived) + ", pubkey is " +
              base32_encode(kp.public_key, sizeof kp.public_key);
      ok = false;
    }
  }
  if (ok) out = kp;
  sodium_memzero(&kp, sizeof kp);
  return ok;
}

Keypair generate_keypair() {
  Keypair kp;
  randombytes_buf(kp.secret_key, sizeof kp.secret_key);
  // Clamp as rspamd stores its keys (libsodium would clamp a copy anyway).
  kp.secret_key[0] &= 248;
  kp.secret_key[31] &= 127;
  kp.secret_key[31] |= 64;
  crypto_scalarmult_curve25519_base(kp.public_key, kp.secret_key);
  return kp;
}

std::string keypair_id(const Keypair& kp) {
  uint8_t hash[crypto_generichash_BYTES_MAX];
  static_assert(sizeof hash == 64);
  crypto_generichash(hash, sizeof hash, kp.public_key, sizeof kp.public_key, nullptr, 0);
  return base32_encode(hash, sizeof hash);
}

std::string render_keypair(const Keypair& kp) {
  std::string text = "keypair {\n";
  text += "    privkey = \"" + base32_encode(kp.secret_key, sizeof kp.secret_key) + "\";\n";
  text += "    pubkey = \"" + base32_encode(kp.public_key, sizeof kp.public_key) + "\";\n";
  text += "    encoding = \"base32\";\n";
  text += "    type = \"kex\";\n";
  text += "    algorithm = \"curve25519\";\n";
  text += "    id = \"" + keypair_id(kp) + "\";\n";
  text += "}\n";
  return text;
}

}  // namespace shingled
