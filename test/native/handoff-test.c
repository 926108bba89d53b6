// native/troupe-handoff.c under the sanitizers: the handoff of a connection, and each way a
// receive can be refused (extra descriptors, more than fit, none, a closed peer), with no
// descriptor left open by any of them. Built and run by test/unit/native-addons.test.ts.
#include "../../native/troupe-handoff.c"

#include <fcntl.h>
#include <netinet/in.h>

#include "napi-fake.h"

static int name_counter;

static napi_value unique_name(void) {
  char name[64];
  snprintf(name, sizeof name, "troupe-handoff-test-%d-%d", getpid(), name_counter++);
  return fake_string(name);
}

// A connected pair of the addon's handoff sockets: `sender` connects, `receiver` is accepted.
static void handoff_pair(int* sender, int* receiver) {
  napi_value name = unique_name();
  int listener = fake_as_int(fake_call("listen", 1, &name));
  CHECK(listener >= 0, "listen: %s", fake_thrown());
  *sender = fake_as_int(fake_call("connect", 1, &name));
  CHECK(*sender >= 0, "connect: %s", fake_thrown());
  napi_value args[2] = {fake_int(listener), fake_int(getpid())};
  *receiver = fake_as_int(fake_call("accept", 2, args));
  CHECK(*receiver >= 0, "accept: %s", fake_thrown());
  close(listener);
}

// Sends one byte with `count` descriptors (duplicates of `fd`) in one SCM_RIGHTS message, as a
// peer other than the addon might.
static void send_fds(int socket_fd, int fd, int count) {
  char byte = 'c';
  struct iovec iov = {&byte, 1};
  union {
    char bytes[CMSG_SPACE(sizeof(int) * 64)];
    struct cmsghdr align;
  } control;
  memset(&control, 0, sizeof control);
  struct msghdr message = {0};
  message.msg_iov = &iov;
  message.msg_iovlen = 1;
  if (count > 0) {
    message.msg_control = control.bytes;
    message.msg_controllen = CMSG_SPACE(sizeof(int) * count);
    struct cmsghdr* header = CMSG_FIRSTHDR(&message);
    header->cmsg_level = SOL_SOCKET;
    header->cmsg_type = SCM_RIGHTS;
    header->cmsg_len = CMSG_LEN(sizeof(int) * count);
    for (int i = 0; i < count; i++) memcpy(CMSG_DATA(header) + i * sizeof(int), &fd, sizeof(int));
  }
  CHECK(sendmsg(socket_fd, &message, MSG_NOSIGNAL) == 1, "sendmsg: %s", strerror(errno));
}

static napi_value receive(int fd) {
  napi_value arg = fake_int(fd);
  return fake_call("receive", 1, &arg);
}

static void a_connection_is_handed_over(void) {
  int before = fake_open_fds();
  int sender, receiver, pair[2];
  handoff_pair(&sender, &receiver);
  CHECK(fake_as_int(receive(receiver)) == -1, "an empty queue receives -1");
  CHECK(socketpair(AF_UNIX, SOCK_STREAM, 0, pair) == 0, "socketpair");
  napi_value args[2] = {fake_int(sender), fake_int(pair[0])};
  CHECK(fake_as_bool(fake_call("send", 2, args)), "send: %s", fake_thrown());
  int got = fake_as_int(receive(receiver));
  CHECK(got >= 0, "receive: %s", fake_thrown());
  // The descriptor received is the connection: what is written to it arrives at its other end.
  CHECK(write(got, "hi", 2) == 2, "write");
  char buffer[2] = {0};
  CHECK(read(pair[1], buffer, 2) == 2 && memcmp(buffer, "hi", 2) == 0, "the bytes written arrive");
  CHECK((fcntl(got, F_GETFD) & FD_CLOEXEC) != 0, "a received descriptor is close-on-exec");
  napi_value closing = fake_int(got);
  fake_call("close", 1, &closing);
  close(pair[0]);
  close(pair[1]);
  close(sender);
  close(receiver);
  CHECK(fake_open_fds() == before, "%d descriptors open after, %d before", fake_open_fds(), before);
}

