// Request choice (see workload.h). A CHECK picks its kind by the mix, then a
// stored id by the key distribution (near-duplicates too: a hot message has
// hot near-duplicates); unknowns are random ids of their own kind, which
// nothing ever writes.
#include "shingle_load/workload.h"

#include <charconv>

#include "shingled/fuzzy_wire.h"

namespace shingled::load {

const char* mode_name(Mode m) {
  switch (m) {
    case Mode::write: return "write";
    case Mode::check: return "check";
    case Mode::del: return "delete";
    case Mode::mixed: return "mixed";
  }
  return "?";
}

bool parse_mix(std::string_view text, Mix& out, std::string& error) {
  Mix m{0, 0, 0};
  bool seen[3] = {false, false, false};
  while (!text.empty()) {
    const size_t comma = text.find(',');
    const std::string_view item = text.substr(0, comma);
    text = comma == std::string_view::npos ? std::string_view() : text.substr(comma + 1);
    const size_t colon = item.find(':');
    if (colon == std::string_view::npos) {
      error = "--mix: '" + std::string(item) + "' is not KIND:WEIGHT";
      return false;
    }
    const std::string_view name = item.substr(0, colon), num = item.substr(colon + 1);
    unsigned weight = 0;
    const auto [end, ec] = std::from_chars(num.data(), num.data() + num.size(), weight);
    if (ec != std::errc() || end != num.data() + num.size() || num.empty() || weight > 1000000) {
      error = "--mix: weight '" + std::string(num) + "' is not a whole number up to 1000000";
      return false;
    }
    int k = name == "stored" ? 0 : name == "near" ? 1 : name == "unknown" ? 2 : -1;
    if (k < 0) {
      error = "--mix: unknown kind '" + std::string(name) + "' (stored, near, unknown)";
      return false;
    }
    if (seen[k]) {
      error = "--mix: '" + std::string(name) + "' given twice";
      return false;
    }
    seen[k] = true;
    (k == 0 ? m.stored : k == 1 ? m.near : m.unknown) = weight;
  }
  if (m.total() == 0) {
    error = "--mix: all weights are zero";
    return false;
  }
  out = m;
  return true;
}

RequestSource::RequestSource(const Workload& w, const KeyDistribution& keys, unsigned index,
                             unsigned sockets, uint64_t seed)
    : w_(w), keys_(keys), rng_(seed * 0x100000001B3ull + index), index_(index), sockets_(sockets) {
  if (w.mode == Mode::write || w.mode == Mode::del) {
    share_ = (w.count > index ? (w.count - index + sockets - 1) / sockets : 0) * w.multipart.parts;
  }
}

uint64_t RequestSource::check_code() {
  const uint64_t pick = rng_.below(w_.mix.total());
  if (pick < w_.mix.stored) {
    const uint64_t id = w_.first + keys_.pick(rng_);
    const unsigned part = w_.multipart.parts > 1 ? unsigned(rng_.below(w_.multipart.parts)) : 0;
    return part_code(Kind::stored, id, part, w_.multipart.differs);
  }
  if (pick < w_.mix.stored + w_.mix.near) {
    return message_code(Kind::near, w_.first + keys_.pick(rng_), w_.near_shared);
  }
  return message_code(Kind::unknown, rng_.next());
}

bool RequestSource::next(NextRequest& out) {
  switch (w_.mode) {
    case Mode::write:
    case Mode::del: {
      if (issued_ >= share_) return false;
      const uint64_t mail = issued_ / w_.multipart.parts;
      const unsigned part = unsigned(issued_ % w_.multipart.parts);
      out.code = part_code(Kind::stored, w_.first + index_ + mail * sockets_, part, w_.multipart.differs);
      out.cmd = w_.mode == Mode::write ? fuzzy::kWrite : fuzzy::kDel;
      ++issued_;
      return true;
    }
    case Mode::check:
      out.code = check_code();
      out.cmd = fuzzy::kCheck;
      return true;
    case Mode::mixed:
      if (fresh_part_ != 0 || rng_.below(uint64_t(w_.reads) + w_.writes) < w_.writes) {
        // Fresh messages: one id space per socket, each written once, the
        // parts of a multipart one back to back.
        out.code = part_code(Kind::fresh, uint64_t(index_) << 40 | fresh_, fresh_part_, w_.multipart.differs);
        out.cmd = fuzzy::kWrite;
        if (++fresh_part_ == w_.multipart.parts) {
          fresh_part_ = 0;
          ++fresh_;
        }
      } else {
        out.code = check_code();
        out.cmd = fuzzy::kCheck;
      }
      return true;
  }
  return false;
}

}  // namespace shingled::load
