/* exporter: the Prometheus endpoint of wattprofd ([exporter] listen).
 *
 * libmicrohttpd serves GET /metrics from its own thread; each scrape renders
 * the sampler's latest published snapshot (exposition.c), so a scraper,
 * however slow, never holds anything the sampler waits for. A connection
 * that stalls is dropped after EXPORTER_TIMEOUT_S, and at most
 * EXPORTER_MAX_CONNECTIONS are open at once, so stalled scrapers cannot pile
 * up either. MHD_USE_AUTO picks epoll: the daemon holds a counter descriptor
 * per event and process, so a scraper's socket is often above FD_SETSIZE,
 * which select() (MHD's default) cannot wait on. A scraper that sends
 * Accept-Encoding: gzip gets the exposition compressed (Prometheus does). */
#include "daemon.h"
#include "util/util.h"

#include <arpa/inet.h>
#include <errno.h>
#include <microhttpd.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <zlib.h>

#define EXPORTER_TIMEOUT_S 10
#define EXPORTER_MAX_CONNECTIONS 32
#define EXPORTER_CONTENT_TYPE "text/plain; version=0.0.4; charset=utf-8"

struct exporter {
    daemon_ctx *ctx;
    struct MHD_Daemon *mhd;
};

/* `encoding`: NULL for plain text, else the Content-Encoding body is in. */
static enum MHD_Result exporter_reply(struct MHD_Connection *conn, unsigned status,
                                      const char *type, char *body, size_t len,
                                      enum MHD_ResponseMemoryMode mode, const char *encoding)
{
    struct MHD_Response *resp = MHD_create_response_from_buffer(len, body, mode);
    enum MHD_Result r;

    if (!resp) {
        if (mode == MHD_RESPMEM_MUST_FREE)
            free(body);
        return MHD_NO;
    }
    MHD_add_response_header(resp, MHD_HTTP_HEADER_CONTENT_TYPE, type);
    if (status == MHD_HTTP_OK) /* the same URL, two encodings: caches must ask */
        MHD_add_response_header(resp, MHD_HTTP_HEADER_VARY, MHD_HTTP_HEADER_ACCEPT_ENCODING);
    if (encoding)
        MHD_add_response_header(resp, MHD_HTTP_HEADER_CONTENT_ENCODING, encoding);
    r = MHD_queue_response(conn, status, resp);
    MHD_destroy_response(resp);
    return r;
}

/* Whether an Accept-Encoding header accepts gzip: the token "gzip" (or "*")
 * without ";q=0". */
static bool exporter_wants_gzip(const char *accept)
{
    const char *p = accept;

    while (p && *p) {
        size_t n;
        p += strspn(p, " \t,");
        n = strcspn(p, " \t,;");
        if ((n == 4 && strncasecmp(p, "gzip", 4) == 0) || (n == 1 && *p == '*')) {
            const char *q = p + n + strspn(p + n, " \t");
            double qv = 1;
            if (*q == ';' && (q = strstr(q, "q=")) && q < p + strcspn(p, ","))
                qv = strtod(q + 2, NULL);
            return qv > 0;
        }
        p += strcspn(p, ",");
    }
    return false;
}

/* Compresses body[0..len) into a gzip member; *out is malloc'd. */
static int exporter_gzip(const char *body, size_t len, char **out, size_t *out_len)
{
    z_stream z = {0};
    uLong cap;
    char *buf;
    int r;

    if (deflateInit2(&z, Z_DEFAULT_COMPRESSION, Z_DEFLATED, 15 + 16, 8, Z_DEFAULT_STRATEGY) != Z_OK)
        return -ENOMEM;
    cap = deflateBound(&z, (uLong)len) + 32; /* + the gzip header and trailer */
    if (!(buf = malloc(cap))) {
        deflateEnd(&z);
        return -ENOMEM;
    }
    z.next_in = (Bytef *)body;
    z.avail_in = (uInt)len;
    z.next_out = (Bytef *)buf;
    z.avail_out = (uInt)cap;
    r = deflate(&z, Z_FINISH);
    *out_len = z.total_out;
    deflateEnd(&z);
    if (r != Z_STREAM_END) {
        log_error("exporter: gzip of a %zu-byte exposition failed (zlib %d)", len, r);
        free(buf);
        return -EIO;
    }
    *out = buf;
    return 0;
}

static enum MHD_Result exporter_text(struct MHD_Connection *conn, unsigned status, const char *text)
{
    return exporter_reply(conn, status, "text/plain; charset=utf-8", (char *)text, strlen(text),
                          MHD_RESPMEM_PERSISTENT, NULL);
}

