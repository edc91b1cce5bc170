/* rpc noise: what a client can make the server log is rate-limited per uid,
 * so 5,000 malformed requests write a few lines, not 5,000: at most one line
 * a second about each uid, and a count of the lines left out. */
#include "rpc/internal.h"

#include "util/util.h"

#include <time.h>

#define NOISE_WINDOW_NS 1000000000ull

static void say_suppressed(struct rpc_noise *n)
{
    if (n->suppressed)
        log_info("rpc: %llu more lines about uid %u were not logged (at most one a second)",
                 (unsigned long long)n->suppressed, (unsigned)n->uid);
    n->suppressed = 0;
}

/* The slot of `uid`, or the one least recently opened, taken over. */
static struct rpc_noise *slot_of(rpc_server *srv, uid_t uid)
{
    struct rpc_noise *oldest = &srv->noise[0];

    for (size_t i = 0; i < RPC_NOISE_SLOTS; i++) {
        struct rpc_noise *n = &srv->noise[i];
        if (n->used && n->uid == uid)
            return n;
        if (!n->used || (oldest->used && n->since_ns < oldest->since_ns))
            oldest = n;
    }
    if (oldest->used)
        say_suppressed(oldest);
    *oldest = (struct rpc_noise){.uid = uid, .used = true};
    return oldest;
}

bool rpc_noise_allow(rpc_server *srv, uid_t uid)
{
    struct rpc_noise *n = slot_of(srv, uid);
    uint64_t now = util_now_ns(CLOCK_MONOTONIC);

    if (n->since_ns && now - n->since_ns < NOISE_WINDOW_NS) {
        n->suppressed++;
        return false;
    }
    say_suppressed(n);
    n->since_ns = now;
    return true;
}

void rpc_noise_flush(rpc_server *srv)
{
    uint64_t now = util_now_ns(CLOCK_MONOTONIC);

    for (size_t i = 0; i < RPC_NOISE_SLOTS; i++)
        if (srv->noise[i].used && srv->noise[i].suppressed &&
            now - srv->noise[i].since_ns >= NOISE_WINDOW_NS)
            say_suppressed(&srv->noise[i]);
}
