/* LD_PRELOAD allocation counter for tests: interposes malloc, calloc,
 * realloc, posix_memalign, aligned_alloc, memalign, valloc, pvalloc and free,
 * forwards them to the next definition (glibc) found with dlsym(RTLD_NEXT),
 * and counts the calls. At exit it writes
 *     alloc_counter: allocs=N frees=M
 * to the file named by ALLOC_COUNTER_OUT, or to stderr.
 *
 * ALLOC_COUNTER_EXCLUDE=NAME[,NAME...] (e.g. libdnnl,libgomp): an allocation
 * whose call stack (glibc backtrace(), up to 64 frames) has a return address
 * inside the executable segments of a loaded object whose path contains NAME
 * is counted against that NAME instead of in allocs (the innermost such frame
 * decides), and the line gains " excluded=NAME:K,NAME:K". This separates
 * allocations made inside a library (oneDNN builds a std::unordered_map of
 * the arguments in every dnnl_primitive_execute) from the caller's own. The
 * objects are looked up once, at the first allocation after start-up; a
 * library dlopen'ed later is not seen.
 *
 * Bootstrap: dlsym itself may allocate (glibc's dlerror state uses calloc)
 * before the real functions are known. Calls made while resolving are served
 * from a small static buffer, are not counted, and are never passed to the
 * real free. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <execinfo.h>
#include <fcntl.h>
#include <link.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static void* (*real_malloc)(size_t);
static void* (*real_calloc)(size_t, size_t);
static void* (*real_realloc)(void*, size_t);
static int (*real_posix_memalign)(void**, size_t, size_t);
static void* (*real_aligned_alloc)(size_t, size_t);
static void* (*real_memalign)(size_t, size_t);
static void* (*real_valloc)(size_t);
static void* (*real_pvalloc)(size_t);
static void (*real_free)(void*);

static atomic_long n_allocs;
static atomic_long n_frees;
static atomic_int resolving;
enum { kMaxNames = 4, kMaxRanges = 32 };
static char exclude_buf[256]; /* ALLOC_COUNTER_EXCLUDE, split at commas */
static const char* exclude_names[kMaxNames];
static int n_names;
static atomic_long n_excluded[kMaxNames];
static struct { uintptr_t lo, hi; int name; } ranges[kMaxRanges];
static atomic_int n_ranges;
static atomic_int ranges_done;
static __thread int in_backtrace; /* backtrace() may allocate (first call) */

static _Alignas(64) char boot[64 * 1024];
static atomic_size_t boot_used;

static void* boot_alloc(size_t n) {
  size_t need = (n + 63) / 64 * 64;
  size_t at = atomic_fetch_add(&boot_used, need);
  if (at + need > sizeof boot) return NULL;
  return boot + at; /* static storage: already zero */
}

static int in_boot(const void* p) {
  return (const char*)p >= boot && (const char*)p < boot + sizeof boot;
}

static void resolve(void) {
  if (real_free) return;
  atomic_store(&resolving, 1);
  real_malloc = dlsym(RTLD_NEXT, "malloc");
  real_calloc = dlsym(RTLD_NEXT, "calloc");
  real_realloc = dlsym(RTLD_NEXT, "realloc");
  real_posix_memalign = dlsym(RTLD_NEXT, "posix_memalign");
  real_aligned_alloc = dlsym(RTLD_NEXT, "aligned_alloc");
  real_memalign = dlsym(RTLD_NEXT, "memalign");
  real_valloc = dlsym(RTLD_NEXT, "valloc");
  real_pvalloc = dlsym(RTLD_NEXT, "pvalloc");
  real_free = dlsym(RTLD_NEXT, "free");
  atomic_store(&resolving, 0);
}

static int find_ranges(struct dl_phdr_info* info, size_t size, void* data) {
  (void)size;
  (void)data;
  if (!info->dlpi_name) return 0;
  int name = -1;
  for (int k = 0; k < n_names && name < 0; ++k)
    if (strstr(info->dlpi_name, exclude_names[k])) name = k;
  if (name < 0) return 0;
  int n = atomic_load(&n_ranges);
  for (int i = 0; i < info->dlpi_phnum && n < kMaxRanges; ++i) {
    const ElfW(Phdr)* ph = &info->dlpi_phdr[i];
    if (ph->p_type != PT_LOAD || !(ph->p_flags & PF_X)) continue;
    ranges[n].lo = info->dlpi_addr + ph->p_vaddr;
    ranges[n].hi = ranges[n].lo + ph->p_memsz;
    ranges[n].name = name;
    ++n;
  }
  atomic_store(&n_ranges, n);
  return 0;
}

