// What the addons in native/ share: each is compiled on its own (scripts/build-native.mjs), so
// these are static, one copy in each.
#ifndef TROUPE_NAPI_HELPERS_H
#define TROUPE_NAPI_HELPERS_H
#include <errno.h>
#include <node_api.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>

// Throws an Error saying `what` failed, with errno's text; returns NULL for the caller to return.
static napi_value ThrowErrno(napi_env env, const char* what) {
  char message[256];
  snprintf(message, sizeof message, "%s: %s", what, strerror(errno));
  napi_throw_error(env, NULL, message);
  return NULL;
}

typedef struct {
  const char* name;
  napi_callback fn;
} Exported;

// Sets each function on `exports` under its name; returns `exports`, as a module's Init does.
static napi_value ExportFunctions(napi_env env, napi_value exports, const Exported* functions, size_t count) {
  for (size_t i = 0; i < count; i++) {
    napi_value fn;
    napi_create_function(env, functions[i].name, NAPI_AUTO_LENGTH, functions[i].fn, NULL, &fn);
    napi_set_named_property(env, exports, functions[i].name, fn);
  }
  return exports;
}

#endif
