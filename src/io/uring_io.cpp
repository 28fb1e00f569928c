// The default packet-I/O backend: io_uring, one multishot recvmsg per socket over a
// provided-buffer ring, sendmsg replies submitted in one batch. Owned by one worker
// thread; never blocks except in receive_burst's bounded wait, no syscall per packet.
#include "io/uring_io.h"

#include <fcntl.h>
#include <poll.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <sys/utsname.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>

#include "common/log.h"
#include "io/udp_socket.h"

namespace shingled {

namespace {

// user_data of every request: what it is in the top byte, which one below.
// TCP's kinds (UringTcp::kAccept, kReceive, kSend) are 5 to 7.
enum Kind : uint64_t { kRecv = 1, kSend = 2, kWake = 3, kCancel = 4 };
constexpr bool is_tcp(uint64_t kind) { return kind >= UringTcp::kAccept && kind <= UringTcp::kSend; }

uint64_t monotonic_ms() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC_COARSE, &ts);
  return uint64_t(ts.tv_sec) * 1000 + uint64_t(ts.tv_nsec) / 1'000'000;
}
constexpr uint64_t tag(Kind kind, uint32_t index) { return (uint64_t{kind} << 56) | index; }
constexpr uint64_t tag_kind(uint64_t data) { return data >> 56; }
constexpr uint32_t tag_index(uint64_t data) { return static_cast<uint32_t>(data); }

constexpr uint16_t kBufferGroup = 0;  // one provided-buffer ring, shared by all sockets
constexpr unsigned kPeekBatch = 64;

unsigned round_up_pow2(unsigned v) {
  unsigned p = 1;
  while (p < v) p <<= 1;
  return p;
}

// Multishot recvmsg arrived in Linux 6.0. Older kernels would accept the ring
// and the buffer ring, then fail every receive; refuse them up front so the
// caller falls back to recvmmsg.
bool kernel_has_multishot_recvmsg(std::string& release) {
  utsname u{};
  if (uname(&u) != 0) return true;  // cannot tell; let the kernel decide
  release = u.release;
  unsigned major = 0;
  if (std::sscanf(u.release, "%u", &major) != 1) return true;
  return major >= 6;
}

std::string setup_error(int err) {
  std::string text = std::string("io_uring: cannot set up a ring: ") + std::strerror(err);
  if (err == EPERM) text += " (disabled by sysctl kernel.io_uring_disabled or a seccomp filter)";
  if (err == ENOSYS) text += " (kernel built without io_uring)";
  if (err == ENOMEM) text += " (locked-memory limit too low?)";
  return text;
}

// Errors after which re-arming the receive would only fail again.
bool receive_error_is_permanent(int err) {
  return err == EINVAL || err == EBADF || err == ENOTSOCK || err == EOPNOTSUPP ||
         err == EFAULT;
}

}  // namespace

