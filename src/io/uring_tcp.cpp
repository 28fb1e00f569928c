// TCP connections through the worker's io_uring (see uring_tcp.h).
#include "io/uring_tcp.h"

#include <netinet/in.h>
#include <netinet/tcp.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "common/log.h"
#include "io/tcp_frames.h"
#include "io/udp_socket.h"

namespace shingled {

namespace {

constexpr int kBacklog = 1024;
constexpr uint64_t kIdleCheckEveryMs = 100;

uint64_t tag(uint64_t kind, uint32_t id) { return (kind << 56) | id; }

int open_tcp_listener(const ListenAddress& addr, std::string& error) {
  const auto* sa = reinterpret_cast<const sockaddr*>(&addr.addr);
  const int fd = socket(sa->sa_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, IPPROTO_TCP);
  if (fd < 0) {
    error = "tcp socket " + addr.text + ": " + std::strerror(errno);
    return -1;
  }
  const int one = 1;
  setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  setsockopt(fd, SOL_SOCKET, SO_REUSEPORT, &one, sizeof one);  // one accept queue per worker
  if (sa->sa_family == AF_INET6) setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &one, sizeof one);
  if (bind(fd, sa, addr.addr_len) != 0 || ::listen(fd, kBacklog) != 0) {
    error = "tcp " + addr.text + ": " + std::strerror(errno);
    close(fd);
    return -1;
  }
  return fd;
}

}  // namespace

UringTcp::~UringTcp() { close_all(); }

bool UringTcp::listen(const std::vector<ListenAddress>& listeners, std::string& error) {
  for (unsigned i = 0; i < settings_.listeners && i < listeners.size(); ++i) {
    Listener l;
    l.fd = open_tcp_listener(listeners[i], error);
    if (l.fd < 0) return false;
    l.index = uint16_t(i);
    listeners_.push_back(l);
  }
  const unsigned slots = std::min(settings_.max_connections, 65535u);
  slots_.resize(slots);
  generations_.assign(slots, 0);
  for (unsigned s = slots; s-- > 0;) free_.push_back(s);
  dirty_.reserve(slots);
  sends_.reserve(slots);
  return true;
}

UringTcp::Connection* UringTcp::find(uint32_t id) {
  const uint32_t slot = (id & 0xFFFF) - 1;
  if (slot >= slots_.size() || slots_[slot] == nullptr) return nullptr;
  Connection* c = slots_[slot].get();
  return c->generation == uint16_t(id >> 16) ? c : nullptr;
}

void UringTcp::mark_dirty(uint32_t slot, Connection& c) {
  if (c.dirty) return;
  c.dirty = true;
  dirty_.push_back(slot);
}

void UringTcp::arm_receive(uint32_t slot, Connection& c) {
  if (c.receiving || c.closing || c.filled >= c.in_size) return;
  io_uring_sqe* sqe = sqes_.next_sqe();
  if (sqe == nullptr) {
    mark_dirty(slot, c);  // the next burst tries again
    return;
  }
  io_uring_prep_recv(sqe, c.fd, c.in.get() + c.filled, c.in_size - c.filled, 0);
  io_uring_sqe_set_data64(sqe, tag(kReceive, id_of(slot, c.generation)));
  c.receiving = true;
  ++in_flight_;
}

void UringTcp::recycle() {
  waiting_.swap(dirty_);
  dirty_.clear();
  for (const uint32_t slot : waiting_) {
    Connection* c = slots_[slot].get();
    if (c == nullptr) continue;
    c->dirty = false;
    if (c->closing) {
      free_if_done(slot, *c);
      continue;
    }
    if (c->parsed != 0) {
      // The frames handed out last burst are done with: drop them, keep a
      // partial one (and any complete ones not yet handed out) at the front.
      std::memmove(c->in.get(), c->in.get() + c->parsed, c->filled - c->parsed);
      c->filled -= c->parsed;
      c->parsed = 0;
    }
  }
}

unsigned UringTcp::deliver_waiting(RxPacket* out, unsigned max) {
  // The connections recycled above: what is complete goes out first (a
  // full burst left it behind; a connection with frames waiting has no
  // receive in flight, so order holds), then each receives again.
  unsigned n = 0;
  for (const uint32_t slot : waiting_) {
    Connection* c = slots_[slot].get();
    if (c == nullptr || c->closing) continue;
    parse(slot, *c, out, n, max);
    if (!c->closing && !c->dirty) arm_receive(slot, *c);
  }
  waiting_.clear();
  return n;
}

