// Handing a client's TCP connection from the head to a replica on the same host, so that the
// replica serves its HTTP requests itself (head/front-door/handoff.ts, actors/http-door.ts): the
// socket travels as SCM_RIGHTS over a Unix socket pair between the two processes, which Node can
// only do between a parent and its child. Built by `npm run build` beside the shared-memory addon
// (scripts/build-native.mjs); without it, every connection is served by the front-door workers.
//
// The Unix sockets here are the addon's own, never libuv's: libuv reads pipes with read(), which
// would drop the descriptors. Both ends are non-blocking; whoever sends a descriptor tells the
// other end on its WebSocket channel, after the descriptor is queued, so a receive finds it.
//   listen(name) -> fd: a listening socket at the abstract address `name` (one pending connection)
//   accept(fd, pid) -> fd | -1: the pending connection when the peer is process `pid`; -1: none yet
//   connect(name) -> fd: connected to the abstract address `name` on this host
//   send(fd, socketFd) -> boolean: queues a duplicate of socketFd; false when the queue is full
//   receive(fd) -> fd | -1: the next descriptor queued; -1: none. A message that carries no
//     descriptor, more than one, or more than fit (MSG_CTRUNC) is refused, its descriptors closed.
//   close(fd)
//   sendBuffer(fd, bytes) -> bytes: fixes the socket's kernel send buffer (SO_SNDBUF, which turns
//     off its autotuning); returns the size the kernel chose (Linux doubles what is asked, for its
//     bookkeeping). For streams paced by their socket (head/http/sse.ts): an autotuned loopback send
//     buffer grew to megabytes of items that a paused reader had not asked for.
#define _GNU_SOURCE
#include <errno.h>
#include <node_api.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include "napi-helpers.h"

// Room for more descriptors than the one a handoff carries: a message with extra ones (a confused
// or hostile peer) is read whole and its descriptors closed, instead of left open in this process.
// One with more than even this holds is cut short by the kernel (MSG_CTRUNC), which drops the rest.
#define MAX_RECEIVED_FDS 8

// Control buffers aligned for the cmsghdr read and written in them.
#define CONTROL_BUFFER(name, fds)          \
  union {                                  \
    char bytes[CMSG_SPACE(sizeof(int) * (fds))]; \
    struct cmsghdr align;                  \
  } name

static napi_value Int(napi_env env, int value) {
  napi_value result;
  napi_create_int32(env, value, &result);
  return result;
}

static int Ints(napi_env env, napi_callback_info info, size_t want, int32_t* out) {
  size_t argc = 2;
  napi_value argv[2];
  napi_get_cb_info(env, info, &argc, argv, NULL, NULL);
  if (argc < want) return 0;
  for (size_t i = 0; i < want; i++) {
    if (napi_get_value_int32(env, argv[i], &out[i]) != napi_ok || out[i] < 0) return 0;
  }
  return 1;
}

// An abstract address (a leading NUL: no file, gone with its last socket) from a JS string.
static int Address(napi_env env, napi_callback_info info, struct sockaddr_un* address, socklen_t* length) {
  size_t argc = 1;
  napi_value argv[1];
  napi_get_cb_info(env, info, &argc, argv, NULL, NULL);
  size_t written = 0;
  memset(address, 0, sizeof *address);
  address->sun_family = AF_UNIX;
  if (argc < 1 || napi_get_value_string_utf8(env, argv[0], address->sun_path + 1, sizeof address->sun_path - 1, &written) != napi_ok ||
      written == 0 || written >= sizeof address->sun_path - 2) {
    return 0;
  }
  *length = (socklen_t)(offsetof(struct sockaddr_un, sun_path) + 1 + written);
  return 1;
}

static napi_value Listen(napi_env env, napi_callback_info info) {
  struct sockaddr_un address;
  socklen_t length;
  if (!Address(env, info, &address, &length)) {
    napi_throw_type_error(env, NULL, "listen(name: string of 1 to 100 bytes)");
    return NULL;
  }
  int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (fd < 0) return ThrowErrno(env, "socket");
  if (bind(fd, (struct sockaddr*)&address, length) != 0 || listen(fd, 1) != 0) {
    napi_value thrown = ThrowErrno(env, "listen");
    close(fd);
    return thrown;
  }
  return Int(env, fd);
}

static napi_value Accept(napi_env env, napi_callback_info info) {
  int32_t args[2];
  if (!Ints(env, info, 2, args)) {
    napi_throw_type_error(env, NULL, "accept(fd: number, pid: number)");
    return NULL;
  }
  int fd = accept4(args[0], NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
  if (fd < 0) return errno == EAGAIN || errno == EWOULDBLOCK ? Int(env, -1) : ThrowErrno(env, "accept");
  // Any process on the host may find an abstract address; only the one named may use it.
  struct ucred peer;
  socklen_t size = sizeof peer;
  if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &peer, &size) != 0 || peer.pid != args[1]) {
    close(fd);
    char message[128];
    snprintf(message, sizeof message, "accept: the peer is not process %d", args[1]);
    napi_throw_error(env, NULL, message);
    return NULL;
  }
  return Int(env, fd);
}

static napi_value Connect(napi_env env, napi_callback_info info) {
  struct sockaddr_un address;
  socklen_t length;
  if (!Address(env, info, &address, &length)) {
    napi_throw_type_error(env, NULL, "connect(name: string of 1 to 100 bytes)");
    return NULL;
  }
  int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (fd < 0) return ThrowErrno(env, "socket");
  // A Unix stream connect completes at once or fails (EAGAIN: the backlog is full).
  if (connect(fd, (struct sockaddr*)&address, length) != 0) {
    napi_value thrown = ThrowErrno(env, "connect");
    close(fd);
    return thrown;
  }
  return Int(env, fd);
}

