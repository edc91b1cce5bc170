/* forest: random forests of CART regression trees.
 *
 * Each tree is grown on a bootstrap sample (drawn as per-row counts, which
 * weigh the squared error like scikit-learn's sample weights) with a random
 * subset of features tried at every split.  Instead of sorting at every
 * node, the rows are sorted by each feature once per forest; a tree keeps,
 * for every feature, its in-bag rows in that order and splits a node by a
 * stable partition of each feature's segment, so a level of the tree costs
 * O(rows x features) and no sort is ever repeated.
 *
 * Tree t draws everything random from its own mt19937 seeded from (seed, t)
 * and stores its own importances; threads only decide who builds which
 * tree, so the forest does not depend on their number. */
#include "learn/learn.h"

#include <errno.h>
#include <gsl/gsl_randist.h>
#include <gsl/gsl_rng.h>
#include <json-c/json.h>
#include <math.h>
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

/* 24 bytes: a fully grown tree has about twice as many nodes as distinct
 * in-bag rows, so a 100-tree forest of 100,000 rows is 300 MB at this size.
 * Children are always added in pairs, so the right child is left + 1. */
typedef struct tnode {
    int32_t feature; /* -1 for a leaf */
    int32_t left;
    double threshold; /* x <= threshold goes left */
    double value;     /* mean target of the node's in-bag rows */
} tnode;

typedef struct tree {
    tnode *nodes;
    size_t n, cap;
} tree;

struct forest {
    size_t p, n_trees;
    tree *trees;
    double *tree_importance; /* n_trees x p */
    double *importance;      /* p */
};

/* What every builder thread reads. */
struct shared {
    const forest_opts *o;
    forest *f;
    size_t n, p, mtry;
    const double *const *x; /* local columns: n values each */
    const double *y;
    const uint32_t *order; /* p x n: rows sorted by each feature */
    size_t next_tree;
    pthread_mutex_t lock;
    int error;
};

/* One thread's scratch space, reused tree after tree. */
struct work {
    uint32_t *cnt; /* bootstrap count per row */
    uint32_t *ids; /* p x m in-bag rows of each feature, in sorted order */
    double *vals;  /* the matching feature values */
    uint32_t *tmp_ids;
    double *tmp_vals;
    unsigned char *left;
    size_t *feat; /* feature permutation */
    gsl_rng *rng;
};

struct frame {
    int node;
    size_t lo, hi;
};

static uint64_t splitmix64(uint64_t z)
{
    z += 0x9e3779b97f4a7c15ULL;
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}

static int tree_add(tree *t, double value)
{
    if (t->n == t->cap) {
        size_t ncap = t->cap ? t->cap * 2 : 64;
        tnode *nn = realloc(t->nodes, ncap * sizeof(*nn));
        if (!nn)
            return -ENOMEM;
        t->nodes = nn;
        t->cap = ncap;
    }
    t->nodes[t->n] = (tnode){.feature = -1, .left = -1, .value = value};
    return (int)t->n++;
}

/* Draws the bootstrap sample and lays out each feature's in-bag rows in
 * sorted order. Returns the number of distinct in-bag rows. */
static size_t bootstrap(const struct shared *sh, struct work *w)
{
    size_t n = sh->n, m = 0;

    memset(w->cnt, 0, n * sizeof(*w->cnt));
    for (size_t i = 0; i < n; i++)
        w->cnt[gsl_rng_uniform_int(w->rng, n)]++;
    for (size_t j = 0; j < sh->p; j++) {
        const uint32_t *ord = sh->order + j * n;
        uint32_t *ids = w->ids + j * n;
        double *vals = w->vals + j * n;
        size_t k = 0;
        for (size_t i = 0; i < n; i++)
            if (w->cnt[ord[i]]) {
                ids[k] = ord[i];
                vals[k++] = sh->x[j][ord[i]];
            }
        m = k;
    }
    return m;
}

struct split {
    int feature;
    size_t at; /* last position (in the feature's order) that goes left */
    double threshold, score;
};

/* Best split of [lo, hi) on feature j, scored by sum_L^2/w_L + sum_R^2/w_R
 * (maximising it minimises the children's squared error). */
