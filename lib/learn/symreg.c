/* symreg: symbolic regression by genetic programming, the paper's loop.
 *
 * Every random choice is drawn in the calling thread from one mt19937
 * stream, in a fixed order; worker threads only evaluate (fit constants by
 * Levenberg-Marquardt, then score), which is deterministic per individual.
 * So a seed gives the same run whatever the thread count. */
#include "learn/symreg-internal.h"
#include "util/util.h"

#include <errno.h>
#include <gsl/gsl_rng.h>
#include <math.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define INIT_TRIES 100               /* attempts at an initial tree within the size limit */
#define SYMREG_CACHE_SLOTS 16384     /* fitted shapes remembered (symreg-cache.c) */
#define SYMREG_PARETO_MAX 64         /* candidates a Pareto tournament looks at, at most */
#define ARCHIVE_REFIT_ITERATIONS 100 /* LM steps of the final refit of each size's best */
#define SCALE_GAIN 0.9               /* linear scaling is kept when it cuts the error to this */
#define SCALE_MIN_SPREAD 1e-12       /* predictions vary less than this (relative): no scaling */

struct ind {
    expr *e;
    expr *key;  /* during evaluation only: e before linear scaling changed its shape */
    double err; /* training error; INFINITY when not finite */
    double fit; /* err, but no lower than the exact floor: below it only size counts */
};

struct engine {
    const symreg_params *p;
    struct symreg_prims ps;
    const double *const *x;
    const double *y;
    double *w; /* LM weights: 1/|y| under MAPE, so LM minimises relative error */
    size_t n;
    gsl_rng *rng;
    uint64_t evaluations, cached;
    struct symreg_cache *cache; /* NULL without params.cache */
    double floor;               /* symreg_error_floor */
    double rss_goal;            /* a fit's (weighted) RSS well under the floor: LM stops there */
    struct ind *archive;        /* the lowest error seen at each size 1..max_size */
    struct ind *epoch;          /* the same since the last restart (== archive without restarts) */
    double tie;                 /* with tie = bic: selection sees errors below this as this */
};

/* ---- Evaluation, spread over threads ------------------------------------ */

/* The first stage: the new individual simplified. */
static int prepare(const struct engine *g, struct ind *in, double *pred)
{
    expr *s;

    if (!g->p->simplify)
        return 0;
    if (!(s = expr_simplify(in->e)))
        return -ENOMEM;
    expr_free(in->e);
    in->e = s;
    return 0;
}

static void set_error(const struct engine *g, struct ind *in, double err)
{
    in->err = err;
    in->fit = err > g->floor ? err : g->floor;
}

/* Linear scaling (Keijzer 2003): the a, b that minimise the (LM-weighted)
 * squared error of a + b * pred, in closed form. False when pred is
 * constant over the rows, or a or b is not finite. */
static bool scale_fit(const struct engine *g, const double *pred, double *a, double *b)
{
    double sw = 0, sp = 0, sy = 0;

    for (size_t i = 0; i < g->n; i++) {
        double w = g->w ? g->w[i] * g->w[i] : 1;
        sw += w;
        sp += w * pred[i];
        sy += w * g->y[i];
    }
    double mp = sp / sw, my = sy / sw, vpp = 0, vpy = 0, spp = 0;
    for (size_t i = 0; i < g->n; i++) {
        double w = g->w ? g->w[i] * g->w[i] : 1, d = pred[i] - mp;
        vpp += w * d * d;
        vpy += w * d * (g->y[i] - my);
        spp += w * pred[i] * pred[i];
    }
    if (!(vpp > SCALE_MIN_SPREAD * spp))
        return false;
    *b = vpy / vpp;
    *a = my - *b * mp;
    return isfinite(*a) && isfinite(*b);
}

/* With params.scaling: makes in->e into a + b * e when that lowers its error
 * by at least SCALE_GAIN and stays within the limits. The head is left
 * as it is (children simplify it, and so does the report): folding it into
 * the tree here (a constant times a sum goes into its terms) did no better
 * in trials. The tree as it was goes to in->key (the shape the cache files
 * it under). pred holds e's predictions on entry and is clobbered. */
