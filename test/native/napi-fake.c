// The stand-in Node-API of napi-fake.h: values live for the program's life (no collector), and
// only what native/ calls is implemented, with Node's checks on argument types. Values are made on
// the test's thread only (Node's JS thread); of what an addon's own thread may call, only
// napi_call_threadsafe_function is implemented, under its function's mutex.
#define _GNU_SOURCE
#include "napi-fake.h"

#include <dirent.h>
#include <pthread.h>
#include <string.h>

enum Kind { UNDEFINED, NUMBER, BOOLEAN, STRING, OBJECT, FUNCTION, ARRAYBUFFER, EXTERNAL };

#define MAX_PROPERTIES 16
#define MAX_STRING 1024
struct napi_value__ {
  enum Kind kind;
  double number;
  bool boolean;
  char string[MAX_STRING + 1];  // a string's bytes (length in `length`), or a function's name
  struct {
    char name[64];
    napi_value value;
  } properties[MAX_PROPERTIES];
  size_t property_count;
  napi_callback function;
  void* data;  // an ArrayBuffer's bytes, an external's data, a function's data
  size_t length;
  napi_finalize finalize;
  void* hint;
  bool finalized;
};

struct napi_callback_info__ {
  size_t argc;
  napi_value* argv;
  napi_value this_arg;
  void* data;
};

// The env every call gets: addons pass it on and may test it against NULL (a threadsafe
// function's call_js gets NULL while its function is torn down).
struct napi_env__ {
  int unused;
};
static struct napi_env__ env_instance;
static napi_env const fake_env = &env_instance;

// Values come in chunks that are never freed or moved, so a napi_value stays valid for the
// program's life (and stays reachable, so LeakSanitizer does not count them).
#define CHUNK 1024
#define CHUNKS 256
static struct napi_value__* chunks[CHUNKS];
static size_t used;
static char thrown[512];
static bool thrown_is_type;
static bool has_thrown;
static napi_value exports_object;
static napi_value global_object;
static pthread_t js_thread;
static bool js_thread_known;
int fake_failures;

static napi_value make(enum Kind kind) {
  if (js_thread_known && !pthread_equal(pthread_self(), js_thread)) {
    // Node-API calls that make values are for the JS thread alone; an addon's thread doing so has a bug.
    fprintf(stderr, "napi-fake: a value made off the JS thread\n");
    abort();
  }
  if (used == (size_t)CHUNK * CHUNKS) {
    fprintf(stderr, "napi-fake: value pool exhausted\n");
    exit(2);
  }
  if (used % CHUNK == 0) {
    chunks[used / CHUNK] = calloc(CHUNK, sizeof(struct napi_value__));
    if (!chunks[used / CHUNK]) {
      fprintf(stderr, "napi-fake: out of memory\n");
      exit(2);
    }
  }
  napi_value value = &chunks[used / CHUNK][used % CHUNK];
  used++;
  memset(value, 0, sizeof *value);
  value->kind = kind;
  return value;
}

