// The cluster's replicated log on NATS JetStream (see jetstream_log.h).
#include "cluster/jetstream_log.h"

#include "cluster/kv_record.h"
#include "cluster/nats_connection.h"

#include <nats/nats.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstring>

namespace shingled::cluster {

namespace {

// The client library gives up on an ack after kAckWaitMs and reports a
// timeout, which is retried (same id: stored once); a publish with neither
// an ack nor that report a second later is sent again all the same.
constexpr uint64_t kAckWaitMs = 2000;
constexpr uint64_t kAckBackstopMs = kAckWaitMs + 1000;
// A publish that failed waits this long before it goes again.
constexpr uint64_t kRetryBackoffMs = 100;
// Stale entries poll_publishes' queue may hold beyond four per pending record.
constexpr size_t kDueSlack = 1024;
// What a record's headers (Nats-Msg-Id) and protocol line add to it
// against the server's max_payload, with room to spare.
constexpr size_t kHeaderRoom = 1024;
// The error code the client gives a publish nobody answered (no stream
// leader): "JetStream not enabled", though it is only an election.
constexpr int kNoRespondersCode = 10076;

uint64_t now_ms() {
  return uint64_t(std::chrono::duration_cast<std::chrono::milliseconds>(
                      std::chrono::steady_clock::now().time_since_epoch())
                      .count());
}

std::string describe(natsStatus s, int code) { return describe_nats(int(s), code); }

}  // namespace

struct JetStreamLog::Ack {
  std::string id;
  bool ok;
  bool duplicate;
  uint64_t sequence;
  int status;  // natsStatus of a failure
  int code;    // its JetStream error code, 0 when the server did not decide
  std::string error;
};

struct JetStreamLog::Inbox {
  std::mutex mutex;
  std::condition_variable cv;  // a record came, or a subscription ended
  Doorbell* doorbell = nullptr;
  std::vector<Ack> acks;
  // The current subscription's records, in stream order.
  uint64_t reader = 0;        // its number: deliveries of any other are dropped
  size_t max_records = 0;     // LogOptions::max_queued_records
  struct Queued {
    natsMsg* msg;
    uint64_t sequence;
    size_t bytes;
  };
  std::deque<Queued> records;
  size_t bytes = 0;
  uint64_t last_sequence = 0;  // of the last record queued (0: none yet)
  bool overflowed = false;     // records were dropped: nothing more is queued

