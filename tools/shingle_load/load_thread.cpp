// The send/receive loop of one load thread (see load_thread.h).
//
// Per loop: for each socket, build the requests that may go now (closed
// loop: once a quarter of the window is free, until `inflight` are out;
// open loop: every request whose due time has come) back to back into one
// buffer and hand them to the kernel in one UDP GSO send (when the
// protocol's requests all have one size) or one sendmmsg;
// read whatever replies are queued with recvmmsg and verify each; once a
// millisecond, count requests older than the timeout as lost. A request is
// never retransmitted, and nothing is allocated once run() has started.
//
// With --tcp each socket is a TCP connection: the batch goes out as frames
// (a little-endian u16 length and the request) in one write, and replies are
// cut out of the byte stream; a connection the server closes ends its
// sending, and what it had in flight is lost by timeout.
//
// Idle waits: within --busy-poll of the last send or reply (open loop by
// default) the loop keeps polling. Otherwise one socket in closed loop
// blocks in recvmmsg itself (one system call, woken by the first reply;
// SO_RCVTIMEO bounds it so timeouts and the stop flag are seen), and
// anything else sleeps in ppoll until a reply comes or the next request is
// nearly due.
#include "shingle_load/load_thread.h"

#include <netinet/in.h>
#include <netinet/tcp.h>
#include <netinet/udp.h>
#include <poll.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cinttypes>
#include <cmath>
#include <cstring>

#include "io/tcp_frames.h"
#include "shingle_load/slot_table.h"
#include "common/little_endian.h"

namespace shingled::load {

uint64_t now_ns() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return uint64_t(ts.tv_sec) * 1000000000u + uint64_t(ts.tv_nsec);
}

namespace {

constexpr unsigned kMaxBatch = 64;
constexpr uint64_t kSweepEveryNs = 1000000;  // 1 ms
constexpr uint32_t kSweepChunk = 4096;       // slots looked at per sweep
constexpr int kSocketBuffer = 4 << 20;

// Slots a socket needs: closed loop, its window; open loop, every request
// that can be in flight within the timeout (and the sweep's lag), at its
// share of the rate.
uint32_t slot_capacity(const Options& o, unsigned total_sockets) {
  if (o.rate <= 0) return o.inflight;
  const double per_socket = o.rate / total_sockets;
  const double want = per_socket * (o.timeout_s + 0.2) * 1.25 + 2 * kMaxBatch;
  return uint32_t(std::min(want, double(1u << 22)));
}

void set_buffer(int fd, int opt_force, int opt, int bytes) {
  if (setsockopt(fd, SOL_SOCKET, opt_force, &bytes, sizeof bytes) != 0) {
    setsockopt(fd, SOL_SOCKET, opt, &bytes, sizeof bytes);  // capped by net.core.*mem_max
  }
}

}  // namespace

struct LoadThread::Connection {
  // `overhead`: bytes the encryption adds to a request and to a reply.
  Connection(const Options& o, Protocol& protocol, unsigned index, unsigned total,
             size_t request_overhead, size_t reply_overhead)
      : index(index),
        slots(slot_capacity(o, total)),
        session(protocol.session(index, total, slots.capacity())),
        request_size(session->max_request_size() + request_overhead),
        recv_size(session->max_reply_size() + reply_overhead + 1),
        send_mem(new uint8_t[kMaxBatch * request_size]),
        recv_mem(new uint8_t[kMaxBatch * recv_size]) {
    for (unsigned j = 0; j < kMaxBatch; ++j) {
      send_iov[j] = {send_mem.get() + j * request_size, request_size};
      send_msgs[j] = {};
      send_msgs[j].msg_hdr.msg_iov = &send_iov[j];
      send_msgs[j].msg_hdr.msg_iovlen = 1;
      recv_iov[j] = {recv_mem.get() + j * recv_size, recv_size};
      recv_msgs[j] = {};
      recv_msgs[j].msg_hdr.msg_iov = &recv_iov[j];
      recv_msgs[j].msg_hdr.msg_iovlen = 1;
    }
  }
  ~Connection() {
    if (fd >= 0) close(fd);
  }

