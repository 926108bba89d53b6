// native/troupe-accept.c under the sanitizers: its thread accepts on a real TCP socket, waits for
// each connection's request head and hands it to onArrival (run here as Node's event loop would
// run the threadsafe function's calls: fake_run_queued), with the head's bytes still unread; a
// connection that says nothing, or not all, in time is closed, as is the oldest past capacity, an
// evicted one and every one still waiting at stop; and no descriptor or memory is left behind.
// Every wait for the thread is a condition polled under a generous bound, never a bare sleep.
// Built (with -pthread) and run by test/unit/native-addons.test.ts.
#include "../../native/troupe-accept.c"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <signal.h>

#include "napi-fake.h"

// The longest a condition is waited for: generous, for a busy machine under the sanitizers.
#define BOUND_MS 10000
// Long enough that no connection of the acceptors that use it times out during the test.
#define NEVER_MS 60000
#define TIMEOUT_MS 300

static void pause_ms(int ms) {
  struct timespec pause = {0, (long)ms * 1000000L};
  nanosleep(&pause, NULL);
}

// Polls `cond` (running what the addon's thread queued for the JS thread first, if `run`) until
// it holds or BOUND_MS pass; its value is whether it held.
#define WAIT_UNTIL(run, cond)                               \
  ({                                                        \
    int64_t until_ = NowMs() + BOUND_MS;                    \
    bool met_;                                              \
    for (;;) {                                              \
      if (run) fake_run_queued();                           \
      if ((met_ = (cond)) || NowMs() >= until_) break;      \
      pause_ms(2);                                          \
    }                                                       \
    met_;                                                   \
  })
#define EVENTUALLY(cond) WAIT_UNTIL(true, cond)

// What onArrival was called with, in order.
typedef struct {
  int fd;
  bool whole, taken;
  size_t length;
  char line[LINE_BYTES + 1];
} Delivered;
#define MAX_DELIVERED 64
static Delivered delivered[MAX_DELIVERED];
static int delivered_count;
static bool throw_next;

static napi_value on_arrival(napi_env env, napi_callback_info info) {
  size_t argc = 3;
  napi_value argv[3];
  napi_get_cb_info(env, info, &argc, argv, NULL, NULL);
  napi_valuetype types[3] = {napi_undefined, napi_undefined, napi_undefined};
  for (size_t i = 0; i < 3 && i < argc; i++) napi_typeof(env, argv[i], &types[i]);
  CHECK(argc == 3 && types[0] == napi_number && types[1] == napi_string && types[2] == napi_boolean,
        "onArrival(fd: number, line: string, whole: boolean), got %zu arguments", argc);
  size_t length = 0;
  const char* line = fake_as_string(argv[1], &length);
  int fd = fake_as_int(argv[0]);
  if (delivered_count == MAX_DELIVERED || !line || length > LINE_BYTES) {
    CHECK(false, "an arrival past what the test expects (fd %d, %zu bytes)", fd, length);
    close(fd);
    return NULL;
  }
  Delivered* d = &delivered[delivered_count++];
  d->fd = fd;
  d->whole = fake_as_bool(argv[2]);
  d->length = length;
  memcpy(d->line, line, length);
  d->line[length] = '\0';
  if (throw_next) {
    throw_next = false;
    napi_throw_error(env, NULL, "onArrival threw");
  }
  return NULL;
}

static int port_of(int fd, bool peer) {
  struct sockaddr_in address;
  socklen_t length = sizeof address;
  int got = peer ? getpeername(fd, (struct sockaddr*)&address, &length) : getsockname(fd, (struct sockaddr*)&address, &length);
  return got == 0 ? ntohs(address.sin_port) : -1;
}

// The arrival (not taken yet) of the connection whose client end is `client`, or NULL.
static Delivered* arrival_of(int client) {
  int port = port_of(client, false);
  if (port < 0) return NULL;
  for (int i = 0; i < delivered_count; i++)
    if (!delivered[i].taken && port_of(delivered[i].fd, true) == port) return &delivered[i];
  return NULL;
}

// Waits for the arrival of `client`'s connection and takes it (the test then closes its fd).
static Delivered* take(int client) {
  Delivered* d = NULL;
  EVENTUALLY((d = arrival_of(client)) != NULL);
  if (d) d->taken = true;
  return d;
}

