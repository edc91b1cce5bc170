/* calib: the calibration row's two JSON columns.
 *
 * Rates are kept as JSON text rather than one column per event because
 * the events are the model's (their names are in the models table row that
 * model_id names) and change when the model does; one row per second stays
 * one row whatever the model counts. */
#include "store/store-internal.h"

#include <errno.h>
#include <json-c/json.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int to_text(json_object *o, char **out)
{
    const char *text = o ? json_object_to_json_string_ext(o, JSON_C_TO_STRING_PLAIN) : NULL;

    *out = text ? strdup(text) : NULL;
    json_object_put(o);
    return *out ? 0 : -ENOMEM;
}

int store_calib_json(const agg_calib *c, char **power, char **rates)
{
    json_object *p = json_object_new_object(), *r = json_object_new_array();
    int ret;

    for (size_t i = 0; p && i < c->n_domains; i++)
        json_object_object_add(p, c->domain[i],
                               json_object_new_double(c->domain_j[i] / c->duration_s));
    for (unsigned k = 0; r && k < c->n_classes; k++) {
        json_object *row = json_object_new_array();
        for (size_t j = 0; row && j < c->n_events; j++)
            json_object_array_add(
                row, json_object_new_double(c->sum[k * c->n_events + j] / c->duration_s));
        json_object_array_add(r, row);
    }
    ret = to_text(p, power);
    if (to_text(r, rates) < 0 || ret < 0) {
        free(*power);
        free(*rates);
        *power = *rates = NULL;
        return -ENOMEM;
    }
    return 0;
}

static int parse_power(json_object *p, store_calibration_row *row)
{
    size_t n = 0;

    if (!json_object_is_type(p, json_type_object))
        return -EBADMSG;
    row->n_domains = json_object_object_length(p);
    row->domain = calloc(row->n_domains ? row->n_domains : 1, sizeof(*row->domain));
    row->power_w = calloc(row->n_domains ? row->n_domains : 1, sizeof(double));
    if (!row->domain || !row->power_w)
        return -ENOMEM;
    json_object_object_foreach(p, key, val)
    {
        snprintf(row->domain[n], STORE_DOMAIN_LEN, "%s", key);
        row->power_w[n++] = json_object_get_double(val);
    }
    return 0;
}

static int parse_rates(json_object *r, store_calibration_row *row)
{
    if (!json_object_is_type(r, json_type_array))
        return -EBADMSG;
    row->n_classes = json_object_array_length(r);
    row->n_events = row->n_classes ? json_object_array_length(json_object_array_get_idx(r, 0)) : 0;
    row->rates = calloc(row->n_classes * row->n_events + 1, sizeof(double));
    if (!row->rates)
        return -ENOMEM;
    for (size_t k = 0; k < row->n_classes; k++) {
        json_object *cls = json_object_array_get_idx(r, k);
        if (!json_object_is_type(cls, json_type_array) ||
            json_object_array_length(cls) != row->n_events)
            return -EBADMSG;
        for (size_t j = 0; j < row->n_events; j++)
            row->rates[k * row->n_events + j] =
                json_object_get_double(json_object_array_get_idx(cls, j));
    }
    return 0;
}

int store_calib_parse(const char *power, const char *rates, store_calibration_row *row)
{
    json_object *p = json_tokener_parse(power ? power : "");
    json_object *r = json_tokener_parse(rates ? rates : "");
    int ret = p && r ? parse_power(p, row) : -EBADMSG;

    if (ret == 0)
        ret = parse_rates(r, row);
    json_object_put(p);
    json_object_put(r);
    return ret;
}