static int scale(const struct engine *g, struct ind *in, double *pred)
{
    const symreg_params *p = g->p;
    struct expr_node head[4] = {
        {.op = EXPR_ADD}, {.op = EXPR_CONST}, {.op = EXPR_MUL}, {.op = EXPR_CONST}};
    expr *w;

    if (!p->scaling || !(in->err > g->floor) || !scale_fit(g, pred, &head[1].c, &head[3].c))
        return 0;
    for (size_t i = 0; i < g->n; i++)
        pred[i] = head[1].c + head[3].c * pred[i];
    if (!(symreg_error(p->fitness, g->y, pred, g->n) < SCALE_GAIN * in->err))
        return 0;
    if (!(w = expr_clone(in->e)) || expr_splice(w, 0, 0, head, 4) < 0) {
        expr_free(w);
        return -ENOMEM;
    }
    if (!symreg_within_limits(w, p->max_depth, p->max_size)) {
        expr_free(w);
        return 0;
    }
    in->key = in->e;
    in->e = w;
    set_error(g, in, symreg_error(p->fitness, g->y, pred, g->n));
    return 0;
}

/* The second stage: its constants fitted, its error measured. */
static int evaluate(const struct engine *g, struct ind *in, double *pred)
{
    const symreg_params *p = g->p;

    if (p->lm && p->lm_iterations > 0 && expr_n_consts(in->e) > 0) {
        double rss;
        int r = expr_fit_consts_search(in->e, g->x, g->y, g->w, g->n, p->lm_iterations, g->rss_goal,
                                       &rss);
        if (r < 0)
            return r;
        /* The fit's sum is the fitness's own (same terms, same order) except
         * under mape: no need to evaluate the equation again. */
        if (p->fitness != SYMREG_MAPE) {
            double mse = rss / (double)g->n;
            double err = p->fitness == SYMREG_RMSE ? sqrt(mse) : mse;
            set_error(g, in, isfinite(err) ? err : INFINITY);
            if (!p->scaling || !(in->err > g->floor))
                return 0;
        }
    }
    if (!expr_eval(in->e, g->x, g->n, pred)) {
        set_error(g, in, INFINITY);
        return 0;
    }
    set_error(g, in, symreg_error(p->fitness, g->y, pred, g->n));
    return scale(g, in, pred);
}

struct batch {
    const struct engine *g;
    int (*stage)(const struct engine *g, struct ind *in, double *pred);
    struct ind **todo;
    size_t n_todo;
    atomic_size_t next;
    atomic_int rc;
};

static void *eval_worker(void *arg)
{
    struct batch *b = arg;
    double *pred = malloc(b->g->n * sizeof(double));

    if (!pred) {
        atomic_store(&b->rc, -ENOMEM);
        return NULL;
    }
    for (;;) {
        size_t i = atomic_fetch_add(&b->next, 1);
        if (i >= b->n_todo)
            break;
        int r = b->stage(b->g, b->todo[i], pred);
        if (r < 0)
            atomic_store(&b->rc, r);
    }
    free(pred);
    return NULL;
}

/* Runs `stage` on every individual of todo, over params.threads threads. */
static int run_stage(struct engine *g, int (*stage)(const struct engine *, struct ind *, double *),
                     struct ind **todo, size_t n_todo)
{
    struct batch b = {.g = g, .stage = stage, .todo = todo, .n_todo = n_todo};
    size_t n_threads = (size_t)g->p->threads < n_todo ? (size_t)g->p->threads : n_todo;
    pthread_t tid[n_threads + 1];
    size_t started = 0;

    atomic_init(&b.next, 0);
    atomic_init(&b.rc, 0);
    /* The calling thread works too; a thread that fails to start only
     * means fewer workers. */
    for (size_t t = 1; t < n_threads; t++)
        if (pthread_create(&tid[started], NULL, eval_worker, &b) == 0)
            started++;
    eval_worker(&b);
    for (size_t t = 0; t < started; t++)
        pthread_join(tid[t], NULL);
    return atomic_load(&b.rc);
}

