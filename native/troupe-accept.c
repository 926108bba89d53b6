// The head's accept loop for its HTTP port, on a thread of its own (head/front-door/accept-loop.ts).
// A connection costs the head's event loop nothing until it has sent a whole request head: this
// thread accepts it, waits for its bytes with epoll and reads them with MSG_PEEK (so they stay in
// the kernel for whichever process serves the connection), and only then passes the descriptor to
// JavaScript with the request's first line. Under a burst of slow or silent connections (slowloris)
// the event loop had accepted, wrapped and read each one, and a health check waited behind them.
//
//   start(listenFd, capacity, timeoutMs, onArrival) -> handle: serves a duplicate of listenFd (the
//     caller closes its own). onArrival(fd, line, whole) is called on the JS thread for each
//     connection whose request head is whole (whole: true), or that cannot be waited on further
//     (past HEAD_LIMIT bytes, not an HTTP request line, or its peer stopped sending); `line` is its
//     first LINE_BYTES bytes (latin1). The descriptor is then JavaScript's to serve or close.
//     At most `capacity` connections wait here: a new one past that closes the oldest. One that has
//     not sent a whole request head `timeoutMs` after it was accepted is closed.
//   waiting(handle) -> number: the connections waiting here now.
//   evict(handle) -> boolean: closes the connection that has waited longest; false if none waits.
//   stop(handle): stops the thread and closes the listening socket and every waiting connection.
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <node_api.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "napi-helpers.h"

// Past this many bytes without the blank line that ends a request head, the connection goes on as
// it is: Node's parser answers a head larger than its bound (16 KiB) with 431.
#define HEAD_LIMIT (16 * 1024 + 1024)
// What JavaScript is shown of a request: enough for its request line (the deployment it names).
#define LINE_BYTES 512
// Events taken from epoll in one wait, and connections accepted in one turn, so that arrivals are
// passed on between accepts under a long burst.
#define EVENTS 256
#define ACCEPTS_PER_TURN 512
// After accept4 fails for want of descriptors or memory, the listening socket rests this long
// (it stays readable, so waiting on it at once would spin).
#define ACCEPT_REST_MS 100

#define LISTENER_TAG UINT64_MAX
#define WAKE_TAG (UINT64_MAX - 1)

typedef struct {
  int fd;  // -1: free
  uint32_t generation;
  int older, newer;  // the waiting list, oldest first; free slots chain through `newer`
  int64_t deadline_ms;
} Slot;

typedef struct {
  int fd;
  bool whole;
  uint16_t length;
  char line[LINE_BYTES];
} Arrival;

typedef struct {
  size_t count;
  Arrival items[];
} Batch;

typedef struct {
  int listen_fd, epoll_fd, wake_fd;
  int capacity, timeout_ms;
  pthread_t thread;
  napi_threadsafe_function deliver;
  // Held by the thread while it handles a wait's events, and by evict(): a slot closed by evict()
  // may still be named by an event the thread took before it; the slot's generation tells.
  pthread_mutex_t lock;
  Slot* slots;
  int oldest, newest, free_slot;
  atomic_int waiting;
  atomic_bool stopping;
  // The rest is the JS thread's. The acceptor is freed once both its owners let go: the handle
  // JavaScript holds (collected) and the threadsafe function (finalized).
  napi_env env;
  bool stopped, hooked;
  int owners;
  int64_t resting_until;
} Acceptor;

static int64_t NowMs(void) {
  struct timespec now;
  clock_gettime(CLOCK_MONOTONIC, &now);
  return (int64_t)now.tv_sec * 1000 + now.tv_nsec / 1000000;
}

static uint64_t Tag(int index, uint32_t generation) {
  return ((uint64_t)generation << 32) | (uint32_t)index;
}

static void Unlink(Acceptor* a, int index) {
  Slot* slot = &a->slots[index];
  if (slot->older >= 0) a->slots[slot->older].newer = slot->newer;
  else a->oldest = slot->newer;
  if (slot->newer >= 0) a->slots[slot->newer].older = slot->older;
  else a->newest = slot->older;
  slot->fd = -1;
  slot->generation++;
  slot->older = -1;
  slot->newer = a->free_slot;
  a->free_slot = index;
  atomic_fetch_sub(&a->waiting, 1);
}