void UringTcp::parse(uint32_t slot, Connection& c, RxPacket* out, unsigned& n, unsigned max) {
  for (;;) {
    uint32_t len = 0;
    const TcpFrameStatus status = next_tcp_frame(c.in.get() + c.parsed, c.filled - c.parsed, len);
    if (status == TcpFrameStatus::bad_length) {
      ++counters_.tcp_bad_frames;
      begin_close(slot, c);
      return;
    }
    if (status == TcpFrameStatus::partial) return;  // the rest is on its way
    if (n == max) {
      mark_dirty(slot, c);  // delivered at the next burst
      return;
    }
    RxPacket& p = out[n++];
    p.data = c.in.get() + c.parsed + 2;
    p.len = len;
    p.truncated = false;
    p.listener = c.listener;
    p.peer = reinterpret_cast<const sockaddr*>(&c.peer);
    p.peer_len = c.peer_len;
    p.connection = id_of(slot, c.generation);
    c.parsed += 2 + len;
    ++counters_.tcp_frames;
    ++counters_.rx_packets;
    counters_.rx_bytes += len;
    mark_dirty(slot, c);  // recycled at the next burst
  }
}

void UringTcp::prepare(uint64_t now_ms) {
  for (Listener& l : listeners_) {
    if (l.armed || l.dead) continue;
    io_uring_sqe* sqe = sqes_.next_sqe();
    if (sqe == nullptr) break;
    io_uring_prep_multishot_accept(sqe, l.fd, nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC);
    io_uring_sqe_set_data64(sqe, tag(kAccept, l.index));
    l.armed = true;
    ++in_flight_;
  }
  if (now_ms < next_idle_check_ms_) return;
  next_idle_check_ms_ = now_ms + kIdleCheckEveryMs;
  for (uint32_t slot = 0; slot < slots_.size(); ++slot) {
    Connection* c = slots_[slot].get();
    if (c == nullptr || c->closing) continue;
    if (now_ms - c->last_read_ms >= settings_.idle_timeout_ms) {
      ++counters_.tcp_closed_idle;
      begin_close(slot, *c);
    }
  }
}

void UringTcp::accept(const Listener& l, int fd, uint64_t now_ms) {
  if (free_.empty()) {
    ++counters_.tcp_refused;
    close(fd);
    return;
  }
  if (admit_) {
    sockaddr_storage peer{};
    socklen_t peer_len = sizeof peer;
    if (getpeername(fd, reinterpret_cast<sockaddr*>(&peer), &peer_len) == 0 &&
        !admit_(reinterpret_cast<const sockaddr*>(&peer))) {
      ++counters_.tcp_denied;
      close(fd);
      return;
    }
  }
  const uint32_t slot = free_.back();
  free_.pop_back();
  const uint32_t in_bytes = std::max<uint32_t>(settings_.buffer_bytes, kMaxTcpFrame + 2);
  slots_[slot] = std::make_unique<Connection>(in_bytes, 2 * in_bytes);
  Connection& c = *slots_[slot];
  c.fd = fd;
  c.generation = ++generations_[slot];
  c.listener = l.index;
  c.peer_len = sizeof c.peer;
  if (getpeername(fd, reinterpret_cast<sockaddr*>(&c.peer), &c.peer_len) != 0) c.peer_len = 0;
  const int one = 1;
  setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  c.last_read_ms = now_ms;
  ++open_;
  ++counters_.tcp_accepted;
  counters_.tcp_open = open_;
  arm_receive(slot, c);
}