/* Simplifies, then scores each of todo: from the cache when its shape was
 * fitted before, else by fitting it (and caching the result). The cache is
 * read and written here, in the calling thread, in index order. */
static int evaluate_all(struct engine *g, struct ind **todo, size_t n_todo)
{
    struct ind **fit = malloc((n_todo ? n_todo : 1) * sizeof(*fit));
    uint64_t *hash = malloc((n_todo ? n_todo : 1) * sizeof(*hash));
    size_t n_fit = 0;
    int r = fit && hash ? run_stage(g, prepare, todo, n_todo) : -ENOMEM;

    for (size_t i = 0; i < n_todo && r == 0; i++) {
        double err;
        if (g->cache) {
            hash[n_fit] = symreg_shape_hash(todo[i]->e);
            if (symreg_cache_take(g->cache, todo[i]->e, hash[n_fit], &err)) {
                set_error(g, todo[i], err);
                g->cached++;
                continue;
            }
        }
        fit[n_fit++] = todo[i];
    }
    if (r == 0)
        r = run_stage(g, evaluate, fit, n_fit);
    for (size_t i = 0; i < n_fit && r == 0 && g->cache; i++)
        r = symreg_cache_put(g->cache, fit[i]->key, fit[i]->e, hash[i], fit[i]->err);
    for (size_t i = 0; i < n_fit; i++) {
        expr_free(fit[i]->key);
        fit[i]->key = NULL;
    }
    if (r == 0)
        g->evaluations += n_todo;
    free(fit);
    free(hash);
    return r;
}

/* ---- Selection ---------------------------------------------------------- */

/* The error selection compares: with tie = bic, none below g->tie. */
static double sel_fit(const struct engine *g, const struct ind *a)
{
    return g->p->tie == SYMREG_TIE_BIC && a->fit < g->tie ? g->tie : a->fit;
}

/* Whether selection prefers a to b on error; with tie = bic, on size when
 * their errors tie. */
static bool fitter(const struct engine *g, const struct ind *a, const struct ind *b)
{
    double fa = sel_fit(g, a), fb = sel_fit(g, b);

    return fa < fb || (g->p->tie == SYMREG_TIE_BIC && fa == fb && a->e->n < b->e->n);
}

static bool better(const struct ind *a, const struct ind *b)
{
    return a->fit < b->fit || (a->fit == b->fit && a->e->n < b->e->n);
}

static const struct ind *fitness_tournament(struct engine *g, const struct ind *pool, size_t n)
{
    const struct ind *best = &pool[gsl_rng_uniform_int(g->rng, n)];

    for (size_t k = 1; k < g->p->tournament_fitness; k++) {
        const struct ind *c = &pool[gsl_rng_uniform_int(g->rng, n)];
        if (fitter(g, c, best))
            best = c;
    }
    return best;
}

/* Two fitness tournaments, then the smaller winner is kept with
 * probability parsimony/2 (a coin toss when they are the same size). */
static const struct ind *double_tournament(struct engine *g, const struct ind *pool, size_t n)
{
    const struct ind *a = fitness_tournament(g, pool, n), *b = fitness_tournament(g, pool, n);
    double prob = g->p->tournament_parsimony / 2;

    if (a->e->n > b->e->n) {
        const struct ind *t = a;
        a = b;
        b = t;
    } else if (a->e->n == b->e->n) {
        prob = 0.5;
    }
    return gsl_rng_uniform(g->rng) < prob ? a : b;
}

/* Of tournament_fitness candidates, one that no other candidate beats on
 * both error and size, drawn uniformly among those: selection that keeps
 * small equations alive beside accurate ones. */
