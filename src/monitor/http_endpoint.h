// The exporter's HTTP endpoint: GET and HEAD of a few fixed paths, served by
// one thread with poll(), so that no client, however slow or hostile, can
// hold the scrape Prometheus is waiting for.
//
//   * The request head must arrive within kHeadTimeout of its first byte (or
//     of the connection) and fit in kMaxHeadBytes; else 408/431 and close.
//   * Bodies are never read: a request that announces one (POST, a
//     Content-Length, chunked) gets 405/413 and the connection is closed.
//   * A response the client does not take within kSendTimeout is dropped.
//   * At most kMaxConnections at once; when full, the connection that has
//     waited longest without completing a request is closed to make room.
//   * Idle keep-alive connections are closed after kIdleTimeout.
// Memory is bounded by kMaxConnections × (kMaxHeadBytes + a response head);
// response bodies are shared, not copied per client.
//
// The listening socket is bound without SO_REUSEPORT: a second exporter on
// a taken port is refused (EADDRINUSE) instead of sharing the port.
//
// Threads: run() serves on the calling thread; stop() may be called from
// any thread (and before run()); handler() runs on the serving thread.
#pragma once

#include <chrono>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace gpuleak::monitor {

class HttpEndpoint {
 public:
  struct Response {
    int status = 200;
    std::string content_type;
    std::shared_ptr<const std::string> body;
  };
  // The response for a path (query string removed), or nullopt for 404.
  using Handler = std::function<std::optional<Response>(const std::string& path)>;

  static constexpr std::size_t kMaxHeadBytes = 8 << 10;
  static constexpr std::size_t kMaxConnections = 512;
  static constexpr std::chrono::milliseconds kHeadTimeout{5000};
  static constexpr std::chrono::milliseconds kSendTimeout{10000};
  static constexpr std::chrono::milliseconds kIdleTimeout{75000};

  explicit HttpEndpoint(Handler handler);
  ~HttpEndpoint();
  HttpEndpoint(const HttpEndpoint&) = delete;
  HttpEndpoint& operator=(const HttpEndpoint&) = delete;

  // Binds and listens; returns the port (the real one for port 0). Throws
  // std::runtime_error with a sentence for people when it cannot.
  int listen(const std::string& host, int port);
  // Serves until stop(). Requires listen().
  void run();
  void stop();

 private:
  struct Connection;
  void accept_all();
  void on_readable(Connection& c);
  void on_writable(Connection& c);
  void handle_request(Connection& c, std::size_t head_end);
  void respond(Connection& c, int status, const std::string& content_type,
               std::shared_ptr<const std::string> body, bool head_only, bool close_after,
               const std::string& extra_headers = "");
  void close_connection(std::size_t index);

  Handler handler_;
  int listen_fd_ = -1;
  int wake_fds_[2] = {-1, -1};
  std::vector<std::unique_ptr<Connection>> connections_;
};

}  // namespace gpuleak::monitor