  int fd = -1;
  unsigned index;       // among all sockets of the run
  SlotTable slots;
  std::unique_ptr<Session> session;
  size_t request_size;  // the largest request, as sent (encrypted or not)
  size_t recv_size;     // one byte more than the largest right reply
  bool gso = false;     // send a batch as one UDP GSO datagram train
  unsigned batch = 0;   // requests per send: --batch, or fewer to keep a GSO buffer under 64 KiB
  uint64_t quota = UINT64_MAX;  // requests still to send (check/mixed --count)
  bool exhausted = false;       // write/delete: every id of this socket sent
  // Open loop: request `seq` is due at start + (seq + phase) * interval.
  double interval_ns = 0;
  double phase = 0;
  uint64_t seq = 0;
  uint64_t due_ns = 0;
  // Requests built but not yet taken by the kernel, in send_mem (request j
  // at j * request_size, staged_len[j] bytes), with their slots.
  unsigned staged = 0;
  uint32_t staged_slot[kMaxBatch];
  size_t staged_len[kMaxBatch];
  std::unique_ptr<uint8_t[]> send_mem;
  iovec send_iov[kMaxBatch];
  mmsghdr send_msgs[kMaxBatch];
  std::unique_ptr<uint8_t[]> recv_mem;
  iovec recv_iov[kMaxBatch];
  mmsghdr recv_msgs[kMaxBatch];
  uint32_t sweep_cursor = 0;
  // --tcp: replies received but not yet whole, and whether the server hung up.
  std::vector<uint8_t> stream_in;
  size_t stream_filled = 0;
  std::vector<uint8_t> stream_out;
  bool closed = false;

  bool done_sending(bool stopping) const { return stopping || quota == 0 || exhausted || closed; }

  // Drops the first n staged requests (sent, or given up).
  void unstage(unsigned n) {
    if (n < staged) {
      std::memmove(send_mem.get(), send_mem.get() + n * request_size, (staged - n) * request_size);
      std::memmove(staged_slot, staged_slot + n, (staged - n) * sizeof staged_slot[0]);
      std::memmove(staged_len, staged_len + n, (staged - n) * sizeof staged_len[0]);
    }
    staged -= n;
  }
};

LoadThread::LoadThread(const Options& o, Protocol& protocol, unsigned index)
    : o_(o),
      protocol_(protocol),
      index_(index),
      open_loop_(o.rate > 0),
      encrypted_(!o.server_pk.empty()),
      timeout_ns_(uint64_t(o.timeout_s * 1e9)),
      busy_poll_ns_(uint64_t(o.busy_poll_us) * 1000) {}

LoadThread::~LoadThread() = default;