static const struct ind *pareto_tournament(struct engine *g, const struct ind *pool, size_t n)
{
    size_t k = g->p->tournament_fitness, nf = 0;
    const struct ind *cand[SYMREG_PARETO_MAX], *front[SYMREG_PARETO_MAX];

    if (k > SYMREG_PARETO_MAX)
        k = SYMREG_PARETO_MAX;
    for (size_t i = 0; i < k; i++)
        cand[i] = &pool[gsl_rng_uniform_int(g->rng, n)];
    for (size_t i = 0; i < k; i++) {
        bool beaten = false;
        double fi = sel_fit(g, cand[i]);
        for (size_t j = 0; j < k && !beaten; j++) {
            double fj = sel_fit(g, cand[j]);
            beaten = fj <= fi && cand[j]->e->n <= cand[i]->e->n &&
                     (fj < fi || cand[j]->e->n < cand[i]->e->n);
        }
        if (!beaten)
            front[nf++] = cand[i];
    }
    return front[nf > 1 ? gsl_rng_uniform_int(g->rng, nf) : 0];
}

static const struct ind *select_one(struct engine *g, const struct ind *pool, size_t n)
{
    return g->p->selection == SYMREG_SEL_PARETO ? pareto_tournament(g, pool, n)
                                                : double_tournament(g, pool, n);
}

/* ---- The generation loop ----------------------------------------------- */

/* With params.migration: each equation of the archive's front (the lowest
 * error at its size, lower than at every smaller size) replaces one of the
 * next parents drawn at random. Selection alone loses a small accurate
 * equation as soon as larger, slightly better ones crowd its tournaments;
 * back among the parents, its shape keeps being recombined. */
static int migrate_front(struct engine *g, struct ind *next)
{
    size_t n = g->p->population;
    double lowest = INFINITY;

    for (size_t s = 1; s <= g->p->max_size; s++) {
        const struct ind *a = &g->epoch[s];
        if (!a->e || !(a->fit < lowest))
            continue;
        lowest = a->fit;
        struct ind *t = &next[gsl_rng_uniform_int(g->rng, n)];
        expr *c = expr_clone(a->e);
        if (!c)
            return -ENOMEM;
        expr_free(t->e);
        *t = (struct ind){.e = c, .err = a->err, .fit = a->fit};
    }
    return 0;
}

static void free_inds(struct ind *v, size_t n)
{
    if (!v)
        return;
    for (size_t i = 0; i < n; i++)
        expr_free(v[i].e);
    free(v);
}

static int init_population(struct engine *g, struct ind *pop)
{
    const symreg_params *p = g->p;

    for (size_t i = 0; i < p->population; i++) {
        for (int tries = 0; !pop[i].e && tries < INIT_TRIES; tries++) {
            bool full = gsl_rng_uniform_int(g->rng, 2);
            expr *e = symreg_gen_tree(&g->ps, g->rng, p->init_min_depth, p->init_max_depth, full);
            if (!e)
                return -ENOMEM;
            if (symreg_within_limits(e, p->max_depth, p->max_size) || tries == INIT_TRIES - 1)
                pop[i].e = e;
            else
                expr_free(e);
        }
        if (!symreg_within_limits(pop[i].e, p->max_depth, p->max_size)) {
            /* Only when max_size is tiny: fall back to a terminal. */
            expr_free(pop[i].e);
            pop[i].e = symreg_gen_tree(&g->ps, g->rng, 0, 0, true);
            if (!pop[i].e)
                return -ENOMEM;
        }
    }
    return 0;
}

/* Children: copies of the parents, crossed in pairs and mutated; a child
 * that breaks the bloat limits goes back to what it was before that step.
 * changed[i] says whether child i needs evaluating. */