// The connection leaves the waiting list: to JavaScript (close_it false) or closed.
static void Release(Acceptor* a, int index, bool close_it) {
  int fd = a->slots[index].fd;
  epoll_ctl(a->epoll_fd, EPOLL_CTL_DEL, fd, NULL);
  Unlink(a, index);
  if (close_it) close(fd);
}

static void Wait(Acceptor* a, int fd) {
  if (a->free_slot < 0) Release(a, a->oldest, true);
  int index = a->free_slot;
  Slot* slot = &a->slots[index];
  a->free_slot = slot->newer;
  slot->fd = fd;
  slot->deadline_ms = NowMs() + a->timeout_ms;
  slot->older = a->newest;
  slot->newer = -1;
  if (a->newest >= 0) a->slots[a->newest].newer = index;
  else a->oldest = index;
  a->newest = index;
  atomic_fetch_add(&a->waiting, 1);
  // Edge-triggered: the bytes are only peeked at, so a level-triggered wait would wake at once
  // again; each new segment of a head still coming wakes it once.
  struct epoll_event event = {.events = EPOLLIN | EPOLLRDHUP | EPOLLET, .data.u64 = Tag(index, slot->generation)};
  if (epoll_ctl(a->epoll_fd, EPOLL_CTL_ADD, fd, &event) != 0) Release(a, index, true);
}

static void AcceptSome(Acceptor* a) {
  for (int i = 0; i < ACCEPTS_PER_TURN; i++) {
    int fd = accept4(a->listen_fd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
    if (fd >= 0) {
      Wait(a, fd);
      continue;
    }
    if (errno == EINTR || errno == ECONNABORTED || errno == EPROTO) continue;
    // Out of descriptors or memory, or the socket no longer listens: it stays readable, so it
    // rests instead of being waited on at once again.
    if (errno != EAGAIN && errno != EWOULDBLOCK) {
      epoll_ctl(a->epoll_fd, EPOLL_CTL_DEL, a->listen_fd, NULL);
      a->resting_until = NowMs() + ACCEPT_REST_MS;
    }
    return;
  }
}

// Whether a request whose first `length` bytes are `bytes` can go on now: its head is whole, it is
// past the bound of a head, or it does not open like a request line (a method's capitals, then a
// space), so that waiting for a blank line would only delay Node's answer to it.
static bool Ready(const char* bytes, size_t length, bool* whole) {
  *whole = memmem(bytes, length, "\r\n\r\n", 4) != NULL;
  if (*whole || length >= HEAD_LIMIT) return true;
  for (size_t i = 0; i < length && i < 24; i++) {
    if (bytes[i] == ' ') return i == 0;
    if (bytes[i] < 'A' || bytes[i] > 'Z') return true;
  }
  return length >= 24;
}

static void Arrived(Acceptor* a, struct epoll_event* event, Batch* batch, char* buffer) {
  int index = (int)(uint32_t)event->data.u64;
  uint32_t generation = (uint32_t)(event->data.u64 >> 32);
  if (index < 0 || index >= a->capacity) return;
  Slot* slot = &a->slots[index];
  // Closed since the wait began (evicted, or timed out), and perhaps its slot taken by another.
  if (slot->fd < 0 || slot->generation != generation) return;
  ssize_t got = recv(slot->fd, buffer, HEAD_LIMIT, MSG_PEEK | MSG_DONTWAIT);
  if (got < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)) return;
  if (got <= 0) {
    Release(a, index, true);
    return;
  }
  bool whole;
  bool ready = Ready(buffer, (size_t)got, &whole);
  // A peer that stopped sending says nothing more: what it sent goes on as it is.
  if (!ready && !(event->events & (EPOLLRDHUP | EPOLLHUP | EPOLLERR))) return;
  Arrival* arrival = &batch->items[batch->count++];
  arrival->fd = slot->fd;
  arrival->whole = whole;
  arrival->length = (uint16_t)(got < LINE_BYTES ? got : LINE_BYTES);
  memcpy(arrival->line, buffer, arrival->length);
  Release(a, index, false);
}