static bool best_on_feature(const struct shared *sh, const struct work *w, size_t j, size_t lo,
                            size_t hi, double wsum, double ysum, struct split *best)
{
    const uint32_t *ids = w->ids + j * sh->n;
    const double *vals = w->vals + j * sh->n;
    size_t min_leaf = sh->o->min_leaf ? sh->o->min_leaf : 1, cnt = hi - lo;
    double wl = 0, sl = 0;

    if (vals[lo] == vals[hi - 1])
        return false;
    for (size_t k = lo; k + 1 < hi; k++) {
        uint32_t s = ids[k];
        size_t nl = k - lo + 1;
        wl += w->cnt[s];
        sl += w->cnt[s] * sh->y[s];
        if (nl < min_leaf)
            continue;
        if (cnt - nl < min_leaf)
            break;
        if (vals[k] == vals[k + 1])
            continue;
        double score = sl * sl / wl + (ysum - sl) * (ysum - sl) / (wsum - wl);
        if (score > best->score) {
            double mid = vals[k] / 2 + vals[k + 1] / 2;
            best->feature = (int)j;
            best->at = k;
            best->threshold = mid < vals[k + 1] ? mid : vals[k];
            best->score = score;
        }
    }
    return true;
}

/* Features in random order until mtry non-constant ones have been tried,
 * as scikit-learn does, so constant features do not waste the budget. */
static void find_split(const struct shared *sh, struct work *w, size_t lo, size_t hi, double wsum,
                       double ysum, struct split *best)
{
    size_t p = sh->p, tried = 0;

    best->feature = -1;
    best->score = ysum * ysum / wsum;
    for (size_t j = 0; j < p; j++)
        w->feat[j] = j;
    for (size_t k = 0; k < p && tried < sh->mtry; k++) {
        size_t r = k + gsl_rng_uniform_int(w->rng, p - k), j = w->feat[r];
        w->feat[r] = w->feat[k];
        w->feat[k] = j;
        if (best_on_feature(sh, w, j, lo, hi, wsum, ysum, best))
            tried++;
    }
}

/* Stable partition of every feature's segment [lo, hi) into the rows that
 * go left, then those that go right. */
static void partition(const struct shared *sh, struct work *w, const struct split *sp, size_t lo,
                      size_t hi)
{
    const uint32_t *bids = w->ids + (size_t)sp->feature * sh->n;

    for (size_t k = lo; k < hi; k++)
        w->left[bids[k]] = k <= sp->at;
    for (size_t j = 0; j < sh->p; j++) {
        uint32_t *ids = w->ids + j * sh->n;
        double *vals = w->vals + j * sh->n;
        size_t a = lo, b = 0;
        if ((int)j == sp->feature)
            continue;
        for (size_t k = lo; k < hi; k++) {
            if (w->left[ids[k]]) {
                ids[a] = ids[k];
                vals[a++] = vals[k];
            } else {
                w->tmp_ids[b] = ids[k];
                w->tmp_vals[b++] = vals[k];
            }
        }
        memcpy(ids + a, w->tmp_ids, b * sizeof(*ids));
        memcpy(vals + a, w->tmp_vals, b * sizeof(*vals));
    }
}

static int reserve(struct frame **stack, size_t *cap, size_t need)
{
    struct frame *n;

    if (need <= *cap)
        return 0;
    n = realloc(*stack, *cap * 2 * sizeof(*n));
    if (!n)
        return -ENOMEM;
    *stack = n;
    *cap *= 2;
    return 0;
}

