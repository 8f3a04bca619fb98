#include "monitor/http_endpoint.h"

#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <stdexcept>
#include <string_view>
#include <vector>

namespace gpuleak::monitor {

namespace {

using Clock = std::chrono::steady_clock;

const char* reason_phrase(int status) {
  switch (status) {
    case 200:
      return "OK";
    case 400:
      return "Bad Request";
    case 404:
      return "Not Found";
    case 405:
      return "Method Not Allowed";
    case 408:
      return "Request Timeout";
    case 413:
      return "Content Too Large";
    case 431:
      return "Request Header Fields Too Large";
    case 505:
      return "HTTP Version Not Supported";
    default:
      return "Error";
  }
}

char lower(char c) { return (c >= 'A' && c <= 'Z') ? static_cast<char>(c - 'A' + 'a') : c; }

bool equals_ignoring_case(std::string_view a, std::string_view b) {
  if (a.size() != b.size()) return false;
  for (std::size_t i = 0; i < a.size(); ++i) {
    if (lower(a[i]) != lower(b[i])) return false;
  }
  return true;
}

std::string_view trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t' || s.back() == '\r'))
    s.remove_suffix(1);
  return s;
}

}  // namespace

struct HttpEndpoint::Connection {
  int fd = -1;
  std::string in;        // bytes of the request being read
  std::string out_head;  // status line and headers being sent
  std::shared_ptr<const std::string> out_body;
  std::size_t sent = 0;  // of out_head + out_body
  bool writing = false;
  bool close_after = false;
  bool peer_closed = false;         // the client shut its side: answer, then close
  Clock::time_point waiting_since;  // when it began to wait for a request (eviction order)
  Clock::time_point deadline;
};

HttpEndpoint::HttpEndpoint(Handler handler) : handler_(std::move(handler)) {
  if (::pipe2(wake_fds_, O_CLOEXEC | O_NONBLOCK) != 0)
    throw std::runtime_error(std::string("cannot create a pipe: ") + std::strerror(errno));
}

HttpEndpoint::~HttpEndpoint() {
  for (auto& c : connections_) ::close(c->fd);
  if (listen_fd_ >= 0) ::close(listen_fd_);
  ::close(wake_fds_[0]);
  ::close(wake_fds_[1]);
}

int HttpEndpoint::listen(const std::string& host, int port) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_PASSIVE | AI_NUMERICSERV;
  addrinfo* found = nullptr;
  std::string service = std::to_string(port);
  int resolved =
      ::getaddrinfo(host.empty() ? nullptr : host.c_str(), service.c_str(), &hints, &found);
  if (resolved != 0) {
    throw std::runtime_error("cannot listen on " + host + ":" + service + " (" +
                             ::gai_strerror(resolved) + "): is the address one of this machine's?");
  }
  int error = 0;
  for (addrinfo* a = found; a && listen_fd_ < 0; a = a->ai_next) {
    int fd = ::socket(a->ai_family, a->ai_socktype | SOCK_NONBLOCK | SOCK_CLOEXEC, a->ai_protocol);
    if (fd < 0) {
      error = errno;
      continue;
    }
    // SO_REUSEADDR only lets a restarted exporter bind over connections in
    // TIME_WAIT; on Linux it never lets two sockets listen on one port (that
    // is SO_REUSEPORT, deliberately not set).
    int yes = 1;
    ::setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &yes, sizeof yes);
    if (::bind(fd, a->ai_addr, a->ai_addrlen) != 0 || ::listen(fd, 128) != 0) {
      error = errno;
      ::close(fd);
      continue;
    }
    listen_fd_ = fd;
  }
  ::freeaddrinfo(found);
  if (listen_fd_ < 0) {
    throw std::runtime_error(
        "cannot listen on " + host + ":" + service + " (" + std::strerror(error) +
        (error == EADDRINUSE ? "): another program (another exporter?) listens there"
                             : "): is the address one of this machine's?"));
  }
  sockaddr_storage bound{};
  socklen_t length = sizeof bound;
  ::getsockname(listen_fd_, reinterpret_cast<sockaddr*>(&bound), &length);
  if (bound.ss_family == AF_INET6) return ntohs(reinterpret_cast<sockaddr_in6*>(&bound)->sin6_port);
  return ntohs(reinterpret_cast<sockaddr_in*>(&bound)->sin_port);
}

void HttpEndpoint::stop() {
  char byte = 1;
  [[maybe_unused]] ssize_t n = ::write(wake_fds_[1], &byte, 1);
}

