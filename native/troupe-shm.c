// Shared memory for tensors between processes on one host (runtime/shm/): a client writes a large
// input into a region it made, and the actor reads it in place instead of through a socket.
// Node has no mmap, so this small N-API addon is built by `npm run build` where a C compiler is
// found (scripts/build-native.mjs); without it, every tensor travels in its frame as before.
//
// Regions are memfds sealed against shrinking: another process maps one through
// /proc/<pid>/fd/<fd> and checks that seal first, so a peer cannot truncate memory under it (with
// a plain shm_open file that is a SIGBUS, and a crash, on the next read).
//   create(bytes) -> { buffer, fd }: a new sealed region, mapped; the fd stays open while mapped
//   open(pid, fd, bytes) -> ArrayBuffer: another process's region, mapped read-only (its reader
//     only reads inputs from it; a stray write faults here instead of changing the client's tensor);
//     throws why it cannot
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <node_api.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "napi-helpers.h"

typedef struct {
  void* address;
  size_t bytes;
  int fd;  // -1 for a region another process made: its fd is closed once mapped
} Mapping;

static void Unmap(napi_env env, void* data, void* hint) {
  (void)env;
  (void)data;
  Mapping* mapping = hint;
  munmap(mapping->address, mapping->bytes);
  if (mapping->fd >= 0) close(mapping->fd);
  free(mapping);
}

static napi_value ArrayBufferOver(napi_env env, void* address, size_t bytes, int fd) {
  Mapping* mapping = malloc(sizeof *mapping);
  if (!mapping) {
    munmap(address, bytes);
    if (fd >= 0) close(fd);
    napi_throw_error(env, NULL, "out of memory");
    return NULL;
  }
  *mapping = (Mapping){address, bytes, fd};
  napi_value buffer;
  if (napi_create_external_arraybuffer(env, address, bytes, Unmap, mapping, &buffer) != napi_ok) {
    Unmap(env, NULL, mapping);
    napi_throw_error(env, NULL, "this runtime does not allow external ArrayBuffers");
    return NULL;
  }
  return buffer;
}

static int ReadSize(napi_env env, napi_value value, size_t* out) {
  double number = 0;
  // Written so that NaN fails too (converting it to size_t is undefined), as does a fraction.
  if (napi_get_value_double(env, value, &number) != napi_ok || !(number >= 1 && number <= (double)(1ull << 40))) return 0;
  if (number != (double)(size_t)number) return 0;
  *out = (size_t)number;
  return 1;
}

static napi_value Create(napi_env env, napi_callback_info info) {
  size_t argc = 1;
  napi_value argv[1];
  size_t bytes = 0;
  napi_get_cb_info(env, info, &argc, argv, NULL, NULL);
  if (argc < 1 || !ReadSize(env, argv[0], &bytes)) {
    napi_throw_type_error(env, NULL, "create(bytes: number from 1 to 2^40)");
    return NULL;
  }
  int fd = memfd_create("troupe-tensors", MFD_CLOEXEC | MFD_ALLOW_SEALING);
  if (fd < 0) return ThrowErrno(env, "memfd_create");
  if (ftruncate(fd, (off_t)bytes) != 0 || fcntl(fd, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL) != 0) {
    napi_value thrown = ThrowErrno(env, "sizing and sealing the region");
    close(fd);
    return thrown;
  }
  void* address = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  if (address == MAP_FAILED) {
    napi_value thrown = ThrowErrno(env, "mmap");
    close(fd);
    return thrown;
  }
  napi_value buffer = ArrayBufferOver(env, address, bytes, fd);
  if (!buffer) return NULL;
  napi_value result, fd_value;
  napi_create_object(env, &result);
  napi_create_int32(env, fd, &fd_value);
  napi_set_named_property(env, result, "buffer", buffer);
  napi_set_named_property(env, result, "fd", fd_value);
  return result;
}

static napi_value Open(napi_env env, napi_callback_info info) {
  size_t argc = 3;
  napi_value argv[3];
  int32_t pid = 0, peer_fd = -1;
  size_t bytes = 0;
  napi_get_cb_info(env, info, &argc, argv, NULL, NULL);
  if (argc < 3 || napi_get_value_int32(env, argv[0], &pid) != napi_ok || napi_get_value_int32(env, argv[1], &peer_fd) != napi_ok ||
      pid < 1 || peer_fd < 0 || !ReadSize(env, argv[2], &bytes)) {
    napi_throw_type_error(env, NULL, "open(pid: number, fd: number, bytes: number)");
    return NULL;
  }
  char path[64];
  snprintf(path, sizeof path, "/proc/%d/fd/%d", pid, peer_fd);
  // Checked before opening too: opening a device or a FIFO a peer names could block or act.
  struct stat st;
  if (stat(path, &st) != 0) return ThrowErrno(env, path);
  if (!S_ISREG(st.st_mode)) {
    char message[128];
    snprintf(message, sizeof message, "%s is not a memory region", path);
    napi_throw_error(env, NULL, message);
    return NULL;
  }
  int fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOCTTY);
  if (fd < 0) return ThrowErrno(env, path);
  int seals = fcntl(fd, F_GET_SEALS);
  const char* refused = NULL;
  if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) refused = "not a memory region";
  else if (seals < 0 || !(seals & F_SEAL_SHRINK)) refused = "not a region sealed against shrinking";
  else if ((size_t)st.st_size < bytes) refused = "smaller than offered";
  if (refused) {
    close(fd);
    char message[128];
    snprintf(message, sizeof message, "%s is %s", path, refused);
    napi_throw_error(env, NULL, message);
    return NULL;
  }
  void* address = mmap(NULL, bytes, PROT_READ, MAP_SHARED, fd, 0);
  close(fd);
  if (address == MAP_FAILED) return ThrowErrno(env, "mmap");
  return ArrayBufferOver(env, address, bytes, -1);
}

static napi_value Init(napi_env env, napi_value exports) {
  static const Exported functions[] = {{"create", Create}, {"open", Open}};
  return ExportFunctions(env, exports, functions, sizeof functions / sizeof functions[0]);
}

NAPI_MODULE(NODE_GYP_MODULE_NAME, Init)