static int grow(const struct shared *sh, struct work *w, tree *t, double *imp, size_t m)
{
    size_t cap = 64, top = 0, min_leaf = sh->o->min_leaf ? sh->o->min_leaf : 1;
    struct frame *stack = malloc(cap * sizeof(*stack));
    int r = 0;

    if (!stack)
        return -ENOMEM;
    stack[top++] = (struct frame){tree_add(t, 0), 0, m};
    if (stack[0].node < 0)
        r = -ENOMEM;
    while (top > 0 && r == 0) {
        struct frame fr = stack[--top];
        const uint32_t *ids = w->ids;
        double wsum = 0, ysum = 0, ylo = INFINITY, yhi = -INFINITY;
        struct split sp;

        for (size_t k = fr.lo; k < fr.hi; k++) {
            uint32_t s = ids[k];
            wsum += w->cnt[s];
            ysum += w->cnt[s] * sh->y[s];
            ylo = fmin(ylo, sh->y[s]);
            yhi = fmax(yhi, sh->y[s]);
        }
        t->nodes[fr.node].value = ysum / wsum;
        if (fr.hi - fr.lo < 2 * min_leaf || ylo == yhi)
            continue;
        find_split(sh, w, fr.lo, fr.hi, wsum, ysum, &sp);
        if (sp.feature < 0)
            continue;
        imp[sp.feature] += sp.score - ysum * ysum / wsum;
        partition(sh, w, &sp, fr.lo, fr.hi);
        int l = tree_add(t, 0), rr = tree_add(t, 0);
        if (l < 0 || rr < 0 || reserve(&stack, &cap, top + 2) < 0) {
            r = -ENOMEM;
            break;
        }
        t->nodes[fr.node].feature = sp.feature;
        t->nodes[fr.node].threshold = sp.threshold;
        t->nodes[fr.node].left = l;
        stack[top++] = (struct frame){rr, sp.at + 1, fr.hi};
        stack[top++] = (struct frame){l, fr.lo, sp.at + 1};
    }
    free(stack);
    if (r == 0 && t->n < t->cap) { /* give back the doubling's slack */
        tnode *fit = realloc(t->nodes, t->n * sizeof(*fit));
        if (fit) {
            t->nodes = fit;
            t->cap = t->n;
        }
    }
    return r;
}

static void work_free(struct work *w)
{
    free(w->cnt);
    free(w->ids);
    free(w->vals);
    free(w->tmp_ids);
    free(w->tmp_vals);
    free(w->left);
    free(w->feat);
    if (w->rng)
        gsl_rng_free(w->rng);
}

static int work_alloc(struct work *w, size_t n, size_t p)
{
    memset(w, 0, sizeof(*w));
    w->cnt = malloc(n * sizeof(*w->cnt));
    w->ids = malloc(n * p * sizeof(*w->ids));
    w->vals = malloc(n * p * sizeof(*w->vals));
    w->tmp_ids = malloc(n * sizeof(*w->tmp_ids));
    w->tmp_vals = malloc(n * sizeof(*w->tmp_vals));
    w->left = malloc(n);
    w->feat = malloc(p * sizeof(*w->feat));
    w->rng = gsl_rng_alloc(gsl_rng_mt19937);
    if (!w->cnt || !w->ids || !w->vals || !w->tmp_ids || !w->tmp_vals || !w->left || !w->feat ||
        !w->rng) {
        work_free(w);
        return -ENOMEM;
    }
    return 0;
}

/* Per-tree importances normalised to sum 1 (a tree with no split has none). */
static void normalise(double *v, size_t p)
{
    double s = 0;

    for (size_t j = 0; j < p; j++)
        s += v[j];
    if (s > 0)
        for (size_t j = 0; j < p; j++)
            v[j] /= s;
}

static int build_tree(struct shared *sh, struct work *w, size_t t)
{
    uint64_t s = splitmix64(((uint64_t)sh->o->seed << 20) ^ (uint64_t)t);
    double *imp = sh->f->tree_importance + t * sh->p;
    int r;

    gsl_rng_set(w->rng, (unsigned long)(s & 0xffffffffu) | 1u);
    r = grow(sh, w, &sh->f->trees[t], imp, bootstrap(sh, w));
    normalise(imp, sh->p);
    return r;
}

static void *builder(void *arg)
{
    struct shared *sh = arg;
    struct work w;
    int r = work_alloc(&w, sh->n, sh->p);
    bool allocated = r == 0;

    while (r == 0) {
        size_t t;
        pthread_mutex_lock(&sh->lock);
        t = sh->next_tree < sh->f->n_trees && !sh->error ? sh->next_tree++ : SIZE_MAX;
        pthread_mutex_unlock(&sh->lock);
        if (t == SIZE_MAX)
            break;
        r = build_tree(sh, &w, t);
    }
    if (allocated)
        work_free(&w);
    if (r < 0) {
        pthread_mutex_lock(&sh->lock);
        sh->error = r;
        pthread_mutex_unlock(&sh->lock);
    }
    return NULL;
}

struct keyed {
    double v;
    uint32_t id;
};

static int cmp_keyed(const void *a, const void *b)
{
    const struct keyed *x = a, *y = b;
    if (x->v != y->v)
        return x->v < y->v ? -1 : 1;
    return (x->id > y->id) - (x->id < y->id);
}