static int vary(struct engine *g, const struct ind *pop, struct ind *off, bool *changed)
{
    const symreg_params *p = g->p;
    size_t n = p->population;

    for (size_t i = 0; i < n; i++) {
        off[i].fit = pop[i].fit;
        off[i].err = pop[i].err;
        changed[i] = false;
        if (!(off[i].e = expr_clone(pop[i].e)))
            return -ENOMEM;
    }
    for (size_t i = 1; i < n; i += 2) {
        if (gsl_rng_uniform(g->rng) >= p->crossover)
            continue;
        int r = symreg_crossover(off[i - 1].e, off[i].e, g->rng);
        if (r < 0)
            return r;
        for (size_t k = i - 1; k <= i && r > 0; k++) {
            if (symreg_within_limits(off[k].e, p->max_depth, p->max_size)) {
                changed[k] = true;
                continue;
            }
            expr_free(off[k].e);
            if (!(off[k].e = expr_clone(pop[k].e)))
                return -ENOMEM;
        }
    }
    for (size_t i = 0; i < n; i++) {
        if (gsl_rng_uniform(g->rng) >= p->mutation)
            continue;
        enum symreg_mutation kind = gsl_rng_uniform_int(g->rng, SYMREG_N_MUTATIONS);
        expr *before = expr_clone(off[i].e);
        if (!before)
            return -ENOMEM;
        int r = symreg_mutate(off[i].e, kind, &g->ps, g->rng);
        if (r > 0 && !symreg_within_limits(off[i].e, p->max_depth, p->max_size)) {
            expr_free(off[i].e);
            off[i].e = before;
            continue;
        }
        expr_free(before);
        if (r < 0)
            return r;
        changed[i] |= r > 0;
    }
    return 0;
}

/* With tie = bic: the training error of the equation the bic rule would
 * report from the archive's front so far. Selection then sees every error
 * below it as equal, and the smaller equation wins: the rule takes a lower
 * error as worth no more nodes, so on noisy data that pressure would only
 * grow equations that fit the noise, crowding out small ones of the right
 * shape (noisy Nguyen-6 settled on a 10-node single sine). An equation
 * that does lower the criterion enters the archive, and the tie drops to
 * it in the next generation; on exact data the tie reaches the round-off
 * floor once an exact fit is found. */
static void update_tie(struct engine *g)
{
    double lowest = INFINITY, front = INFINITY;

    g->tie = g->floor;
    for (size_t s = 1; s <= g->p->max_size; s++) {
        const struct ind *a = &g->archive[s];
        if (!a->e || !(a->fit < front))
            continue;
        front = a->fit;
        if (!symreg_bic_admits(a->err, g->floor, s, expr_n_consts(a->e), g->n))
            continue;
        double b = symreg_bic(g->p->fitness, a->err, g->floor, s, g->n);
        if (b < lowest) {
            lowest = b;
            g->tie = a->fit;
        }
    }
}

/* Plus-selection: the next parents are drawn from parents and children. */
static int select_next(struct engine *g, struct ind *pool, struct ind *next)
{
    size_t n = g->p->population;

    for (size_t i = 0; i < n; i++) {
        const struct ind *w = select_one(g, pool, 2 * n);
        next[i].fit = w->fit;
        next[i].err = w->err;
        if (!(next[i].e = expr_clone(w->e)))
            return -ENOMEM;
    }
    return 0;
}

/* Keeps a copy of `in` in arch when it has the lowest error of its size. */
static int archive_offer(struct ind *arch, const struct ind *in, size_t max_size)
{
    struct ind *a = &arch[in->e->n];

    if (in->e->n > max_size || !(in->fit < a->fit))
        return 0;
    expr *c = expr_clone(in->e);
    if (!c)
        return -ENOMEM;
    expr_free(a->e);
    *a = (struct ind){.e = c, .err = in->err, .fit = in->fit};
    return 0;
}

static int evaluate_changed(struct engine *g, struct ind *v, const bool *changed, size_t n)
{
    struct ind **todo = malloc(n * sizeof(*todo));
    size_t k = 0;

    if (!todo)
        return -ENOMEM;
    for (size_t i = 0; i < n; i++)
        if (!changed || changed[i])
            todo[k++] = &v[i];
    int r = evaluate_all(g, todo, k);
    /* The archives: the lowest error seen at each size, whatever the
     * selection later does with the individual. */
    for (size_t i = 0; i < k && r == 0; i++) {
        r = archive_offer(g->archive, todo[i], g->p->max_size);
        if (r == 0 && g->epoch != g->archive)
            r = archive_offer(g->epoch, todo[i], g->p->max_size);
    }
    free(todo);
    return r;
}

