// The fixed-size message one worker core sends another through their SPSC
// ring (engine/outbox.h). It names the service it is for (its row in the
// engine's service table) and a kind that service defines; the payload is
// that service's own trivially copyable struct. The worker itself uses one
// kind: batches of shingle index inserts for the owner of their shards.
// The services' messages: a fuzzy WRITE/DEL for the digest's owner, a
// counter series request for its owner (both answer the client
// themselves), and the parts and replies of requests fanned out to owner
// cores (engine/fanout_router.h) for counters and rate limits.
#pragma once

#include <cstddef>
#include <cstdint>
#include <new>
#include <type_traits>

#include "store/fuzzy_store.h"

namespace shingled {

struct InboxMessage {
  // 472 bytes a message, as before services had their own payloads: large
  // enough for a fuzzy update with its return address and seal.
  static constexpr size_t kPayloadSize = 464;
  static constexpr uint8_t kWorker = 0xff;  // `service` of the worker's own messages
  static constexpr uint8_t kIndexBatch = 0; // the worker's kinds
  static constexpr uint8_t kStreamReply = 1;

  uint8_t service = kWorker;
  uint8_t kind = kIndexBatch;
  alignas(8) unsigned char payload[kPayloadSize];

  // Starts a payload of type T (value-initialised) and returns it.
  template <typename T>
  T& emplace(uint8_t for_service, uint8_t of_kind) {
    check<T>();
    service = for_service;
    kind = of_kind;
    return *new (payload) T{};
  }
  template <typename T>
  T& as() {
    check<T>();
    return *std::launder(reinterpret_cast<T*>(payload));
  }
  template <typename T>
  const T& as() const {
    check<T>();
    return *std::launder(reinterpret_cast<const T*>(payload));
  }

 private:
  template <typename T>
  static constexpr void check() {
    static_assert(sizeof(T) <= kPayloadSize, "payload larger than an inbox message");
    static_assert(alignof(T) <= 8, "payload aligned beyond the message");
    static_assert(std::is_trivially_copyable_v<T>, "payloads are copied as bytes");
  }
};

// The worker's own messages: shingle index inserts of WRITEs, for the owner
// of their index shards;
struct IndexBatch {
  static constexpr unsigned kCapacity = 24;
  uint32_t count;
  IndexInsert items[kCapacity];
};
// and a reply to a request that came over TCP, made by another core (the
// owner of a WRITE's digest), for the worker whose connection it came on.
struct StreamReply {
  static constexpr size_t kCapacity = InboxMessage::kPayloadSize - 8;
  uint32_t connection;
  uint32_t len;
  uint8_t data[kCapacity];
};

}  // namespace shingled