static int NextTimeout(Acceptor* a) {
  int64_t now = NowMs();
  int64_t next = a->oldest >= 0 ? a->slots[a->oldest].deadline_ms : -1;
  if (a->resting_until > 0 && (next < 0 || a->resting_until < next)) next = a->resting_until;
  if (next < 0) return -1;
  return next <= now ? 0 : (int)(next - now);
}

static void* Loop(void* data) {
  Acceptor* a = data;
  struct epoll_event events[EVENTS];
  char* buffer = malloc(HEAD_LIMIT);
  if (!buffer) return NULL;
  while (!atomic_load(&a->stopping)) {
    pthread_mutex_lock(&a->lock);
    int timeout = NextTimeout(a);
    pthread_mutex_unlock(&a->lock);
    int count = epoll_wait(a->epoll_fd, events, EVENTS, timeout);
    if (atomic_load(&a->stopping)) break;
    if (count < 0 && errno != EINTR) break;
    Batch* batch = malloc(sizeof(Batch) + sizeof(Arrival) * (count > 0 ? (size_t)count : 1));
    if (!batch) continue;
    batch->count = 0;
    pthread_mutex_lock(&a->lock);
    for (int i = 0; i < count; i++) {
      if (events[i].data.u64 == LISTENER_TAG) AcceptSome(a);
      else if (events[i].data.u64 != WAKE_TAG) Arrived(a, &events[i], batch, buffer);
    }
    int64_t now = NowMs();
    while (a->oldest >= 0 && a->slots[a->oldest].deadline_ms <= now) Release(a, a->oldest, true);
    if (a->resting_until > 0 && a->resting_until <= now) {
      a->resting_until = 0;
      struct epoll_event listener = {.events = EPOLLIN, .data.u64 = LISTENER_TAG};
      epoll_ctl(a->epoll_fd, EPOLL_CTL_ADD, a->listen_fd, &listener);
    }
    pthread_mutex_unlock(&a->lock);
    if (batch->count == 0 || napi_call_threadsafe_function(a->deliver, batch, napi_tsfn_nonblocking) != napi_ok) {
      for (size_t i = 0; i < batch->count; i++) close(batch->items[i].fd);
      free(batch);
    }
  }
  free(buffer);
  return NULL;
}

// On the JS thread: each arrival to onArrival. With no env (the function is being torn down), or
// once JavaScript cannot take more, the descriptors left are closed.
static void Deliver(napi_env env, napi_value on_arrival, void* context, void* data) {
  (void)context;
  Batch* batch = data;
  size_t i = 0;
  for (; env && on_arrival && i < batch->count; i++) {
    Arrival* arrival = &batch->items[i];
    napi_value args[3], global, result;
    if (napi_create_int32(env, arrival->fd, &args[0]) != napi_ok ||
        napi_create_string_latin1(env, arrival->line, arrival->length, &args[1]) != napi_ok ||
        napi_get_boolean(env, arrival->whole, &args[2]) != napi_ok || napi_get_global(env, &global) != napi_ok) {
      break;
    }
    if (napi_call_function(env, global, on_arrival, 3, args, &result) != napi_ok) {
      // The callback threw: this descriptor is its to close; the rest are passed on all the same.
      napi_value ignored;
      napi_get_and_clear_last_exception(env, &ignored);
    }
  }
  for (; i < batch->count; i++) close(batch->items[i].fd);
  free(batch);
}

static void Drop(Acceptor* a) {
  if (--a->owners > 0) return;
  pthread_mutex_destroy(&a->lock);
  free(a->slots);
  free(a);
}

static void AtTeardown(void* data);