bool LoadThread::open(std::string& error) {
  if (encrypted_ && !crypto_.init(o_.server_pk.data())) {
    error = "--pubkey is not a usable X25519 public key (low-order point)";
    return false;
  }
  const unsigned total = o_.threads * o_.sockets;
  const bool by_count = o_.count != 0 && o_.timed();
  for (unsigned s = 0; s < o_.sockets; ++s) {
    const unsigned g = index_ * o_.sockets + s;
    auto c = std::make_unique<Connection>(o_, protocol_, g, total,
                                          encrypted_ ? crypto::kRequestHeaderSize : 0,
                                          encrypted_ ? crypto::kReplyHeaderSize : 0);
    c->fd = socket(o_.server.ss_family, (o_.tcp ? SOCK_STREAM : SOCK_DGRAM) | SOCK_CLOEXEC, 0);
    if (c->fd < 0) {
      error = std::string("socket: ") + strerror(errno);
      return false;
    }
    set_buffer(c->fd, SO_RCVBUFFORCE, SO_RCVBUF, kSocketBuffer);
    set_buffer(c->fd, SO_SNDBUFFORCE, SO_SNDBUF, kSocketBuffer);
    const timeval tv{0, 1000};  // a blocking recvmmsg returns after 1 ms without replies
    setsockopt(c->fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    if (connect(c->fd, reinterpret_cast<const sockaddr*>(&o_.server), o_.server_len) != 0) {
      error = "connect to " + o_.server_text + ": " + strerror(errno);
      return false;
    }
    // UDP GSO: the kernel cuts one buffer into request_size datagrams, so a
    // batch costs one trip down the stack. The server receives the same
    // datagrams either way.
    if (o_.tcp) {
      const int one = 1;
      setsockopt(c->fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
      c->stream_in.resize(64 * 1024);
      c->stream_out.reserve(kMaxBatch * (c->request_size + 2));
    }
    const int segment = int(c->request_size);
    c->gso = !o_.tcp && o_.gso && c->session->fixed_size() &&
             setsockopt(c->fd, SOL_UDP, UDP_SEGMENT, &segment, sizeof segment) == 0;
    c->batch = c->gso ? std::max<unsigned>(1, std::min<unsigned>(o_.batch, 65000 / c->request_size))
                      : o_.batch;
    if (by_count) c->quota = o_.count / total + (g < o_.count % total ? 1 : 0);
    if (open_loop_) {
      c->interval_ns = 1e9 * total / o_.rate;
      c->phase = double(g) / total;
    }
    conns_.push_back(std::move(c));
  }
  return true;
}

void LoadThread::publish() {
  progress.sent.store(stats_.sent, std::memory_order_relaxed);
  progress.answered.store(stats_.answered, std::memory_order_relaxed);
  progress.units.store(stats_.units, std::memory_order_relaxed);
  progress.lost.store(stats_.lost, std::memory_order_relaxed);
  progress.wrong.store(stats_.wrong, std::memory_order_relaxed);
}

void LoadThread::count_wrong(Wrong why, const std::string* example) {
  ++stats_.wrong;
  ++stats_.wrong_by[size_t(why)];
  if (example != nullptr && stats_.wrong_examples.size() < o_.show_wrong) {
    stats_.wrong_examples.push_back(*example);
  }
}

// Closed loop: true when a good part of a batch may go (a quarter of the
// window, at most a batch), so that a few replies do not each cost a send
// and a wake-up of the server; always true with nothing in flight.
bool LoadThread::window_open(const Connection& c) const {
  const uint32_t in_flight = c.slots.in_flight();
  if (in_flight == 0) return true;
  const uint32_t free_window = o_.inflight > in_flight ? o_.inflight - in_flight : 0;
  const uint32_t want = std::min<uint32_t>(c.batch, std::max<uint32_t>(1, o_.inflight / 4));
  return free_window >= want;
}

unsigned LoadThread::send_some(Connection& c, bool stopping) {
  if (stopping) {  // requests not yet sent are dropped, not counted
    for (unsigned j = 0; j < c.staged; ++j) {
      c.session->abandon(c.staged_slot[j], c.slots[c.staged_slot[j]], false);
      c.slots.release(c.staged_slot[j]);
    }
    c.staged = 0;
    return 0;
  }
  const uint64_t now = now_ns();
  const unsigned batch = c.batch;
  if (!open_loop_ && c.staged == 0 && !window_open(c)) return 0;
  while (c.staged < batch && c.quota > 0 && !c.exhausted && !c.slots.full()) {
    uint64_t t0 = now;
    if (open_loop_) {
      if (c.due_ns > now) break;
      t0 = c.due_ns;
    } else if (c.slots.in_flight() >= o_.inflight) {
      break;
    }
    const uint32_t i = c.slots.acquire(0, 0, t0);
    uint8_t* out = c.send_mem.get() + c.staged * c.request_size;
    size_t len = c.session->build(i, c.slots[i], out + (encrypted_ ? crypto::kRequestHeaderSize : 0));
    if (len == 0) {
      c.slots.release(i);
      c.exhausted = true;
      break;
    }
    if (encrypted_) len = crypto_.seal(out, len);
    c.staged_len[c.staged] = len;
    c.staged_slot[c.staged] = i;
    ++c.staged;
    if (c.quota != UINT64_MAX) --c.quota;
    if (open_loop_) {
      ++c.seq;
      c.due_ns = start_ns_ + uint64_t((double(c.seq) + c.phase) * c.interval_ns);
    }
  }
  if (c.staged == 0) return 0;

  const uint64_t sent_at = now_ns();
  int n;
  if (o_.tcp) {
    n = send_frames(c);
  } else if (c.gso) {
    iovec iov{c.send_mem.get(), c.staged * c.request_size};
    msghdr m{};
    m.msg_iov = &iov;
    m.msg_iovlen = 1;
    n = sendmsg(c.fd, &m, MSG_DONTWAIT) < 0 ? -1 : int(c.staged);
    if (n < 0 && (errno == EIO || errno == EINVAL || errno == EOPNOTSUPP || errno == EMSGSIZE)) {
      c.gso = false;  // the route cannot segment: one datagram per message from now on
      c.batch = o_.batch;
      const int off = 0;
      setsockopt(c.fd, SOL_UDP, UDP_SEGMENT, &off, sizeof off);
      return 0;
    }
  } else {
    for (unsigned j = 0; j < c.staged; ++j) c.send_iov[j].iov_len = c.staged_len[j];
    n = sendmmsg(c.fd, c.send_msgs, c.staged, MSG_DONTWAIT);
  }
  if (n <= 0) {
    if (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != ENOBUFS && errno != EINTR) {
      ++stats_.send_errors;
      // ECONNREFUSED reports an earlier datagram's ICMP error: this one was
      // not sent and goes again. Anything else: the first one is lost.
      if (errno != ECONNREFUSED) {
        c.session->abandon(c.staged_slot[0], c.slots[c.staged_slot[0]], true);
        c.slots.expire(c.staged_slot[0]);
        ++stats_.lost;
        c.unstage(1);
        return 1;
      }
    }
    return 0;
  }
  for (int j = 0; j < n; ++j) {
    Slot& s = c.slots[c.staged_slot[j]];
    s.state = Slot::in_flight;
    if (open_loop_) {
      if (sent_at > s.t0_ns && sent_at - s.t0_ns > stats_.max_send_lag_ns) {
        stats_.max_send_lag_ns = sent_at - s.t0_ns;
      }
    } else {
      s.t0_ns = sent_at;
    }
    ++stats_.sent_by_kind[s.kind % kMaxKinds];
  }
  stats_.sent += unsigned(n);
  last_activity_ns_ = sent_at;
  c.unstage(unsigned(n));  // the rest, if any, waits for room in the socket buffer
  return unsigned(n);
}

int LoadThread::send_frames(Connection& c) {
  c.stream_out.clear();
  for (unsigned j = 0; j < c.staged; ++j) {
    const size_t len = c.staged_len[j];
    uint8_t prefix[2];
    put_tcp_frame_length(prefix, uint32_t(len));
    c.stream_out.insert(c.stream_out.end(), prefix, prefix + 2);
    const uint8_t* r = c.send_mem.get() + j * c.request_size;
    c.stream_out.insert(c.stream_out.end(), r, r + len);
  }
  // A stream cannot drop half a frame: the whole batch goes, waiting for
  // room in the socket buffer if it must (SO_SNDTIMEO is not set: the
  // server reads as fast as it answers).
  size_t done = 0;
  while (done < c.stream_out.size()) {
    const ssize_t w = send(c.fd, c.stream_out.data() + done, c.stream_out.size() - done, MSG_NOSIGNAL);
    if (w > 0) {
      done += size_t(w);
    } else if (w < 0 && errno == EINTR) {
      continue;
    } else {
      c.closed = true;  // the server hung up: nothing more goes on this one
      errno = EPIPE;
      return done == 0 ? -1 : 0;
    }
  }
  return int(c.staged);
}

unsigned LoadThread::receive_frames(Connection& c, bool block) {
  if (c.closed && c.stream_filled == 0) return 0;
  const ssize_t r = recv(c.fd, c.stream_in.data() + c.stream_filled,
                         c.stream_in.size() - c.stream_filled, block ? 0 : MSG_DONTWAIT);
  if (r == 0) c.closed = true;
  if (r <= 0) return 0;
  c.stream_filled += size_t(r);
  const uint64_t now = now_ns();
  unsigned frames = 0;
  size_t at = 0;
  for (;;) {
    uint32_t len = 0;
    const TcpFrameStatus status = next_tcp_frame(c.stream_in.data() + at, c.stream_filled - at, len);
    if (status == TcpFrameStatus::partial) break;
    if (status == TcpFrameStatus::bad_length) {  // no reply of ours has such a length: the stream is lost
      const std::string why = "a reply frame of length " + std::to_string(len);
      count_wrong(Wrong::size, stats_.wrong_examples.size() < o_.show_wrong ? &why : nullptr);
      c.closed = true;
      at = c.stream_filled;
      break;
    }
    handle_reply(c, c.stream_in.data() + at + 2, len, len >= c.recv_size, now);
    at += 2 + len;
    ++frames;
  }
  std::memmove(c.stream_in.data(), c.stream_in.data() + at, c.stream_filled - at);
  c.stream_filled -= at;
  if (frames != 0) {
    stats_.last_reply_ns = now;
    last_activity_ns_ = now;
  }
  return frames;
}

unsigned LoadThread::receive(Connection& c, bool block) {
  if (o_.tcp) return receive_frames(c, block);
  const int r = recvmmsg(c.fd, c.recv_msgs, o_.batch, block ? MSG_WAITFORONE : MSG_DONTWAIT,
                         nullptr);
  if (r <= 0) return 0;  // EAGAIN, EINTR, or an ICMP error (ECONNREFUSED): nothing to read
  const uint64_t now = now_ns();
  for (int j = 0; j < r; ++j) {
    const mmsghdr& m = c.recv_msgs[j];
    handle_reply(c, static_cast<uint8_t*>(c.recv_iov[j].iov_base), m.msg_len,
                 (m.msg_hdr.msg_flags & MSG_TRUNC) != 0, now);
  }
  stats_.last_reply_ns = now;
  last_activity_ns_ = now;
  return unsigned(r);
}

void LoadThread::handle_reply(Connection& c, uint8_t* data, size_t len, bool truncated,
                              uint64_t now) {
  const bool explain = stats_.wrong_examples.size() < o_.show_wrong;
  if (truncated) len = c.recv_size + 1;  // larger than the buffer: the wrong size, whatever it was
  uint8_t* body = data;
  if (encrypted_) {
    if (truncated || !crypto_.open(data, len)) {
      const std::string why = "a reply of " + std::to_string(len) +
                              " bytes does not open with this thread's key (bad MAC or size)";
      count_wrong(Wrong::undecryptable, explain ? &why : nullptr);
      return;
    }
    body = data + crypto::kReplyHeaderSize;
    len -= crypto::kReplyHeaderSize;
  }
  if (len < 12) {
    const std::string why = "a reply of " + std::to_string(len) + " bytes has no tag";
    count_wrong(Wrong::size, explain ? &why : nullptr);
    return;
  }
  const uint32_t tag = load_le32(body + 8);
  Slot* s = c.slots.find(tag);
  if (s == nullptr) {
    if (c.slots.expired(tag)) {
      ++stats_.late;
      return;
    }
    std::string why;
    if (explain) {
      why = "a reply with tag " + std::to_string(tag) + " matches no request in flight [reply: " +
            c.session->describe_reply(body, len) + "]";
    }
    count_wrong(Wrong::tag, explain ? &why : nullptr);
    return;
  }
  const uint64_t latency = now > s->t0_ns ? now - s->t0_ns : 0;
  if (latency > timeout_ns_) {  // too late: lost, as if the sweep had seen it first
    ++stats_.lost;
    ++stats_.late;
    const uint32_t i = uint32_t(s - &c.slots[0]);
    c.session->abandon(i, *s, true);
    c.slots.expire(i);
    return;
  }
  const uint32_t i = uint32_t(s - &c.slots[0]);
  std::string why;
  const Answer a = c.session->verify(i, *s, body, truncated ? 0 : len, explain ? &why : nullptr);
  ++stats_.answered;
  stats_.latency.record(latency);
  if (a.why != Wrong::none) {
    count_wrong(a.why, explain ? &why : nullptr);
  } else {
    for (unsigned k = 0; k < kMaxOutcomes; ++k) stats_.outcomes[k] += a.outcomes[k];
    stats_.units += a.units;
  }
  c.slots.release(i);
}

void LoadThread::sweep(Connection& c, uint64_t now) {
  if (c.slots.in_flight() == 0) return;
  const uint32_t cap = c.slots.capacity();
  const uint32_t chunk = std::min(cap, kSweepChunk);
  for (uint32_t k = 0; k < chunk; ++k) {
    const uint32_t i = c.sweep_cursor++ & (cap - 1);
    const Slot& s = c.slots[i];
    if (s.state == Slot::in_flight && now > s.t0_ns && now - s.t0_ns > timeout_ns_) {
      ++stats_.lost;
      c.session->abandon(i, s, true);
      c.slots.expire(i);
    }
  }
}

void LoadThread::idle(uint64_t now, bool stopping) {
  uint64_t wait_ns = kSweepEveryNs;
  if (open_loop_) {
    for (const auto& c : conns_) {
      if (c->done_sending(stopping) || c->slots.full()) continue;
      wait_ns = c->due_ns > now ? std::min(wait_ns, c->due_ns - now) : 0;
    }
  }
  // Busy polling: within the window after the last send or reply, and when
  // the next request is due within it, keep polling instead of sleeping; a
  // sleeping thread on a VM can take milliseconds to wake, which would show
  // as the server's latency. Otherwise sleep, waking a window early.
  if (polling(now) || wait_ns <= busy_poll_ns_ || wait_ns < 2000) return;
  if (open_loop_) wait_ns -= busy_poll_ns_;
  pollfd fds[1024];
  const size_t n = std::min(conns_.size(), sizeof fds / sizeof fds[0]);
  for (size_t j = 0; j < n; ++j) fds[j] = {conns_[j]->fd, POLLIN, 0};
  const timespec ts{time_t(wait_ns / 1000000000u), long(wait_ns % 1000000000u)};
  ppoll(fds, nfds_t(n), &ts, nullptr);
}

void LoadThread::run(uint64_t start_ns, uint64_t end_ns, const std::atomic<bool>& stop) {
  start_ns_ = start_ns;
  if (open_loop_) prctl(PR_SET_TIMERSLACK, 1UL, 0, 0, 0);  // wake at the due time, not 50 us later
  for (auto& c : conns_) {
    c->due_ns = start_ns + uint64_t(c->phase * c->interval_ns);
  }
  uint64_t next_sweep = start_ns + kSweepEveryNs;
  const bool single_closed = conns_.size() == 1 && !open_loop_;
  for (;;) {
    uint64_t now = now_ns();
    const bool stopping = stop.load(std::memory_order_relaxed) || now >= end_ns;
    unsigned work = 0;
    for (auto& c : conns_) work += send_some(*c, stopping);
    if (single_closed) {
      // Block for replies when nothing more may be sent now: the window is
      // full, or sending is over and replies are awaited.
      Connection& c = *conns_[0];
      const bool wait = c.staged == 0 && (c.done_sending(stopping) || !window_open(c)) &&
                        !polling(now);
      work += receive(c, wait);
    } else {
      for (auto& c : conns_) work += receive(*c, false);
    }
    now = now_ns();
    if (now >= next_sweep) {
      for (auto& c : conns_) sweep(*c, now);
      next_sweep = now + kSweepEveryNs;
      publish();
    }
    bool done = true;
    for (const auto& c : conns_) {
      if (!c->done_sending(stopping) || c->staged != 0 || c->slots.in_flight() != 0) {
        done = false;
        break;
      }
    }
    if (done) break;
    if (work == 0) idle(now, stopping);
  }
  publish();
}

}  // namespace shingled::load