std::unique_ptr<UringIo> UringIo::create(const std::vector<ListenAddress>& listeners,
                                         std::string& error, const UringOptions& options) {
  if (listeners.empty() || listeners.size() > 65535) {
    error = "io_uring: need between 1 and 65535 listen addresses";
    return nullptr;
  }
  const unsigned rx = options.rx_buffers;
  if (rx == 0 || rx > 32768 || (rx & (rx - 1)) != 0) {
    error = "io_uring: rx_buffers must be a power of two between 1 and 32768";
    return nullptr;
  }
  if (options.tx_slots == 0 || options.tx_slots > 16384) {
    error = "io_uring: tx_slots must be between 1 and 16384";
    return nullptr;
  }
  std::string release;
  if (!kernel_has_multishot_recvmsg(release)) {
    error = "io_uring: kernel " + release + " lacks multishot recvmsg (needs Linux 6.0)";
    return nullptr;
  }

  std::unique_ptr<UringIo> io(new UringIo());
  const unsigned count = static_cast<unsigned>(listeners.size());
  // Every TX slot may hold an unsubmitted SQE, plus one receive per socket
  // and the wake poll, so queue_send() never finds the SQ full.
  // TCP: a receive and a send per connection, an accept per listener.
  const unsigned tcp = options.tcp.listeners == 0 ? 0 : 2 * options.tcp.max_connections + count;
  const unsigned sq = round_up_pow2(options.tx_slots + count + 8 + tcp);
  // Every buffer and every slot may complete before the worker reaps; a
  // full CQ would end the multishot receives.
  const unsigned cq = round_up_pow2(rx + options.tx_slots + 2 * count + 16 + 2 * tcp);
  if (!io->setup_ring(std::min(sq, 32768u), std::min(cq, 65536u), error)) return nullptr;
  if (!io->setup_buffers(rx, error)) return nullptr;

  for (const ListenAddress& addr : listeners) {
    Listener l;
    l.fd = open_udp_socket(addr, error);
    if (l.fd < 0) return nullptr;  // the destructor releases what is set up
    l.msg.msg_namelen = sizeof(sockaddr_in6);
    io->listeners_.push_back(l);
  }

  io->tx_slot_count_ = options.tx_slots;
  io->tx_.reset(new TxSlot[options.tx_slots]);
  io->tx_free_.resize(options.tx_slots);
  for (unsigned i = 0; i < options.tx_slots; ++i) {
    io->tx_free_[i] = options.tx_slots - 1 - i;  // slot 0 on top: low slots stay cache-warm
  }
  io->tx_free_count_ = options.tx_slots;
  if (options.tcp.listeners != 0) {
    io->tcp_ = std::make_unique<UringTcp>(*io, io->counters_, options.tcp);
    if (!io->tcp_->listen(listeners, error)) return nullptr;
  }
  return io;
}

io_uring_sqe* UringIo::next_sqe() {
  io_uring_sqe* sqe = io_uring_get_sqe(&ring_);
  if (sqe != nullptr) return sqe;
  ensure_started();
  io_uring_submit(&ring_);
  ++counters_.syscalls;
  return io_uring_get_sqe(&ring_);
}

bool UringIo::queue_send_stream(uint32_t connection, const uint8_t* data, uint32_t len) {
  if (tcp_ == nullptr) {
    ++counters_.tcp_replies_dropped;
    return false;
  }
  return tcp_->queue_send(connection, data, len);
}

void UringIo::set_tcp_admission(TcpAdmission admit) {
  if (tcp_ != nullptr) tcp_->set_admission(std::move(admit));
}

bool UringIo::setup_ring(unsigned sq_entries, unsigned cq_entries, std::string& error) {
  // Most capable first. DEFER_TASKRUN runs completion work only when this
  // thread asks for events, so receives never interrupt the burst being
  // processed; it needs SINGLE_ISSUER. Older kernels answer EINVAL for flags
  // they do not know, and we try the next set.
  const unsigned base = IORING_SETUP_CQSIZE | IORING_SETUP_CLAMP | IORING_SETUP_SUBMIT_ALL |
                        IORING_SETUP_R_DISABLED;
  const unsigned tiers[] = {
      base | IORING_SETUP_SINGLE_ISSUER | IORING_SETUP_DEFER_TASKRUN |
          IORING_SETUP_COOP_TASKRUN,
      base | IORING_SETUP_SINGLE_ISSUER | IORING_SETUP_COOP_TASKRUN,
      base | IORING_SETUP_COOP_TASKRUN,
      base,
  };
  int ret = -EINVAL;
  for (unsigned flags : tiers) {
    io_uring_params params{};
    params.flags = flags;
    params.cq_entries = cq_entries;
    ret = io_uring_queue_init_params(sq_entries, &ring_, &params);
    if (ret == 0) {
      setup_flags_ = flags;
      ring_open_ = true;
      break;
    }
    if (ret != -EINVAL) break;
  }
  if (!ring_open_) {
    error = setup_error(-ret);
    return false;
  }
  if ((ring_.features & IORING_FEAT_EXT_ARG) == 0) {
    // Without it a timed wait costs an extra timeout SQE and CQE; every
    // kernel with multishot recvmsg has it, so this is only a guard.
    error = "io_uring: kernel lacks IORING_FEAT_EXT_ARG (needs Linux 5.11)";
    return false;
  }
  LOG_DEBUG("io_uring: ring set up, flags 0x%x, %u SQ / %u CQ entries", setup_flags_,
            sq_entries, cq_entries);
  return true;
}

