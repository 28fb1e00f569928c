// What to send next: the mode (write, check, delete, mixed), the CHECK mix
// of stored / near-duplicate / unknown messages and the key distribution,
// turned into one (message code, command) per request. One RequestSource
// per socket; no allocation, no system calls.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "shingle_load/key_distribution.h"
#include "shingle_load/message.h"

namespace shingled::load {

enum class Mode : uint8_t { write, check, del, mixed };

const char* mode_name(Mode m);

// Relative weights of the CHECK kinds (need not sum to 100).
struct Mix {
  unsigned stored = 50;
  unsigned near = 25;
  unsigned unknown = 25;
  unsigned total() const { return stored + near + unknown; }
};

// "stored:50,near:25,unknown:25"; kinds left out weigh 0. False (and
// `error`) on an unknown kind, a repeated one, a bad number, or all zero.
bool parse_mix(std::string_view text, Mix& out, std::string& error);

struct Workload {
  Mode mode = Mode::check;
  uint64_t first = 0;        // first stored id
  uint64_t count = 0;        // write, delete: ids first..first+count-1
  uint64_t stored = 100000;  // check, mixed: ids first..first+stored-1 are stored
  Mix mix;
  unsigned near_shared = 24;  // shingles a near-duplicate shares with its source
  Multipart multipart;        // parts per mail (write, delete, mixed's fresh writes)
  double zipf = 0;            // 0: uniform
  unsigned reads = 90;        // mixed: CHECKs to WRITEs
  unsigned writes = 10;
};

struct NextRequest {
  uint64_t code;
  uint8_t cmd;
};

class RequestSource {
 public:
  // Socket `index` of `sockets` in the whole run; `keys` must outlive this.
  RequestSource(const Workload& w, const KeyDistribution& keys, unsigned index, unsigned sockets,
                uint64_t seed);

  // The next request; false once a write or delete socket has sent its
  // share of the ids (ids first + index, first + index + sockets, ...),
  // every part of a multipart mail back to back.
  bool next(NextRequest& out);

  // How many requests this socket sends in write or delete mode.
  uint64_t share() const { return share_; }

 private:
  uint64_t check_code();

  const Workload& w_;
  const KeyDistribution& keys_;
  Rng rng_;
  unsigned index_;
  unsigned sockets_;
  uint64_t share_ = 0;
  uint64_t issued_ = 0;
  uint64_t fresh_ = 0;       // fresh mails begun
  unsigned fresh_part_ = 0;  // the part of the current fresh mail to write next
};

}  // namespace shingled::load