/* The excluded library the current call stack passes through (innermost
 * first), or -1. */
static int excluded_caller(void) {
  if (!n_names || in_backtrace) return -1;
  in_backtrace = 1;
  if (!atomic_exchange(&ranges_done, 1)) dl_iterate_phdr(find_ranges, NULL);
  void* frames[64];
  int n = backtrace(frames, 64);
  int hit = -1, nr = atomic_load(&n_ranges);
  for (int i = 1; i < n && hit < 0; ++i)
    for (int r = 0; r < nr; ++r)
      if ((uintptr_t)frames[i] >= ranges[r].lo && (uintptr_t)frames[i] < ranges[r].hi)
        hit = ranges[r].name;
  in_backtrace = 0;
  return hit;
}

static void count_alloc(void) {
  int lib = excluded_caller();
  if (lib >= 0)
    atomic_fetch_add(&n_excluded[lib], 1);
  else
    atomic_fetch_add(&n_allocs, 1);
}

/* True while the real functions are being looked up: serve from `boot`. */
static int booting(void) {
  if (atomic_load(&resolving)) return 1;
  resolve();
  return 0;
}

void* malloc(size_t n) {
  if (booting()) return boot_alloc(n);
  count_alloc();
  return real_malloc(n);
}

void* calloc(size_t a, size_t b) {
  if (booting()) return boot_alloc(a * b);
  count_alloc();
  return real_calloc(a, b);
}

void* realloc(void* p, size_t n) {
  if (booting()) return boot_alloc(n);
  if (in_boot(p)) { /* move a bootstrap block to the real heap */
    void* q = real_malloc(n);
    size_t left = (size_t)(boot + sizeof boot - (char*)p); /* old size unknown: copy what fits */
    if (q) memcpy(q, p, n < left ? n : left);
    count_alloc();
    return q;
  }
  count_alloc();
  return real_realloc(p, n);
}

int posix_memalign(void** out, size_t align, size_t n) {
  if (booting()) {
    *out = align <= 64 ? boot_alloc(n) : NULL;
    return *out ? 0 : ENOMEM;
  }
  count_alloc();
  return real_posix_memalign(out, align, n);
}

void* aligned_alloc(size_t align, size_t n) {
  if (booting()) return align <= 64 ? boot_alloc(n) : NULL;
  count_alloc();
  return real_aligned_alloc(align, n);
}

void* memalign(size_t align, size_t n) {
  if (booting()) return align <= 64 ? boot_alloc(n) : NULL;
  count_alloc();
  return real_memalign(align, n);
}

void* valloc(size_t n) {
  if (booting()) return NULL;
  count_alloc();
  return real_valloc(n);
}

void* pvalloc(size_t n) {
  if (booting()) return NULL;
  count_alloc();
  return real_pvalloc(n);
}

void free(void* p) {
  if (!p || in_boot(p)) return;
  if (booting()) return; /* cannot happen for a real block: nothing real exists yet */
  atomic_fetch_add(&n_frees, 1);
  real_free(p);
}

__attribute__((constructor)) static void alloc_counter_init(void) {
  resolve();
  const char* ex = getenv("ALLOC_COUNTER_EXCLUDE");
  if (ex) {
    strncpy(exclude_buf, ex, sizeof exclude_buf - 1);
    for (char* tok = strtok(exclude_buf, ","); tok && n_names < kMaxNames; tok = strtok(NULL, ","))
      if (*tok) exclude_names[n_names++] = tok;
  }
  if (n_names) { /* the first backtrace() loads libgcc_s: do it now */
    void* f[4];
    backtrace(f, 4);
  }
}

__attribute__((destructor)) static void alloc_counter_report(void) {
  char line[256];
  int len = snprintf(line, sizeof line, "alloc_counter: allocs=%ld frees=%ld",
                     atomic_load(&n_allocs), atomic_load(&n_frees));
  for (int k = 0; k < n_names; ++k)
    len += snprintf(line + len, sizeof line - len, "%s%s:%ld", k ? "," : " excluded=",
                     exclude_names[k], atomic_load(&n_excluded[k]));
  line[len++] = '\n';
  const char* path = getenv("ALLOC_COUNTER_OUT");
  int fd = path ? open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644) : 2;
  if (fd < 0) fd = 2;
  if (write(fd, line, (size_t)len) < 0) { /* nothing to do */ }
  if (fd != 2) close(fd);
}
