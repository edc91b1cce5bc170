/* fuzz_regex: the comm patterns every client of the socket may send
 * (lib/util/regex.c).  The first line of an input is the pattern, the rest
 * the text it is matched against; compiling and matching must stay within
 * the fuzzer's memory and time limits whatever the pattern. */
#include "fuzz-file.h"
#include "util/util.h"

#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char err[UTIL_ERRLEN], *pattern = fuzz_string(data, size), *text;
    util_regex *re;

    if (!pattern)
        return 0;
    text = strchr(pattern, '\n');
    if (text)
        *text++ = '\0';
    if (util_regex_new(pattern, &re, err, sizeof(err)) == 0) {
        util_regex_match(re, text ? text : "");
        util_regex_free(re);
    }
    free(pattern);
    return 0;
}
