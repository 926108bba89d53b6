// A small stand-in for Node-API, enough for the addons in native/ to run in a plain C program:
// each addon's test (handoff-test.c, shm-test.c, accept-test.c) includes the addon's source, registers it through
// its real NAPI_MODULE entry point, and calls its functions as Node would, under AddressSanitizer
// and UndefinedBehaviorSanitizer (test/unit/native-addons.test.ts builds and runs them).
#ifndef TROUPE_NAPI_FAKE_H
#define TROUPE_NAPI_FAKE_H
#include <node_api.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>

// Values the tests make and read.
napi_value fake_int(int32_t value);
napi_value fake_number(double value);
napi_value fake_string(const char* value);
napi_value fake_object(void);
int32_t fake_as_int(napi_value value);
bool fake_as_bool(napi_value value);
napi_value fake_property(napi_value object, const char* name);
// A string's bytes (NUL-terminated) and their count; a latin1 string holds the bytes it was made
// from, NULs included. NULL for a value that is not a string.
const char* fake_as_string(napi_value value, size_t* length);
// An ArrayBuffer's bytes and length; fake_finalize runs the finalizer of an ArrayBuffer or an
// external (the collector's part) once.
void* fake_buffer_data(napi_value buffer, size_t* length);
void fake_finalize(napi_value value);

// Registers the addon (its napi_register_module_v1), then calls its function `name` with `argc`
// arguments. fake_thrown() is the message the last call threw, or NULL; fake_thrown_type() says
// whether it was a TypeError.
void fake_load(void);
napi_value fake_call(const char* name, size_t argc, napi_value* argv);
const char* fake_thrown(void);
bool fake_thrown_type(void);

// Threadsafe functions, as Node's: napi_call_threadsafe_function, from any thread, only queues
// its data. fake_run_queued, on the test's thread (Node's event loop), runs call_js for each item
// queued and returns how many ran; a function released by its last thread runs what it still has
// queued and then its finalizer (aborted, it runs each item with no env and no function, as Node
// does), and is gone. fake_queued: the items queued and not run yet; fake_live_tsfns: the
// threadsafe functions not finalized yet.
int fake_run_queued(void);
int fake_queued(void);
int fake_live_tsfns(void);
// The environment ends: its cleanup hooks run (last added first), then every threadsafe function
// left is emptied (its items run with no env) and finalized. fake_cleanup_hooks: hooks added and
// not removed.
void fake_teardown(void);
int fake_cleanup_hooks(void);

// The number of descriptors open in this process (/proc/self/fd), to find one a case left open.
int fake_open_fds(void);

extern int fake_failures;
#define CHECK(cond, ...)                                              \
  do {                                                                \
    if (!(cond)) {                                                    \
      fake_failures++;                                                \
      fprintf(stderr, "FAIL %s:%d: %s: ", __FILE__, __LINE__, #cond); \
      fprintf(stderr, __VA_ARGS__);                                   \
      fprintf(stderr, "\n");                                          \
    }                                                                 \
  } while (0)
#define THROWS(call, pattern)                                                                                    \
  do {                                                                                                           \
    napi_value thrown_result_ = (call);                                                                          \
    CHECK(thrown_result_ == NULL && fake_thrown() && strstr(fake_thrown(), (pattern)), "threw '%s', wanted '%s'", \
          fake_thrown() ? fake_thrown() : "(nothing)", (pattern));                                               \
  } while (0)

#endif