/* Keeps a copy of the best individual of v in *best; returns whether the
 * error dropped by more than rounding (which is what resets the stall). */
static int track_best(struct ind *best, const struct ind *v, size_t n, bool *improved)
{
    const struct ind *b = NULL;

    *improved = false;
    for (size_t i = 0; i < n; i++)
        if (!b || better(&v[i], b))
            b = &v[i];
    if (best->e && !better(b, best))
        return 0;
    *improved = !best->e || b->fit < best->fit * (1 - 1e-9);
    expr *c = expr_clone(b->e);
    if (!c)
        return -ENOMEM;
    expr_free(best->e);
    best->e = c;
    best->fit = b->fit;
    best->err = b->err;
    return 0;
}

static double seconds_since(uint64_t t0)
{
    return (double)(util_now_ns(CLOCK_MONOTONIC) - t0) / 1e9;
}

/* Whether restart `epoch` (0 for the first population) has had its share of
 * the budget: the last epoch gets half, the one before a quarter, and so on,
 * the first two alike, so each runs as long as all before it. Equations
 * found early (which is when most are) then get several independent
 * chances, while the longest epoch can still refine. */
static bool epoch_over(const struct engine *g, uint64_t t0, size_t gens, size_t epoch)
{
    const symreg_params *p = g->p;
    double share = ldexp(1, (int)epoch - (int)p->restarts);

    if (epoch >= p->restarts)
        return false;
    return (p->time_limit > 0 && seconds_since(t0) >= share * p->time_limit) ||
           (double)gens >= share * (double)p->generations;
}

/* A fresh population and an empty front to migrate from; the archive the
 * result comes from is kept. */
static int restart(struct engine *g, struct ind **pop_io)
{
    const symreg_params *p = g->p;

    free_inds(*pop_io, p->population);
    *pop_io = NULL;
    for (size_t s = 0; s <= p->max_size; s++) {
        expr_free(g->epoch[s].e);
        g->epoch[s] = (struct ind){.e = NULL, .err = INFINITY, .fit = INFINITY};
    }
    struct ind *pop = calloc(p->population, sizeof(*pop));
    if (!pop)
        return -ENOMEM;
    *pop_io = pop;
    int r = init_population(g, pop);
    return r < 0 ? r : evaluate_changed(g, pop, NULL, p->population);
}

/* The generations after the initial one; *gens gets how many ran. */
static int evolve(struct engine *g, struct ind **pop_io, struct ind *best, uint64_t t0,
                  symreg_progress_fn progress, void *ctx, size_t *gens, enum symreg_stop *stop)
{
    const symreg_params *p = g->p;
    size_t n = p->population, stall = 0, epoch = 0;
    struct ind *pool = calloc(2 * n, sizeof(*pool)), *next = NULL;
    bool *changed = calloc(n, sizeof(*changed)), improved = false;
    int r = 0;

    if (!pool || !changed) {
        r = -ENOMEM;
        goto out;
    }
    *stop = SYMREG_STOP_GENERATIONS;
    for (*gens = 0; *gens < p->generations; ++*gens) {
        if (p->stall && stall >= p->stall) {
            *stop = SYMREG_STOP_STALL;
            break;
        }
        if (p->time_limit > 0 && seconds_since(t0) >= p->time_limit) {
            *stop = SYMREG_STOP_TIME;
            break;
        }
        if (epoch_over(g, t0, *gens, epoch)) {
            epoch++;
            if ((r = restart(g, pop_io)) < 0)
                goto out;
        }
        next = calloc(n, sizeof(*next));
        if (!next) {
            r = -ENOMEM;
            goto out;
        }
        memcpy(pool, *pop_io, n * sizeof(*pool));
        free(*pop_io);
        *pop_io = NULL;
        r = vary(g, pool, pool + n, changed);
        if (r == 0)
            r = evaluate_changed(g, pool + n, changed, n);
        if (r == 0)
            r = track_best(best, pool + n, n, &improved);
        if (r == 0 && p->tie == SYMREG_TIE_BIC)
            update_tie(g);
        if (r == 0)
            r = select_next(g, pool, next);
        if (r == 0 && p->migration)
            r = migrate_front(g, next);
        for (size_t i = 0; i < 2 * n; i++)
            expr_free(pool[i].e);
        memset(pool, 0, 2 * n * sizeof(*pool));
        *pop_io = next;
        next = NULL;
        if (r < 0)
            goto out;
        stall = improved ? 0 : stall + 1;
        if (progress)
            progress(&(symreg_progress){*gens + 1, best->fit, g->evaluations, seconds_since(t0)},
                     ctx);
    }
out:
    free(pool);
    free(changed);
    return r;
}