static int listener(int* port) {
  int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  struct sockaddr_in address = {.sin_family = AF_INET, .sin_port = 0, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
  CHECK(fd >= 0 && bind(fd, (struct sockaddr*)&address, sizeof address) == 0 && listen(fd, 64) == 0, "listen: %s", strerror(errno));
  *port = port_of(fd, false);
  return fd;
}

static int connect_to(int port) {
  int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  struct sockaddr_in address = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port), .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
  if (fd < 0 || connect(fd, (struct sockaddr*)&address, sizeof address) != 0) {
    int error = errno;
    if (fd >= 0) close(fd);
    errno = error;
    return -1;
  }
  int one = 1;
  setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  return fd;
}

static void send_all(int fd, const char* bytes, size_t length) {
  while (length > 0) {
    ssize_t sent = send(fd, bytes, length, MSG_NOSIGNAL);
    if (sent < 0 && errno == EINTR) continue;
    if (sent <= 0) {
      CHECK(false, "send: %s", strerror(errno));
      return;
    }
    bytes += sent;
    length -= (size_t)sent;
  }
}

// Whether the other end of `client` closed it (an EOF, or a reset where it had unread bytes),
// waiting up to `wait_ms` for that.
static bool closed_by_server(int client, int wait_ms) {
  struct pollfd p = {.fd = client, .events = POLLIN};
  int64_t until = NowMs() + wait_ms;
  for (;;) {
    int64_t left = until - NowMs();
    int ready = poll(&p, 1, left > 0 ? (int)left : 0);
    if (ready < 0 && errno == EINTR) continue;
    if (ready <= 0) return false;
    char byte;
    ssize_t got = recv(client, &byte, 1, MSG_DONTWAIT);
    if (got == 0 || (got < 0 && errno == ECONNRESET)) return true;
    if (got < 0 && (errno == EAGAIN || errno == EINTR)) continue;
    return false;  // bytes from the server: not closed (no case here expects them)
  }
}

// Reads what `fd` (non-blocking, as the addon accepted it) has, up to `size` bytes, waiting for
// `want` of them.
static size_t read_some(int fd, char* buffer, size_t size, size_t want) {
  size_t have = 0;
  int64_t until = NowMs() + BOUND_MS;
  while (have < want && have < size && NowMs() < until) {
    ssize_t got = recv(fd, buffer + have, size - have, MSG_DONTWAIT);
    if (got > 0) have += (size_t)got;
    else if (got == 0) break;
    else if (errno == EAGAIN || errno == EINTR) pause_ms(2);
    else break;
  }
  return have;
}

static napi_value on_arrival_fn;

// An acceptor serving a listening socket of the test's, which the test then closes (the addon
// keeps its duplicate).
static napi_value start(int* port, int capacity, int timeout_ms) {
  int fd = listener(port);
  napi_value args[4] = {fake_int(fd), fake_int(capacity), fake_int(timeout_ms), on_arrival_fn};
  napi_value handle = fake_call("start", 4, args);
  CHECK(handle != NULL, "start: %s", fake_thrown() ? fake_thrown() : "(nothing)");
  close(fd);
  return handle;
}

static int waiting(napi_value handle) { return fake_as_int(fake_call("waiting", 1, &handle)); }
static napi_value evict(napi_value handle) { return fake_call("evict", 1, &handle); }
static napi_value stop(napi_value handle) { return fake_call("stop", 1, &handle); }

// Stops an acceptor with nothing queued, and runs its teardown as Node would after the turn:
// the threadsafe function is finalized (Free), then the handle collected.
static void stopped(napi_value acceptor) {
  int live = fake_live_tsfns();
  napi_value result = stop(acceptor);
  CHECK(result == NULL && fake_thrown() == NULL, "stop: %s", fake_thrown() ? fake_thrown() : "returned a value");
  CHECK(fake_run_queued() == 0, "an arrival no case expected ran at stop()");
  CHECK(fake_live_tsfns() == live - 1, "the threadsafe function was not finalized after stop()");
  fake_finalize(acceptor);
}