void HttpEndpoint::close_connection(std::size_t index) {
  ::close(connections_[index]->fd);
  connections_[index] = std::move(connections_.back());
  connections_.pop_back();
}

void HttpEndpoint::accept_all() {
  for (;;) {
    int fd = ::accept4(listen_fd_, nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC);
    if (fd < 0) return;  // EAGAIN, or out of descriptors: try again next round
    if (connections_.size() >= kMaxConnections) {
      // Make room: close the one that has waited longest for a whole request.
      std::size_t oldest = connections_.size();
      for (std::size_t i = 0; i < connections_.size(); ++i) {
        if (connections_[i]->writing) continue;
        if (oldest == connections_.size() ||
            connections_[i]->waiting_since < connections_[oldest]->waiting_since)
          oldest = i;
      }
      if (oldest == connections_.size()) {
        ::close(fd);
        continue;
      }
      close_connection(oldest);
    }
    auto c = std::make_unique<Connection>();
    c->fd = fd;
    c->waiting_since = Clock::now();
    c->deadline = c->waiting_since + kHeadTimeout;
    connections_.push_back(std::move(c));
  }
}

void HttpEndpoint::respond(Connection& c, int status, const std::string& content_type,
                           std::shared_ptr<const std::string> body, bool head_only,
                           bool close_after, const std::string& extra_headers) {
  std::size_t length = body ? body->size() : 0;
  c.out_head = "HTTP/1.1 " + std::to_string(status) + " " + reason_phrase(status) + "\r\n";
  if (!content_type.empty()) c.out_head += "Content-Type: " + content_type + "\r\n";
  c.out_head += "Content-Length: " + std::to_string(length) + "\r\n";
  c.out_head += extra_headers;
  c.out_head += close_after ? "Connection: close\r\n\r\n" : "\r\n";
  c.out_body = head_only ? nullptr : std::move(body);
  c.sent = 0;
  c.writing = true;
  c.close_after = close_after || c.peer_closed;
  c.deadline = Clock::now() + kSendTimeout;
}

void HttpEndpoint::handle_request(Connection& c, std::size_t head_end) {
  std::string_view head(c.in.data(), head_end);
  std::size_t line_end = head.find("\r\n");
  std::string_view request_line = head.substr(0, line_end);
  std::size_t first_space = request_line.find(' ');
  std::size_t second_space =
      first_space == std::string_view::npos ? first_space : request_line.find(' ', first_space + 1);
  if (second_space == std::string_view::npos) {
    respond(c, 400, "text/plain; charset=utf-8",
            std::make_shared<const std::string>("bad request\n"), false, true);
    return;
  }
  std::string method(request_line.substr(0, first_space));
  std::string path(request_line.substr(first_space + 1, second_space - first_space - 1));
  std::string_view version = request_line.substr(second_space + 1);
  bool http10 = version == "HTTP/1.0";
  if (!http10 && version != "HTTP/1.1") {
    respond(c, 505, "", nullptr, false, true);
    return;
  }
  bool keep_alive = !http10, has_body = false;
  std::string_view headers = line_end == std::string_view::npos ? "" : head.substr(line_end + 2);
  while (!headers.empty()) {
    std::size_t end = headers.find("\r\n");
    std::string_view line = headers.substr(0, end);
    headers = end == std::string_view::npos ? "" : headers.substr(end + 2);
    std::size_t colon = line.find(':');
    if (colon == std::string_view::npos) continue;
    std::string_view name = trim(line.substr(0, colon)), value = trim(line.substr(colon + 1));
    if (equals_ignoring_case(name, "content-length")) {
      has_body = has_body || value != "0";
    } else if (equals_ignoring_case(name, "transfer-encoding")) {
      has_body = true;
    } else if (equals_ignoring_case(name, "connection")) {
      if (equals_ignoring_case(value, "close")) keep_alive = false;
      if (equals_ignoring_case(value, "keep-alive")) keep_alive = true;
    }
  }
  // The views into c.in end here.
  c.in.erase(0, head_end + 4);
  bool head_only = method == "HEAD";
  if (method != "GET" && !head_only) {
    // The body that may follow is never read: the connection ends here.
    respond(c, 405, "text/plain; charset=utf-8",
            std::make_shared<const std::string>("only GET and HEAD\n"), false, true,
            "Allow: GET, HEAD\r\n");
    return;
  }
  if (has_body) {
    respond(c, 413, "text/plain; charset=utf-8",
            std::make_shared<const std::string>("requests have no body here\n"), false, true);
    return;
  }
  if (std::size_t query = path.find('?'); query != std::string::npos) path.resize(query);
  std::optional<Response> response = handler_(path);
  if (!response) {
    respond(c, 404, "text/plain; charset=utf-8", std::make_shared<const std::string>("not found\n"),
            head_only, !keep_alive);
    return;
  }
  respond(c, response->status, response->content_type, std::move(response->body), head_only,
          !keep_alive);
}