static napi_value make_string(const char* bytes, size_t length) {
  if (length > MAX_STRING) {
    fprintf(stderr, "napi-fake: a string of %zu bytes, past the fake's %d\n", length, MAX_STRING);
    exit(2);
  }
  napi_value v = make(STRING);
  memcpy(v->string, bytes, length);
  v->string[length] = '\0';
  v->length = length;
  return v;
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
napi_value fake_string(const char* value) { return make_string(value, strlen(value)); }
napi_value fake_object(void) { return make(OBJECT); }
int32_t fake_as_int(napi_value value) { return value && value->kind == NUMBER ? (int32_t)value->number : -999; }
bool fake_as_bool(napi_value value) { return value && value->kind == BOOLEAN && value->boolean; }

napi_value fake_property(napi_value object, const char* name) {
  if (!object) return NULL;
  for (size_t i = 0; i < object->property_count; i++)
    if (strcmp(object->properties[i].name, name) == 0) return object->properties[i].value;
  return NULL;
}

const char* fake_as_string(napi_value value, size_t* length) {
  if (!value || value->kind != STRING) return NULL;
  if (length) *length = value->length;
  return value->string;
}

void* fake_buffer_data(napi_value buffer, size_t* length) {
  if (!buffer || buffer->kind != ARRAYBUFFER) return NULL;
  *length = buffer->length;
  return buffer->data;
}

void fake_finalize(napi_value value) {
  if (!value || (value->kind != ARRAYBUFFER && value->kind != EXTERNAL) || value->finalized) return;
  value->finalized = true;
  if (value->finalize) value->finalize(fake_env, value->data, value->hint);
}

napi_value NAPI_MODULE_INITIALIZER(napi_env env, napi_value exports);

void fake_load(void) {
  js_thread = pthread_self();
  js_thread_known = true;
  exports_object = fake_object();
  napi_value returned = NAPI_MODULE_INITIALIZER(fake_env, exports_object);
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
  struct napi_callback_info__ info = {argc, argv, make(UNDEFINED), fn->data};
  napi_value result = fn->function(fake_env, &info);
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
  *result = make(FUNCTION);
  snprintf((*result)->string, sizeof (*result)->string, "%s", utf8name);
  (*result)->function = cb;
  (*result)->data = data;
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
  if (this_arg) *this_arg = info->this_arg;
  if (data) *data = info->data;
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
  size_t length = value->length;
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

napi_status napi_create_string_utf8(napi_env env, const char* str, size_t length, napi_value* result) {
  (void)env;
  if (!result || (!str && length != 0)) return napi_invalid_arg;
  *result = make_string(str ? str : "", length == NAPI_AUTO_LENGTH ? strlen(str) : length);
  return napi_ok;
}
// Node makes each byte a character; the fake keeps the bytes (fake_as_string gives them back).
napi_status napi_create_string_latin1(napi_env env, const char* str, size_t length, napi_value* result) {
  return napi_create_string_utf8(env, str, length, result);
}
napi_status napi_get_global(napi_env env, napi_value* result) {
  (void)env;
  if (!global_object) global_object = fake_object();
  *result = global_object;
  return napi_ok;
}
napi_status napi_typeof(napi_env env, napi_value value, napi_valuetype* result) {
  (void)env;
  if (!value || !result) return napi_invalid_arg;
  static const napi_valuetype types[] = {
      [UNDEFINED] = napi_undefined, [NUMBER] = napi_number,   [BOOLEAN] = napi_boolean,     [STRING] = napi_string,
      [OBJECT] = napi_object,       [FUNCTION] = napi_function, [ARRAYBUFFER] = napi_object, [EXTERNAL] = napi_external,
  };
  *result = types[value->kind];
  return napi_ok;
}
napi_status napi_create_external(napi_env env, void* data, napi_finalize finalize_cb, void* finalize_hint, napi_value* result) {
  (void)env;
  *result = make(EXTERNAL);
  (*result)->data = data;
  (*result)->finalize = finalize_cb;
  (*result)->hint = finalize_hint;
  return napi_ok;
}
napi_status napi_get_value_external(napi_env env, napi_value value, void** result) {
  (void)env;
  if (!value || value->kind != EXTERNAL) return napi_invalid_arg;
  *result = value->data;
  return napi_ok;
}
// As Node: refused while an exception is pending; a callback that throws leaves its exception
// pending and `result` unset (napi_pending_exception).
napi_status napi_call_function(napi_env env, napi_value recv, napi_value func, size_t argc, const napi_value* argv, napi_value* result) {
  if (has_thrown) return napi_pending_exception;
  if (!func || func->kind != FUNCTION) return napi_function_expected;
  if (argc > 0 && !argv) return napi_invalid_arg;
  struct napi_callback_info__ info = {argc, (napi_value*)argv, recv ? recv : make(UNDEFINED), func->data};
  napi_value returned = func->function(env, &info);
  if (has_thrown) return napi_pending_exception;
  if (result) *result = returned ? returned : make(UNDEFINED);
  return napi_ok;
}
// The exception is given as a string of its message (Node gives the Error), or undefined if none.
napi_status napi_get_and_clear_last_exception(napi_env env, napi_value* result) {
  (void)env;
  if (!has_thrown) {
    *result = make(UNDEFINED);
    return napi_ok;
  }
  has_thrown = false;
  *result = fake_string(thrown);
  return napi_ok;
}

// Threadsafe functions. The queue and the thread count are the only state another thread
// touches, under `lock`; the list of live functions is the JS thread's.
typedef struct QueuedCall {
  void* data;
  struct QueuedCall* next;
} QueuedCall;

struct napi_threadsafe_function__ {
  pthread_mutex_t lock;
  pthread_cond_t room;  // signalled as the queue shrinks, for a blocking call at max_queue_size
  QueuedCall *first, *last;
  size_t queued, max_queue;
  size_t threads;  // acquired and not released; 0: released, calls are refused
  bool aborted;
  bool refed;
  napi_value func;
  void* context;
  napi_threadsafe_function_call_js call_js;
  napi_finalize finalize;
  void* finalize_data;
  napi_threadsafe_function next_live;
};

static napi_threadsafe_function live_tsfns;

napi_status napi_create_threadsafe_function(napi_env env, napi_value func, napi_value async_resource, napi_value async_resource_name,
                                            size_t max_queue_size, size_t initial_thread_count, void* thread_finalize_data,
                                            napi_finalize thread_finalize_cb, void* context, napi_threadsafe_function_call_js call_js_cb,
                                            napi_threadsafe_function* result) {
  (void)env;
  (void)async_resource;
  // As Node: a name is required, at least one thread, and a function or a call_js.
  if (!async_resource_name || async_resource_name->kind != STRING || initial_thread_count == 0 || !result) return napi_invalid_arg;
  if (!func && !call_js_cb) return napi_invalid_arg;
  if (func && func->kind != FUNCTION) return napi_function_expected;
  napi_threadsafe_function tsfn = calloc(1, sizeof *tsfn);
  if (!tsfn) return napi_generic_failure;
  pthread_mutex_init(&tsfn->lock, NULL);
  pthread_cond_init(&tsfn->room, NULL);
  tsfn->max_queue = max_queue_size;
  tsfn->threads = initial_thread_count;
  tsfn->refed = true;
  tsfn->func = func;
  tsfn->context = context;
  tsfn->call_js = call_js_cb;
  tsfn->finalize = thread_finalize_cb;
  tsfn->finalize_data = thread_finalize_data;
  napi_threadsafe_function* at = &live_tsfns;
  while (*at) at = &(*at)->next_live;
  *at = tsfn;
  *result = tsfn;
  return napi_ok;
}

// From any thread: queues `data` for fake_run_queued. After the function's last release (or an
// abort) a call is refused with napi_closing; in Node the function may be gone by then, so an
// addon must not call it at all.
napi_status napi_call_threadsafe_function(napi_threadsafe_function func, void* data, napi_threadsafe_function_call_mode is_blocking) {
  if (!func) return napi_invalid_arg;
  QueuedCall* call = malloc(sizeof *call);
  if (!call) return napi_generic_failure;
  call->data = data;
  call->next = NULL;
  napi_status status = napi_ok;
  pthread_mutex_lock(&func->lock);
  while (func->max_queue > 0 && func->queued >= func->max_queue && func->threads > 0 && !func->aborted) {
    if (is_blocking == napi_tsfn_nonblocking) {
      status = napi_queue_full;
      break;
    }
    pthread_cond_wait(&func->room, &func->lock);
  }
  if (status == napi_ok && (func->threads == 0 || func->aborted)) status = napi_closing;
  if (status == napi_ok) {
    if (func->last) func->last->next = call;
    else func->first = call;
    func->last = call;
    func->queued++;
  }
  pthread_mutex_unlock(&func->lock);
  if (status != napi_ok) free(call);
  return status;
}

napi_status napi_release_threadsafe_function(napi_threadsafe_function func, napi_threadsafe_function_release_mode mode) {
  if (!func) return napi_invalid_arg;
  napi_status status = napi_ok;
  pthread_mutex_lock(&func->lock);
  if (func->threads == 0) {
    status = napi_invalid_arg;
  } else {
    func->threads--;
    if (mode == napi_tsfn_abort) func->aborted = true;
    pthread_cond_broadcast(&func->room);
  }
  pthread_mutex_unlock(&func->lock);
  return status;
}

napi_status napi_unref_threadsafe_function(napi_env env, napi_threadsafe_function func) {
  (void)env;
  if (!func) return napi_invalid_arg;
  func->refed = false;
  return napi_ok;
}

// The next item queued on `tsfn`, or NULL; *done: none is queued and none can be any more.
static QueuedCall* next_call(napi_threadsafe_function tsfn, bool* done, bool* aborted) {
  pthread_mutex_lock(&tsfn->lock);
  QueuedCall* call = tsfn->first;
  if (call) {
    tsfn->first = call->next;
    if (!tsfn->first) tsfn->last = NULL;
    tsfn->queued--;
    pthread_cond_broadcast(&tsfn->room);
  }
  *aborted = tsfn->aborted;
  *done = !call && (tsfn->threads == 0 || tsfn->aborted);
  pthread_mutex_unlock(&tsfn->lock);
  return call;
}

static void run_call(napi_threadsafe_function tsfn, napi_env env, void* data) {
  // Each call starts as a turn of Node's event loop would: with no exception pending.
  has_thrown = false;
  napi_value func = env ? tsfn->func : NULL;
  if (tsfn->call_js) {
    tsfn->call_js(env, func, tsfn->context, data);
  } else if (env) {
    napi_value ignored;
    napi_call_function(env, NULL, func, 0, NULL, &ignored);
  }
  if (has_thrown) {
    // Node raises an exception call_js leaves pending as uncaught: the process would die of it.
    fake_failures++;
    fprintf(stderr, "FAIL a threadsafe function's call left an exception pending ('%s')\n", thrown);
    has_thrown = false;
  }
}

int fake_run_queued(void) {
  int ran = 0;
  napi_threadsafe_function tsfn = live_tsfns;
  while (tsfn) {
    bool done = false, aborted = false;
    QueuedCall* call;
    while (!done && (call = next_call(tsfn, &done, &aborted)) != NULL) {
      // As Node: once aborted, what is still queued gets no env and no function.
      run_call(tsfn, aborted ? NULL : fake_env, call->data);
      free(call);
      ran++;
    }
    napi_threadsafe_function next = tsfn->next_live;
    if (done) {
      napi_threadsafe_function* at = &live_tsfns;
      while (*at != tsfn) at = &(*at)->next_live;
      *at = tsfn->next_live;
      if (tsfn->finalize) tsfn->finalize(fake_env, tsfn->finalize_data, tsfn->context);
      pthread_cond_destroy(&tsfn->room);
      pthread_mutex_destroy(&tsfn->lock);
      free(tsfn);
    }
    tsfn = next;
  }
  return ran;
}

int fake_queued(void) {
  int queued = 0;
  for (napi_threadsafe_function tsfn = live_tsfns; tsfn; tsfn = tsfn->next_live) {
    pthread_mutex_lock(&tsfn->lock);
    queued += (int)tsfn->queued;
    pthread_mutex_unlock(&tsfn->lock);
  }
  return queued;
}

int fake_live_tsfns(void) {
  int live = 0;
  for (napi_threadsafe_function tsfn = live_tsfns; tsfn; tsfn = tsfn->next_live) live++;
  return live;
}

// Environment cleanup hooks, run by fake_teardown in the reverse of their order, as Node runs them
// when an environment ends; then every threadsafe function left is emptied (its items run with no
// env, as Node's teardown does) and finalized.
typedef struct CleanupHook {
  void (*fn)(void*);
  void* arg;
  struct CleanupHook* next;
} CleanupHook;
static CleanupHook* cleanup_hooks;

napi_status napi_add_env_cleanup_hook(napi_env env, void (*fun)(void* arg), void* arg) {
  (void)env;
  CleanupHook* hook = malloc(sizeof *hook);
  if (!hook) return napi_generic_failure;
  *hook = (CleanupHook){fun, arg, cleanup_hooks};
  cleanup_hooks = hook;
  return napi_ok;
}

napi_status napi_remove_env_cleanup_hook(napi_env env, void (*fun)(void* arg), void* arg) {
  (void)env;
  for (CleanupHook** at = &cleanup_hooks; *at; at = &(*at)->next) {
    if ((*at)->fn == fun && (*at)->arg == arg) {
      CleanupHook* gone = *at;
      *at = gone->next;
      free(gone);
      return napi_ok;
    }
  }
  return napi_invalid_arg;
}

int fake_cleanup_hooks(void) {
  int count = 0;
  for (CleanupHook* hook = cleanup_hooks; hook; hook = hook->next) count++;
  return count;
}

void fake_teardown(void) {
  while (cleanup_hooks) {
    CleanupHook* hook = cleanup_hooks;
    cleanup_hooks = hook->next;
    hook->fn(hook->arg);
    free(hook);
  }
  while (live_tsfns) {
    napi_threadsafe_function tsfn = live_tsfns;
    pthread_mutex_lock(&tsfn->lock);
    tsfn->aborted = true;
    tsfn->threads = 0;
    pthread_mutex_unlock(&tsfn->lock);
    fake_run_queued();
  }
}