static void extra_descriptors_are_closed_and_refused(void) {
  int before = fake_open_fds();
  int sender, receiver;
  handoff_pair(&sender, &receiver);
  send_fds(sender, STDERR_FILENO, 2);
  THROWS(receive(receiver), "a message with 2 descriptors, not one; closed them");
  send_fds(sender, STDERR_FILENO, 8);
  THROWS(receive(receiver), "a message with 8 descriptors, not one; closed them");
  // More than the receive has room for: the kernel cuts the message short and says so.
  send_fds(sender, STDERR_FILENO, 9);
  THROWS(receive(receiver), "(MSG_CTRUNC); closed the 8 received");
  send_fds(sender, STDERR_FILENO, 60);
  THROWS(receive(receiver), "(MSG_CTRUNC)");
  send_fds(sender, STDERR_FILENO, 0);
  THROWS(receive(receiver), "a message without a descriptor");
  // The socket still works after each refusal.
  send_fds(sender, STDERR_FILENO, 1);
  int got = fake_as_int(receive(receiver));
  CHECK(got >= 0, "receive after refusals: %s", fake_thrown());
  close(got);
  close(sender);
  THROWS(receive(receiver), "the peer closed the handoff socket");
  close(receiver);
  CHECK(fake_open_fds() == before, "%d descriptors open after, %d before: a refused message left some open", fake_open_fds(), before);
}

static void only_the_named_peer_is_accepted(void) {
  int before = fake_open_fds();
  napi_value name = unique_name();
  int listener = fake_as_int(fake_call("listen", 1, &name));
  int sender = fake_as_int(fake_call("connect", 1, &name));
  napi_value args[2] = {fake_int(listener), fake_int(getpid() + 1)};
  THROWS(fake_call("accept", 2, args), "the peer is not process");
  napi_value again[2] = {fake_int(listener), fake_int(getpid())};
  CHECK(fake_as_int(fake_call("accept", 2, again)) == -1, "no connection is pending after the refusal");
  close(sender);
  close(listener);
  CHECK(fake_open_fds() == before, "%d descriptors open after, %d before", fake_open_fds(), before);
}

static void a_send_buffer_is_fixed_at_the_size_asked(void) {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  CHECK(fd >= 0, "socket");
  napi_value args[2] = {fake_int(fd), fake_int(16384)};
  int size = fake_as_int(fake_call("sendBuffer", 2, args));
  int kernel = 0;
  socklen_t length = sizeof kernel;
  CHECK(getsockopt(fd, SOL_SOCKET, SO_SNDBUF, &kernel, &length) == 0, "getsockopt");
  CHECK(size == kernel && size >= 16384 && size <= 2 * 16384, "sendBuffer answered %d, the kernel has %d", size, kernel);
  close(fd);
  napi_value closed[2] = {fake_int(fd), fake_int(16384)};
  THROWS(fake_call("sendBuffer", 2, closed), "sendBuffer: setsockopt");
  napi_value zero[2] = {fake_int(3), fake_int(0)};
  THROWS(fake_call("sendBuffer", 2, zero), "sendBuffer(fd");
  CHECK(fake_thrown_type(), "a zero size is a TypeError");
}

static void bad_arguments_are_type_errors(void) {
  THROWS(fake_call("listen", 0, NULL), "listen(name");
  CHECK(fake_thrown_type(), "a TypeError");
  napi_value empty = fake_string("");
  THROWS(fake_call("listen", 1, &empty), "listen(name");
  char long_name[200];
  memset(long_name, 'x', sizeof long_name - 1);
  long_name[sizeof long_name - 1] = '\0';
  napi_value too_long = fake_string(long_name);
  THROWS(fake_call("connect", 1, &too_long), "connect(name");
  napi_value negative = fake_int(-1);
  THROWS(fake_call("receive", 1, &negative), "receive(fd");
  napi_value text = fake_string("3");
  THROWS(fake_call("close", 1, &text), "close(fd");
  napi_value one[1] = {fake_int(3)};
  THROWS(fake_call("send", 1, one), "send(fd");
  napi_value nobody = unique_name();
  THROWS(fake_call("connect", 1, &nobody), "connect: Connection refused");
  CHECK(!fake_thrown_type(), "a failed connect is an Error, not a TypeError");
}

int main(void) {
  fake_load();
  a_connection_is_handed_over();
  extra_descriptors_are_closed_and_refused();
  only_the_named_peer_is_accepted();
  a_send_buffer_is_fixed_at_the_size_asked();
  bad_arguments_are_type_errors();
  if (fake_failures) {
    fprintf(stderr, "troupe-handoff: %d check(s) failed\n", fake_failures);
    return 1;
  }
  printf("troupe-handoff: every check passed\n");
  return 0;
}