static int presort(struct shared *sh, uint32_t **order)
{
    size_t n = sh->n;
    struct keyed *k = malloc(n * sizeof(*k));
    uint32_t *o = malloc(n * sh->p * sizeof(*o));

    if (!k || !o) {
        free(k);
        free(o);
        return -ENOMEM;
    }
    for (size_t j = 0; j < sh->p; j++) {
        for (size_t i = 0; i < n; i++)
            k[i] = (struct keyed){sh->x[j][i], (uint32_t)i};
        qsort(k, n, sizeof(*k), cmp_keyed);
        for (size_t i = 0; i < n; i++)
            o[j * n + i] = k[i].id;
    }
    free(k);
    *order = o;
    return 0;
}

static size_t features_per_split(double mf, size_t p)
{
    size_t m;

    if (mf <= 0)
        return p;
    m = mf <= 1 ? (size_t)(mf * (double)p) : (size_t)mf;
    return m < 1 ? 1 : m > p ? p : m;
}

/* Columns restricted to the chosen rows, so trees index rows 0..n-1. */
static double *gather(const double *const *x, const double *y, size_t p, const size_t *rows,
                      size_t n, double **cols, double **yl)
{
    double *buf = malloc((p + 1) * n * sizeof(double));

    if (!buf)
        return NULL;
    for (size_t j = 0; j < p; j++) {
        cols[j] = buf + j * n;
        for (size_t i = 0; i < n; i++)
            cols[j][i] = x[j][rows ? rows[i] : i];
    }
    *yl = buf + p * n;
    for (size_t i = 0; i < n; i++)
        (*yl)[i] = y[rows ? rows[i] : i];
    return buf;
}

static forest *forest_alloc(size_t p, size_t n_trees)
{
    forest *f = calloc(1, sizeof(*f));

    if (!f)
        return NULL;
    f->p = p;
    f->n_trees = n_trees;
    f->trees = calloc(n_trees, sizeof(*f->trees));
    f->tree_importance = calloc(n_trees * p, sizeof(double));
    f->importance = calloc(p ? p : 1, sizeof(double));
    if (!f->trees || !f->tree_importance || !f->importance) {
        forest_free(f);
        return NULL;
    }
    return f;
}

static int run_builders(struct shared *sh, size_t threads)
{
    pthread_t tid[threads];
    size_t started = 0;

    pthread_mutex_init(&sh->lock, NULL);
    for (; started + 1 < threads; started++)
        if (pthread_create(&tid[started], NULL, builder, sh) != 0)
            break;
    builder(sh); /* the calling thread builds too */
    for (size_t i = 0; i < started; i++)
        pthread_join(tid[i], NULL);
    pthread_mutex_destroy(&sh->lock);
    return sh->error;
}

int forest_fit(forest **out, const forest_opts *o, const double *const *x, const double *y,
               size_t p, const size_t *rows, size_t n_rows)
{
    size_t n_trees = o->n_trees ? o->n_trees : 100, threads = o->threads ? o->threads : 1;
    double *cols[p ? p : 1], *yl = NULL, *buf;
    uint32_t *order = NULL;
    struct shared sh = {
        .o = o, .n = n_rows, .p = p, .mtry = features_per_split(o->max_features, p)};
    int r;

    if (n_rows == 0 || n_rows > UINT32_MAX)
        return -EINVAL;
    sh.f = forest_alloc(p, n_trees);
    if (!sh.f)
        return -ENOMEM;
    buf = gather(x, y, p, rows, n_rows, cols, &yl);
    r = buf ? 0 : -ENOMEM;
    if (r == 0) {
        sh.x = (const double *const *)cols;
        sh.y = yl;
        r = presort(&sh, &order);
    }
    if (r == 0) {
        sh.order = order;
        r = run_builders(&sh, threads < n_trees ? threads : n_trees);
    }
    free(order);
    free(buf);
    if (r < 0) {
        forest_free(sh.f);
        return r;
    }
    for (size_t t = 0; t < n_trees; t++)
        for (size_t j = 0; j < p; j++)
            sh.f->importance[j] += sh.f->tree_importance[t * p + j] / (double)n_trees;
    normalise(sh.f->importance, p);
    *out = sh.f;
    return 0;
}

static double tree_predict(const tree *t, const double *const *x, size_t row)
{
    const tnode *nd = t->nodes;

    while (nd->feature >= 0)
        nd = &t->nodes[nd->left + (x[nd->feature][row] > nd->threshold)];
    return nd->value;
}

