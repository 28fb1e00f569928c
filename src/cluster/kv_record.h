// One key of a JetStream key-value bucket, read and written by
// compare-and-set on its revision: how the cluster keeps the few values
// every node must agree on (the partition layout, the last snapshot
// period claimed) without a protocol of its own.
#pragma once

#include <cstdint>
#include <string>

struct __jsCtx;
struct __kvStore;

namespace shingled::cluster {

class KvRecord {
 public:
  KvRecord() = default;
  ~KvRecord();
  KvRecord(const KvRecord&) = delete;
  KvRecord& operator=(const KvRecord&) = delete;

  // Binds bucket `bucket` through `js`; with `create`, makes the bucket
  // (`replicas`, one value of history) when it is missing. False with the
  // reason.
  bool open(__jsCtx* js, const std::string& bucket, int replicas, bool create, std::string& error);
  // After open() failed without `create`: the bucket does not exist.
  bool missing() const { return missing_; }
  // The key's value and revision; found = false when it has none.
  bool get(const std::string& key, std::string& value, uint64_t& revision, bool& found, std::string& error);
  // Writes `value` if the key is still at `revision` (0: if it has none).
  // written = false when another writer got there first (not an error).
  bool put_if(const std::string& key, const std::string& value, uint64_t revision, bool& written,
              std::string& error);

 private:
  __jsCtx* js_ = nullptr;
  __kvStore* kv_ = nullptr;
  std::string bucket_;
  bool missing_ = false;
};

}  // namespace shingled::cluster