static void a_whole_head_is_delivered_with_its_bytes_unread(napi_value acceptor, int port) {
  const char* head = "GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n";
  int client = connect_to(port);
  CHECK(client >= 0, "connect: %s", strerror(errno));
  send_all(client, head, strlen(head));
  Delivered* d = take(client);
  CHECK(d != NULL, "the whole head was not delivered");
  if (!d) {
    close(client);
    return;
  }
  CHECK(d->whole, "a whole head is delivered as whole");
  CHECK(d->length == strlen(head) && memcmp(d->line, head, d->length) == 0, "the line is what was sent, got '%s'", d->line);
  CHECK((fcntl(d->fd, F_GETFD) & FD_CLOEXEC) != 0, "a delivered descriptor is close-on-exec");
  char buffer[256];
  size_t got = read_some(d->fd, buffer, sizeof buffer, strlen(head));
  CHECK(got == strlen(head) && memcmp(buffer, head, got) == 0, "the head is still there to read (read %zu bytes)", got);
  // The descriptor is the connection itself: what is written to it reaches the client.
  send_all(d->fd, "HTTP/1.1 204 No Content\r\n\r\n", 27);
  got = read_some(client, buffer, sizeof buffer, 27);
  CHECK(got == 27 && memcmp(buffer, "HTTP/1.1 204", 12) == 0, "the client got the answer (%zu bytes)", got);
  CHECK(waiting(acceptor) == 0, "a delivered connection no longer waits");
  close(d->fd);
  close(client);
}

static void a_head_in_pieces_waits_for_its_end(napi_value acceptor, int port) {
  const char* pieces[] = {"POST /v2/mo", "dels/x/infer HTTP/1.1\r\n", "\r\n"};
  int client = connect_to(port);
  CHECK(client >= 0, "connect: %s", strerror(errno));
  CHECK(EVENTUALLY(waiting(acceptor) == 1), "the connection waits (%d)", waiting(acceptor));
  for (int i = 0; i < 2; i++) {
    send_all(client, pieces[i], strlen(pieces[i]));
    // An absence, so a window: long enough for the thread to have seen the piece.
    int64_t until = NowMs() + 150;
    while (NowMs() < until) {
      fake_run_queued();
      pause_ms(5);
    }
    CHECK(arrival_of(client) == NULL, "delivered after piece %d of 3", i + 1);
    CHECK(waiting(acceptor) == 1, "still waiting after piece %d of 3 (%d)", i + 1, waiting(acceptor));
  }
  send_all(client, pieces[2], strlen(pieces[2]));
  Delivered* d = take(client);
  CHECK(d != NULL, "the head was not delivered after its last piece");
  if (!d) {
    close(client);
    return;
  }
  const char* whole = "POST /v2/models/x/infer HTTP/1.1\r\n\r\n";
  CHECK(d->whole && d->length == strlen(whole) && memcmp(d->line, whole, d->length) == 0, "whole %d, line '%s'", d->whole, d->line);
  char buffer[128];
  CHECK(read_some(d->fd, buffer, sizeof buffer, strlen(whole)) == strlen(whole), "the pieces are all still there to read");
  CHECK(waiting(acceptor) == 0, "no longer waiting (%d)", waiting(acceptor));
  close(d->fd);
  close(client);
}

static void what_is_not_a_request_head_goes_at_once(napi_value acceptor, int port) {
  static const struct {
    const char* bytes;
    size_t length;
  } cases[] = {
      {"\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03", 11},  // a TLS ClientHello, NULs and all
      {"get / HTTP/1.1\r\n", 16},                            // not a method's capitals
      {" GET / HTTP/1.1\r\n", 17},                           // a space first
      {"ABCDEFGHIJKLMNOPQRSTUVWXYZ", 26},                    // no space in a method's room
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    int client = connect_to(port);
    CHECK(client >= 0, "connect: %s", strerror(errno));
    send_all(client, cases[i].bytes, cases[i].length);
    Delivered* d = take(client);
    CHECK(d != NULL, "case %zu was not delivered", i);
    if (!d) {
      close(client);
      continue;
    }
    CHECK(!d->whole, "case %zu is not a whole head", i);
    CHECK(d->length == cases[i].length && memcmp(d->line, cases[i].bytes, d->length) == 0, "case %zu: the line is its bytes (%zu of them)", i,
          d->length);
    char buffer[64];
    size_t got = read_some(d->fd, buffer, sizeof buffer, cases[i].length);
    CHECK(got == cases[i].length && memcmp(buffer, cases[i].bytes, got) == 0, "case %zu: its bytes are still there to read", i);
    close(d->fd);
    close(client);
  }
  CHECK(waiting(acceptor) == 0, "none waits (%d)", waiting(acceptor));
}