// Stops the thread (joined: it touches nothing after) and closes every descriptor the acceptor
// holds. From stop(), from the handle's collection, or when the environment ends without either.
static void Halt(Acceptor* a) {
  if (a->hooked) napi_remove_env_cleanup_hook(a->env, AtTeardown, a);
  a->hooked = false;
  if (a->stopped) return;
  a->stopped = true;
  atomic_store(&a->stopping, true);
  uint64_t one = 1;
  if (write(a->wake_fd, &one, sizeof one) < 0) {
    // The counter is full, so the thread is awake already.
  }
  pthread_join(a->thread, NULL);
  while (a->oldest >= 0) Release(a, a->oldest, true);
  close(a->listen_fd);
  close(a->epoll_fd);
  close(a->wake_fd);
}

// The environment ends (a worker thread's, or the process's) before stop(): the thread must not
// outlive the threadsafe function, which Node deletes next.
static void AtTeardown(void* data) {
  Acceptor* a = data;
  a->hooked = false;
  Halt(a);
}

static void Finalized(napi_env env, void* data, void* hint) {
  (void)env;
  (void)hint;
  Acceptor* a = data;
  Halt(a);
  Drop(a);
}

static void Collected(napi_env env, void* data, void* hint) {
  (void)env;
  (void)hint;
  Acceptor* a = data;
  if (!a->stopped) {
    Halt(a);
    napi_release_threadsafe_function(a->deliver, napi_tsfn_release);
  }
  Drop(a);
}

static Acceptor* HandleOf(napi_env env, napi_callback_info info) {
  size_t argc = 1;
  napi_value argv[1];
  void* data = NULL;
  napi_get_cb_info(env, info, &argc, argv, NULL, NULL);
  if (argc < 1 || napi_get_value_external(env, argv[0], &data) != napi_ok || !data) {
    napi_throw_type_error(env, NULL, "an acceptor handle, from start()");
    return NULL;
  }
  return data;
}