void forest_predict(const forest *f, const double *const *x, const size_t *rows, size_t n_rows,
                    double *out)
{
    for (size_t i = 0; i < n_rows; i++) {
        double s = 0;
        for (size_t t = 0; t < f->n_trees; t++)
            s += tree_predict(&f->trees[t], x, rows ? rows[i] : i);
        out[i] = s / (double)f->n_trees;
    }
}

const double *forest_importance(const forest *f)
{
    return f->importance;
}

static double mse_of(const forest *f, const double *const *cols, const double *y, size_t n,
                     double *pred)
{
    double s = 0;

    forest_predict(f, cols, NULL, n, pred);
    for (size_t i = 0; i < n; i++)
        s += (y[i] - pred[i]) * (y[i] - pred[i]);
    return s / (double)n;
}

int forest_permutation_importance(const forest *f, const double *const *x, const double *y,
                                  const size_t *rows, size_t n_rows, size_t repeats,
                                  unsigned long seed, double *out)
{
    size_t p = f->p;
    double *cols[p ? p : 1], *yl, *buf = NULL, *pred = malloc(n_rows * sizeof(double));
    double *shuffled = malloc(n_rows * sizeof(double));
    gsl_rng *rng = gsl_rng_alloc(gsl_rng_mt19937);
    int r = -ENOMEM;

    if (!pred || !shuffled || !rng || n_rows == 0 ||
        !(buf = gather(x, y, p, rows, n_rows, cols, &yl)))
        goto out;
    gsl_rng_set(rng, seed);
    double base = mse_of(f, (const double *const *)cols, yl, n_rows, pred);
    for (size_t j = 0; j < p; j++) {
        double *keep = cols[j], sum = 0;
        for (size_t k = 0; k < (repeats ? repeats : 1); k++) {
            memcpy(shuffled, keep, n_rows * sizeof(double));
            gsl_ran_shuffle(rng, shuffled, n_rows, sizeof(double));
            cols[j] = shuffled;
            sum += mse_of(f, (const double *const *)cols, yl, n_rows, pred) - base;
            cols[j] = keep;
        }
        out[j] = sum / (double)(repeats ? repeats : 1);
    }
    r = 0;
out:
    free(buf);
    free(pred);
    free(shuffled);
    if (rng)
        gsl_rng_free(rng);
    return r;
}

size_t forest_n_trees(const forest *f)
{
    return f->n_trees;
}

size_t forest_n_nodes(const forest *f)
{
    size_t n = 0;

    for (size_t t = 0; t < f->n_trees; t++)
        n += f->trees[t].n;
    return n;
}

static json_object *tree_to_json(const tree *t)
{
    json_object *o = json_object_new_object();
    json_object *fe = json_object_new_array(), *th = json_object_new_array();
    json_object *le = json_object_new_array(), *ri = json_object_new_array();
    json_object *va = json_object_new_array();

    for (size_t i = 0; i < t->n; i++) {
        const tnode *nd = &t->nodes[i];
        json_object_array_add(fe, json_object_new_int(nd->feature));
        json_object_array_add(th, json_object_new_double(nd->feature >= 0 ? nd->threshold : 0));
        json_object_array_add(le, json_object_new_int(nd->left));
        json_object_array_add(ri, json_object_new_int(nd->feature >= 0 ? nd->left + 1 : -1));
        json_object_array_add(va, json_object_new_double(nd->value));
    }
    json_object_object_add(o, "feature", fe);
    json_object_object_add(o, "threshold", th);
    json_object_object_add(o, "left", le);
    json_object_object_add(o, "right", ri);
    json_object_object_add(o, "value", va);
    return o;
}

void *forest_to_json(const forest *f)
{
    json_object *o = json_object_new_object(), *trees = json_object_new_array();

    for (size_t t = 0; t < f->n_trees; t++)
        json_object_array_add(trees, tree_to_json(&f->trees[t]));
    json_object_object_add(o, "trees", trees);
    return o;
}

void forest_free(forest *f)
{
    if (!f)
        return;
    if (f->trees)
        for (size_t t = 0; t < f->n_trees; t++)
            free(f->trees[t].nodes);
    free(f->trees);
    free(f->tree_importance);
    free(f->importance);
    free(f);
}
