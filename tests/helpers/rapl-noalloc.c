/* rapl-noalloc: checks that rapl_read allocates nothing, as sample.h
 * promises for the sampling path, by counting every malloc, calloc, realloc
 * and aligned allocation made in this process (this program's definitions
 * take the place of libc's for libpowercap too, and forward to glibc's
 * __libc_* entry points).
 *
 * Usage: rapl-noalloc [READS]   (default 1000; run it where RAPL zones are,
 *                                e.g. inside tests/helpers/fake-powercap)
 * Prints "allocations N in READS reads of Z zones"; exit status 0 when N is
 * 0, 1 when rapl_read allocated or there are no zones, 77 (with the reason)
 * in a sanitizer build, whose runtime owns malloc. */
#include "sample/sample.h"

#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#if defined(__SANITIZE_ADDRESS__)
#define NOALLOC_SANITIZED 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define NOALLOC_SANITIZED 1
#endif
#endif

#ifndef NOALLOC_SANITIZED
extern void *__libc_malloc(size_t size);
extern void *__libc_calloc(size_t n, size_t size);
extern void *__libc_realloc(void *p, size_t size);
extern void *__libc_memalign(size_t align, size_t size);

static unsigned long n_alloc;

/* The interposed allocator: count, then let glibc do the work. */
void *malloc(size_t size);
void *calloc(size_t n, size_t size);
void *realloc(void *p, size_t size);
void *memalign(size_t align, size_t size);
int posix_memalign(void **p, size_t align, size_t size);

void *malloc(size_t size)
{
    n_alloc++;
    return __libc_malloc(size);
}

void *calloc(size_t n, size_t size)
{
    n_alloc++;
    return __libc_calloc(n, size);
}

void *realloc(void *p, size_t size)
{
    n_alloc++;
    return __libc_realloc(p, size);
}

void *memalign(size_t align, size_t size)
{
    n_alloc++;
    return __libc_memalign(align, size);
}

int posix_memalign(void **p, size_t align, size_t size)
{
    n_alloc++;
    *p = __libc_memalign(align, size);
    return *p ? 0 : 12; /* ENOMEM */
}

/* strdup that the compiler cannot see through (it removes an unused
 * malloc/free pair) */
static char *(*volatile strdup_opaque)(const char *) = strdup;

static int check(long reads)
{
    unsigned long before, during, probe;
    double *d;
    rapl *r;
    char *s;

    if (rapl_open(&r) < 0 || r->n == 0) {
        fprintf(stderr, "rapl-noalloc: no zones: %s\n", r ? r->state : "rapl_open failed");
        rapl_close(r);
        return 1;
    }
    d = calloc(r->n, sizeof(*d));
    if (!d)
        return 1;
    before = n_alloc;
    for (long i = 0; i < reads; i++)
        if (rapl_read(r, d) < 0)
            fprintf(stderr, "rapl-noalloc: rapl_read failed at read %ld\n", i);
    during = n_alloc - before;
    /* the counter itself must see an allocation, or a 0 above means nothing */
    s = strdup_opaque("x");
    probe = n_alloc - before - during;
    free(s);
    printf("allocations %lu in %ld reads of %zu zones\n", during, reads, r->n);
    free(d);
    rapl_close(r);
    if (probe == 0) {
        fprintf(stderr, "rapl-noalloc: the allocation counter does not see strdup\n");
        return 1;
    }
    return during == 0 ? 0 : 1;
}
#endif

int main(int argc, char **argv)
{
    long reads = argc > 1 ? strtol(argv[1], NULL, 10) : 1000;

    if (reads <= 0) {
        fprintf(stderr, "rapl-noalloc: READS must be a positive number: '%s'\n", argv[1]);
        return 2;
    }
#ifdef NOALLOC_SANITIZED
    printf("SKIP: rapl-noalloc counts allocations by replacing malloc, which the sanitizer "
           "runtime owns in this build\n");
    return 77;
#else
    return check(reads);
#endif
}
