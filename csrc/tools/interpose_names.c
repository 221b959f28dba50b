/* interpose_names.c - writes csrc/interpose/calls.def's tables as JSON, the
 * file the Python reader knows the record by (ceiling/_core/interpose_names.json,
 * read by src/ceiling/probes/interpose_names.py). Run by the build
 * (CMakeLists.txt), never installed: the names are the library's, so they are
 * written from the same table it is compiled from, not copied by hand.
 *
 * Exits 1 (and the build fails) when a call's class is not one of its
 * module's classes; a line naming a key that CEIL_IP_KEYS lacks does not
 * compile (CEIL_IPK_<key>).
 *
 *     interpose_names OUT.json
 */
#include <ctype.h>
#include <stdio.h>
#include <string.h>

#include "../interpose/interpose.h"     /* calls.def, CEIL_IP_FORMAT_VERSION and the keys' types (CEIL_IPK_*) */

typedef struct { const char *name; int type; } key_t_;
#define KEY_U(key) {#key, 'u'},
#define KEY_I(key) {#key, 'i'},
#define KEY_S(key) {#key, 's'},
#define KEY_P(key) {#key, 'p'},
static const key_t_ keys[] = {CEIL_IP_KEYS(KEY_U, KEY_I, KEY_S, KEY_P)};

static FILE *out;
static int failed;

static const char *type_name(int t)
{
    return t == 'u' ? "u64" : t == 'i' ? "i32" : t == 's' ? "str" : "peer";
}

/* "NAME" in lower case (the tables' ENUM tokens are the names in upper case) */
static void lower(const char *s)
{
    fputc('"', out);
    for (; *s; s++)
        fputc(tolower((unsigned char)*s), out);
    fputc('"', out);
}

static const char *sep;
static void item(void) { fputs(sep, out); sep = ", "; }

/* ---- value sets ---- */
#define NAME_OF(e, name) item(); fputs("\"" #name "\"", out);
#define FN_OF(fn, cls) item(); fputs("\"" #fn "\"", out);
#define FN_OF_C(fn, cls) item(); fputs("\"" #fn "\", \"" #fn "_c\"", out);
#define SET(name, body)                                                                                          \
    do {                                                                                                         \
        fprintf(out, "%s\"%s\": [", first ? "\n    " : ",\n    ", name);                                           \
        first = 0, sep = "";                                                                                     \
        body fputs("]", out);                                                                                    \
    } while (0)

static void sets(void)
{
    int first = 1;
    fputs("  \"sets\": {", out);
    SET("posix_classes", CEIL_IP_POSIX_CLASSES(NAME_OF));
    SET("stdio_classes", CEIL_IP_STDIO_CLASSES(NAME_OF));
    SET("stdio_kernel", CEIL_IP_STDIO_KERNEL(NAME_OF));
    SET("copy_classes", CEIL_IP_COPY_CLASSES(NAME_OF));
    SET("mpi_classes", CEIL_IP_MPI_CLASSES(NAME_OF));
    SET("mpi_hists", CEIL_IP_MPI_HISTS(NAME_OF));
    SET("posix_fns", CEIL_IP_POSIX_BASE_FNS(FN_OF) CEIL_IP_POSIX_STAT_FNS(FN_OF) CEIL_IP_POSIX_XSTAT_FNS(FN_OF));
    SET("stdio_fns", CEIL_IP_STDIO_REAL_FNS(FN_OF) CEIL_IP_STDIO_VARIADIC_FNS(FN_OF));
    SET("copy_fns", CEIL_IP_COPY_FNS(FN_OF));
    SET("mpi_fns", CEIL_IP_MPI_FNS(FN_OF, FN_OF_C));
    fputs("\n  },\n", out);
}

/* ---- calls, numbered as interpose.h's enum ceil_ip_call ---- */
static int call_id;
static const char *module_;
static const char *const *classes_;

static void call(const char *fn, const char *cls)
{
    char low[64];
    size_t n = strlen(cls);
    for (size_t i = 0; i <= n && i < sizeof low; i++)
        low[i] = (char)tolower((unsigned char)cls[i]);
    int known = 0;
    for (const char *const *c = classes_; *c; c++)
        known |= strcmp(*c, low) == 0;
    if (!known) {
        fprintf(stderr, "interpose_names: %s's call %s has class %s, not one of its module's\n", module_, fn, low);
        failed = 1;
    }
    fprintf(out, "%s\n    {\"id\": %d, \"module\": \"%s\", \"fn\": \"%s\", \"class\": \"%s\"}", call_id ? "," : "",
            call_id, module_, fn, low);
    call_id++;
}
#define CALL(fn, cls) call(#fn, #cls);
#define CALL_C(fn, cls) call(#fn, #cls); call(#fn "_c", #cls);
#define CLASS_STR(e, name) #name,