void HttpEndpoint::on_readable(Connection& c) {
  char buffer[4096];
  for (;;) {
    ssize_t n = ::recv(c.fd, buffer, sizeof buffer, 0);
    if (n == 0) {
      c.peer_closed = true;  // a request already sent is still answered
      break;
    }
    if (n < 0) {
      if (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR)
        c.deadline = Clock::time_point::min();
      break;
    }
    if (c.in.empty()) c.deadline = std::min(c.deadline, Clock::now() + kHeadTimeout);
    c.in.append(buffer, static_cast<std::size_t>(n));
    if (c.in.size() > kMaxHeadBytes + 4) break;
  }
  std::size_t head_end = c.in.find("\r\n\r\n");
  if (head_end != std::string::npos && head_end <= kMaxHeadBytes) {
    handle_request(c, head_end);
  } else if (c.in.size() > kMaxHeadBytes) {
    respond(c, 431, "", nullptr, false, true);
  } else if (c.peer_closed) {
    c.deadline = Clock::time_point::min();
  }
}

void HttpEndpoint::on_writable(Connection& c) {
  while (c.writing) {
    std::string_view part;
    if (c.sent < c.out_head.size()) {
      part = std::string_view(c.out_head).substr(c.sent);
    } else if (c.out_body && c.sent < c.out_head.size() + c.out_body->size()) {
      part = std::string_view(*c.out_body).substr(c.sent - c.out_head.size());
    } else {
      c.writing = false;
      c.out_body.reset();
      if (c.close_after) {
        c.deadline = Clock::time_point::min();
        return;
      }
      c.waiting_since = Clock::now();
      c.deadline = c.waiting_since + kIdleTimeout;
      // A request already read behind this one (pipelining).
      std::size_t head_end = c.in.find("\r\n\r\n");
      if (head_end != std::string::npos && head_end <= kMaxHeadBytes) handle_request(c, head_end);
      return;
    }
    ssize_t n = ::send(c.fd, part.data(), part.size(), MSG_NOSIGNAL);
    if (n < 0) {
      if (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR)
        c.deadline = Clock::time_point::min();
      return;
    }
    c.sent += static_cast<std::size_t>(n);
  }
}

void HttpEndpoint::run() {
  std::vector<pollfd> fds;
  for (;;) {
    fds.clear();
    fds.push_back({wake_fds_[0], POLLIN, 0});
    fds.push_back({listen_fd_, POLLIN, 0});
    auto now = Clock::now();
    auto next_deadline = now + std::chrono::seconds(60);
    for (const auto& c : connections_) {
      fds.push_back({c->fd, static_cast<short>(c->writing ? POLLOUT : POLLIN), 0});
      next_deadline = std::min(next_deadline, c->deadline);
    }
    auto wait = std::chrono::duration_cast<std::chrono::milliseconds>(next_deadline - now).count();
    int ready =
        ::poll(fds.data(), fds.size(), static_cast<int>(std::clamp<long long>(wait + 1, 0, 60000)));
    if (ready < 0 && errno != EINTR) return;
    if (fds[0].revents) return;  // stop()
    std::size_t count = connections_.size();
    for (std::size_t i = 0; i < count; ++i) {
      short events = fds[i + 2].revents;
      Connection& c = *connections_[i];
      if (events & (POLLERR | POLLNVAL)) {
        c.deadline = Clock::time_point::min();
      } else if (c.writing && (events & (POLLOUT | POLLHUP))) {
        on_writable(c);
      } else if (!c.writing && (events & (POLLIN | POLLHUP))) {
        on_readable(c);
        if (c.writing) on_writable(c);
      }
    }
    // Deadlines: a head that took too long gets 408 if it can still be told.
    now = Clock::now();
    for (std::size_t i = connections_.size(); i-- > 0;) {
      Connection& c = *connections_[i];
      if (c.deadline > now) continue;
      if (c.deadline != Clock::time_point::min() && !c.writing && !c.in.empty()) {
        respond(c, 408, "", nullptr, false, true);
        on_writable(c);
        if (c.writing) c.deadline = now + std::chrono::milliseconds(100);  // one last try
        if (c.deadline > now) continue;
      }
      close_connection(i);
    }
    if (fds[1].revents & POLLIN) accept_all();
  }
}

}  // namespace gpuleak::monitor
