// One key of a JetStream key-value bucket (see kv_record.h).
#include "cluster/kv_record.h"

#include <nats/nats.h>

#include "cluster/nats_connection.h"

namespace shingled::cluster {

KvRecord::~KvRecord() {
  if (kv_ != nullptr) kvStore_Destroy(kv_);
}

bool KvRecord::open(jsCtx* js, const std::string& bucket, int replicas, bool create, std::string& error) {
  bucket_ = bucket;
  js_ = js;
  natsStatus s = js_KeyValue(&kv_, js, bucket.c_str());
  if (s != NATS_OK && create) {
    kvConfig cfg;
    kvConfig_Init(&cfg);
    cfg.Bucket = bucket.c_str();
    cfg.Replicas = replicas;
    cfg.History = 1;
    s = js_CreateKeyValue(&kv_, js, &cfg);
    if (s != NATS_OK) s = js_KeyValue(&kv_, js, bucket.c_str());  // made by another meanwhile
  }
  missing_ = s == NATS_NOT_FOUND && !create;
  if (s != NATS_OK) {
    kv_ = nullptr;
    error = "key-value bucket " + bucket + ": " + describe_nats(s, 0);
    return false;
  }
  return true;
}

// From the bucket's stream leader (js_GetLastMsg), not kvStore_Get: the
// client library reads a bucket created with direct gets from any replica,
// and a follower may not have a write acknowledged a moment ago (seen:
// a value read back older than the update just made). A compare-and-set
// must start from the latest revision, and a value written must be read
// back as written.
bool KvRecord::get(const std::string& key, std::string& value, uint64_t& revision, bool& found, std::string& error) {
  found = false;
  natsMsg* msg = nullptr;
  jsErrCode code = jsErrCode(0);
  const std::string stream = "KV_" + bucket_, subject = "$KV." + bucket_ + "." + key;
  const natsStatus s = js_GetLastMsg(&msg, js_, stream.c_str(), subject.c_str(), nullptr, &code);
  if (s == NATS_NOT_FOUND || code == JSNoMessageFoundErr) return true;
  if (s != NATS_OK) {
    error = "key-value bucket " + bucket_ + ", key " + key + ": " + describe_nats(s, code);
    return false;
  }
  // A deleted or purged key keeps a marker message: no value.
  const char* operation = nullptr;
  const bool marker = natsMsgHeader_Get(msg, "KV-Operation", &operation) == NATS_OK && operation != nullptr;
  if (!marker) {
    value.assign(natsMsg_GetData(msg), size_t(natsMsg_GetDataLength(msg)));
    revision = natsMsg_GetSequence(msg);
    found = true;
  }
  natsMsg_Destroy(msg);
  return true;
}

bool KvRecord::put_if(const std::string& key, const std::string& value, uint64_t revision, bool& written,
                      std::string& error) {
  uint64_t now_at = 0;
  jsErrCode code = jsErrCode(0);
  const natsStatus s = revision == 0
                           ? kvStore_Create(&now_at, kv_, key.c_str(), value.data(), int(value.size()))
                           : kvStore_Update(&now_at, kv_, key.c_str(), value.data(), int(value.size()), revision);
  written = s == NATS_OK;
  if (written) return true;
  // A wrong last revision (or, for a create, an existing key) is the
  // compare-and-set losing; anything else is a failure to say.
  const char* last = nats_GetLastError(nullptr);
  const std::string why = last != nullptr ? last : "";
  if (s == NATS_ERR && (why.find("wrong last sequence") != std::string::npos ||
                        why.find("key exists") != std::string::npos)) {
    return true;
  }
  error = "key-value bucket " + bucket_ + ", key " + key + ": " + describe_nats(s, code);
  return false;
}

}  // namespace shingled::cluster
