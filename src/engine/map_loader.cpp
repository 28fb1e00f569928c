// Reading and re-reading the access-control map files (see map_loader.h).
#include "engine/map_loader.h"

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "access/map_entries.h"
#include "access/map_file.h"
#include "common/log.h"
#include "common/text_file.h"
#include "config/keypair_block.h"
#include "config/ucl_parser.h"

namespace shingled {

MapLoader::MapLoader(const Config& config) : config_(config) {
  auto add = [&](const std::vector<std::string>& paths, Map map) {
    for (const std::string& p : paths) files_.push_back(File{p, map, {}, false, {}, {}, {}});
  };
  add(config.map_files.allow_update, Map::allow_update);
  add(config.map_files.blocked, Map::blocked);
  add(config.map_files.delay_whitelist, Map::delay_whitelist);
  add(config.map_files.skip_hashes, Map::skip_hashes);
  add(config.map_files.ratelimit_whitelist, Map::ratelimit_whitelist);
  add(config.map_files.allow_update_keys, Map::allow_update_keys);
  if (!config.dynamic_keys_map.empty()) add({config.dynamic_keys_map}, Map::dynamic_keys);
  for (const KeypairText& t : config.keypairs) {
    Keypair kp;
    std::string ignored;  // the daemon has refused bad keypairs before this runs
    if (decode_keypair(t.pubkey, t.privkey, t.encoding, kp, ignored)) {
      static_key_ids_.push_back(KeyRules::from({}, kp).id);
    }
  }
}

bool MapLoader::stamp_of(const std::string& path, Stamp& out, std::string& error) {
  struct stat st;
  if (stat(path.c_str(), &st) != 0) {
    error = path + ": cannot be read: " + strerror(errno);
    return false;
  }
  if (!S_ISREG(st.st_mode)) {
    error = path + ": not a regular file (a map is a file of one entry per line)";
    return false;
  }
  out.dev = st.st_dev;
  out.ino = st.st_ino;
  out.size = st.st_size;
  out.mtime_ns = int64_t(st.st_mtim.tv_sec) * 1'000'000'000 + st.st_mtim.tv_nsec;
  return true;
}

// dynamic_keys_map: one array of keypair blocks, each as a `keypair { }`
// of the config (extensions included). All or nothing: a bad block, or two
// with one key id, refuses the file with the block's line.
bool MapLoader::read_keys(File& f, std::string& error) const {
  std::string text;
  if (!read_text_file(f.path, kUclMaxInputBytes, text, error)) {
    error = f.path + ": " + error;
    return false;
  }
  UclNode root;
  UclError ucl;
  if (!parse_ucl_array(text, root, ucl)) {
    error = f.path + ": line " + std::to_string(ucl.line) + ": " + ucl.reason;
    return false;
  }
  if (root.children.size() > kMaxDynamicKeys) {
    error = f.path + ": more than " + std::to_string(kMaxDynamicKeys) + " keypairs";
    return false;
  }
  std::vector<std::pair<Keypair, KeyExtensions>> keys;
  for (const UclNode& block : root.children) {
    KeypairText kt;
    int line = block.line;
    std::string why;
    Keypair kp;
    if (!parse_keypair_block(block, kt, line, why) ||
        !decode_keypair(kt.pubkey, kt.privkey, kt.encoding, kp, why)) {
      error = f.path + ": line " + std::to_string(line) + ": " + (why.rfind("keypair", 0) == 0 ? "" : "keypair: ") + why;
      return false;
    }
    for (const auto& [other, ext] : keys) {
      if (std::memcmp(other.key_id(), kp.key_id(), crypto::kKeyIdSize) == 0) {
        error = f.path + ": line " + std::to_string(block.line) + ": a second keypair with the key id " +
                "of another (the same public key?)";
        return false;
      }
    }
    keys.emplace_back(kp, kt.extensions);
  }
  f.keys = std::move(keys);
  return true;
}

// Reads `f` into its content; on any problem leaves the content as it was.
bool MapLoader::read(File& f, std::string& error) const {
  if (f.map == Map::dynamic_keys) return read_keys(f, error);
  std::vector<MapLine> lines;
  if (!read_map_file(f.path, config_.max_map_entries, lines, error)) return false;
  std::vector<Network> networks;
  std::vector<Digest> digests;
  for (const MapLine& l : lines) {
    std::string why;
    bool ok;
    if (f.map == Map::skip_hashes || f.map == Map::allow_update_keys) {
      Digest d;
      ok = f.map == Map::skip_hashes ? parse_digest_entry(l.entry, d, why) : parse_key_id_entry(l.entry, d, why);
      if (ok) digests.push_back(d);
    } else {
      ok = parse_network_entry(l.entry, networks, why);
    }
    if (!ok) {
      error = f.path + ": line " + std::to_string(l.line) + ": " + why;
      return false;
    }
  }
  f.networks = std::move(networks);
  f.digests = std::move(digests);
  return true;
}

bool MapLoader::load(std::string& error) {
  for (File& f : files_) {
    if (!stamp_of(f.path, f.stamp, error) || !read(f, error)) return false;
  }
  return true;
}

bool MapLoader::refresh(bool force) {
  bool changed = false;
  for (File& f : files_) {
    Stamp now;
    std::string error;
    if (!stamp_of(f.path, now, error)) {
      // Gone or unreadable: keep serving the last good content; say so once.
      if (!f.failing) {
        LOG_WARN("map %s; keeping its previous content (%zu entries)", error.c_str(), f.entries());
        failures_.fetch_add(1, std::memory_order_relaxed);
        f.failing = true;
        f.stamp = Stamp{};
      }
      continue;
    }
    if (!force && now == f.stamp) continue;
    f.stamp = now;
    if (!read(f, error)) {
      LOG_ERROR("map reload refused: %s; keeping its previous content (%zu entries)", error.c_str(),
                f.entries());
      failures_.fetch_add(1, std::memory_order_relaxed);
      f.failing = true;
      continue;
    }
    f.failing = false;
    reloads_.fetch_add(1, std::memory_order_relaxed);
    LOG_INFO("map %s reloaded: %zu entries", f.path.c_str(), f.entries());
    changed = true;
  }
  return changed;
}

std::unique_ptr<AccessLists> MapLoader::build() const {
  std::vector<Network> allow = config_.allow_update, blocked = config_.blocked,
                       delay_white = config_.delay_whitelist, limit_white = config_.limit_whitelist;
  auto digests_of = [](const std::vector<std::string>& raw) {
    std::vector<Digest> out;
    for (const std::string& r : raw) {
      Digest d{};
      std::memcpy(d.data(), r.data(), std::min(r.size(), d.size()));
      out.push_back(d);
    }
    return out;
  };
  std::vector<Digest> skip = digests_of(config_.skip_hashes);
  std::vector<Digest> key_ids = digests_of(config_.allow_update_keys);
  auto lists = std::make_unique<AccessLists>();
  for (const File& f : files_) {
    switch (f.map) {
      case Map::allow_update: allow.insert(allow.end(), f.networks.begin(), f.networks.end()); break;
      case Map::blocked: blocked.insert(blocked.end(), f.networks.begin(), f.networks.end()); break;
      case Map::delay_whitelist:
        delay_white.insert(delay_white.end(), f.networks.begin(), f.networks.end());
        break;
      case Map::skip_hashes: skip.insert(skip.end(), f.digests.begin(), f.digests.end()); break;
      case Map::ratelimit_whitelist:
        limit_white.insert(limit_white.end(), f.networks.begin(), f.networks.end());
        break;
      case Map::allow_update_keys: key_ids.insert(key_ids.end(), f.digests.begin(), f.digests.end()); break;
      case Map::dynamic_keys:
        for (const auto& [kp, ext] : f.keys) lists->dynamic_keys.add(DynamicKey{kp, KeyRules::from(ext, kp)});
        break;
    }
  }
  lists->allow_update = NetworkSet(allow);
  lists->allow_update_keys = DigestSet(key_ids);
  // An id that names no keypair grants nothing: say so (a typo, or a key
  // removed from dynamic_keys_map).
  uint64_t unknown = 0;
  for (const Digest& id : key_ids) {
    bool known = std::find(static_key_ids_.begin(), static_key_ids_.end(), id) != static_key_ids_.end();
    for (const DynamicKey& k : lists->dynamic_keys.keys()) known = known || k.rules.id == id;
    if (!known) {
      KeyRules r;
      r.id = id;
      LOG_WARN("allow_update_keys: %s... names no configured keypair; it allows nothing",
               r.label().substr(4).c_str());
      ++unknown;
    }
  }
  unknown_key_ids_.store(unknown, std::memory_order_relaxed);
  lists->blocked = NetworkSet(blocked);
  lists->delay_whitelist = NetworkSet(delay_white);
  lists->limit_whitelist = NetworkSet(limit_white);
  lists->skip_hashes = DigestSet(skip);
  return lists;
}

}  // namespace shingled
