// native/troupe-shm.c under the sanitizers: a region made, written and mapped again read-only as
// another process would map it, each refusal (not sealed, too small, not a regular file, gone)
// with no descriptor or mapping left behind. Built and run by test/unit/native-addons.test.ts.
#include "../../native/troupe-shm.c"

#include "napi-fake.h"

// The permissions /proc/self/maps shows for the mapping that holds `address` ("rw-s", "r--s"), or "".
static const char* permissions(const void* address, char out[5]) {
  out[0] = '\0';
  FILE* maps = fopen("/proc/self/maps", "r");
  if (!maps) return out;
  unsigned long from, to;
  char perms[5];
  while (fscanf(maps, "%lx-%lx %4s%*[^\n]", &from, &to, perms) == 3) {
    if ((unsigned long)address >= from && (unsigned long)address < to) {
      memcpy(out, perms, 5);
      break;
    }
  }
  fclose(maps);
  return out;
}

static napi_value open_region(int pid, int fd, double bytes) {
  napi_value args[3] = {fake_int(pid), fake_int(fd), fake_number(bytes)};
  return fake_call("open", 3, args);
}

static void a_region_is_shared_and_mapped_read_only(void) {
  int before = fake_open_fds();
  napi_value size = fake_number(8192);
  napi_value made = fake_call("create", 1, &size);
  CHECK(made != NULL, "create: %s", fake_thrown());
  napi_value buffer = fake_property(made, "buffer");
  int fd = fake_as_int(fake_property(made, "fd"));
  size_t length = 0;
  unsigned char* bytes = fake_buffer_data(buffer, &length);
  CHECK(bytes && length == 8192 && fd >= 0, "a mapped region of 8192 bytes and its fd");
  char perms[5];
  CHECK(strncmp(permissions(bytes, perms), "rw", 2) == 0, "the maker's mapping is writable (%s)", perms);
  for (size_t i = 0; i < length; i++) bytes[i] = (unsigned char)(i * 7);
  CHECK((fcntl(fd, F_GET_SEALS) & (F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL)) == (F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL), "sealed");

  napi_value mapped = open_region(getpid(), fd, 4096);
  size_t mapped_length = 0;
  unsigned char* view = fake_buffer_data(mapped, &mapped_length);
  CHECK(view && mapped_length == 4096, "open: %s", fake_thrown());
  if (view) {
    CHECK(memcmp(view, bytes, 4096) == 0, "the reader sees what the maker wrote");
    CHECK(strcmp(permissions(view, perms), "r--s") == 0, "the reader's mapping is read-only and shared (%s)", perms);
    bytes[10] = 0xab;
    CHECK(view[10] == 0xab, "a later write shows through");
  }
  fake_finalize(mapped);
  CHECK(view == NULL || permissions(view, perms)[0] == '\0', "the reader's mapping is gone once collected");
  fake_finalize(buffer);
  CHECK(fcntl(fd, F_GETFD) == -1, "the maker's fd is closed once its buffer is collected");
  CHECK(fake_open_fds() == before, "%d descriptors open after, %d before", fake_open_fds(), before);
}

static void regions_that_cannot_be_trusted_are_refused(void) {
  int before = fake_open_fds();
  char path[64];
  // Not sealed against shrinking: its maker could truncate it under the reader (SIGBUS).
  int loose = memfd_create("loose", MFD_CLOEXEC);
  CHECK(loose >= 0 && ftruncate(loose, 4096) == 0, "a loose memfd");
  THROWS(open_region(getpid(), loose, 4096), "is not a region sealed against shrinking");
  close(loose);
  napi_value size = fake_number(4096);
  napi_value made = fake_call("create", 1, &size);
  int fd = fake_as_int(fake_property(made, "fd"));
  THROWS(open_region(getpid(), fd, 8192), "is smaller than offered");
  // A pipe (or a device) a peer names is never opened: opening could block or act.
  int pipe_fds[2];
  CHECK(pipe(pipe_fds) == 0, "pipe");
  snprintf(path, sizeof path, "/proc/%d/fd/%d is not a memory region", getpid(), pipe_fds[0]);
  THROWS(open_region(getpid(), pipe_fds[0], 4096), path);
  close(pipe_fds[0]);
  close(pipe_fds[1]);
  THROWS(open_region(getpid(), 1000000, 4096), "No such file or directory");
  fake_finalize(fake_property(made, "buffer"));
  CHECK(fake_open_fds() == before, "%d descriptors open after, %d before: a refusal left some open", fake_open_fds(), before);
}

static void bad_sizes_are_type_errors(void) {
  const double bad[] = {0, -1, 0.5, 1.5, (double)(1ull << 40) + 1, 0.0 / 0.0, 1.0 / 0.0};
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    napi_value size = fake_number(bad[i]);
    THROWS(fake_call("create", 1, &size), "create(bytes");
    CHECK(fake_thrown_type(), "create(%g) is a TypeError", bad[i]);
    THROWS(open_region(getpid(), 3, bad[i]), "open(pid");
  }
  napi_value text = fake_string("4096");
  THROWS(fake_call("create", 1, &text), "create(bytes");
  THROWS(fake_call("create", 0, NULL), "create(bytes");
  THROWS(open_region(0, 3, 4096), "open(pid");
  THROWS(open_region(getpid(), -1, 4096), "open(pid");
}

int main(void) {
  fake_load();
  a_region_is_shared_and_mapped_read_only();
  regions_that_cannot_be_trusted_are_refused();
  bad_sizes_are_type_errors();
  if (fake_failures) {
    fprintf(stderr, "troupe-shm: %d check(s) failed\n", fake_failures);
    return 1;
  }
  printf("troupe-shm: every check passed\n");
  return 0;
}