bool UringIo::setup_buffers(unsigned count, std::string& error) {
  // The ring of buffer descriptors must be page-aligned; mmap gives that.
  buf_ring_bytes_ = size_t{count} * sizeof(io_uring_buf);
  void* ring_mem = mmap(nullptr, buf_ring_bytes_, PROT_READ | PROT_WRITE,
                        MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (ring_mem == MAP_FAILED) {
    buf_ring_bytes_ = 0;
    error = std::string("io_uring: cannot map the buffer ring: ") + std::strerror(errno);
    return false;
  }
  buf_ring_ = static_cast<io_uring_buf_ring*>(ring_mem);
  buffers_bytes_ = size_t{count} * kBufferBytes;
  void* buf_mem = mmap(nullptr, buffers_bytes_, PROT_READ | PROT_WRITE,
                       MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (buf_mem == MAP_FAILED) {
    buffers_bytes_ = 0;
    error = std::string("io_uring: cannot map receive buffers: ") + std::strerror(errno);
    return false;
  }
  buffers_ = static_cast<uint8_t*>(buf_mem);

  io_uring_buf_reg reg{};
  reg.ring_addr = reinterpret_cast<uint64_t>(buf_ring_);
  reg.ring_entries = count;
  reg.bgid = kBufferGroup;
  const int ret = io_uring_register_buf_ring(&ring_, &reg, 0);
  if (ret != 0) {
    error = std::string("io_uring: cannot register a provided-buffer ring: ") +
            std::strerror(-ret) + " (needs Linux 5.19)";
    return false;
  }
  buffer_count_ = count;
  io_uring_buf_ring_init(buf_ring_);
  const int mask = io_uring_buf_ring_mask(count);
  for (unsigned i = 0; i < count; ++i) {
    io_uring_buf_ring_add(buf_ring_, buffer(i), kBufferBytes, static_cast<uint16_t>(i), mask,
                          static_cast<int>(i));
  }
  io_uring_buf_ring_advance(buf_ring_, static_cast<int>(count));
  used_buffers_.resize(count);
  return true;
}

UringIo::~UringIo() {
  if (ring_open_) {
    cancel_all();
    // Closing the ring cancels whatever cancel_all() could not wait for,
    // before the buffers the receives would write into are unmapped.
    io_uring_queue_exit(&ring_);
  }
  if (buffers_ != nullptr) munmap(buffers_, buffers_bytes_);
  if (buf_ring_ != nullptr) munmap(buf_ring_, buf_ring_bytes_);
  for (const Listener& l : listeners_) close(l.fd);
}

bool UringIo::local_address(uint16_t index, sockaddr_storage& out, socklen_t& out_len) const {
  return index < listeners_.size() && socket_local_address(listeners_[index].fd, out, out_len);
}

void UringIo::cancel_all() {
  // With SINGLE_ISSUER only the thread that enabled the ring may submit; on
  // any other thread the kernel tears the requests down asynchronously.
  if (!started_ || owner_tid_ != gettid()) return;
  io_uring_sqe* sqe = io_uring_get_sqe(&ring_);
  if (sqe == nullptr) {
    io_uring_submit(&ring_);
    sqe = io_uring_get_sqe(&ring_);
    if (sqe == nullptr) return;
  }
  io_uring_prep_cancel64(sqe, 0, IORING_ASYNC_CANCEL_ANY);
  io_uring_sqe_set_data64(sqe, tag(kCancel, 0));

  auto outstanding = [this] {
    if (wake_armed_ || tx_free_count_ != tx_slot_count_) return true;
    if (tcp_ != nullptr && tcp_->in_flight() != 0) return true;
    for (const Listener& l : listeners_) {
      if (l.armed) return true;
    }
    return false;
  };
  // Bounded: a request the kernel cannot cancel must not hang shutdown.
  for (int round = 0; round < 20 && outstanding(); ++round) {
    __kernel_timespec ts{};
    ts.tv_nsec = 50'000'000;
    io_uring_cqe* cqe = nullptr;
    io_uring_submit_and_wait_timeout(&ring_, &cqe, 1, &ts, nullptr);
    unsigned head;
    unsigned seen = 0;
    io_uring_for_each_cqe(&ring_, head, cqe) {
      ++seen;
      const uint64_t data = io_uring_cqe_get_data64(cqe);
      const bool ended = (cqe->flags & IORING_CQE_F_MORE) == 0;
      switch (tag_kind(data)) {
        case kRecv: if (ended) listeners_[tag_index(data)].armed = false; break;
        case kSend: on_send(cqe, tag_index(data)); break;
        case kWake:
          if (ended && tag_index(data) == wake_generation_) wake_armed_ = false;
          break;
        default:
          if (tcp_ != nullptr && is_tcp(tag_kind(data))) tcp_->on_cancelled(tag_kind(data), cqe);
          break;
      }
    }
    io_uring_cq_advance(&ring_, seen);
  }
}

void UringIo::ensure_started() {
  if (started_) return;
  started_ = true;
  owner_tid_ = gettid();
  // liburing 2.3 declares io_uring_enable_rings() but its shared library
  // does not export it, so the register call is made directly.
  const long ret =
      syscall(__NR_io_uring_register, ring_.ring_fd, IORING_REGISTER_ENABLE_RINGS, nullptr, 0);
  ++counters_.syscalls;
  if (ret != 0) LOG_ERROR("io_uring: cannot enable the ring: %s", std::strerror(errno));
}

void UringIo::recycle_buffers() {
  if (used_count_ == 0) return;
  const int mask = io_uring_buf_ring_mask(buffer_count_);
  for (unsigned i = 0; i < used_count_; ++i) {
    const uint16_t id = used_buffers_[i];
    io_uring_buf_ring_add(buf_ring_, buffer(id), kBufferBytes, id, mask, static_cast<int>(i));
  }
  // One tail store publishes the whole batch to the kernel.
  io_uring_buf_ring_advance(buf_ring_, static_cast<int>(used_count_));
  used_count_ = 0;
}

void UringIo::prepare_arms() {
  if (tcp_ != nullptr) tcp_->prepare(now_ms_);
  for (uint32_t i = 0; i < listeners_.size(); ++i) {
    Listener& l = listeners_[i];
    if (l.armed || l.dead) continue;
    io_uring_sqe* sqe = io_uring_get_sqe(&ring_);
    if (sqe == nullptr) return;  // SQ full; the next call tries again
    io_uring_prep_recvmsg_multishot(sqe, l.fd, &l.msg, 0);
    sqe->flags |= IOSQE_BUFFER_SELECT;
    sqe->buf_group = kBufferGroup;
    io_uring_sqe_set_data64(sqe, tag(kRecv, i));
    l.armed = true;
  }
  if (wake_fd_ >= 0 && !wake_armed_) {
    io_uring_sqe* sqe = io_uring_get_sqe(&ring_);
    if (sqe == nullptr) return;
    io_uring_prep_poll_multishot(sqe, wake_fd_, POLLIN);
    io_uring_sqe_set_data64(sqe, tag(kWake, wake_generation_));
    wake_armed_ = true;
  }
}

unsigned UringIo::receive_burst(RxPacket* out, unsigned max, unsigned timeout_us) {
  ensure_started();
  recycle_buffers();  // the caller is done with the previous burst
  unsigned n = 0;
  if (tcp_ != nullptr) {
    now_ms_ = monotonic_ms();
    tcp_->recycle();
    n = tcp_->deliver_waiting(out, max);
  }
  n += reap(out + n, max - n);
  prepare_arms();  // first start, or receives that ended while reaping
  if (n > 0 || max == 0) return n;

  if (timeout_us > 0) {
    __kernel_timespec ts{};
    ts.tv_sec = timeout_us / 1000000;
    ts.tv_nsec = static_cast<long long>(timeout_us % 1000000) * 1000;
    io_uring_cqe* cqe = nullptr;
    // One io_uring_enter: submits the pending SQEs (re-arms, replies not yet
    // flushed) and sleeps until a completion, the wake fd, or the timeout.
    io_uring_submit_and_wait_timeout(&ring_, &cqe, 1, &ts, nullptr);
  } else {
    // Nothing is visible; with DEFER_TASKRUN completions exist only after
    // we enter the kernel to ask for them.
    io_uring_submit_and_get_events(&ring_);
  }
  ++counters_.syscalls;
  n = reap(out, max);
  prepare_arms();
  return n;
}

unsigned UringIo::reap(RxPacket* out, unsigned max) {
  unsigned n = 0;
  io_uring_cqe* cqes[kPeekBatch];
  // Checking cq_ready first keeps io_uring_peek_batch_cqe from entering the
  // kernel on its own (it would, to flush an overflowed CQ).
  while (n < max && io_uring_cq_ready(&ring_) > 0) {
    const unsigned got = io_uring_peek_batch_cqe(&ring_, cqes, kPeekBatch);
    unsigned seen = 0;
    for (; seen < got && n < max; ++seen) {
      const io_uring_cqe* cqe = cqes[seen];
      const uint64_t data = io_uring_cqe_get_data64(cqe);
      switch (tag_kind(data)) {
        case kRecv: on_receive(cqe, tag_index(data), out, n); break;
        case kSend: on_send(cqe, tag_index(data)); break;
        case kWake: on_wake(cqe, tag_index(data)); break;
        case UringTcp::kAccept:
        case UringTcp::kReceive:
        case UringTcp::kSend:
          if (tcp_ != nullptr) tcp_->on_completion(tag_kind(data), tag_index(data), cqe, out, n, max, now_ms_);
          break;
        default: break;  // cancellations: nothing to do
      }
    }
    io_uring_cq_advance(&ring_, seen);
    if (seen < got) break;  // `out` is full; the rest waits for the next burst
  }
  if (wake_pending_) {
    // An eventfd read returns and resets the whole count, so one read
    // drains any number of wake-ups. The fd is non-blocking: a wake-up
    // already drained by an earlier read costs an EAGAIN, never a stall.
    wake_pending_ = false;
    uint64_t value;
    ssize_t ignored = read(wake_fd_, &value, sizeof(value));
    (void)ignored;
    ++counters_.syscalls;
  }
  return n;
}

void UringIo::on_receive(const io_uring_cqe* cqe, uint32_t index, RxPacket* out,
                         unsigned& n) {
  Listener& l = listeners_[index];
  if ((cqe->flags & IORING_CQE_F_MORE) == 0) {
    // The multishot receive ended (buffers ran out, CQ overflowed, error);
    // prepare_arms() starts a new one.
    l.armed = false;
    if (cqe->res == -ENOBUFS) ++rx_no_buffers_;
    if (cqe->res < 0 && receive_error_is_permanent(-cqe->res)) {
      l.dead = true;
      LOG_ERROR("io_uring: receive on listener %u failed for good: %s", index,
                std::strerror(-cqe->res));
    } else {
      ++rx_rearms_;
    }
  }
  if ((cqe->flags & IORING_CQE_F_BUFFER) == 0) return;  // an error without data
  const uint16_t id = static_cast<uint16_t>(cqe->flags >> IORING_CQE_BUFFER_SHIFT);
  used_buffers_[used_count_++] = id;  // back to the ring at the next burst
  if (cqe->res < 0) return;

  uint8_t* buf = buffer(id);
  io_uring_recvmsg_out* msg = io_uring_recvmsg_validate(buf, cqe->res, &l.msg);
  if (msg == nullptr) return;  // shorter than its own header: cannot happen for UDP
  const uint32_t len = io_uring_recvmsg_payload_length(msg, cqe->res, &l.msg);
  RxPacket& p = out[n++];
  p.data = static_cast<const uint8_t*>(io_uring_recvmsg_payload(msg, &l.msg));
  p.len = std::min(len, kMaxDatagram);
  p.truncated = (msg->flags & MSG_TRUNC) != 0 || len > kMaxDatagram;
  p.listener = static_cast<uint16_t>(index);
  p.peer = static_cast<const sockaddr*>(io_uring_recvmsg_name(msg));
  p.peer_len = std::min<socklen_t>(msg->namelen, l.msg.msg_namelen);
  p.connection = 0;
  ++counters_.rx_packets;
  counters_.rx_bytes += p.len;
  if (p.truncated) ++counters_.rx_truncated;
}

void UringIo::on_send(const io_uring_cqe* cqe, uint32_t slot) {
  if (cqe->res < 0) {
    ++counters_.tx_errors;
  } else {
    ++counters_.tx_packets;
    counters_.tx_bytes += static_cast<uint32_t>(cqe->res);
  }
  tx_free_[tx_free_count_++] = slot;
}

void UringIo::on_wake(const io_uring_cqe* cqe, uint32_t generation) {
  if (generation != wake_generation_) return;  // the poll of a replaced wake fd
  if ((cqe->flags & IORING_CQE_F_MORE) == 0) wake_armed_ = false;
  if (cqe->res > 0) wake_pending_ = true;
}

bool UringIo::queue_send(uint16_t listener, const sockaddr* peer, socklen_t peer_len,
                         const uint8_t* data, uint32_t len) {
  if (listener >= listeners_.size() || peer == nullptr ||
      peer_len > sizeof(sockaddr_storage) || len > kMaxReply) {
    ++counters_.tx_errors;  // a caller bug, not back-pressure
    return false;
  }
  if (tx_free_count_ == 0) {
    ++counters_.tx_queue_full;
    return false;
  }
  io_uring_sqe* sqe = io_uring_get_sqe(&ring_);
  if (sqe == nullptr) {
    // The SQ is sized for every slot, so only pending re-arms can fill it:
    // hand everything to the kernel and go on.
    ensure_started();
    io_uring_submit(&ring_);
    ++counters_.syscalls;
    sqe = io_uring_get_sqe(&ring_);
    if (sqe == nullptr) {
      ++counters_.tx_queue_full;
      return false;
    }
  }
  const uint32_t id = tx_free_[--tx_free_count_];
  TxSlot& s = tx_[id];
  std::memcpy(&s.peer, peer, peer_len);
  std::memcpy(s.data, data, len);
  s.iov = iovec{s.data, len};
  s.msg = msghdr{};
  s.msg.msg_name = &s.peer;
  s.msg.msg_namelen = peer_len;
  s.msg.msg_iov = &s.iov;
  s.msg.msg_iovlen = 1;
  io_uring_prep_sendmsg(sqe, listeners_[listener].fd, &s.msg, 0);
  io_uring_sqe_set_data64(sqe, tag(kSend, id));
  return true;
}

void UringIo::flush() {
  if (tcp_ != nullptr) tcp_->flush();
  if (io_uring_sq_ready(&ring_) == 0) return;
  ensure_started();
  // One io_uring_enter for the whole batch. Asking for events as well posts
  // receive completions waiting as deferred work, so the next
  // receive_burst() usually finds packets without entering the kernel.
  io_uring_submit_and_get_events(&ring_);
  ++counters_.syscalls;
}

void UringIo::set_wake_fd(int fd) {
  if (wake_fd_ >= 0 && wake_armed_) {
    // Stop polling the old fd; its completions carry the old generation
    // and are ignored.
    io_uring_sqe* sqe = io_uring_get_sqe(&ring_);
    if (sqe != nullptr) {
      io_uring_prep_cancel64(sqe, tag(kWake, wake_generation_), 0);
      io_uring_sqe_set_data64(sqe, tag(kCancel, 0));
    }
  }
  ++wake_generation_;
  wake_armed_ = false;
  wake_pending_ = false;
  wake_fd_ = fd;
  if (fd < 0) return;
  const int flags = fcntl(fd, F_GETFL);
  if (flags >= 0 && (flags & O_NONBLOCK) == 0) fcntl(fd, F_SETFL, flags | O_NONBLOCK);
  prepare_arms();
}

}  // namespace shingled
