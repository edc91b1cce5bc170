/* The cgroup id -> path cache of daemon/cgroupids.c: over a directory tree
 * that a test mountinfo names as the cgroup2 mount (readdir's inode is the
 * id, as kernfs makes it), and over the host's own cgroup2 mount when there
 * is one: the id of this process's cgroup gives the path /proc shows. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
/* cmocka.h needs the three above first */
#include <cmocka.h>

#include "cgroupids.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define SEC 1000000000ull

struct tree {
    char dir[64];       /* the fake mount point (has a space: escaped in mountinfo) */
    char mountinfo[96]; /* the fake mountinfo file */
};

static uint64_t ino(const struct tree *t, const char *rel)
{
    char path[256];
    struct stat st;

    snprintf(path, sizeof(path), "%s%s", t->dir, rel);
    assert_int_equal(stat(path, &st), 0);
    return (uint64_t)st.st_ino;
}

static void mk(const struct tree *t, const char *rel)
{
    char path[256];

    snprintf(path, sizeof(path), "%s%s", t->dir, rel);
    assert_int_equal(mkdir(path, 0755), 0);
}

/* A tree under a fresh temporary folder, and a mountinfo naming it as the
 * cgroup2 mount with root `root` after an unrelated cgroup v1 line. */
static void make_tree(struct tree *t, const char *root)
{
    char base[] = "/tmp/wp-cgroupids-XXXXXX";
    FILE *f;

    assert_non_null(mkdtemp(base));
    snprintf(t->dir, sizeof(t->dir), "%s/cg 2", base);
    assert_int_equal(mkdir(t->dir, 0755), 0);
    mk(t, "/system.slice");
    mk(t, "/system.slice/a.service");
    mk(t, "/user.slice");
    snprintf(t->mountinfo, sizeof(t->mountinfo), "%s/mountinfo", base);
    /* the mount point "BASE/cg 2" as mountinfo escapes it */
    assert_non_null(f = fopen(t->mountinfo, "w"));
    fprintf(f, "30 25 0:26 / /sys/fs/cgroup/cpu rw,relatime shared:1 - cgroup cgroup rw,cpu\n");
    fprintf(f, "41 31 0:38 %s %s/cg\\0402 rw,relatime - cgroup2 cgroup2 rw\n", root, base);
    fclose(f);
}

static void remove_tree(const struct tree *t)
{
    char cmd[256];

    snprintf(cmd, sizeof(cmd), "rm -rf '%.*s'", (int)(strrchr(t->mountinfo, '/') - t->mountinfo),
             t->mountinfo);
    assert_int_equal(system(cmd), 0);
}

/* The cache over a fresh tree whose mount has root `root`. */
static cgroupids *open_tree(struct tree *t, const char *root)
{
    cgroupids *c = NULL;

    make_tree(t, root);
    assert_int_equal(cgroupids_new(t->mountinfo, &c), 0);
    return c;
}

static void close_tree(struct tree *t, cgroupids *c)
{
    cgroupids_free(c);
    remove_tree(t);
}

static void test_paths(void **state)
{
    struct tree t;
    cgroupids *c = open_tree(&t, "/");

    assert_string_equal(cgroupids_path(c, ino(&t, "/system.slice/a.service"), SEC),
                        "/system.slice/a.service");
    assert_string_equal(cgroupids_path(c, ino(&t, "/user.slice"), SEC), "/user.slice");
    assert_string_equal(cgroupids_path(c, ino(&t, ""), SEC), "/");
    assert_null(cgroupids_path(c, 0, SEC));
    /* Made after the walk: a miss within the second does not walk again,
     * one after it does. */
    mk(&t, "/user.slice/late.scope");
    uint64_t late = ino(&t, "/user.slice/late.scope");
    assert_null(cgroupids_path(c, late, SEC + SEC / 2));
    assert_string_equal(cgroupids_path(c, late, 2 * SEC + 1), "/user.slice/late.scope");
    /* Known ids answer without a walk, whenever asked. */
    assert_string_equal(cgroupids_path(c, ino(&t, "/user.slice"), 2 * SEC + 2), "/user.slice");
    close_tree(&t, c);
}

/* Inside a cgroup namespace the mount's root is the namespace's: paths
 * below it are shown from the hierarchy's root. */
static void test_root(void **state)
{
    struct tree t;
    cgroupids *c = open_tree(&t, "/machine.slice/m1");

    assert_string_equal(cgroupids_path(c, ino(&t, "/system.slice"), SEC),
                        "/machine.slice/m1/system.slice");
    assert_string_equal(cgroupids_path(c, ino(&t, ""), SEC), "/machine.slice/m1");
    close_tree(&t, c);
}

static void test_no_mount(void **state)
{
    char path[] = "/tmp/wp-cgroupids-mi-XXXXXX";
    int fd = mkstemp(path);
    cgroupids *c = NULL;

    assert_true(fd >= 0);
    assert_true(write(fd, "30 25 0:26 / /sys/fs/cgroup/cpu rw - cgroup cgroup rw,cpu\n", 58) == 58);
    close(fd);
    assert_int_equal(cgroupids_new(path, &c), -ENOENT);
    assert_null(c);
    unlink(path);
    assert_int_equal(cgroupids_new("/nonexistent/mountinfo", &c), -ENOENT);
    assert_null(cgroupids_path(NULL, 5, SEC));
}

/* The host's: this process's cgroup (the "0::" line of /proc/self/cgroup)
 * found by the inode of its folder under the real cgroup2 mount. */
static void test_host(void **state)
{
    char *mount = NULL, *root = NULL, line[4096], dir[8192];
    const char *path = NULL;
    struct stat st;
    cgroupids *c;
    FILE *f;

    if (cgroupids_find_mount("/proc/self/mountinfo", &mount, &root) < 0) {
        skip(); /* cgroup v1 only */
        return;
    }
    assert_non_null(f = fopen("/proc/self/cgroup", "r"));
    while (fgets(line, sizeof(line), f))
        if (strncmp(line, "0::", 3) == 0) {
            line[strcspn(line, "\n")] = '\0';
            path = line + 3;
        }
    fclose(f);
    assert_non_null(path);
    assert_int_equal(strncmp(path, root, strlen(root)), 0);
    snprintf(dir, sizeof(dir), "%s%s", mount, path + strlen(root));
    assert_int_equal(stat(dir, &st), 0);
    assert_int_equal(cgroupids_new("/proc/self/mountinfo", &c), 0);
    assert_string_equal(cgroupids_path(c, (uint64_t)st.st_ino, SEC), path);
    cgroupids_free(c);
    free(mount);
    free(root);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_paths),
        cmocka_unit_test(test_root),
        cmocka_unit_test(test_no_mount),
        cmocka_unit_test(test_host),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