static void calls(void)
{
    static const char *const posix[] = {CEIL_IP_POSIX_CLASSES(CLASS_STR) NULL};
    static const char *const stdio[] = {CEIL_IP_STDIO_CLASSES(CLASS_STR) NULL};
    static const char *const copy[] = {CEIL_IP_COPY_CLASSES(CLASS_STR) NULL};
    static const char *const mpi[] = {CEIL_IP_MPI_CLASSES(CLASS_STR) NULL};
    fputs("  \"calls\": [", out);
    /* in CEIL_IP_CALLS's order */
    module_ = "posix", classes_ = posix;
    CEIL_IP_POSIX_BASE_FNS(CALL) CEIL_IP_POSIX_STAT_FNS(CALL) CEIL_IP_POSIX_XSTAT_FNS(CALL)
    module_ = "stdio", classes_ = stdio;
    CEIL_IP_STDIO_REAL_FNS(CALL) CEIL_IP_STDIO_VARIADIC_FNS(CALL)
    module_ = "copy", classes_ = copy;
    CEIL_IP_COPY_FNS(CALL)
    module_ = "mpi", classes_ = mpi;
    CEIL_IP_MPI_FNS(CALL, CALL_C)
    fputs("\n  ],\n", out);
}
/* the same count as the library's enum */
#define COUNT(fn, cls) +1
#define COUNT_C(fn, cls) +2
enum { CALLS_ = 0 CEIL_IP_CALLS(COUNT, COUNT_C) };

/* ---- lines ---- */
#define LINE_KEY(key) item(); fprintf(out, "\"%s\"", #key); (void)CEIL_IPK_##key;
#define LINE(word, kind, lead, set, KEYS, buckets)                                                               \
    fprintf(out, "%s\n    {\"word\": \"%s\", \"kind\": \"%s\", \"lead\": %s, \"set\": ", n++ ? "," : "", #word,      \
            #kind, strcmp(#lead, "-") ? "\"" #lead "\"" : "null");                                               \
    if (strcmp(#set, "any"))                                                                                     \
        lower(#set);                                                                                             \
    else                                                                                                         \
        fputs("null", out);                                                                                      \
    fputs(", \"keys\": [", out), sep = "";                                                                       \
    KEYS(LINE_KEY)                                                                                               \
    fprintf(out, "], \"buckets\": %s}", (buckets) ? "true" : "false");

static void lines(void)
{
    int n = 0;
    fputs("  \"lines\": [", out);
    CEIL_IP_LINES(LINE)
    fputs("\n  ],\n", out);
}

#define BUCKET(b) item(); fputs("\"" b "\"", out);
#define COUNTER(key, ticks, _) item(); fprintf(out, "{\"key\": \"%s\", \"ns\": %s}", #key, ticks ? "true" : "false");
#define PROC_IO(key) item(); fputs("\"" #key "\"", out);

int main(int argc, char **argv)
{
    if (argc != 2) {
        fputs("usage: interpose_names OUT.json\n", stderr);
        return 2;
    }
    out = fopen(argv[1], "w");
    if (!out) {
        perror(argv[1]);
        return 1;
    }
    fprintf(out, "{\n  \"format_version\": %d,\n", CEIL_IP_FORMAT_VERSION);
    fputs("  \"keys\": {", out);
    for (size_t i = 0; i < sizeof keys / sizeof keys[0]; i++)
        fprintf(out, "%s\"%s\": \"%s\"", i ? ", " : "", keys[i].name, type_name(keys[i].type));
    fputs("},\n  \"buckets\": [", out), sep = "";
    CEIL_IP_BUCKETS(BUCKET)
    fputs("],\n  \"file_counters\": [", out), sep = "";
    CEIL_IP_FILE_COUNTERS(COUNTER, _)
    fputs("],\n  \"proc_io\": [", out), sep = "";
    CEIL_IP_PROC_IO(PROC_IO)
    fputs("],\n", out);
    sets();
    lines();
    calls();
    fprintf(out, "  \"call_count\": %d\n}\n", CALLS_);
    if (call_id != CALLS_) {
        fprintf(stderr, "interpose_names: %d calls written, CEIL_IP_CALLS has %d\n", call_id, CALLS_);
        failed = 1;
    }
    if (fclose(out) != 0 || failed) {
        remove(argv[1]);
        return 1;
    }
    return 0;
}
