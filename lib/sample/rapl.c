/* rapl: every RAPL zone of every package, read through libpowercap.
 *
 * The kernel's intel-rapl control type (also used for AMD) has one top-level
 * zone per package ("package-N", or "package-N-die-M" on multi-die parts) and
 * sometimes "psys", each with sub-zones ("core", "uncore", "dram").  Zone
 * indexes are dense, so they are walked until the first missing one.
 *
 * A machine without RAPL, or a user who may not read energy_uj (root-only
 * since Linux 5.10), is a state to report and not an error: the set comes back
 * empty with the reason in `state`, and everything else keeps working.
 *
 * rapl_read only calls powercap_sysfs_zone_get_energy_uj, which opens, reads
 * and closes one file on the stack: nothing is allocated on the sampling
 * path.  Reopening the file each time also means a reader never holds a
 * stale descriptor on a file that is replaced (the fake trees of the tests
 * replace energy_uj by rename). */
#include "sample/sample.h"
#include "util/util.h"

#include <ctype.h>
#include <errno.h>
#include <powercap/powercap-sysfs.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define RAPL_CONTROL_TYPE "intel-rapl"
#define RAPL_SYSFS "/sys/class/powercap/" RAPL_CONTROL_TYPE
/* flat name of a zone's folder, as the kernel links it: /sys/class/powercap/ID */
#define RAPL_FLAT "/sys/class/powercap/"

/* More than any machine has (8 sockets x a few dies); bounds the walk if a
 * tree is not what it should be. */
#define RAPL_MAX_TOP 64
#define RAPL_MAX_SUB 16

static bool zone_exists(const uint32_t *path, uint32_t depth)
{
    return powercap_sysfs_zone_exists(RAPL_CONTROL_TYPE, path, depth) == 0;
}

/* Number of zones (top-level and sub-zones) in the tree. */
static size_t rapl_count(void)
{
    uint32_t path[2];
    size_t n = 0;

    for (path[0] = 0; path[0] < RAPL_MAX_TOP && zone_exists(path, 1); path[0]++) {
        n++;
        for (path[1] = 0; path[1] < RAPL_MAX_SUB && zone_exists(path, 2); path[1]++)
            n++;
    }
    return n;
}

/* "package-0-die-1" -> "package": the name up to the first "-<digit>". */
static void rapl_domain_of(const char *name, char *domain, size_t size)
{
    size_t len = 0;

    while (name[len] != '\0' && !(name[len] == '-' && isdigit((unsigned char)name[len + 1])))
        len++;
    if (len >= size)
        len = size - 1;
    memcpy(domain, name, len);
    domain[len] = '\0';
}

static void rapl_id_of(const uint32_t *path, uint32_t depth, char *id, size_t size)
{
    /* sysfs spells zone indexes in hex, as libpowercap does */
    if (depth == 1)
        snprintf(id, size, RAPL_CONTROL_TYPE ":%x", (unsigned)path[0]);
    else
        snprintf(id, size, RAPL_CONTROL_TYPE ":%x:%x", (unsigned)path[0], (unsigned)path[1]);
}

/* Fills zone z from sysfs and takes its first reading. On failure returns
 * -errno with `why` naming the file that could not be read. */
static int rapl_zone_init(rapl_zone *z, const uint32_t *path, uint32_t depth, char *why,
                          size_t whylen)
{
    ssize_t len;
    int r;

    memset(z, 0, sizeof(*z));
    z->path[0] = path[0];
    z->path[1] = depth > 1 ? path[1] : 0;
    z->depth = depth;
    z->package = path[0];
    rapl_id_of(path, depth, z->id, sizeof(z->id));

    len = powercap_sysfs_zone_get_name(RAPL_CONTROL_TYPE, z->path, depth, z->name, sizeof(z->name));
    if (len < 0)
        return util_err(why, whylen, (int)len, "cannot read %s%s/name: %s", RAPL_FLAT, z->id,
                        strerror((int)-len));
    rapl_domain_of(z->name, z->domain, sizeof(z->domain));

    r = powercap_sysfs_zone_get_max_energy_range_uj(RAPL_CONTROL_TYPE, z->path, depth,
                                                    &z->max_energy_range_uj);
    if (r < 0)
        return util_err(why, whylen, r, "cannot read %s%s/max_energy_range_uj: %s", RAPL_FLAT,
                        z->id, strerror(-r));

    r = powercap_sysfs_zone_get_energy_uj(RAPL_CONTROL_TYPE, z->path, depth, &z->last_uj);
    if (r == -EACCES || r == -EPERM)
        return util_err(why, whylen, r, "%s%s/energy_uj: %s (root-only since Linux 5.10)",
                        RAPL_FLAT, z->id, strerror(-r));
    if (r < 0)
        return util_err(why, whylen, r, "cannot read %s%s/energy_uj: %s", RAPL_FLAT, z->id,
                        strerror(-r));
    return 0;
}