void UringTcp::on_completion(uint64_t kind, uint32_t id, const io_uring_cqe* cqe, RxPacket* out,
                             unsigned& n, unsigned max, uint64_t now_ms) {
  if (kind != kAccept || (cqe->flags & IORING_CQE_F_MORE) == 0) --in_flight_;
  if (kind == kAccept) {
    if (id >= listeners_.size()) return;
    Listener& l = listeners_[id];
    if ((cqe->flags & IORING_CQE_F_MORE) == 0) l.armed = false;  // re-armed by prepare()
    if (cqe->res >= 0) {
      accept(l, cqe->res, now_ms);
    } else if (cqe->res != -ECANCELED && cqe->res != -EAGAIN && cqe->res != -EMFILE &&
               cqe->res != -ENFILE && cqe->res != -ECONNABORTED && cqe->res != -EINTR) {
      LOG_ERROR("tcp: accept failed for good: %s", std::strerror(-cqe->res));
      l.dead = true;
    }
    return;
  }
  const uint32_t slot = (id & 0xFFFF) - 1;
  Connection* c = find(id);
  if (c == nullptr) return;  // cannot happen: a slot is freed only with nothing in flight
  if (kind == kReceive) {
    c->receiving = false;
    if (cqe->res <= 0 || c->closing) {
      begin_close(slot, *c);  // the peer closed (0), an error, or we are closing
      mark_dirty(slot, *c);   // freed at the next recycle once idle
      return;
    }
    c->filled += uint32_t(cqe->res);
    c->last_read_ms = now_ms;
    const unsigned before = n;
    parse(slot, *c, out, n, max);
    if (!c->closing && n == before && !c->dirty) arm_receive(slot, *c);  // a partial frame: read on
    return;
  }
  if (kind == kSend) {
    const uint32_t sent = cqe->res > 0 ? uint32_t(cqe->res) : 0;
    c->sending = 0;
    if (cqe->res < 0 || c->closing) {
      begin_close(slot, *c);
      mark_dirty(slot, *c);
      return;
    }
    ++counters_.tx_packets;
    counters_.tx_bytes += sent;
    std::memmove(c->out.get(), c->out.get() + sent, c->out_len - sent);
    c->out_len -= sent;
    if (c->out_len != 0 && !c->sends_listed) {
      c->sends_listed = true;
      sends_.push_back(slot);
    }
  }
}

bool UringTcp::queue_send(uint32_t connection, const uint8_t* data, uint32_t len) {
  Connection* c = find(connection);
  if (c == nullptr || c->closing || len == 0 || len > kMaxTcpFrame ||
      c->out_len + 2 + len > c->out_size) {
    ++counters_.tcp_replies_dropped;
    return false;
  }
  put_tcp_frame_length(c->out.get() + c->out_len, len);
  std::memcpy(c->out.get() + c->out_len + 2, data, len);
  c->out_len += 2 + len;
  if (!c->sends_listed) {
    c->sends_listed = true;
    sends_.push_back((connection & 0xFFFF) - 1);
  }
  return true;
}

void UringTcp::flush() {
  size_t kept = 0;
  for (size_t i = 0; i < sends_.size(); ++i) {
    const uint32_t slot = sends_[i];
    Connection* c = slots_[slot].get();
    if (c == nullptr) continue;
    if (c->closing || c->out_len == 0) {
      c->sends_listed = false;
      continue;
    }
    if (c->sending != 0) {
      sends_[kept++] = slot;  // after the one in flight
      continue;
    }
    io_uring_sqe* sqe = sqes_.next_sqe();
    if (sqe == nullptr) {
      sends_[kept++] = slot;
      continue;
    }
    io_uring_prep_send(sqe, c->fd, c->out.get(), c->out_len, MSG_NOSIGNAL);
    io_uring_sqe_set_data64(sqe, tag(kSend, id_of(slot, c->generation)));
    c->sending = c->out_len;
    ++in_flight_;
    c->sends_listed = false;
  }
  sends_.resize(kept);
}

void UringTcp::begin_close(uint32_t slot, Connection& c) {
  mark_dirty(slot, c);
  if (c.closing) return;
  c.closing = true;
  // Ends the receive (and a send) in flight; the socket is closed when
  // their completions are in and the burst is done (free_if_done).
  shutdown(c.fd, SHUT_RDWR);
}

void UringTcp::free_if_done(uint32_t slot, Connection& c) {
  if (!c.closing || c.receiving || c.sending != 0) return;  // a completion marks it again
  close(c.fd);
  slots_[slot].reset();
  free_.push_back(slot);
  --open_;
  counters_.tcp_open = open_;
}

void UringTcp::on_cancelled(uint64_t kind, const io_uring_cqe* cqe) {
  if (kind != kAccept || (cqe->flags & IORING_CQE_F_MORE) == 0) --in_flight_;
}

void UringTcp::close_all() {
  for (Listener& l : listeners_) {
    if (l.fd >= 0) close(l.fd);
    l.fd = -1;
  }
  for (auto& c : slots_) {
    if (c != nullptr && c->fd >= 0) close(c->fd);
    c.reset();
  }
  open_ = 0;
}

}  // namespace shingled
