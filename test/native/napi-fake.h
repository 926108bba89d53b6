// A small stand-in for Node-API, enough for the addons in native/ to run in a plain C program:
// each addon's test (handoff-test.c, shm-test.c) includes the addon's source, registers it through
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
// An ArrayBuffer's bytes and length; fake_finalize runs its finalizer (the collector's part) once.
void* fake_buffer_data(napi_value buffer, size_t* length);
void fake_finalize(napi_value buffer);

// Registers the addon (its napi_register_module_v1), then calls its function `name` with `argc`
// arguments. fake_thrown() is the message the last call threw, or NULL; fake_thrown_type() says
// whether it was a TypeError.
void fake_load(void);
napi_value fake_call(const char* name, size_t argc, napi_value* argv);
const char* fake_thrown(void);
bool fake_thrown_type(void);

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
