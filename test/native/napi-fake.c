// The stand-in Node-API of napi-fake.h: values live in a fixed pool for the program's life (no
// collector), and only what native/ calls is implemented, with Node's checks on argument types.
#define _GNU_SOURCE
#include "napi-fake.h"

#include <dirent.h>
#include <string.h>

enum Kind { UNDEFINED, NUMBER, BOOLEAN, STRING, OBJECT, FUNCTION, ARRAYBUFFER };

#define MAX_PROPERTIES 16
struct napi_value__ {
  enum Kind kind;
  double number;
  bool boolean;
  char string[512];
  struct {
    char name[64];
    napi_value value;
  } properties[MAX_PROPERTIES];
  size_t property_count;
  napi_callback function;
  void* data;
  size_t length;
  napi_finalize finalize;
  void* hint;
  bool finalized;
};

struct napi_callback_info__ {
  size_t argc;
  napi_value* argv;
};

#define POOL 4096
static struct napi_value__ pool[POOL];
static size_t used;
static char thrown[512];
static bool thrown_is_type;
static bool has_thrown;
static napi_value exports_object;
int fake_failures;

static napi_value make(enum Kind kind) {
  if (used == POOL) {
    fprintf(stderr, "napi-fake: value pool exhausted\n");
    exit(2);
  }
  napi_value value = &pool[used++];
  memset(value, 0, sizeof *value);
  value->kind = kind;
  return value;
}

napi_value fake_int(int32_t value) {
  napi_value v = make(NUMBER);
  v->number = value;
  return v;
}
napi_value fake_number(double value) {
  napi_value v = make(NUMBER);
  v->number = value;
  return v;
}
napi_value fake_string(const char* value) {
  napi_value v = make(STRING);
  snprintf(v->string, sizeof v->string, "%s", value);
  return v;
}
napi_value fake_object(void) { return make(OBJECT); }
int32_t fake_as_int(napi_value value) { return value && value->kind == NUMBER ? (int32_t)value->number : -999; }
bool fake_as_bool(napi_value value) { return value && value->kind == BOOLEAN && value->boolean; }

napi_value fake_property(napi_value object, const char* name) {
  if (!object) return NULL;
  for (size_t i = 0; i < object->property_count; i++)
    if (strcmp(object->properties[i].name, name) == 0) return object->properties[i].value;
  return NULL;
}

void* fake_buffer_data(napi_value buffer, size_t* length) {
  if (!buffer || buffer->kind != ARRAYBUFFER) return NULL;
  *length = buffer->length;
  return buffer->data;
}

void fake_finalize(napi_value buffer) {
  if (!buffer || buffer->kind != ARRAYBUFFER || buffer->finalized) return;
  buffer->finalized = true;
  if (buffer->finalize) buffer->finalize(NULL, buffer->data, buffer->hint);
}

napi_value NAPI_MODULE_INITIALIZER(napi_env env, napi_value exports);

void fake_load(void) {
  exports_object = fake_object();
  napi_value returned = NAPI_MODULE_INITIALIZER(NULL, exports_object);
  if (returned != exports_object) {
    fprintf(stderr, "napi-fake: the addon's init returned another object\n");
    exit(2);
  }
}

napi_value fake_call(const char* name, size_t argc, napi_value* argv) {
  napi_value fn = fake_property(exports_object, name);
  if (!fn || fn->kind != FUNCTION) {
    fprintf(stderr, "napi-fake: the addon has no function '%s'\n", name);
    exit(2);
  }
  has_thrown = false;
  struct napi_callback_info__ info = {argc, argv};
  napi_value result = fn->function(NULL, &info);
  if (has_thrown && result != NULL) {
    fake_failures++;
    fprintf(stderr, "FAIL %s() threw '%s' and still returned a value\n", name, thrown);
  }
  return result;
}

const char* fake_thrown(void) { return has_thrown ? thrown : NULL; }
bool fake_thrown_type(void) { return has_thrown && thrown_is_type; }

int fake_open_fds(void) {
  DIR* dir = opendir("/proc/self/fd");
  if (!dir) return -1;
  int count = 0;
  while (readdir(dir)) count++;
  closedir(dir);
  return count;
}

