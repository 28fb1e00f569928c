// data.mdb against its meta pages (see lmdb_file_check.h).
//
// The layout read here is LMDB's on-disk format (lmdb.h, mdb.c; format
// version 1, unchanged since 0.9): pages 0 and 1 are meta pages, each a
// 16-byte page header followed by the meta record. In the meta record, at
// these offsets from the start of the page on a 64-bit build: the magic
// 0xBEEFC0DE (16), the format version (20), the free-page DB whose md_pad
// holds the page size (40), the last used page number (136) and the
// transaction id (144). The meta with the larger transaction id is the
// current one; the file must reach at least (last page + 1) x page size.
#include "persist/lmdb_file_check.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <cstring>
#include <vector>

namespace shingled {

namespace {

constexpr uint32_t kMagic = 0xBEEFC0DE;
constexpr size_t kMagicAt = 16, kVersionAt = 20, kPageSizeAt = 40, kLastPageAt = 136, kTxnAt = 144;
constexpr size_t kMetaBytes = kTxnAt + 8;

template <typename T>
T read_at(const uint8_t* page, size_t at) {
  T v;
  std::memcpy(&v, page + at, sizeof v);
  return v;
}

struct Meta {
  bool valid = false;
  uint64_t page_size = 0, last_page = 0, txn = 0;
};

Meta parse_meta(const uint8_t* page) {
  Meta m;
  if (read_at<uint32_t>(page, kMagicAt) != kMagic || read_at<uint32_t>(page, kVersionAt) != 1) return m;
  m.page_size = read_at<uint32_t>(page, kPageSizeAt);
  m.last_page = read_at<uint64_t>(page, kLastPageAt);
  m.txn = read_at<uint64_t>(page, kTxnAt);
  // Page sizes LMDB uses are powers of two from 512 to 64 KiB.
  m.valid = m.page_size >= 512 && m.page_size <= 65536 && (m.page_size & (m.page_size - 1)) == 0;
  return m;
}

}  // namespace

bool check_lmdb_meta(const uint8_t* head, size_t head_len, uint64_t file_size,
                     const std::string& file, std::string& error) {
  if (file_size == 0) {
    error = "database truncated: " + file + " is empty (0 bytes); a new database is created "
            "only in a directory that holds no data.mdb: restore the file, or move the "
            "directory away to start empty";
    return false;
  }
  Meta best = head_len >= kMetaBytes ? parse_meta(head) : Meta{};
  if (best.valid && best.page_size + kMetaBytes <= head_len) {
    const Meta second = parse_meta(head + best.page_size);
    if (second.valid && second.txn > best.txn) best = second;
  }
  if (!best.valid) return true;  // not LMDB's meta: mdb_env_open says MDB_INVALID
  // last_page is the file's word: (last_page + 1) x page_size must not wrap.
  if (best.last_page >= UINT64_MAX / best.page_size) {
    error = "database damaged: " + file + " names page " + std::to_string(best.last_page) +
            " as its last";
    return false;
  }
  const uint64_t needed = (best.last_page + 1) * best.page_size;
  if (file_size < needed) {
    error = "database truncated: " + file + " is " + std::to_string(file_size) +
            " bytes, expected at least " + std::to_string(needed) + " (" +
            std::to_string(best.last_page + 1) + " pages of " + std::to_string(best.page_size) +
            "): restore it from a backup or `shinglectl dump`";
    return false;
  }
  return true;
}

bool check_lmdb_data_file(const std::string& dir, std::string& error) {
  const std::string file = dir + "/data.mdb";
  const int fd = ::open(file.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    if (errno == ENOENT) return true;  // a new environment
    error = file + ": " + std::strerror(errno);
    return false;
  }
  struct stat st;
  if (fstat(fd, &st) != 0) {
    error = file + ": " + std::strerror(errno);
    ::close(fd);
    return false;
  }
  const uint64_t size = uint64_t(st.st_size);
  std::vector<uint8_t> head(size_t(std::min<uint64_t>(size, kLmdbMetaHeadBytes)));
  const ssize_t got = head.empty() ? 0 : ::pread(fd, head.data(), head.size(), 0);
  ::close(fd);
  if (got < 0) {
    error = file + ": " + std::strerror(errno);
    return false;
  }
  return check_lmdb_meta(head.data(), size_t(got), size, file, error);
}

}  // namespace shingled
