// Reading and re-reading the access-control map files (see map_loader.h).
#include "engine/map_loader.h"

#include <cerrno>
#include <cstring>

#include "access/map_entries.h"
#include "access/map_file.h"
#include "common/log.h"

namespace shingled {

MapLoader::MapLoader(const Config& config) : config_(config) {
  auto add = [&](const std::vector<std::string>& paths, Map map) {
    for (const std::string& p : paths) files_.push_back(File{p, map, {}, false, {}, {}});
  };
  add(config.map_files.allow_update, Map::allow_update);
  add(config.map_files.blocked, Map::blocked);
  add(config.map_files.delay_whitelist, Map::delay_whitelist);
  add(config.map_files.skip_hashes, Map::skip_hashes);
  add(config.map_files.ratelimit_whitelist, Map::ratelimit_whitelist);
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

// Reads `f` into its content; on any problem leaves the content as it was.
bool MapLoader::read(File& f, std::string& error) const {
  std::vector<MapLine> lines;
  if (!read_map_file(f.path, config_.max_map_entries, lines, error)) return false;
  std::vector<Network> networks;
  std::vector<Digest> digests;
  for (const MapLine& l : lines) {
    std::string why;
    bool ok;
    if (f.map == Map::skip_hashes) {
      Digest d;
      ok = parse_digest_entry(l.entry, d, why);
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
        LOG_WARN("map %s; keeping its previous content (%zu entries)", error.c_str(),
                 f.networks.size() + f.digests.size());
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
                f.networks.size() + f.digests.size());
      failures_.fetch_add(1, std::memory_order_relaxed);
      f.failing = true;
      continue;
    }
    f.failing = false;
    reloads_.fetch_add(1, std::memory_order_relaxed);
    LOG_INFO("map %s reloaded: %zu entries", f.path.c_str(), f.networks.size() + f.digests.size());
    changed = true;
  }
  return changed;
}

std::unique_ptr<AccessLists> MapLoader::build() const {
  std::vector<Network> allow = config_.allow_update, blocked = config_.blocked,
                       delay_white = config_.delay_whitelist, limit_white = config_.limit_whitelist;
  std::vector<Digest> skip;
  for (const std::string& raw : config_.skip_hashes) {
    Digest d{};
    std::memcpy(d.data(), raw.data(), std::min(raw.size(), d.size()));
    skip.push_back(d);
  }
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
    }
  }
  auto lists = std::make_unique<AccessLists>();
  lists->allow_update = NetworkSet(allow);
  lists->blocked = NetworkSet(blocked);
  lists->delay_whitelist = NetworkSet(delay_white);
  lists->limit_whitelist = NetworkSet(limit_white);
  lists->skip_hashes = DigestSet(skip);
  return lists;
}

}  // namespace shingled