/* Appends the zone at `path` to r->zone, which holds `cap` zones. */
static int rapl_add(rapl *r, size_t cap, const uint32_t *path, uint32_t depth, char *why,
                    size_t whylen)
{
    int ret;

    if (r->n == cap)
        return util_err(why, whylen, -EAGAIN, "%s changed while it was read", RAPL_SYSFS);
    ret = rapl_zone_init(&r->zone[r->n], path, depth, why, whylen);
    if (ret < 0)
        return ret;
    r->n++;
    return 0;
}

/* Opens every zone into r->zone (sized by rapl_count). */
static int rapl_walk(rapl *r, size_t cap, char *why, size_t whylen)
{
    uint32_t path[2];
    int ret;

    for (path[0] = 0; path[0] < RAPL_MAX_TOP && zone_exists(path, 1); path[0]++) {
        ret = rapl_add(r, cap, path, 1, why, whylen);
        for (path[1] = 0; ret == 0 && path[1] < RAPL_MAX_SUB && zone_exists(path, 2); path[1]++)
            ret = rapl_add(r, cap, path, 2, why, whylen);
        if (ret < 0)
            return ret;
    }
    return 0;
}

/* "4 zones: package-0, core, uncore, dram", cut short if it does not fit. */
static void rapl_describe(rapl *r)
{
    size_t used;

    used = (size_t)snprintf(r->state, sizeof(r->state), "%zu zone%s:", r->n, r->n == 1 ? "" : "s");
    for (size_t i = 0; i < r->n && used < sizeof(r->state); i++)
        used += (size_t)snprintf(r->state + used, sizeof(r->state) - used, "%s %s",
                                 i == 0 ? "" : ",", r->zone[i].name);
}

int rapl_open(rapl **out)
{
    char why[200];
    size_t cap;
    rapl *r;
    int ret;

    r = calloc(1, sizeof(*r));
    if (!r)
        return -ENOMEM;

    if (powercap_sysfs_control_type_exists(RAPL_CONTROL_TYPE) < 0) {
        snprintf(r->state, sizeof(r->state),
                 "no RAPL: %s does not exist (no powercap RAPL driver for this CPU, or a "
                 "virtual machine)",
                 RAPL_SYSFS);
        *out = r;
        return 0;
    }

    cap = rapl_count();
    if (cap == 0) {
        snprintf(r->state, sizeof(r->state), "no RAPL: %s has no zones", RAPL_SYSFS);
        *out = r;
        return 0;
    }
    r->zone = calloc(cap, sizeof(*r->zone));
    if (!r->zone) {
        free(r);
        return -ENOMEM;
    }

    ret = rapl_walk(r, cap, why, sizeof(why));
    if (ret < 0) {
        /* the machine's doing, not the caller's: report it, run without */
        r->n = 0;
        snprintf(r->state, sizeof(r->state), "no RAPL: %s", why);
    } else {
        rapl_describe(r);
    }
    *out = r;
    return 0;
}

void rapl_close(rapl *r)
{
    if (!r)
        return;
    free(r->zone);
    free(r);
}

uint64_t rapl_wrap_delta(uint64_t prev, uint64_t now, uint64_t range)
{
    if (now >= prev)
        return now - prev;
    /* The counter cannot have gone past its range: it was reset, and all
     * we know is what it counted since. */
    if (range == 0 || prev > range)
        return now;
    /* Wrapped once (a 32-bit counter lasts minutes even at hundreds of
     * watts, and it is read 50 times a second). The hardware wraps one
     * energy unit (~61 uJ) past max_energy_range_uj; that is below what any
     * interval resolves, so the sysfs value is taken as the modulus. */
    return range - prev + now;
}

int rapl_read(rapl *r, double *delta_j)
{
    int first_error = 0;

    for (size_t i = 0; i < r->n; i++) {
        rapl_zone *z = &r->zone[i];
        uint64_t now;
        int ret;

        ret = powercap_sysfs_zone_get_energy_uj(RAPL_CONTROL_TYPE, z->path, z->depth, &now);
        if (ret < 0) {
            /* keep last_uj: the energy shows up in the next good read */
            delta_j[i] = 0;
            if (first_error == 0)
                first_error = ret;
            continue;
        }
        delta_j[i] = (double)rapl_wrap_delta(z->last_uj, now, z->max_energy_range_uj) * 1e-6;
        z->last_uj = now;
    }
    return first_error;
}

static bool rapl_listed(const char *domain, const char *const *domains, size_t n_domains)
{
    for (size_t i = 0; i < n_domains; i++)
        if (strcmp(domain, domains[i]) == 0)
            return true;
    return false;
}

double rapl_sum_domains(const rapl *r, const double *delta_j, const char *const *domains,
                        size_t n_domains)
{
    bool package = rapl_listed("package", domains, n_domains);
    double sum = 0;

    for (size_t i = 0; i < r->n; i++) {
        const char *d = r->zone[i].domain;

        if (!rapl_listed(d, domains, n_domains))
            continue;
        if (package && (strcmp(d, "core") == 0 || strcmp(d, "uncore") == 0))
            continue;
        sum += delta_j[i];
    }
    return sum;
}