static napi_status throw(const char* message, bool type) {
  if (has_thrown) {
    // Node refuses a second throw while one is pending; an addon doing so has a bug.
    fake_failures++;
    fprintf(stderr, "FAIL a second exception ('%s') while '%s' is pending\n", message, thrown);
    return napi_pending_exception;
  }
  has_thrown = true;
  thrown_is_type = type;
  snprintf(thrown, sizeof thrown, "%s", message);
  return napi_ok;
}

napi_status napi_throw_error(napi_env env, const char* code, const char* msg) {
  (void)env;
  (void)code;
  return throw(msg, false);
}
napi_status napi_throw_type_error(napi_env env, const char* code, const char* msg) {
  (void)env;
  (void)code;
  return throw(msg, true);
}

napi_status napi_create_int32(napi_env env, int32_t value, napi_value* result) {
  (void)env;
  *result = fake_int(value);
  return napi_ok;
}
napi_status napi_create_object(napi_env env, napi_value* result) {
  (void)env;
  *result = fake_object();
  return napi_ok;
}
napi_status napi_get_boolean(napi_env env, bool value, napi_value* result) {
  (void)env;
  *result = make(BOOLEAN);
  (*result)->boolean = value;
  return napi_ok;
}
napi_status napi_create_function(napi_env env, const char* utf8name, size_t length, napi_callback cb, void* data, napi_value* result) {
  (void)env;
  (void)length;
  (void)data;
  *result = make(FUNCTION);
  snprintf((*result)->string, sizeof (*result)->string, "%s", utf8name);
  (*result)->function = cb;
  return napi_ok;
}
napi_status napi_set_named_property(napi_env env, napi_value object, const char* utf8name, napi_value value) {
  (void)env;
  if (!object || (object->kind != OBJECT && object->kind != FUNCTION)) return napi_object_expected;
  if (object->property_count == MAX_PROPERTIES) return napi_generic_failure;
  snprintf(object->properties[object->property_count].name, sizeof object->properties[0].name, "%s", utf8name);
  object->properties[object->property_count++].value = value;
  return napi_ok;
}
napi_status napi_get_cb_info(napi_env env, napi_callback_info info, size_t* argc, napi_value* argv, napi_value* this_arg, void** data) {
  (void)env;
  if (argc) {
    // As Node: argv gets min(*argc, given) values, the rest of its room undefined; *argc the count given.
    for (size_t i = 0; i < *argc; i++) argv[i] = i < info->argc ? info->argv[i] : make(UNDEFINED);
    *argc = info->argc;
  }
  if (this_arg) *this_arg = make(UNDEFINED);
  if (data) *data = NULL;
  return napi_ok;
}
napi_status napi_get_value_int32(napi_env env, napi_value value, int32_t* result) {
  (void)env;
  if (!value || value->kind != NUMBER) return napi_number_expected;
  double n = value->number;
  // As V8: NaN and infinities are 0, the rest truncated and wrapped to 32 bits.
  *result = n != n || n > 9e18 || n < -9e18 ? 0 : (int32_t)(uint32_t)(int64_t)n;
  return napi_ok;
}
napi_status napi_get_value_double(napi_env env, napi_value value, double* result) {
  (void)env;
  if (!value || value->kind != NUMBER) return napi_number_expected;
  *result = value->number;
  return napi_ok;
}
napi_status napi_get_value_string_utf8(napi_env env, napi_value value, char* buf, size_t bufsize, size_t* result) {
  (void)env;
  if (!value || value->kind != STRING) return napi_string_expected;
  size_t length = strlen(value->string);
  if (!buf) {
    if (result) *result = length;
    return napi_ok;
  }
  size_t copied = bufsize == 0 ? 0 : (length < bufsize - 1 ? length : bufsize - 1);
  memcpy(buf, value->string, copied);
  if (bufsize > 0) buf[copied] = '\0';
  if (result) *result = copied;
  return napi_ok;
}
napi_status napi_create_external_arraybuffer(napi_env env, void* external_data, size_t byte_length, napi_finalize finalize_cb,
                                             void* finalize_hint, napi_value* result) {
  (void)env;
  *result = make(ARRAYBUFFER);
  (*result)->data = external_data;
  (*result)->length = byte_length;
  (*result)->finalize = finalize_cb;
  (*result)->hint = finalize_hint;
  return napi_ok;
}
