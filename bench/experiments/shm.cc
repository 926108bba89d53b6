// POSIX shared memory as ArrayBuffers, for bench/shared-memory.ts: the measurement of the design
// change that would let same-host clients hand images to actors without a copy through a socket.
// An experiment, compiled on demand by bench/lib/shm-addon.ts; nothing in the runtime uses it.
//   map(name, bytes, create): an ArrayBuffer over the region `name` (created at `bytes` if asked)
//   unlink(name): removes the region's name (mappings stay valid until collected)
#include <node_api.h>
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

namespace {

struct Mapping {
  void* address;
  size_t bytes;
};

void Unmap(napi_env, void*, void* hint) {
  auto* mapping = static_cast<Mapping*>(hint);
  munmap(mapping->address, mapping->bytes);
  delete mapping;
}

bool ReadName(napi_env env, napi_value value, char (&name)[256]) {
  size_t length = 0;
  return napi_get_value_string_utf8(env, value, name, sizeof name, &length) == napi_ok && length > 0;
}

napi_value Map(napi_env env, napi_callback_info info) {
  size_t argc = 3;
  napi_value argv[3];
  napi_get_cb_info(env, info, &argc, argv, nullptr, nullptr);
  char name[256];
  double bytes = 0;
  bool create = false;
  if (argc < 3 || !ReadName(env, argv[0], name) || napi_get_value_double(env, argv[1], &bytes) != napi_ok || bytes <= 0 ||
      napi_get_value_bool(env, argv[2], &create) != napi_ok) {
    napi_throw_type_error(env, nullptr, "map(name: string, bytes: number, create: boolean)");
    return nullptr;
  }
  const int fd = shm_open(name, create ? (O_CREAT | O_EXCL | O_RDWR) : O_RDWR, 0600);
  if (fd < 0) {
    napi_throw_error(env, nullptr, "shm_open failed");
    return nullptr;
  }
  struct stat st;
  const bool sized = create ? ftruncate(fd, static_cast<off_t>(bytes)) == 0 : fstat(fd, &st) == 0 && st.st_size >= static_cast<off_t>(bytes);
  void* address = sized ? mmap(nullptr, static_cast<size_t>(bytes), PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0) : MAP_FAILED;
  close(fd);
  if (address == MAP_FAILED) {
    napi_throw_error(env, nullptr, "the region is smaller than asked, or mmap failed");
    return nullptr;
  }
  auto* mapping = new Mapping{address, static_cast<size_t>(bytes)};
  napi_value buffer;
  if (napi_create_external_arraybuffer(env, address, mapping->bytes, Unmap, mapping, &buffer) != napi_ok) {
    Unmap(env, nullptr, mapping);
    napi_throw_error(env, nullptr, "external ArrayBuffers are not allowed in this runtime");
    return nullptr;
  }
  return buffer;
}

napi_value Unlink(napi_env env, napi_callback_info info) {
  size_t argc = 1;
  napi_value argv[1];
  napi_get_cb_info(env, info, &argc, argv, nullptr, nullptr);
  char name[256];
  if (argc < 1 || !ReadName(env, argv[0], name)) {
    napi_throw_type_error(env, nullptr, "unlink(name: string)");
    return nullptr;
  }
  shm_unlink(name);
  return nullptr;
}

napi_value Init(napi_env env, napi_value exports) {
  napi_value fn;
  napi_create_function(env, "map", NAPI_AUTO_LENGTH, Map, nullptr, &fn);
  napi_set_named_property(env, exports, "map", fn);
  napi_create_function(env, "unlink", NAPI_AUTO_LENGTH, Unlink, nullptr, &fn);
  napi_set_named_property(env, exports, "unlink", fn);
  return exports;
}

}  // namespace

NAPI_MODULE(NODE_GYP_MODULE_NAME, Init)
