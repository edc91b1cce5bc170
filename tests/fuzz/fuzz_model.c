/* fuzz_model: the model-file loader.  Each input is parsed as a linear
 * model file (model_parse, from exactly the input's bytes with no NUL after
 * them, so an over-read shows); a model that loads is written back and must
 * load again.  The same bytes are also read as an expression model file
 * (model_expr_load, engine "expr"). */
#include "fuzz-file.h"
#include "model/model.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* A model that loaded serialises to JSON that loads again. */
static void round_trip(model *m)
{
    char err[512], *json = NULL;
    model *again = NULL;

    if (model_to_json(m, &json) < 0)
        return;
    if (model_parse(json, strlen(json), "round-trip", &again, err, sizeof(err)) < 0) {
        fprintf(stderr, "a written model does not load: %s\n%s\n", err, json);
        abort(); /* what we wrote we must be able to read */
    }
    model_free(again);
    free(json);
}

static void parse_linear(const uint8_t *data, size_t size)
{
    char err[512];
    model *m = NULL;
    char *copy = malloc(size ? size : 1);

    if (!copy)
        return;
    memcpy(copy, data, size);
    if (model_parse(copy, size, "fuzz.json", &m, err, sizeof(err)) == 0) {
        round_trip(m);
        model_free(m);
    }
    free(copy);
}

static void parse_expr(const uint8_t *data, size_t size)
{
    char path[64], err[512];
    model_expr *m = NULL;
    int fd = fuzz_file(data, size, path, sizeof(path));

    if (fd < 0)
        return;
    if (model_expr_load(path, &m, err, sizeof(err)) == 0)
        model_expr_free(m);
    close(fd);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    parse_linear(data, size);
    parse_expr(data, size);
    return 0;
}
