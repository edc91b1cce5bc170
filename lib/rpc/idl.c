/* rpc idl: reads what the server needs from a Varlink interface definition
 * (its name and the methods it declares) without a full parser: the text
 * itself is only ever handed back to clients by GetInterfaceDescription. */
#include "rpc/internal.h"

#include "util/util.h"

#include <ctype.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

const char rpc_service_interface[] =
    "# The Varlink service interface every service provides.\n"
    "interface org.varlink.service\n"
    "\n"
    "# Describes the service and lists the interfaces it implements.\n"
    "method GetInfo() -> (\n"
    "  vendor: string,\n"
    "  product: string,\n"
    "  version: string,\n"
    "  url: string,\n"
    "  interfaces: []string\n"
    ")\n"
    "\n"
    "# Returns the definition text of one interface.\n"
    "method GetInterfaceDescription(interface: string) -> (description: string)\n"
    "\n"
    "error InterfaceNotFound (interface: string)\n"
    "error MethodNotFound (method: string)\n"
    "error MethodNotImplemented (method: string)\n"
    "error InvalidParameter (parameter: string)\n"
    "error PermissionDenied ()\n"
    "error ExpectedMore ()\n";

/* Next token of the definition: a word ([A-Za-z0-9_.-]) or one punctuation
 * character; comments and blanks are skipped.  Returns the token length, 0
 * at the end. */
static size_t next_token(const char **p)
{
    const char *s = *p;
    size_t n = 0;

    for (;;) {
        while (isspace((unsigned char)*s))
            s++;
        if (*s != '#')
            break;
        while (*s && *s != '\n')
            s++;
    }
    *p = s;
    while (isalnum((unsigned char)s[n]) || s[n] == '_' || s[n] == '.' || s[n] == '-')
        n++;
    if (n == 0 && *s)
        n = 1;
    return n;
}

static bool valid_interface_name(const char *s, size_t n)
{
    bool dot = false;

    if (n == 0 || !isalpha((unsigned char)s[0]) || s[n - 1] == '.' || s[n - 1] == '-')
        return false;
    for (size_t i = 0; i < n; i++) {
        if (s[i] == '.') {
            if (s[i + 1] == '.' || s[i + 1] == '-')
                return false;
            dot = true;
        } else if (!isalnum((unsigned char)s[i]) && s[i] != '-') {
            return false;
        }
    }
    return dot;
}

static bool valid_member_name(const char *s, size_t n)
{
    if (n == 0 || !isupper((unsigned char)s[0]))
        return false;
    for (size_t i = 0; i < n; i++)
        if (!isalnum((unsigned char)s[i]))
            return false;
    return true;
}

static int add_method(rpc_idl *idl, const char *s, size_t n)
{
    char **v = realloc(idl->methods, (idl->n_methods + 1) * sizeof(*v));

    if (!v)
        return -ENOMEM;
    idl->methods = v;
    v[idl->n_methods] = strndup(s, n);
    if (!v[idl->n_methods])
        return -ENOMEM;
    idl->n_methods++;
    return 0;
}

/* Collects the names after each top-level "method" keyword. */
static int scan_methods(rpc_idl *idl, const char *p, char *err, size_t errlen)
{
    int depth = 0, r;
    size_t n;

    while ((n = next_token(&p)) > 0) {
        const char *tok = p;
        p += n;
        if (n == 1 && (*tok == '(' || *tok == '[' || *tok == '{'))
            depth++;
        else if (n == 1 && (*tok == ')' || *tok == ']' || *tok == '}'))
            depth--;
        if (depth != 0 || n != 6 || memcmp(tok, "method", 6) != 0)
            continue;
        n = next_token(&p);
        if (!valid_member_name(p, n))
            return util_err(err, errlen, -EINVAL, "interface %s: bad method name after 'method'",
                            idl->name);
        r = add_method(idl, p, n);
        if (r < 0)
            return r;
        p += n;
    }
    if (depth != 0)
        return util_err(err, errlen, -EINVAL, "interface %s: unbalanced brackets", idl->name);
    return 0;
}

int rpc_idl_scan(const char *text, rpc_idl *idl, char *err, size_t errlen)
{
    const char *p = text;
    size_t n = next_token(&p);
    int r;

    memset(idl, 0, sizeof(*idl));
    if (n != 9 || memcmp(p, "interface", 9) != 0)
        return util_err(err, errlen, -EINVAL,
                        "interface definition must start with 'interface NAME'");
    p += n;
    n = next_token(&p);
    if (!valid_interface_name(p, n))
        return util_err(err, errlen, -EINVAL, "bad interface name '%.*s'", (int)(n > 64 ? 64 : n),
                        p);
    idl->name = strndup(p, n);
    idl->text = strdup(text);
    if (!idl->name || !idl->text) {
        rpc_idl_free(idl);
        return -ENOMEM;
    }
    r = scan_methods(idl, p + n, err, errlen);
    if (r < 0)
        rpc_idl_free(idl);
    return r;
}

bool rpc_idl_declares(const rpc_idl *idl, const char *method)
{
    for (size_t i = 0; i < idl->n_methods; i++)
        if (strcmp(idl->methods[i], method) == 0)
            return true;
    return false;
}

void rpc_idl_free(rpc_idl *idl)
{
    for (size_t i = 0; i < idl->n_methods; i++)
        free(idl->methods[i]);
    free(idl->methods);
    free(idl->name);
    free(idl->text);
    memset(idl, 0, sizeof(*idl));
}