static void a_peer_that_stops_sending_is_delivered(napi_value acceptor, int port) {
  const char* partial = "GET /slow HTTP/1.1\r\nHost:";
  int client = connect_to(port);
  CHECK(client >= 0, "connect: %s", strerror(errno));
  send_all(client, partial, strlen(partial));
  CHECK(EVENTUALLY(waiting(acceptor) == 1), "the partial head waits (%d)", waiting(acceptor));
  shutdown(client, SHUT_WR);
  Delivered* d = take(client);
  CHECK(d != NULL, "a half-closed connection was not delivered");
  if (!d) {
    close(client);
    return;
  }
  CHECK(!d->whole && d->length == strlen(partial) && memcmp(d->line, partial, d->length) == 0, "whole %d, line '%s'", d->whole, d->line);
  // Half closed, not gone: an answer still reaches the client.
  send_all(d->fd, "HTTP/1.1 400 Bad Request\r\n\r\n", 28);
  char buffer[64];
  CHECK(read_some(client, buffer, sizeof buffer, 28) == 28, "the client reads the answer after its shutdown");
  close(d->fd);
  close(client);

  // A peer that leaves without a byte is closed, not delivered.
  int arrivals = delivered_count;
  client = connect_to(port);
  CHECK(EVENTUALLY(waiting(acceptor) == 1), "the silent connection waits (%d)", waiting(acceptor));
  close(client);
  CHECK(EVENTUALLY(waiting(acceptor) == 0), "a connection its peer closed still waits (%d)", waiting(acceptor));
  fake_run_queued();
  CHECK(delivered_count == arrivals, "a connection that sent nothing was delivered");
}

static void long_lines_are_cut_and_long_heads_go_on(napi_value acceptor, int port) {
  char head[1024];
  int length = snprintf(head, sizeof head, "GET /%0700d HTTP/1.1\r\nHost: x\r\n\r\n", 0);
  int client = connect_to(port);
  send_all(client, head, (size_t)length);
  Delivered* d = take(client);
  CHECK(d && d->whole && d->length == LINE_BYTES && memcmp(d->line, head, LINE_BYTES) == 0, "a long line comes cut to %d bytes (%zu)",
        LINE_BYTES, d ? d->length : 0);
  if (d) close(d->fd);
  close(client);

  // Past a head's bound without its blank line: Node's parser is the one to refuse it (431).
  size_t big = HEAD_LIMIT + 512;
  char* bytes = malloc(big);
  memset(bytes, 'b', big);
  memcpy(bytes, "GET / HTTP/1.1\r\nX-Big: ", 23);
  client = connect_to(port);
  send_all(client, bytes, big);
  d = take(client);
  CHECK(d && !d->whole && d->length == LINE_BYTES, "a head past HEAD_LIMIT goes on, not whole");
  if (d) {
    char* read_back = malloc(big);
    CHECK(read_some(d->fd, read_back, big, big) == big && memcmp(read_back, bytes, big) == 0, "all of it is still there to read");
    free(read_back);
    close(d->fd);
  }
  free(bytes);
  close(client);
  CHECK(waiting(acceptor) == 0, "none waits (%d)", waiting(acceptor));
}

static void an_on_arrival_that_throws_is_cleared(napi_value acceptor, int port) {
  const char* head = "GET /a HTTP/1.1\r\n\r\n";
  int client = connect_to(port);
  throw_next = true;
  send_all(client, head, strlen(head));
  // fake_run_queued fails the test if Deliver leaves the exception pending (Node would raise it).
  Delivered* d = take(client);
  CHECK(d && d->whole, "delivered to the callback that threw");
  CHECK(!throw_next && fake_thrown() == NULL, "the exception was cleared");
  if (d) close(d->fd);
  close(client);
  CHECK(waiting(acceptor) == 0, "none waits (%d)", waiting(acceptor));
}

