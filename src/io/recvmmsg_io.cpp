// The portable packet-I/O backend: recvmmsg()/sendmmsg() on non-blocking
// sockets, poll() to wait. Used where io_uring is unavailable. Owned by one
// worker thread; never blocks except in receive_burst's bounded wait.
#include "io/recvmmsg_io.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <ctime>

#include "io/udp_socket.h"

namespace shingled {

std::unique_ptr<RecvmmsgIo> RecvmmsgIo::create(const std::vector<ListenAddress>& listeners,
                                               std::string& error,
                                               const RecvmmsgOptions& options) {
  if (listeners.empty() || listeners.size() > 65535) {
    error = "recvmmsg: need between 1 and 65535 listen addresses";
    return nullptr;
  }
  if (options.rx_slots == 0 || options.rx_slots > 65536 || options.tx_slots == 0 ||
      options.tx_slots > 65536) {
    error = "recvmmsg: rx_slots and tx_slots must be between 1 and 65536";
    return nullptr;
  }
  std::unique_ptr<RecvmmsgIo> io(new RecvmmsgIo());
  for (const ListenAddress& addr : listeners) {
    const int fd = open_udp_socket(addr, error);
    if (fd < 0) return nullptr;  // the destructor closes the sockets already open
    io->fds_.push_back(fd);
    io->pollfds_.push_back(pollfd{fd, POLLIN, 0});
  }

  // All buffers are set up here, once: the hot path only rewrites lengths.
  const unsigned rx = options.rx_slots;
  io->rx_slot_count_ = rx;
  io->rx_msgs_.assign(rx, mmsghdr{});
  io->rx_iov_.assign(rx, iovec{});
  io->rx_names_.assign(rx, sockaddr_storage{});
  io->rx_data_.reset(new uint8_t[size_t{rx} * kMaxDatagram]);
  for (unsigned i = 0; i < rx; ++i) {
    io->rx_iov_[i] = iovec{io->rx_data_.get() + size_t{i} * kMaxDatagram, kMaxDatagram};
    msghdr& h = io->rx_msgs_[i].msg_hdr;
    h.msg_name = &io->rx_names_[i];
    h.msg_iov = &io->rx_iov_[i];
    h.msg_iovlen = 1;
  }

  const unsigned tx = options.tx_slots;
  io->tx_slot_count_ = tx;
  io->tx_.reset(new TxSlot[tx]);
  io->tx_msgs_.assign(tx, mmsghdr{});
  io->tx_iov_.assign(tx, iovec{});
  return io;
}

RecvmmsgIo::~RecvmmsgIo() {
  for (int fd : fds_) close(fd);
}

bool RecvmmsgIo::local_address(uint16_t index, sockaddr_storage& out,
                               socklen_t& out_len) const {
  return index < fds_.size() && socket_local_address(fds_[index], out, out_len);
}

unsigned RecvmmsgIo::receive_burst(RxPacket* out, unsigned max, unsigned timeout_us) {
  max = std::min(max, rx_slot_count_);
  if (max == 0) return 0;
  unsigned n = read_sockets(out, max, false);
  if (n == 0 && timeout_us > 0) {
    wait(timeout_us);
    n = read_sockets(out, max, true);
  }
  return n;
}

unsigned RecvmmsgIo::read_sockets(RxPacket* out, unsigned max, bool only_ready) {
  const unsigned count = static_cast<unsigned>(fds_.size());
  unsigned n = 0;
  for (unsigned k = 0; k < count && n < max; ++k) {
    const unsigned index = (next_listener_ + k) % count;
    if (only_ready && (pollfds_[index].revents & POLLIN) == 0) continue;
    // Buffers n..max-1 are free: the previous burst is finished by contract.
    for (unsigned i = n; i < max; ++i) rx_msgs_[i].msg_hdr.msg_namelen = sizeof(sockaddr_storage);
    const int got = recvmmsg(fds_[index], &rx_msgs_[n], max - n, MSG_DONTWAIT, nullptr);
    ++counters_.syscalls;
    if (got <= 0) continue;  // EAGAIN: nothing queued; other errors are per-datagram noise
    for (int i = 0; i < got; ++i, ++n) {
      const mmsghdr& m = rx_msgs_[n];
      RxPacket& p = out[n];
      p.data = static_cast<const uint8_t*>(rx_iov_[n].iov_base);
      p.len = std::min<uint32_t>(m.msg_len, kMaxDatagram);
      p.truncated = (m.msg_hdr.msg_flags & MSG_TRUNC) != 0;
      p.listener = static_cast<uint16_t>(index);
      p.peer = reinterpret_cast<const sockaddr*>(&rx_names_[n]);
      p.peer_len = m.msg_hdr.msg_namelen;
      p.connection = 0;
      ++counters_.rx_packets;
      counters_.rx_bytes += p.len;
      if (p.truncated) ++counters_.rx_truncated;
    }
  }
  next_listener_ = (next_listener_ + 1) % count;
  return n;
}

void RecvmmsgIo::wait(unsigned timeout_us) {
  for (pollfd& p : pollfds_) p.revents = 0;
  const timespec ts{static_cast<time_t>(timeout_us / 1000000),
                    static_cast<long>(timeout_us % 1000000) * 1000};
  const int ready = ppoll(pollfds_.data(), pollfds_.size(), &ts, nullptr);
  ++counters_.syscalls;
  if (ready <= 0 || wake_fd_ < 0) return;
  if (pollfds_.back().revents & POLLIN) {
    // An eventfd read returns and resets the whole count, so one read
    // drains any number of wake-ups.
    uint64_t value;
    ssize_t ignored = read(wake_fd_, &value, sizeof(value));
    (void)ignored;
    ++counters_.syscalls;
  }
}

bool RecvmmsgIo::queue_send(uint16_t listener, const sockaddr* peer, socklen_t peer_len,
                            const uint8_t* data, uint32_t len) {
  if (listener >= fds_.size() || peer == nullptr || peer_len > sizeof(sockaddr_storage) ||
      len > kMaxReply) {
    ++counters_.tx_errors;  // a caller bug, not back-pressure
    return false;
  }
  if (tx_queued_ == tx_slot_count_) {
    ++counters_.tx_queue_full;
    return false;
  }
  TxSlot& s = tx_[tx_queued_++];
  s.listener = listener;
  s.peer_len = peer_len;
  s.len = len;
  std::copy_n(reinterpret_cast<const uint8_t*>(peer), peer_len,
              reinterpret_cast<uint8_t*>(&s.peer));
  std::copy_n(data, len, s.data);
  return true;
}

void RecvmmsgIo::flush() {
  if (tx_queued_ == 0) return;
  for (uint16_t l = 0; l < fds_.size(); ++l) send_listener(l);
  tx_queued_ = 0;
}

void RecvmmsgIo::send_listener(uint16_t listener) {
  unsigned count = 0;
  for (unsigned i = 0; i < tx_queued_; ++i) {
    TxSlot& s = tx_[i];
    if (s.listener != listener) continue;
    tx_iov_[count] = iovec{s.data, s.len};
    msghdr& h = tx_msgs_[count].msg_hdr;
    h = msghdr{};
    h.msg_name = &s.peer;
    h.msg_namelen = s.peer_len;
    h.msg_iov = &tx_iov_[count];
    h.msg_iovlen = 1;
    ++count;
  }
  unsigned done = 0;
  while (done < count) {
    const int sent = sendmmsg(fds_[listener], &tx_msgs_[done], count - done, MSG_DONTWAIT);
    ++counters_.syscalls;
    if (sent > 0) {
      for (int i = 0; i < sent; ++i) counters_.tx_bytes += tx_msgs_[done + i].msg_len;
      counters_.tx_packets += sent;
      done += sent;
      continue;
    }
    if (errno == EINTR) continue;
    if (errno == EAGAIN || errno == EWOULDBLOCK || errno == ENOBUFS) {
      // The socket buffer is full: retrying would spin the worker, so the
      // rest of this batch is dropped (UDP clients retry).
      counters_.tx_errors += count - done;
      return;
    }
    // sendmmsg reports the error of the first message it could not send;
    // that peer is refused (unreachable, bad address), the others may not be.
    ++counters_.tx_errors;
    ++done;
  }
}

void RecvmmsgIo::set_wake_fd(int fd) {
  if (wake_fd_ >= 0) pollfds_.pop_back();
  wake_fd_ = fd;
  if (fd < 0) return;
  const int flags = fcntl(fd, F_GETFL);
  if (flags >= 0 && (flags & O_NONBLOCK) == 0) fcntl(fd, F_SETFL, flags | O_NONBLOCK);
  pollfds_.push_back(pollfd{fd, POLLIN, 0});
}

}  // namespace shingled