/* ---- Results ------------------------------------------------------------ */

/* Refits the constants of the archive's equations to convergence: the search
 * stops each fit after lm_iterations steps, enough to rank children but not
 * to compare the sizes of the front fairly. A refit that ends worse (LM
 * stopped on a rejected step) keeps the search's constants. */
static int refit_archive(struct engine *g)
{
    symreg_params p = *g->p;
    struct engine h = *g;
    double *pred = malloc((g->n ? g->n : 1) * sizeof(double));
    int r = pred ? 0 : -ENOMEM;

    p.lm_iterations = ARCHIVE_REFIT_ITERATIONS;
    p.scaling = false; /* the refit keeps each equation's size */
    h.p = &p;
    for (size_t s = 1; s <= p.max_size && r == 0; s++) {
        struct ind *a = &g->archive[s];
        if (!a->e || !p.lm || g->p->lm_iterations == 0 || expr_n_consts(a->e) == 0)
            continue;
        struct ind t = *a;
        if (!(t.e = expr_clone(a->e))) {
            r = -ENOMEM;
            break;
        }
        r = evaluate(&h, &t, pred);
        if (r == 0 && t.err < a->err) {
            expr_free(a->e);
            *a = t;
        } else {
            expr_free(t.e);
        }
    }
    free(pred);
    return r;
}

/* The non-dominated (size, error) pairs of the archive, by size. */
static int build_front(symreg_result *res, const struct engine *g)
{
    double lowest = INFINITY;

    res->front = calloc(g->p->max_size + 1, sizeof(*res->front));
    if (!res->front)
        return -ENOMEM;
    for (size_t s = 1; s <= g->p->max_size; s++) {
        const struct ind *a = &g->archive[s];
        if (!a->e || !(a->fit < lowest))
            continue;
        symreg_front_item *it = &res->front[res->n_front];
        if (!(it->e = expr_clone(a->e)))
            return -ENOMEM;
        it->error = a->err;
        it->size = s;
        it->cv_error = NAN;
        if (res->n_front > 0)
            it->score = -(log(a->fit) - log(lowest)) / (double)(s - it[-1].size);
        lowest = a->fit;
        res->n_front++;
    }
    return 0;
}

void symreg_result_free(symreg_result *r)
{
    if (!r)
        return;
    expr_free(r->best);
    for (size_t i = 0; i < r->n_front; i++)
        expr_free(r->front[i].e);
    free(r->front);
    free(r);
}

static int check_inputs(const symreg_params *p, const double *y, size_t n, size_t n_features,
                        char *err, size_t errlen)
{
    int r = symreg_params_check(p, err, errlen);

    if (r < 0)
        return r;
    if (n == 0)
        return util_err(err, errlen, -EINVAL, "no training rows");
    if (n_features == 0)
        return util_err(err, errlen, -EINVAL, "no features");
    for (size_t i = 0; i < n && p->fitness == SYMREG_MAPE; i++)
        if (y[i] == 0)
            return util_err(err, errlen, -EDOM,
                            "target is 0 in training row %zu: mape needs non-zero targets", i + 1);
    return 0;
}