static void silent_and_partial_heads_time_out(void) {
  int port;
  napi_value acceptor = start(&port, 8, TIMEOUT_MS);
  int64_t connected = NowMs();
  int silent = connect_to(port);
  int partial = connect_to(port);
  CHECK(silent >= 0 && partial >= 0, "connect: %s", strerror(errno));
  send_all(partial, "GET / HTTP/1.1\r\n", 16);
  // Both are counted, unless this thread was kept off the CPU for the whole timeout.
  int seen = 0;
  WAIT_UNTIL(true, (seen = waiting(acceptor)) == 2 || NowMs() - connected >= TIMEOUT_MS);
  CHECK(seen == 2 || NowMs() - connected >= TIMEOUT_MS, "both connections wait (%d)", seen);
  CHECK(closed_by_server(silent, BOUND_MS), "the silent connection was not closed");
  int64_t silent_closed = NowMs();
  CHECK(closed_by_server(partial, BOUND_MS), "the partial head was not closed");
  int64_t partial_closed = NowMs();
  CHECK(silent_closed - connected >= TIMEOUT_MS && partial_closed - connected >= TIMEOUT_MS,
        "closed before their timeout (%lld, %lld ms after connecting)", (long long)(silent_closed - connected),
        (long long)(partial_closed - connected));
  CHECK(EVENTUALLY(waiting(acceptor) == 0), "the timed-out connections still count (%d)", waiting(acceptor));
  CHECK(arrival_of(silent) == NULL && arrival_of(partial) == NULL, "a timed-out connection was delivered");
  close(silent);
  close(partial);
  stopped(acceptor);
}

static void past_capacity_the_oldest_is_closed_and_evict_closes_the_next(void) {
  int port;
  napi_value acceptor = start(&port, 2, NEVER_MS);
  int clients[3];
  for (int i = 0; i < 3; i++) {
    clients[i] = connect_to(port);
    CHECK(clients[i] >= 0, "connect: %s", strerror(errno));
    // One accept at a time, so that the order of arrival is the order of connecting.
    if (i < 2) CHECK(EVENTUALLY(waiting(acceptor) == i + 1), "client %d waits (%d)", i, waiting(acceptor));
  }
  CHECK(closed_by_server(clients[0], BOUND_MS), "the oldest was not closed past capacity");
  CHECK(EVENTUALLY(waiting(acceptor) == 2), "two wait at capacity 2 (%d)", waiting(acceptor));
  CHECK(!closed_by_server(clients[1], 0) && !closed_by_server(clients[2], 0), "a younger one was closed");

  CHECK(fake_as_bool(evict(acceptor)), "evict() with two waiting");
  CHECK(closed_by_server(clients[1], BOUND_MS), "evict() did not close the oldest");
  CHECK(!closed_by_server(clients[2], 0), "evict() closed the youngest");
  CHECK(waiting(acceptor) == 1, "one waits after evict() (%d)", waiting(acceptor));
  CHECK(fake_as_bool(evict(acceptor)), "evict() with one waiting");
  CHECK(closed_by_server(clients[2], BOUND_MS), "evict() did not close the last");
  CHECK(waiting(acceptor) == 0, "none waits (%d)", waiting(acceptor));
  napi_value none = evict(acceptor);
  CHECK(none != NULL && !fake_as_bool(none), "evict() with none waiting is false");
  for (int i = 0; i < 3; i++) close(clients[i]);
  stopped(acceptor);
}

static void stop_closes_the_socket_and_every_waiting_connection(napi_value acceptor, int port) {
  int live = fake_live_tsfns();
  int silent = connect_to(port);
  int partial = connect_to(port);
  send_all(partial, "PUT /x HTTP/1.1\r\n", 17);
  CHECK(EVENTUALLY(waiting(acceptor) == 2), "two wait (%d)", waiting(acceptor));
  // A whole head the thread has queued for JavaScript, not yet run, when stop() comes.
  const char* head = "GET /queued HTTP/1.1\r\n\r\n";
  int queued = connect_to(port);
  send_all(queued, head, strlen(head));
  CHECK(WAIT_UNTIL(false, fake_queued() == 1), "the arrival was not queued (%d)", fake_queued());

  napi_value stopped = stop(acceptor);
  CHECK(stopped == NULL && fake_thrown() == NULL, "stop: %s", fake_thrown() ? fake_thrown() : "returned a value");
  CHECK(closed_by_server(silent, BOUND_MS) && closed_by_server(partial, BOUND_MS), "stop() left a waiting connection open");
  errno = 0;
  int refused = connect_to(port);
  CHECK(refused < 0 && errno == ECONNREFUSED, "a connect after stop() was not refused (%s)", strerror(errno));
  if (refused >= 0) close(refused);
  CHECK(waiting(acceptor) == 0, "waiting after stop() (%d)", waiting(acceptor));
  CHECK(!fake_as_bool(evict(acceptor)), "evict() after stop()");
  // Twice is harmless.
  stopped = stop(acceptor);
  CHECK(stopped == NULL && fake_thrown() == NULL, "a second stop: %s", fake_thrown() ? fake_thrown() : "returned a value");

  // What was queued is still delivered, then the function is finalized (Free).
  CHECK(fake_live_tsfns() == live, "the threadsafe function finalized before its queue ran");
  CHECK(fake_run_queued() == 1, "the queued arrival did not run");
  Delivered* d = arrival_of(queued);
  CHECK(d && d->whole && d->length == strlen(head), "the arrival queued before stop() was delivered");
  if (d) {
    d->taken = true;
    close(d->fd);
  }
  CHECK(fake_live_tsfns() == live - 1, "the threadsafe function was not finalized after stop()");
  close(silent);
  close(partial);
  close(queued);
}

