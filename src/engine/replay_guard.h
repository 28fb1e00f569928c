// Requests that change state (counter increments, rate-limit updates) are
// applied once however often a client resends them: a resend of one already
// answered gets the same reply again, a resend of one still in flight is
// dropped (the first copy's reply answers it). The counter and rate-limit
// handlers ask their worker's ReplyCache the same way, through this.
#pragma once

#include <cstdint>

#include "engine/reply_port.h"
#include "engine/stats.h"
#include "io/packet_io.h"
#include "wire/reply_cache.h"

namespace shingled {

// True: the request is new and now recorded in flight: apply it, then
// complete() or forget() it in `cache`. False: it has been dealt with here
// (replayed, counted in `replayed`, or dropped, counted in `dropped`).
inline bool admit_once(ReplyCache& cache, ReplyPort& replies, const RxPacket& p, const PeerKey& peer,
                       uint64_t id, uint64_t fingerprint, int64_t now_ms, Counter& replayed,
                       Counter& dropped) {
  const uint8_t* cached = nullptr;
  size_t cached_len = 0;
  switch (cache.begin(peer, id, fingerprint, now_ms, cached, cached_len)) {
    case ReplyCache::Lookup::answered:
      replayed.add();
      replies.send(p, cached, cached_len);
      return false;
    case ReplyCache::Lookup::in_flight:
      dropped.add();
      return false;
    case ReplyCache::Lookup::fresh:
      break;
  }
  return true;
}

}  // namespace shingled