static int engine_init(struct engine *g, const symreg_params *p, const double *const *x,
                       size_t n_features, const double *y, size_t n)
{
    *g = (struct engine){.p = p, .x = x, .y = y, .n = n};
    g->floor = symreg_error_floor(p->fitness, y, n);
    /* A tenth of the floor as a root mean square: every error the fitness
     * computes from such residuals is below the floor. */
    double rms = p->fitness == SYMREG_MSE ? sqrt(g->floor) : g->floor;
    g->rss_goal = (double)n * (0.1 * rms) * (0.1 * rms);
    g->archive = calloc(p->max_size + 1, sizeof(*g->archive));
    if (!g->archive)
        return -ENOMEM;
    g->epoch = g->archive;
    if (p->restarts > 0 && !(g->epoch = calloc(p->max_size + 1, sizeof(*g->epoch))))
        return -ENOMEM;
    for (size_t s = 0; s <= p->max_size; s++)
        g->archive[s].fit = g->epoch[s].fit = INFINITY;
    symreg_prims_init(&g->ps, p->ops, n_features, p->constants);
    /* Only fitted constants depend on the shape alone. */
    if (p->cache && p->lm && p->lm_iterations > 0 &&
        symreg_cache_new(SYMREG_CACHE_SLOTS, &g->cache) < 0)
        return -ENOMEM;
    g->rng = gsl_rng_alloc(gsl_rng_mt19937);
    if (!g->rng)
        return -ENOMEM;
    gsl_rng_set(g->rng, (unsigned long)p->seed);
    if (p->fitness == SYMREG_MAPE) {
        g->w = malloc(n * sizeof(double));
        if (!g->w)
            return -ENOMEM;
        for (size_t i = 0; i < n; i++)
            g->w[i] = 1 / fabs(y[i]);
    }
    return 0;
}

int symreg_run(const symreg_params *p, const double *const *x, size_t n_features, const double *y,
               size_t n, symreg_progress_fn progress, void *ctx, symreg_result **out, char *err,
               size_t errlen)
{
    uint64_t t0 = util_now_ns(CLOCK_MONOTONIC);
    struct engine g;
    struct ind *pop = NULL, best = {.e = NULL, .err = INFINITY, .fit = INFINITY};
    symreg_result *res = NULL;
    bool improved;
    int r = check_inputs(p, y, n, n_features, err, errlen);

    if (r < 0)
        return r;
    r = engine_init(&g, p, x, n_features, y, n);
    if (r == 0 && !(pop = calloc(p->population, sizeof(*pop))))
        r = -ENOMEM;
    if (r == 0)
        r = init_population(&g, pop);
    if (r == 0)
        r = evaluate_changed(&g, pop, NULL, p->population);
    if (r == 0)
        r = track_best(&best, pop, p->population, &improved);
    if (r == 0 && !(res = calloc(1, sizeof(*res))))
        r = -ENOMEM;
    if (r == 0)
        r = evolve(&g, &pop, &best, t0, progress, ctx, &res->generations, &res->stop);
    if (r == 0)
        r = refit_archive(&g);
    if (r == 0)
        r = build_front(res, &g);
    if (r == 0) {
        res->best = best.e;
        best.e = NULL;
        res->train_error = best.err;
        res->floor = g.floor;
        res->evaluations = g.evaluations;
        res->cached = g.cached;
        res->seconds = seconds_since(t0);
        *out = res;
        res = NULL;
    } else {
        util_err(err, errlen, r, "symbolic regression failed: %s", strerror(-r));
    }
    symreg_result_free(res);
    free_inds(pop, p->population);
    expr_free(best.e);
    gsl_rng_free(g.rng);
    symreg_cache_free(g.cache);
    free(g.w);
    if (g.epoch && g.epoch != g.archive)
        free_inds(g.epoch, p->max_size + 1);
    if (g.archive)
        free_inds(g.archive, p->max_size + 1);
    return r;
}