// The handle outlives the threadsafe function: after stop() and the function's finalizer, the
// handle still answers (nothing waits, nothing to evict, stop is a no-op) until it is collected.
static void the_handle_answers_after_its_function_is_finalized(void) {
  int before = fake_open_fds();
  int live = fake_live_tsfns();
  int port;
  napi_value acceptor = start(&port, 4, NEVER_MS);
  CHECK(fake_cleanup_hooks() == 1, "start() added no cleanup hook (%d)", fake_cleanup_hooks());
  napi_value result = stop(acceptor);
  CHECK(result == NULL && fake_thrown() == NULL, "stop: %s", fake_thrown() ? fake_thrown() : "returned a value");
  fake_run_queued();
  CHECK(fake_cleanup_hooks() == 0, "stop() left its cleanup hook (%d)", fake_cleanup_hooks());
  CHECK(fake_live_tsfns() == live, "the threadsafe function outlived stop()");
  CHECK(waiting(acceptor) == 0 && fake_thrown() == NULL, "waiting() after the function's finalizer");
  CHECK(!fake_as_bool(evict(acceptor)) && fake_thrown() == NULL, "evict() after the function's finalizer");
  napi_value again = stop(acceptor);
  CHECK(again == NULL && fake_thrown() == NULL, "stop() after the function's finalizer: %s", fake_thrown() ? fake_thrown() : "returned a value");
  fake_finalize(acceptor);
  CHECK(fake_open_fds() == before, "%d descriptors open after, %d before", fake_open_fds(), before);
}

// The environment ends (a worker thread's, the process's) with an acceptor never stopped and a
// connection waiting: its cleanup hook stops the thread before Node deletes the threadsafe
// function, and every descriptor it held is closed.
static void an_environment_that_ends_without_stop_stops_the_thread_first(void) {
  int before = fake_open_fds();
  int port;
  napi_value acceptor = start(&port, 4, NEVER_MS);
  int client = connect_to(port);
  send_all(client, "GET / HTTP/1.1\r\nX-Slow: ", strlen("GET / HTTP/1.1\r\nX-Slow: "));
  for (int waited = 0; waiting(acceptor) < 1 && waited < BOUND_MS; waited += 2) pause_ms(2);
  CHECK(waiting(acceptor) == 1, "the partial head is not waiting (%d)", waiting(acceptor));
  fake_teardown();
  CHECK(fake_live_tsfns() == 0, "teardown left a threadsafe function");
  CHECK(closed_by_server(client, BOUND_MS), "teardown left the waiting connection open");
  // As after teardown, Node collects the handle last.
  fake_finalize(acceptor);
  close(client);
  CHECK(fake_open_fds() == before, "%d descriptors open after, %d before", fake_open_fds(), before);
}