  void ring() {
    if (doorbell != nullptr) doorbell->ring();  // under `mutex`: close() detaches it
  }
  void drop_records() {
    for (const Queued& q : records) natsMsg_Destroy(q.msg);
    records.clear();
    bytes = 0;
    last_sequence = 0;
    overflowed = false;
  }
};

// Given to one subscription's callbacks: which reader they deliver for.
// Freed once the library says no delivery can come (on_reading_done), or
// left if it never says so.
struct JetStreamLog::ReaderTag {
  Inbox* inbox;
  uint64_t number;
  bool done = false;
};

JetStreamLog::JetStreamLog() : inbox_(new Inbox) {}

JetStreamLog::~JetStreamLog() {
  close();
  std::lock_guard<std::mutex> lock(inbox_->mutex);
  inbox_->doorbell = nullptr;  // the inbox itself stays (see the header)
}

void JetStreamLog::set_doorbell(Doorbell* doorbell) {
  std::lock_guard<std::mutex> lock(inbox_->mutex);
  inbox_->doorbell = doorbell;
}

void JetStreamLog::close() {
  stop_reading();
  if (js_ != nullptr) {
    jsCtx_Destroy(js_);
    js_ = nullptr;
  }
  if (nc_ != nullptr) {
    natsConnection_Destroy(nc_);
    nc_ = nullptr;
  }
  pending_.clear();
  due_ = {};
  std::lock_guard<std::mutex> lock(inbox_->mutex);
  inbox_->acks.clear();
}

bool JetStreamLog::open(const LogOptions& options, std::string& error) {
  close();
  options_ = options;
  if (options.servers.empty()) {
    error = "no NATS server given";
    return false;
  }
  nc_ = connect_nats(options, error);
  if (nc_ == nullptr) return false;
  // A record past the server's max_payload could never be stored, and each
  // would be retried until it timed out: refused here, at start.
  if (const int64_t limit = natsConnection_GetMaxPayload(nc_);
      options.largest_record != 0 && limit < int64_t(options.largest_record + kHeaderRoom)) {
    error = "the NATS server's max_payload is " + std::to_string(limit) + " bytes; records of up to " +
            std::to_string(options.largest_record) + " bytes (and their headers) must fit: raise max_payload " +
            "in the nats-server configuration (its default, 1 MB, is enough)";
    close();
    return false;
  }
  natsStatus s = NATS_OK;
  jsOptions jo;
  jsOptions_Init(&jo);
  jo.PublishAsync.MaxPending = int64_t(options.max_pending) * 2;  // ours is the bound; the library's never stalls us
  jo.PublishAsync.AckHandler = &JetStreamLog::on_ack;
  jo.PublishAsync.AckHandlerClosure = inbox_;
  s = natsConnection_JetStream(&js_, nc_, &jo);
  if (s != NATS_OK) {
    error = "JetStream context: " + describe(s, 0);
    close();
    return false;
  }
  if (!options.manage_stream) return true;
  const char* subjects[] = {options.subject.c_str()};
  jsStreamConfig sc;
  jsStreamConfig_Init(&sc);
  sc.Name = options.stream.c_str();
  sc.Subjects = subjects;
  sc.SubjectsLen = 1;
  sc.Storage = js_FileStorage;
  sc.Replicas = options.replicas;
  sc.MaxBytes = options.max_bytes;
  sc.MaxAge = int64_t(options.max_age_s) * 1'000'000'000;        // nanoseconds
  sc.Duplicates = int64_t(options.duplicate_window_s) * 1'000'000'000;
  sc.Discard = js_DiscardNew;  // a full log refuses writes; it never drops what nodes have not applied
  jsStreamInfo* si = nullptr;
  jsErrCode code = jsErrCode(0);
  s = js_AddStream(&si, js_, &sc, nullptr, &code);
  if (s != NATS_OK && code == JSStreamNameExistErr) s = js_UpdateStream(&si, js_, &sc, nullptr, &code);
  if (si != nullptr) jsStreamInfo_Destroy(si);
  stream_error_.clear();
  if (s == NATS_NO_RESPONDERS || s == NATS_TIMEOUT) {
    // No JetStream quorum right now (servers down, an election): connected
    // all the same. Publishes are retried and fail clearly until it is back.
    stream_error_ = "stream " + options.stream + " not confirmed: " + describe(s, code);
    return true;
  }
  if (s != NATS_OK) {
    error = "creating stream " + options.stream + " (R" + std::to_string(options.replicas) + "): " + describe(s, code);
    close();
    return false;
  }
  return true;
}

bool JetStreamLog::publish(uint64_t token, const std::string& id, const uint8_t* data, size_t len) {
  if (js_ == nullptr) return false;
  // Checked at open(); a server reached later (a reconnect) may allow less,
  // and retrying what it can never take would only time out.
  if (int64_t(len + kHeaderRoom) > natsConnection_GetMaxPayload(nc_)) return false;
  if (const auto it = pending_.find(id); it != pending_.end()) {
    // The same record again (a client's retransmission, by its content id)
    // while the first awaits its ack: it shares the first one's outcome.
    it->second.joined.push_back(token);
    return true;
  }
  if (pending_.size() >= options_.max_pending) return false;
  const uint64_t now = now_ms();
  Pending& p = pending_[id];
  p = Pending{token, id, std::vector<uint8_t>(data, data + len), now, now, false, {}, 0, {}};
  send(p);
  return true;
}

void JetStreamLog::look_again_at(Pending& p, uint64_t at_ms) {
  p.generation = ++generations_;
  due_.push(Due{at_ms, p.generation, p.id});
  // Acked records leave their entries behind until the backstop's time:
  // at a high ack rate that is many. Past a bound, keep only the live ones.
  if (due_.size() > 4 * pending_.size() + kDueSlack) {
    std::priority_queue<Due, std::vector<Due>, std::greater<Due>> live;
    while (!due_.empty()) {
      const auto it = pending_.find(due_.top().id);
      if (it != pending_.end() && it->second.generation == due_.top().generation) live.push(due_.top());
      due_.pop();
    }
    due_.swap(live);
  }
}

bool JetStreamLog::send(Pending& p) {
  jsPubOptions po;
  jsPubOptions_Init(&po);
  po.MsgId = p.id.c_str();
  po.MaxWait = int64_t(kAckWaitMs);
  p.sent_ms = now_ms();
  const natsStatus s = js_PublishAsync(js_, options_.subject.c_str(), p.data.data(), int(p.data.size()), &po);
  p.in_flight = s == NATS_OK;
  if (!p.in_flight) p.last_error = describe(s, 0);
  look_again_at(p, p.sent_ms + (p.in_flight ? kAckBackstopMs : kRetryBackoffMs));
  return p.in_flight;
}

void JetStreamLog::on_ack(__jsCtx*, __natsMsg* msg, jsPubAck* ack, jsPubAckErr* err, void* inbox_ptr) {
  auto* inbox = static_cast<Inbox*>(inbox_ptr);
  Ack a{};
  const char* id = nullptr;
  if (natsMsgHeader_Get(msg, "Nats-Msg-Id", &id) == NATS_OK && id != nullptr) a.id = id;
  if (ack != nullptr) {
    a.ok = true;
    a.duplicate = ack->Duplicate;
    a.sequence = ack->Sequence;
  } else if (err != nullptr) {
    a.status = int(err->Err);
    a.code = int(err->ErrCode);
    a.error = describe(err->Err, err->ErrCode);
    const char* status_text = natsStatus_GetText(err->Err);
    if (err->ErrText != nullptr && err->ErrText[0] != '\0' && std::strcmp(err->ErrText, status_text) != 0) {
      a.error += std::string(": ") + err->ErrText;
    }
  }
  natsMsg_Destroy(msg);
  if (a.id.empty()) return;  // not one of ours
  std::lock_guard<std::mutex> lock(inbox->mutex);
  inbox->acks.push_back(std::move(a));
  inbox->ring();
}

void JetStreamLog::poll_publishes(std::vector<Outcome>& done) {
  std::vector<Ack> acks;
  {
    std::lock_guard<std::mutex> lock(inbox_->mutex);
    acks.swap(inbox_->acks);
  }
  for (Ack& a : acks) {
    const auto it = pending_.find(a.id);
    if (it == pending_.end()) continue;  // a later ack of a record already settled
    Pending& p = it->second;
    // JetStream refused it by its own decision (a full stream, a message too
    // large): sending it again changes nothing. Everything else is retried.
    const bool permanent = !a.ok && a.code != 0 && a.code != kNoRespondersCode;
    if (a.ok || permanent) {
      settle(p, Outcome{p.token, a.ok, a.duplicate, a.sequence, a.ok ? std::string() : a.error}, done);
      pending_.erase(it);
      continue;
    }
    p.in_flight = false;
    p.last_error = a.error;
    look_again_at(p, p.sent_ms + kRetryBackoffMs);
  }
  const uint64_t now = now_ms();
  while (!due_.empty() && due_.top().at_ms <= now) {
    const Due d = due_.top();
    due_.pop();
    const auto it = pending_.find(d.id);
    if (it == pending_.end() || it->second.generation != d.generation) continue;  // stale
    Pending& p = it->second;
    if (now - p.first_ms >= options_.retry_for_ms) {
      settle(p,
             Outcome{p.token, false, false, 0,
                     "not stored after " + std::to_string(options_.retry_for_ms) + " ms: " +
                         (p.last_error.empty() ? std::string("no ack") : p.last_error),
                     true},
             done);
      pending_.erase(it);
      continue;
    }
    send(p);
  }
}

void JetStreamLog::settle(const Pending& p, Outcome outcome, std::vector<Outcome>& done) {
  for (const uint64_t token : p.joined) {
    Outcome o = outcome;
    o.token = token;
    done.push_back(std::move(o));
  }
  done.push_back(std::move(outcome));
}

bool JetStreamLog::read_from(uint64_t from, std::string& error) {
  if (js_ == nullptr) {
    error = "not open";
    return false;
  }
  stop_reading();
  jsSubOptions so;
  jsSubOptions_Init(&so);
  so.Stream = options_.stream.c_str();
  // An ordered consumer: ephemeral, no acks, and the client recreates it
  // from the last sequence it saw when a message goes missing.
  so.Ordered = true;
  so.Config.DeliverPolicy = js_DeliverByStartSequence;
  so.Config.OptStartSeq = from == 0 ? 1 : from;
  // The server's idle heartbeat is how the client notices a consumer that
  // stalled (a server restarted under it) and recreates it from the last
  // sequence seen: 1 s instead of the default 5 s, so a reader resumes
  // within seconds of a cluster settling.
  so.Config.Heartbeat = 1'000'000'000;  // nanoseconds
  jsErrCode code = jsErrCode(0);
  // Delivered on the library's thread (on_record), not polled: a sync
  // subscription's reader must wake to look, and waking every millisecond
  // cost a worker sharing its core ~5 % of its CHECKs.
  static std::atomic<uint64_t> readers{0};
  auto* tag = new ReaderTag{inbox_, ++readers};
  {
    std::lock_guard<std::mutex> lock(inbox_->mutex);
    inbox_->drop_records();
    inbox_->reader = tag->number;
    inbox_->max_records = std::max<size_t>(options_.max_queued_records, 1);
  }
  const natsStatus s = js_Subscribe(&sub_, js_, options_.subject.c_str(), &JetStreamLog::on_record, tag, nullptr, &so,
                                    &code);
  if (s != NATS_OK) {
    sub_ = nullptr;
    std::lock_guard<std::mutex> lock(inbox_->mutex);
    inbox_->reader = 0;
    delete tag;  // no subscription: no callback has it
    error = "reading stream " + options_.stream + " from " + std::to_string(from) + ": " + describe(s, code);
    return false;
  }
  reader_ = tag;
  if (natsSubscription_SetOnCompleteCB(sub_, &JetStreamLog::on_reading_done, tag) != NATS_OK) {
    reader_ = nullptr;  // never told when it is done: the tag is left to it
  }
  return true;
}

void JetStreamLog::on_record(__natsConnection*, __natsSubscription*, __natsMsg* msg, void* tag_ptr) {
  auto* tag = static_cast<ReaderTag*>(tag_ptr);
  Inbox& in = *tag->inbox;
  jsMsgMetaData* meta = nullptr;
  const uint64_t sequence =
      natsMsg_GetMetaData(&meta, msg) == NATS_OK && meta != nullptr ? meta->Sequence.Stream : 0;
  if (meta != nullptr) jsMsgMetaData_Destroy(meta);
  const size_t bytes = size_t(natsMsg_GetDataLength(msg)) + 256;  // and the library's share
  // Never wait here: a delivery thread held up misses the consumer's
  // heartbeats, and the library then starts the consumer again from a
  // sequence of its choosing. A full queue drops the rest instead, and the
  // owner reads again from its next sequence. So does a gap after the
  // first record: the library dropped a record (its own pending limit)
  // without knowing it of an ordered consumer. (A gap before the first is
  // the stream's: records purged before this node read them.)
  std::lock_guard<std::mutex> lock(in.mutex);
  const bool gap = in.last_sequence != 0 && sequence != in.last_sequence + 1;
  if (tag->number != in.reader || in.overflowed || gap || sequence == 0 || in.records.size() >= in.max_records ||
      in.bytes + bytes > kMaxQueuedBytes) {
    if (tag->number == in.reader) in.overflowed = true;
    natsMsg_Destroy(msg);
    if (tag->number == in.reader) in.ring();
    return;
  }
  in.records.push_back(Inbox::Queued{msg, sequence, bytes});
  in.bytes += bytes;
  in.last_sequence = sequence;
  in.cv.notify_all();
  in.ring();
}

void JetStreamLog::on_reading_done(void* tag_ptr) {
  auto* tag = static_cast<ReaderTag*>(tag_ptr);
  std::lock_guard<std::mutex> lock(tag->inbox->mutex);
  tag->done = true;
  tag->inbox->cv.notify_all();
}

void JetStreamLog::stop_reading() {
  if (sub_ == nullptr) return;
  {
    std::lock_guard<std::mutex> lock(inbox_->mutex);
    inbox_->reader = 0;  // a delivery under way or to come is dropped
    inbox_->drop_records();
  }
  const bool unsubscribed = natsSubscription_Unsubscribe(sub_) == NATS_OK;  // deletes the ordered consumer too
  bool done = false;
  if (reader_ != nullptr) {
    // The library calls on_reading_done() once no delivery can come; a
    // connection already gone may never get there, hence the bound, and
    // then the tag is left to the library rather than freed under it.
    std::unique_lock<std::mutex> lock(inbox_->mutex);
    done = inbox_->cv.wait_for(lock, std::chrono::seconds(unsubscribed ? 10 : 2), [this] { return reader_->done; });
  }
  natsSubscription_Destroy(sub_);
  sub_ = nullptr;
  if (done) delete reader_;
  reader_ = nullptr;
  std::lock_guard<std::mutex> lock(inbox_->mutex);
  inbox_->drop_records();  // anything a late delivery queued before the reader changed
}

bool JetStreamLog::has_records() const {
  std::lock_guard<std::mutex> lock(inbox_->mutex);
  return !inbox_->records.empty() || inbox_->overflowed;
}

bool JetStreamLog::has_acks() const {
  std::lock_guard<std::mutex> lock(inbox_->mutex);
  return !inbox_->acks.empty();
}

int JetStreamLog::read(const RecordFn& f, int max, int timeout_ms, std::string& error) {
  if (sub_ == nullptr) {
    error = "read_from() first";
    return -1;
  }
  int n = 0;
  while (n < max) {
    natsMsg* m = nullptr;
    uint64_t sequence = 0;
    {
      Inbox& in = *inbox_;
      std::unique_lock<std::mutex> lock(in.mutex);
      if (in.records.empty() && n == 0 && timeout_ms > 0) {
        in.cv.wait_for(lock, std::chrono::milliseconds(timeout_ms),
                       [&in] { return !in.records.empty() || in.overflowed; });
      }
      if (in.records.empty()) {
        if (!in.overflowed) break;
        return n > 0 ? n : kFellBehind;  // the owner reads again from its next sequence
      }
      const Inbox::Queued q = in.records.front();
      in.records.pop_front();
      in.bytes -= q.bytes;
      m = q.msg;
      sequence = q.sequence;
    }
    const bool more =
        f(sequence, reinterpret_cast<const uint8_t*>(natsMsg_GetData(m)), size_t(natsMsg_GetDataLength(m)));
    ++n;
    natsMsg_Destroy(m);
    if (!more) break;
  }
  return n;
}

bool JetStreamLog::settle(const std::string& bucket, const std::string& key, const std::string& mine,
                          std::string& settled, std::string& error) {
  if (js_ == nullptr) {
    error = "not open";
    return false;
  }
  KvRecord record;
  bool written = false, found = false;
  uint64_t revision = 0;
  // The create loses when the key exists: then the bucket's value is the one.
  if (!record.open(js_, bucket, options_.replicas, true, error) || !record.put_if(key, mine, 0, written, error) ||
      !record.get(key, settled, revision, found, error)) {
    return false;
  }
  if (!found) error = "key-value bucket " + bucket + ", key " + key + ": gone right after it was written";
  return found;
}

bool JetStreamLog::stream_state(StreamState& state, std::string& error, int wait_ms) {
  if (js_ == nullptr) {
    error = "not open";
    return false;
  }
  jsOptions jo;
  jsOptions_Init(&jo);
  if (wait_ms > 0) jo.Wait = wait_ms;
  jsStreamInfo* si = nullptr;
  jsErrCode code = jsErrCode(0);
  const natsStatus s = js_GetStreamInfo(&si, js_, options_.stream.c_str(), wait_ms > 0 ? &jo : nullptr, &code);
  if (s != NATS_OK || si == nullptr) {
    error = "stream " + options_.stream + ": " + describe(s, code);
    return false;
  }
  state = StreamState{};
  state.first_sequence = si->State.FirstSeq;
  state.last_sequence = si->State.LastSeq;
  state.records = si->State.Msgs;
  state.bytes = si->State.Bytes;
  if (const jsClusterInfo* c = si->Cluster) {
    state.clustered = c->Name != nullptr && c->Name[0] != '\0';
    state.leader = c->Leader != nullptr ? c->Leader : "";
    for (int i = 0; i < c->ReplicasLen; ++i) {
      const jsPeerInfo* p = c->Replicas[i];
      if (p == nullptr) continue;
      state.replicas.push_back(StreamState::Replica{p->Name != nullptr ? p->Name : "", p->Current, p->Offline,
                                                    p->Lag, uint64_t(std::max<int64_t>(p->Active, 0)) / 1'000'000});
    }
  }
  jsStreamInfo_Destroy(si);
  return true;
}

bool JetStreamLog::purge_below(uint64_t sequence, std::string& error) {
  if (js_ == nullptr) {
    error = "not open";
    return false;
  }
  jsOptions jo;
  jsOptions_Init(&jo);
  jo.Stream.Purge.Sequence = sequence;
  jsErrCode code = jsErrCode(0);
  const natsStatus s = js_PurgeStream(js_, options_.stream.c_str(), &jo, &code);
  if (s != NATS_OK) error = "purging stream " + options_.stream + ": " + describe(s, code);
  return s == NATS_OK;
}

std::string JetStreamLog::connected_server() const {
  if (nc_ == nullptr) return "";
  char url[256];
  if (natsConnection_GetConnectedUrl(nc_, url, sizeof url) != NATS_OK) return "";
  return url;
}

}  // namespace shingled::cluster