static napi_value Start(napi_env env, napi_callback_info info) {
  size_t argc = 4;
  napi_value argv[4];
  napi_get_cb_info(env, info, &argc, argv, NULL, NULL);
  int32_t listen_fd, capacity, timeout_ms;
  napi_valuetype callback_type = napi_undefined;
  if (argc < 4 || napi_get_value_int32(env, argv[0], &listen_fd) != napi_ok || listen_fd < 0 ||
      napi_get_value_int32(env, argv[1], &capacity) != napi_ok || capacity < 1 ||
      napi_get_value_int32(env, argv[2], &timeout_ms) != napi_ok || timeout_ms < 1 || napi_typeof(env, argv[3], &callback_type) != napi_ok ||
      callback_type != napi_function) {
    napi_throw_type_error(env, NULL, "start(listenFd: number, capacity: number > 0, timeoutMs: number > 0, onArrival: function)");
    return NULL;
  }
  Acceptor* a = calloc(1, sizeof *a);
  Slot* slots = calloc((size_t)capacity, sizeof(Slot));
  if (!a || !slots) {
    free(a);
    free(slots);
    return ThrowErrno(env, "start: calloc");
  }
  a->slots = slots;
  a->capacity = capacity;
  a->timeout_ms = timeout_ms;
  a->oldest = a->newest = -1;
  for (int i = 0; i < capacity; i++) slots[i] = (Slot){.fd = -1, .older = -1, .newer = i + 1 < capacity ? i + 1 : -1};
  a->free_slot = 0;
  pthread_mutex_init(&a->lock, NULL);
  a->env = env;
  a->owners = 1;
  a->listen_fd = fcntl(listen_fd, F_DUPFD_CLOEXEC, 0);
  a->epoll_fd = epoll_create1(EPOLL_CLOEXEC);
  a->wake_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
  struct epoll_event listener = {.events = EPOLLIN, .data.u64 = LISTENER_TAG};
  struct epoll_event wake = {.events = EPOLLIN, .data.u64 = WAKE_TAG};
  int listening = 0;
  socklen_t size = sizeof listening;
  bool set_up = a->listen_fd >= 0 && a->epoll_fd >= 0 && a->wake_fd >= 0 && fcntl(a->listen_fd, F_SETFL, O_NONBLOCK) == 0 &&
                getsockopt(a->listen_fd, SOL_SOCKET, SO_ACCEPTCONN, &listening, &size) == 0 &&
                epoll_ctl(a->epoll_fd, EPOLL_CTL_ADD, a->listen_fd, &listener) == 0 && epoll_ctl(a->epoll_fd, EPOLL_CTL_ADD, a->wake_fd, &wake) == 0;
  if (set_up && !listening) errno = EINVAL;
  if (!set_up || !listening) {
    napi_value thrown = ThrowErrno(env, listening || !set_up ? "start" : "start: the socket does not listen");
    if (a->listen_fd >= 0) close(a->listen_fd);
    if (a->epoll_fd >= 0) close(a->epoll_fd);
    if (a->wake_fd >= 0) close(a->wake_fd);
    Drop(a);
    return thrown;
  }
  napi_value name;
  napi_create_string_utf8(env, "troupe-accept", NAPI_AUTO_LENGTH, &name);
  if (napi_create_threadsafe_function(env, argv[3], NULL, name, 0, 1, a, Finalized, NULL, Deliver, &a->deliver) != napi_ok) {
    close(a->listen_fd);
    close(a->epoll_fd);
    close(a->wake_fd);
    Drop(a);
    napi_throw_error(env, NULL, "start: napi_create_threadsafe_function failed");
    return NULL;
  }
  // The head's other handles keep it alive; a listening acceptor must not keep a stopping one.
  napi_unref_threadsafe_function(env, a->deliver);
  if ((errno = pthread_create(&a->thread, NULL, Loop, a)) != 0) {
    napi_value thrown = ThrowErrno(env, "start: pthread_create");
    close(a->listen_fd);
    close(a->epoll_fd);
    close(a->wake_fd);
    a->stopped = true;
    // The function's finalizer lets go of the acceptor.
    napi_release_threadsafe_function(a->deliver, napi_tsfn_abort);
    return thrown;
  }
  a->hooked = napi_add_env_cleanup_hook(env, AtTeardown, a) == napi_ok;
  napi_value handle;
  if (napi_create_external(env, a, Collected, NULL, &handle) != napi_ok) {
    Halt(a);
    napi_release_threadsafe_function(a->deliver, napi_tsfn_release);
    napi_throw_error(env, NULL, "start: napi_create_external failed");
    return NULL;
  }
  a->owners = 2;
  return handle;
}

static napi_value Waiting(napi_env env, napi_callback_info info) {
  Acceptor* a = HandleOf(env, info);
  if (!a) return NULL;
  napi_value result;
  napi_create_int32(env, a->stopped ? 0 : atomic_load(&a->waiting), &result);
  return result;
}

static napi_value Evict(napi_env env, napi_callback_info info) {
  Acceptor* a = HandleOf(env, info);
  if (!a) return NULL;
  bool evicted = false;
  if (!a->stopped) {
    pthread_mutex_lock(&a->lock);
    if (a->oldest >= 0) {
      Release(a, a->oldest, true);
      evicted = true;
    }
    pthread_mutex_unlock(&a->lock);
  }
  napi_value result;
  napi_get_boolean(env, evicted, &result);
  return result;
}

static napi_value Stop(napi_env env, napi_callback_info info) {
  Acceptor* a = HandleOf(env, info);
  if (!a || a->stopped) return NULL;
  Halt(a);
  // Arrivals already queued are still delivered (onArrival then closes them); the function's finalizer runs after.
  napi_release_threadsafe_function(a->deliver, napi_tsfn_release);
  return NULL;
}

static napi_value Init(napi_env env, napi_value exports) {
  static const Exported functions[] = {{"start", Start}, {"waiting", Waiting}, {"evict", Evict}, {"stop", Stop}};
  return ExportFunctions(env, exports, functions, sizeof functions / sizeof functions[0]);
}

NAPI_MODULE(NODE_GYP_MODULE_NAME, Init)