static void bad_arguments_are_type_errors(void) {
  int before = fake_open_fds();
  int live = fake_live_tsfns();
  int port;
  int fd = listener(&port);
  napi_value good[4] = {fake_int(fd), fake_int(4), fake_int(1000), on_arrival_fn};
  struct {
    size_t argc;
    int replace;  // which argument is replaced by `with`
    napi_value with;
  } bad[] = {
      {3, -1, NULL},                    // no callback
      {4, 3, fake_string("onArrival")}, // a callback that is not a function
      {4, 3, fake_object()},
      {4, 1, fake_int(0)},              // capacity 0
      {4, 1, fake_int(-3)},
      {4, 2, fake_int(0)},              // timeout 0
      {4, 0, fake_int(-1)},             // no descriptor
      {4, 0, fake_string("3")},
      {0, -1, NULL},
  };
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    napi_value args[4];
    memcpy(args, good, sizeof args);
    if (bad[i].replace >= 0) args[bad[i].replace] = bad[i].with;
    THROWS(fake_call("start", bad[i].argc, args), "start(listenFd");
    CHECK(fake_thrown_type(), "bad start() %zu is a TypeError", i);
  }
  close(fd);
  // A descriptor that is not open: an Error, with nothing left open or running.
  napi_value closed[4] = {fake_int(fd), fake_int(4), fake_int(1000), on_arrival_fn};
  THROWS(fake_call("start", 4, closed), "start: Bad file descriptor");
  CHECK(!fake_thrown_type(), "a closed descriptor is an Error, not a TypeError");
  // A socket that does not listen (its accept would fail at once, for ever): refused, not spun on.
  int unbound = socket(AF_INET, SOCK_STREAM, 0);
  napi_value not_listening[4] = {fake_int(unbound), fake_int(4), fake_int(1000), on_arrival_fn};
  THROWS(fake_call("start", 4, not_listening), "start: the socket does not listen");
  close(unbound);
  fake_run_queued();
  CHECK(fake_live_tsfns() == live, "a refused start() left a threadsafe function");
  CHECK(fake_open_fds() == before, "%d descriptors open after, %d before: a refused start() left some open", fake_open_fds(), before);

  napi_value not_handles[] = {fake_int(3), fake_string("handle"), fake_object(), on_arrival_fn};
  for (size_t i = 0; i < sizeof not_handles / sizeof not_handles[0]; i++) {
    THROWS(fake_call("waiting", 1, &not_handles[i]), "an acceptor handle");
    CHECK(fake_thrown_type(), "a TypeError");
    THROWS(fake_call("evict", 1, &not_handles[i]), "an acceptor handle");
    THROWS(fake_call("stop", 1, &not_handles[i]), "an acceptor handle");
  }
  THROWS(fake_call("waiting", 0, NULL), "an acceptor handle");
}

// A broken addon can make every bounded wait run to its bound: say so before the runner's
// timeout (60 s) kills the harness without a word.
static void watchdog(int signal) {
  (void)signal;
  static const char message[] = "troupe-accept: still running after 50 s (a FAIL above says why)\n";
  if (write(STDERR_FILENO, message, sizeof message - 1) < 0) _exit(1);
  _exit(1);
}

int main(void) {
  signal(SIGALRM, watchdog);
  alarm(50);
  fake_load();
  int before = fake_open_fds();
  napi_create_function(NULL, "onArrival", NAPI_AUTO_LENGTH, on_arrival, NULL, &on_arrival_fn);

  int port;
  napi_value acceptor = start(&port, 16, NEVER_MS);
  a_whole_head_is_delivered_with_its_bytes_unread(acceptor, port);
  a_head_in_pieces_waits_for_its_end(acceptor, port);
  what_is_not_a_request_head_goes_at_once(acceptor, port);
  a_peer_that_stops_sending_is_delivered(acceptor, port);
  long_lines_are_cut_and_long_heads_go_on(acceptor, port);
  an_on_arrival_that_throws_is_cleared(acceptor, port);
  silent_and_partial_heads_time_out();
  past_capacity_the_oldest_is_closed_and_evict_closes_the_next();
  stop_closes_the_socket_and_every_waiting_connection(acceptor, port);
  fake_finalize(acceptor);
  bad_arguments_are_type_errors();
  the_handle_answers_after_its_function_is_finalized();

  // Whatever the stopped acceptors still had queued runs, and each is finalized (Free).
  fake_run_queued();
  CHECK(fake_live_tsfns() == 0, "%d threadsafe function(s) never finalized", fake_live_tsfns());
  an_environment_that_ends_without_stop_stops_the_thread_first();
  for (int i = 0; i < delivered_count; i++) {
    CHECK(delivered[i].taken, "an arrival no case expected (fd %d, '%s')", delivered[i].fd, delivered[i].line);
    if (!delivered[i].taken) close(delivered[i].fd);
  }
  CHECK(fake_open_fds() == before, "%d descriptors open after, %d before", fake_open_fds(), before);
  if (fake_failures) {
    fprintf(stderr, "troupe-accept: %d check(s) failed\n", fake_failures);
    return 1;
  }
  printf("troupe-accept: every check passed\n");
  return 0;
}