static enum MHD_Result exporter_handle(void *cls, struct MHD_Connection *conn, const char *url,
                                       const char *method, const char *version, const char *upload,
                                       size_t *upload_size, void **state)
{
    struct exporter *e = cls;
    snapshot *snap;
    char *body = NULL;
    size_t len = 0;
    int r;

    if (strcmp(method, MHD_HTTP_METHOD_GET) != 0 && strcmp(method, MHD_HTTP_METHOD_HEAD) != 0)
        return exporter_text(conn, MHD_HTTP_METHOD_NOT_ALLOWED, "only GET /metrics\n");
    if (strcmp(url, "/metrics") != 0)
        return exporter_text(conn, MHD_HTTP_NOT_FOUND, "not found: the metrics are at /metrics\n");
    if (!(snap = sampler_snapshot(e->ctx->smp)))
        return exporter_text(conn, MHD_HTTP_SERVICE_UNAVAILABLE,
                             "no data yet: the sampler publishes after its first second\n");
    r = exposition_render(e->ctx, snap, &body, &len);
    sampler_snapshot_unref(snap);
    if (r < 0)
        return exporter_text(conn, MHD_HTTP_INTERNAL_SERVER_ERROR, "out of memory\n");
    if (exporter_wants_gzip(
            MHD_lookup_connection_value(conn, MHD_HEADER_KIND, MHD_HTTP_HEADER_ACCEPT_ENCODING))) {
        char *gz;
        size_t gz_len;
        r = exporter_gzip(body, len, &gz, &gz_len);
        free(body);
        if (r < 0)
            return exporter_text(conn, MHD_HTTP_INTERNAL_SERVER_ERROR,
                                 "could not compress the exposition\n");
        return exporter_reply(conn, MHD_HTTP_OK, EXPORTER_CONTENT_TYPE, gz, gz_len,
                              MHD_RESPMEM_MUST_FREE, "gzip");
    }
    return exporter_reply(conn, MHD_HTTP_OK, EXPORTER_CONTENT_TYPE, body, len,
                          MHD_RESPMEM_MUST_FREE, NULL);
}

/* "127.0.0.1:9934", "[::1]:9934": where the socket really is (port 0 asks
 * the kernel for one). */
static void exporter_where(int fd, char *out, size_t len)
{
    struct sockaddr_storage ss;
    socklen_t sl = sizeof(ss);
    char host[INET6_ADDRSTRLEN] = "?";
    unsigned port = 0;

    if (getsockname(fd, (struct sockaddr *)&ss, &sl) < 0)
        ss.ss_family = AF_UNSPEC;
    if (ss.ss_family == AF_INET) {
        const struct sockaddr_in *a = (const struct sockaddr_in *)&ss;
        inet_ntop(AF_INET, &a->sin_addr, host, sizeof(host));
        port = ntohs(a->sin_port);
        snprintf(out, len, "%s:%u", host, port);
    } else if (ss.ss_family == AF_INET6) {
        const struct sockaddr_in6 *a = (const struct sockaddr_in6 *)&ss;
        inet_ntop(AF_INET6, &a->sin6_addr, host, sizeof(host));
        port = ntohs(a->sin6_port);
        snprintf(out, len, "[%s]:%u", host, port);
    } else
        snprintf(out, len, "?");
}

/* Our own socket rather than MHD's: a port in use is then one plain line. */
static int exporter_listen(const config *c, int *out, char *err, size_t errlen)
{
    int one = 1, e;
    int fd = socket(c->exporter_addr.ss_family, SOCK_STREAM | SOCK_CLOEXEC, 0);

    /* wattprofd.service's RestrictAddressFamilies= answers EAFNOSUPPORT. */
    if (fd < 0)
        return util_err(err, errlen, -errno, "[exporter] listen = %s: socket: %s%s",
                        c->exporter_listen, strerror(errno),
                        errno == EAFNOSUPPORT ? " (under wattprofd.service, allow IP sockets "
                                                "with a drop-in: README, \"Clusters\")"
                                              : "");
    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
    if (bind(fd, (const struct sockaddr *)&c->exporter_addr, c->exporter_addrlen) < 0 ||
        listen(fd, 64) < 0) {
        e = errno;
        close(fd);
        return util_err(err, errlen, -e, "[exporter] listen = %s: cannot listen there: %s",
                        c->exporter_listen, strerror(e));
    }
    *out = fd;
    return 0;
}

int exporter_start(daemon_ctx *ctx, exporter **out, char *err, size_t errlen)
{
    struct exporter *e;
    char where[128];
    int fd = -1, r;

    *out = NULL;
    if (!ctx->cfg->exporter_listen)
        return 0;
    if ((r = exporter_listen(ctx->cfg, &fd, err, errlen)) < 0)
        return r;
    if (!(e = calloc(1, sizeof(*e)))) {
        close(fd);
        return -ENOMEM;
    }
    e->ctx = ctx;
    e->mhd = MHD_start_daemon(
        MHD_USE_AUTO_INTERNAL_THREAD | MHD_USE_ERROR_LOG, 0, NULL, NULL, exporter_handle, e,
        MHD_OPTION_LISTEN_SOCKET, fd, MHD_OPTION_CONNECTION_TIMEOUT, (unsigned)EXPORTER_TIMEOUT_S,
        MHD_OPTION_CONNECTION_LIMIT, (unsigned)EXPORTER_MAX_CONNECTIONS, MHD_OPTION_END);
    if (!e->mhd) {
        close(fd);
        free(e);
        return util_err(err, errlen, -EIO, "[exporter] listen = %s: libmicrohttpd did not start",
                        ctx->cfg->exporter_listen);
    }
    exporter_where(fd, where, sizeof(where));
    log_info("exporter: serving http://%s/metrics", where);
    *out = e;
    return 0;
}

void exporter_stop(exporter *e)
{
    if (!e)
        return;
    /* MHD_stop_daemon closes the listening socket it was given. */
    MHD_stop_daemon(e->mhd);
    free(e);
}
