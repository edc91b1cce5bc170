/* default: the shipped cputime model, built into the library so that
 * `wattprof run` and the daemon work before anything is installed. */
#include "model/model.h"

#include "model_default.h" /* generated from models/cputime.json */

#include <string.h>

const char *model_default_text(void)
{
    return model_default_json;
}

int model_load_default(model **out, char *err, size_t errlen)
{
    return model_parse(model_default_json, strlen(model_default_json), "built-in cputime.json", out,
                       err, errlen);
}
