// Sorting more fixed-size records than should sit in memory, for the Redis
// importer: records collect in a bounded buffer; each full buffer is sorted
// and appended to an unlinked temporary file as one run; reading merges the
// runs with a heap. Memory is run_records records plus one small read
// buffer per run, whatever the number of records.
#pragma once

#include <sys/types.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>
#include <type_traits>
#include <vector>

namespace shingled {

// The file the runs go to: created unlinked (O_TMPFILE, or mkstemp and
// unlink) in `dir`, so nothing is left behind however the process ends.
class SpillFile {
 public:
  SpillFile() = default;
  SpillFile(const SpillFile&) = delete;
  SpillFile& operator=(const SpillFile&) = delete;
  ~SpillFile();

  bool open(const std::string& dir, std::string& error);
  bool append(const void* data, size_t bytes, std::string& error);
  bool read_at(uint64_t offset, void* data, size_t bytes, std::string& error) const;
  uint64_t size() const { return size_; }

 private:
  int fd_ = -1;
  std::string dir_;
  uint64_t size_ = 0;
};

template <class Record, class Less = std::less<Record>>
class SpillSorter {
  static_assert(std::is_trivially_copyable_v<Record>, "records are written as bytes");

 public:
  // run_records: records sorted in memory at a time (at least 1).
  explicit SpillSorter(size_t run_records, Less less = Less())
      : run_records_(std::max<size_t>(run_records, 1)), less_(less) {}

  bool open(const std::string& dir, std::string& error) { return file_.open(dir, error); }

  bool add(const Record& record, std::string& error) {
    if (buffer_.capacity() < run_records_) buffer_.reserve(run_records_);
    buffer_.push_back(record);
    ++count_;
    return buffer_.size() < run_records_ || spill(error);
  }

  // Ends the adding; next() then yields every record in order.
  bool finish(std::string& error) {
    if (!runs_.empty() && !buffer_.empty() && !spill(error)) return false;
    if (runs_.empty()) {
      std::sort(buffer_.begin(), buffer_.end(), less_);  // one run: stays in memory
      return true;
    }
    std::vector<Record>().swap(buffer_);
    for (size_t i = 0; i < runs_.size(); ++i) {
      if (!refill(i, error)) return false;
      if (runs_[i].have) heap_.push_back(i);
    }
    std::make_heap(heap_.begin(), heap_.end(), heap_order());
    return true;
  }

  // True with the next record; false at the end (error empty) or on a read
  // failure (error set).
  bool next(Record& out, std::string& error) {
    if (runs_.empty()) {
      if (memory_next_ >= buffer_.size()) return false;
      out = buffer_[memory_next_++];
      return true;
    }
    if (heap_.empty()) return false;
    std::pop_heap(heap_.begin(), heap_.end(), heap_order());
    const size_t i = heap_.back();
    Run& run = runs_[i];
    out = run.buffer[run.at++];
    if (!refill(i, error)) return false;
    if (run.have) {
      std::push_heap(heap_.begin(), heap_.end(), heap_order());
    } else {
      heap_.pop_back();
    }
    return true;
  }

  uint64_t size() const { return count_; }
  size_t runs() const { return runs_.size(); }
  uint64_t spilled_bytes() const { return file_.size(); }

 private:
  static constexpr size_t kReadRecords = std::max<size_t>(1, 65536 / sizeof(Record));

  struct Run {
    uint64_t offset = 0;    // of the run's next unread record in the file
    uint64_t left = 0;      // records of the run not yet read from the file
    std::vector<Record> buffer;
    size_t at = 0;          // next record of buffer
    bool have = false;      // buffer[at] is valid
  };

  bool spill(std::string& error) {
    std::sort(buffer_.begin(), buffer_.end(), less_);
    Run run;
    run.offset = file_.size();
    run.left = buffer_.size();
    if (!file_.append(buffer_.data(), buffer_.size() * sizeof(Record), error)) return false;
    runs_.push_back(std::move(run));
    buffer_.clear();
    return true;
  }

  bool refill(size_t i, std::string& error) {
    Run& run = runs_[i];
    if (run.at < run.buffer.size()) {
      run.have = true;
      return true;
    }
    const size_t n = size_t(std::min<uint64_t>(run.left, kReadRecords));
    run.buffer.resize(n);
    run.at = 0;
    run.have = n != 0;
    if (n == 0) return true;
    if (!file_.read_at(run.offset, run.buffer.data(), n * sizeof(Record), error)) return false;
    run.offset += n * sizeof(Record);
    run.left -= n;
    return true;
  }

  // std heaps put the largest first; the merge wants the smallest.
  auto heap_order() {
    return [this](size_t a, size_t b) {
      return less_(runs_[b].buffer[runs_[b].at], runs_[a].buffer[runs_[a].at]);
    };
  }

  size_t run_records_;
  Less less_;
  SpillFile file_;
  std::vector<Record> buffer_;
  size_t memory_next_ = 0;
  std::vector<Run> runs_;
  std::vector<size_t> heap_;
  uint64_t count_ = 0;
};

}  // namespace shingled
