// One worker's side of the rate-limit service: requests that arrive on its
// sockets, and the bucket calls other workers send it for its shards.
//
// A request becomes bucket calls (a message's buckets from the rules, a
// bucket item its own). Each call runs on the owner core of its bucket's
// shard, so every bucket is read-modify-written by one core and decisions
// are exact without locks: this core's calls run at once, the others travel
// in ratelimit_part messages and come back as ratelimit_reply; the request
// waits in a pending slot until all are in. Then a check or one-shot
// message knows its verdict and sends its second pass (release what it
// reserved if limited; commit it, one-shot, if not) the same way, with no
// answer expected, and the reply goes out.
//
// Resends: rspamd's UDP client repeats an identical datagram when the
// answer is slow. The reply cache (per worker; a client's datagrams hash to
// one socket, so to one worker) answers a resend with the bytes already sent,
// or drops it while the first copy is still pending: nothing is applied twice.
//
// Encryption: a datagram in rspamd's cryptobox envelope (as the fuzzy
// protocol's, to one of the same keypairs) is opened first and answered
// sealed with the same shared key; `encrypted_only` refuses plain requests.
#pragma once

#include <sys/socket.h>

#include <cstdint>
#include <vector>

#include "engine/fuzzy_service.h"
#include "engine/inbox_message.h"
#include "engine/ratelimit_service.h"
#include "engine/return_address.h"
#include "engine/stats.h"
#include "io/packet_io.h"
#include "wire/reply_cache.h"

namespace shingled {

// What the router needs of its worker.
class RouterPort {
 public:
  virtual ~RouterPort() = default;
  // Hands a message to worker `owner`'s inbox (queued if its ring is full);
  // false when even the queue is full.
  virtual bool send_to(unsigned owner, const InboxMessage& m) = 0;
  virtual void reply(uint16_t listener, const sockaddr* peer, socklen_t peer_len,
                     const uint8_t* data, size_t len) = 0;
};

class RatelimitRouter {
 public:
  static constexpr size_t kPendingRequests = 256;
  static constexpr int64_t kTimeoutMs = 1000;

  // `fuzzy` and `ctx`: the keypairs, the worker's shared-key cache and
  // nonces, and its stats.
  RatelimitRouter(RatelimitService& service, const FuzzyService& fuzzy, WorkerContext& ctx,
                  unsigned self, unsigned workers, RouterPort& port);

  void handle_packet(const RxPacket& p);
  void execute_part(const InboxMessage& m);   // on the owner
  void execute_reply(const InboxMessage& m);  // back on the origin
  // Timers: requests whose parts did not come back in time, and a sweep
  // slice of one of this core's bucket shards.
  void upkeep(int64_t now_ms);

  unsigned owner_of(const BucketId& id) const { return service_.store().shard_of(id) % workers_; }

 private:
  struct Call {
    BucketCall call;
    BucketResult result;
    uint8_t message = 0;  // the request item it belongs to
    BucketMeta meta;
  };
  struct Pending {
    bool used = false;
    bool cached = false;  // in the reply cache (a request that changes state)
    uint32_t generation = 0;
    ReturnAddress to;
    PeerKey peer_key;
    uint64_t fingerprint = 0;
    uint8_t kind = 0;
    uint8_t n = 0;
    uint64_t id = 0;
    ReplySeal seal;            // how to answer: plain or sealed
    uint16_t outstanding = 0;  // parts not answered yet
    bool lost = false;         // a part could not be sent: its calls fail open
    int64_t started_ms = 0;
    MessagePhase phase[ratelimit::kMaxMessages] = {};
    MessageSkip skip[ratelimit::kMaxMessages] = {};
    uint16_t first_call[ratelimit::kMaxMessages + 1] = {};
    std::vector<Call> calls;  // grows to the largest request seen, then reused
  };

  static bool changes_state(const ratelimit::Request& r);
  void build_calls(Pending& pc);
  void route(uint16_t slot, bool answer, const std::vector<uint16_t>& which);
  void apply_local(Call& c, int64_t now_ms);
  void finish(uint16_t slot);
  void second_pass(uint16_t slot);
  size_t encode(Pending& pc, uint8_t* reply);
  // Seals the plain reply at out + (sealed ? kReplyHeaderSize : 0), `len`
  // bytes, when `seal` says so; returns the datagram's length.
  size_t finish_reply(const ReplySeal& seal, uint8_t* out, size_t len);
  static size_t body_offset(const ReplySeal& seal) {
    return seal.encrypted ? crypto::kReplyHeaderSize : 0;
  }
  static constexpr size_t kReplyBuffer = ratelimit::kMaxReply + crypto::kReplyHeaderSize;

  RatelimitService& service_;
  const FuzzyService& fuzzy_;
  WorkerContext& ctx_;
  unsigned self_;
  unsigned workers_;
  RouterPort& port_;
  WorkerStats& stats_;
  ReplyCache cache_;
  std::vector<Pending> pending_;
  std::vector<uint16_t> free_;
  std::vector<InboxMessage> parts_;      // per owner: the part being filled
  std::vector<uint16_t> scratch_calls_;  // call positions for route()
  std::vector<uint16_t> second_calls_;   // the same for second passes
  BucketMeta meta_scratch_[kMaxMessageBuckets];      // second_pass(): one message's
  BucketResult result_scratch_[kMaxMessageBuckets];  // metas and first-pass results
  uint8_t plain_[ratelimit::kMaxRequest];  // an opened encrypted request
  ratelimit::Request request_;           // decoding scratch (~13 KB)
  ratelimit::Request header_;            // the reply's header fields (kind, n, id)
  ratelimit::MessageResult message_results_[ratelimit::kMaxMessages];
  MessageBuckets buckets_;               // derivation scratch (~40 KB)
  unsigned sweep_shard_ = 0;
  uint64_t upkeep_ticks_ = 0;
};

}  // namespace shingled