static napi_value Send(napi_env env, napi_callback_info info) {
  int32_t args[2];
  if (!Ints(env, info, 2, args)) {
    napi_throw_type_error(env, NULL, "send(fd: number, socketFd: number)");
    return NULL;
  }
  char byte = 'c';
  struct iovec iov = {&byte, 1};
  CONTROL_BUFFER(control, 1);
  memset(&control, 0, sizeof control);
  struct msghdr message = {0};
  message.msg_iov = &iov;
  message.msg_iovlen = 1;
  message.msg_control = control.bytes;
  message.msg_controllen = sizeof control.bytes;
  struct cmsghdr* header = CMSG_FIRSTHDR(&message);
  header->cmsg_level = SOL_SOCKET;
  header->cmsg_type = SCM_RIGHTS;
  header->cmsg_len = CMSG_LEN(sizeof(int));
  memcpy(CMSG_DATA(header), &args[1], sizeof(int));
  ssize_t sent = sendmsg(args[0], &message, MSG_NOSIGNAL | MSG_DONTWAIT);
  if (sent == 1) {
    napi_value yes;
    napi_get_boolean(env, 1, &yes);
    return yes;
  }
  if (sent < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
    napi_value no;
    napi_get_boolean(env, 0, &no);
    return no;
  }
  return ThrowErrno(env, "send");
}

static void CloseAll(const int* fds, size_t count) {
  for (size_t i = 0; i < count; i++) close(fds[i]);
}

static napi_value Receive(napi_env env, napi_callback_info info) {
  int32_t args[1];
  if (!Ints(env, info, 1, args)) {
    napi_throw_type_error(env, NULL, "receive(fd: number)");
    return NULL;
  }
  char byte;
  struct iovec iov = {&byte, 1};
  CONTROL_BUFFER(control, MAX_RECEIVED_FDS);
  struct msghdr message = {0};
  message.msg_iov = &iov;
  message.msg_iovlen = 1;
  message.msg_control = control.bytes;
  message.msg_controllen = sizeof control.bytes;
  ssize_t got = recvmsg(args[0], &message, MSG_DONTWAIT | MSG_CMSG_CLOEXEC);
  if (got < 0) return errno == EAGAIN || errno == EWOULDBLOCK ? Int(env, -1) : ThrowErrno(env, "receive");
  if (got == 0) {
    napi_throw_error(env, NULL, "receive: the peer closed the handoff socket");
    return NULL;
  }
  // Every descriptor the message brought is now open here: each is either returned or closed.
  int fds[MAX_RECEIVED_FDS];
  size_t count = 0;
  for (struct cmsghdr* header = CMSG_FIRSTHDR(&message); header; header = CMSG_NXTHDR(&message, header)) {
    if (header->cmsg_level != SOL_SOCKET || header->cmsg_type != SCM_RIGHTS || header->cmsg_len < CMSG_LEN(0)) continue;
    size_t carried = (header->cmsg_len - CMSG_LEN(0)) / sizeof(int);
    for (size_t i = 0; i < carried && count < MAX_RECEIVED_FDS; i++) memcpy(&fds[count++], CMSG_DATA(header) + i * sizeof(int), sizeof(int));
  }
  char refused[160];
  if (message.msg_flags & MSG_CTRUNC) {
    snprintf(refused, sizeof refused, "receive: a message with more than %d descriptors (MSG_CTRUNC); closed the %zu received", MAX_RECEIVED_FDS, count);
  } else if (count == 0) {
    snprintf(refused, sizeof refused, "receive: a message without a descriptor");
  } else if (count > 1) {
    snprintf(refused, sizeof refused, "receive: a message with %zu descriptors, not one; closed them", count);
  } else {
    return Int(env, fds[0]);
  }
  CloseAll(fds, count);
  napi_throw_error(env, NULL, refused);
  return NULL;
}

static napi_value Close(napi_env env, napi_callback_info info) {
  int32_t args[1];
  if (!Ints(env, info, 1, args)) {
    napi_throw_type_error(env, NULL, "close(fd: number)");
    return NULL;
  }
  close(args[0]);
  return NULL;
}

static napi_value SendBuffer(napi_env env, napi_callback_info info) {
  int32_t args[2];
  if (!Ints(env, info, 2, args) || args[1] == 0) {
    napi_throw_type_error(env, NULL, "sendBuffer(fd: number, bytes: number > 0)");
    return NULL;
  }
  int size = args[1];
  if (setsockopt(args[0], SOL_SOCKET, SO_SNDBUF, &size, sizeof size) != 0) return ThrowErrno(env, "sendBuffer: setsockopt");
  socklen_t length = sizeof size;
  if (getsockopt(args[0], SOL_SOCKET, SO_SNDBUF, &size, &length) != 0) return ThrowErrno(env, "sendBuffer: getsockopt");
  return Int(env, size);
}

static napi_value Init(napi_env env, napi_value exports) {
  static const Exported functions[] = {{"listen", Listen}, {"accept", Accept}, {"connect", Connect}, {"send", Send}, {"receive", Receive}, {"close", Close}, {"sendBuffer", SendBuffer}};
  return ExportFunctions(env, exports, functions, sizeof functions / sizeof functions[0]);
}

NAPI_MODULE(NODE_GYP_MODULE_NAME, Init)
