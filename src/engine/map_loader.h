// The map files of the access controls (allow_update, blocked,
// delay_whitelist, ratelimit_whitelist, skip_hashes, allow_update_keys) and
// the keypairs of dynamic_keys_map: read at start, where a bad one stops the
// daemon with its line, and re-read when they change (checked by the main
// loop every half second, and on SIGHUP). A file that turns bad on reload
// keeps its last good content: the line is logged and counted, and the
// daemon serves on with the previous map. Runs on the main thread only.
#pragma once

#include <sys/stat.h>

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "access/access_lists.h"
#include "config/config.h"

namespace shingled {

class MapLoader {
 public:
  // Most keypairs a dynamic_keys_map file may hold.
  static constexpr size_t kMaxDynamicKeys = 10'000;

  explicit MapLoader(const Config& config);

  // Reads every file. False with the first problem ("PATH: line N: reason").
  bool load(std::string& error);
  // The maps now: the config's inline entries and each file's last good
  // content. (Without load(), the inline entries alone.)
  std::unique_ptr<AccessLists> build() const;
  // Re-reads each file whose inode, size or modification time changed
  // since it was last read (every file when `force`). True if a map's
  // content changed, so build() gives something new.
  bool refresh(bool force);

  size_t files() const { return files_.size(); }
  uint64_t reloads() const { return reloads_.load(std::memory_order_relaxed); }
  uint64_t failures() const { return failures_.load(std::memory_order_relaxed); }
  // allow_update_keys ids that named no keypair at the last build.
  uint64_t unknown_key_ids() const { return unknown_key_ids_.load(std::memory_order_relaxed); }

 private:
  enum class Map {
    allow_update,
    blocked,
    delay_whitelist,
    skip_hashes,
    ratelimit_whitelist,
    allow_update_keys,
    dynamic_keys,
  };
  struct Stamp {
    dev_t dev = 0;
    ino_t ino = 0;
    off_t size = -1;
    int64_t mtime_ns = -1;
    bool operator==(const Stamp&) const = default;
  };
  struct File {
    std::string path;
    Map map;
    Stamp stamp;         // of the last read, good or bad
    bool failing = false;
    std::vector<Network> networks;  // last good content
    std::vector<Digest> digests;     // skip_hashes, allow_update_keys
    std::vector<std::pair<Keypair, KeyExtensions>> keys;  // dynamic_keys
    size_t entries() const { return networks.size() + digests.size() + keys.size(); }
  };
  static bool stamp_of(const std::string& path, Stamp& out, std::string& error);
  bool read(File& f, std::string& error) const;
  bool read_keys(File& f, std::string& error) const;

  const Config& config_;
  std::vector<Digest> static_key_ids_;  // of the config's keypairs
  std::vector<File> files_;
  std::atomic<uint64_t> reloads_{0};   // files re-read and accepted
  std::atomic<uint64_t> failures_{0};  // re-reads refused (the old content kept)
  mutable std::atomic<uint64_t> unknown_key_ids_{0};
};

}  // namespace shingled
