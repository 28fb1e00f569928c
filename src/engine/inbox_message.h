// The fixed-size message one worker core sends another through its SPSC
// ring: either a fuzzy update for the owner of the digest's shard (which
// applies it and replies to the client itself), or a batch of shingle index
// inserts for the owner of those index shards.
#pragma once

#include <netinet/in.h>
#include <sys/socket.h>

#include <cstdint>

#include "engine/fuzzy_service.h"
#include "store/fuzzy_store.h"
#include "wire/fuzzy_request.h"

namespace shingled {

struct InboxMessage {
  enum Kind : uint8_t { fuzzy_update, index_batch };
  static constexpr unsigned kIndexBatch = 24;

  Kind kind;
  uint16_t listener;  // fuzzy_update: which bind_socket the request came in on
  socklen_t peer_len;
  sockaddr_in6 peer;  // large enough for AF_INET and AF_INET6
  ReplySeal seal;     // fuzzy_update: how to answer (plain, or sealed with this key)
  struct IndexItems {
    uint32_t count;
    IndexInsert items[kIndexBatch];
  };
  union {
    fuzzy::Request request;
    IndexItems index;
  };

  InboxMessage() : kind(fuzzy_update), listener(0), peer_len(0), peer{}, seal{}, index{} {}
};

}  // namespace shingled
