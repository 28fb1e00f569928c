// The cluster's snapshot stream (see snapshot_store.h).
#include "cluster/snapshot_store.h"

#include <nats/nats.h>

#include "cluster/field_text.h"
#include "cluster/kv_record.h"

namespace shingled::cluster {
namespace {
constexpr int64_t kChunkWaitMs = 10'000;  // one chunk's ack, or one chunk read
constexpr const char* kSnapshotClaimKey = "snapshot_period";  // the last period claimed
}  // namespace

SnapshotStore::~SnapshotStore() { close(); }

void SnapshotStore::close() {
  if (js_ != nullptr) jsCtx_Destroy(js_);
  js_ = nullptr;
  if (nc_ != nullptr) natsConnection_Destroy(nc_);
  nc_ = nullptr;
}

std::string SnapshotStore::subject(const std::string& leaf) const { return "shingled.snapshot." + stream_ + "." + leaf; }

bool SnapshotStore::open(const NatsEndpoint& endpoint, const std::string& stream, int replicas, bool create,
                         std::string& error) {
  close();
  stream_ = stream;
  name_ = stream + "_SNAPSHOTS";
  nc_ = connect_nats(endpoint, error);
  if (nc_ == nullptr) return false;
  natsStatus s = natsConnection_JetStream(&js_, nc_, nullptr);
  if (s != NATS_OK) {
    error = "JetStream context: " + describe_nats(s, 0);
    close();
    return false;
  }
  if (!create) return true;
  const std::string all = subject(">");
  const char* subjects[] = {all.c_str()};
  jsStreamConfig sc;
  jsStreamConfig_Init(&sc);
  sc.Name = name_.c_str();
  sc.Subjects = subjects;
  sc.SubjectsLen = 1;
  sc.Storage = js_FileStorage;
  sc.Replicas = replicas;
  jsStreamInfo* si = nullptr;
  jsErrCode code = jsErrCode(0);
  s = js_AddStream(&si, js_, &sc, nullptr, &code);
  if (s != NATS_OK && code == JSStreamNameExistErr) s = js_UpdateStream(&si, js_, &sc, nullptr, &code);
  if (si != nullptr) jsStreamInfo_Destroy(si);
  if (s != NATS_OK) {
    error = "snapshot stream " + name_ + ": " + describe_nats(s, code);
    close();
    return false;
  }
  return true;
}

bool SnapshotStore::put_chunk(const std::string& id, uint64_t index, const std::string& chunk, uint64_t& sequence,
                              std::string& error) {
  jsPubOptions po;
  jsPubOptions_Init(&po);
  const std::string msg_id = id + "-" + std::to_string(index);
  po.MsgId = msg_id.c_str();
  po.MaxWait = kChunkWaitMs;
  jsPubAck* ack = nullptr;
  jsErrCode code = jsErrCode(0);
  const natsStatus s = js_Publish(&ack, js_, subject("chunk." + id).c_str(), chunk.data(), int(chunk.size()), &po, &code);
  sequence = ack != nullptr ? ack->Sequence : 0;
  if (ack != nullptr) jsPubAck_Destroy(ack);
  if (s != NATS_OK) error = "snapshot " + id + ", chunk " + std::to_string(index) + ": " + describe_nats(s, code);
  return s == NATS_OK;
}

bool SnapshotStore::put_manifest(const SnapshotManifest& m, std::string& error) {
  SnapshotManifest previous;
  bool had = false;
  if (!latest(previous, had, error)) return false;
  const std::string text = encode_manifest(m);
  jsPubOptions po;
  jsPubOptions_Init(&po);
  po.MaxWait = kChunkWaitMs;
  jsPubAck* ack = nullptr;
  jsErrCode code = jsErrCode(0);
  natsStatus s = js_Publish(&ack, js_, subject("manifest").c_str(), text.data(), int(text.size()), &po, &code);
  if (ack != nullptr) jsPubAck_Destroy(ack);
  if (s != NATS_OK) {
    error = "snapshot " + m.id + ", manifest: " + describe_nats(s, code);
    return false;
  }
  if (!had || previous.id == m.id) return true;
  for (const std::string leaf : {"chunk.>", "manifest"}) {
    jsOptions jo;
    jsOptions_Init(&jo);
    const std::string filter = subject(leaf);
    jo.Stream.Purge.Subject = filter.c_str();
    if (leaf == "manifest") {
      jo.Stream.Purge.Keep = 2;
    } else if (previous.first_chunk_sequence != 0) {
      jo.Stream.Purge.Sequence = previous.first_chunk_sequence;  // up to, not including
    } else {
      continue;  // where the replaced one starts is not known: nothing is purged
    }
    s = js_PurgeStream(js_, name_.c_str(), &jo, &code);
    if (s != NATS_OK) {
      error = "snapshot " + m.id + " stored, but purging " + filter + ": " + describe_nats(s, code);
      return false;
    }
  }
  return true;
}

bool SnapshotStore::claim_period(uint64_t period, bool& won, std::string& error) {
  won = false;
  KvRecord claims;
  if (!claims.open(js_, stream_ + "_SETTINGS", 1, false, error)) return false;
  std::string held;
  uint64_t revision = 0;
  bool found = false;
  if (!claims.get(kSnapshotClaimKey, held, revision, found, error)) return false;
  uint64_t claimed = 0;
  if (found && parse_whole(held, claimed) && claimed >= period) return true;  // another node's, or a later one
  // Lost (not written) when another node claimed it since the read.
  return claims.put_if(kSnapshotClaimKey, std::to_string(period), found ? revision : 0, won, error);
}

bool SnapshotStore::purge_updates_below(uint64_t sequence, std::string& error) {
  jsOptions jo;
  jsOptions_Init(&jo);
  jo.Stream.Purge.Sequence = sequence;  // up to, not including
  jsErrCode code = jsErrCode(0);
  const natsStatus s = js_PurgeStream(js_, stream_.c_str(), &jo, &code);
  if (s != NATS_OK) {
    error = "purging stream " + stream_ + " below sequence " + std::to_string(sequence) + ": " +
            describe_nats(s, code);
    return false;
  }
  return true;
}

bool SnapshotStore::latest(SnapshotManifest& out, bool& found, std::string& error) {
  found = false;
  natsMsg* msg = nullptr;
  jsErrCode code = jsErrCode(0);
  const natsStatus s = js_GetLastMsg(&msg, js_, name_.c_str(), subject("manifest").c_str(), nullptr, &code);
  if (s == NATS_NOT_FOUND || code == JSNoMessageFoundErr || code == JSStreamNotFoundErr) return true;
  if (s != NATS_OK) {
    error = "snapshot stream " + name_ + ": " + describe_nats(s, code);
    return false;
  }
  const std::string_view text(natsMsg_GetData(msg), size_t(natsMsg_GetDataLength(msg)));
  const bool ok = decode_manifest(text, out, error);
  natsMsg_Destroy(msg);
  if (!ok) error = "snapshot stream " + name_ + ": the last manifest: " + error;
  found = ok;
  return ok;
}

bool SnapshotStore::fetch(const SnapshotManifest& m, const std::function<bool(std::string_view chunk)>& fn,
                          std::string& error) {
  jsSubOptions so;
  jsSubOptions_Init(&so);
  so.Stream = name_.c_str();
  so.Ordered = true;
  so.Config.DeliverPolicy = js_DeliverAll;
  natsSubscription* sub = nullptr;
  jsErrCode code = jsErrCode(0);
  natsStatus s = js_SubscribeSync(&sub, js_, subject("chunk." + m.id).c_str(), nullptr, &so, &code);
  if (s != NATS_OK) {
    error = "reading snapshot " + m.id + ": " + describe_nats(s, code);
    return false;
  }
  SnapshotChecker checker;
  bool ok = true;
  for (uint64_t i = 0; i < m.chunks && ok; ++i) {
    natsMsg* msg = nullptr;
    s = natsSubscription_NextMsg(&msg, sub, kChunkWaitMs);
    if (s != NATS_OK) {
      error = "reading snapshot " + m.id + ", chunk " + std::to_string(i) + " of " + std::to_string(m.chunks) +
              ": " + describe_nats(s, 0);
      ok = false;
      break;
    }
    const std::string_view chunk(natsMsg_GetData(msg), size_t(natsMsg_GetDataLength(msg)));
    checker.add(chunk);
    ok = fn(chunk);
    if (!ok) error = "snapshot " + m.id + ", chunk " + std::to_string(i) + " was refused";
    natsMsg_Destroy(msg);
  }
  natsSubscription_Unsubscribe(sub);
  natsSubscription_Destroy(sub);
  return ok && checker.matches(m, error);
}

}  // namespace shingled::cluster
