/* ljmp-push: every session's profile, pushed to a Pyroscope server at an
 * interval, for fleets of servers.  ljmpd stays without network. */
#define _GNU_SOURCE
#include <curl/curl.h>
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "conn.h"
#include "ljmp_wire.h"
#include "pprof_delta.h"

static const char usage_text[] =
    "usage: ljmp-push --server URL [OPTIONS]\n"
    "\n"
    "Every interval, exports each session ljmpd streams (as `ljmpctl export\n"
    "--format pprof` does) and pushes it to a Pyroscope server: POST\n"
    "URL/ingest?name=APP{host=..,pid=..,command=..}&from=..&until=..\n"
    "&format=pprof, the profile as the multipart field 'profile'.\n"
    "alloc_objects and alloc_space are what was allocated during the\n"
    "interval; inuse_objects and inuse_space are the live values at its end.\n"
    "\n"
    "Profiles wait in a bounded queue while the server is unreachable, and\n"
    "are retried with a backoff of 1 s doubling to 60 s; when the queue is\n"
    "full, the oldest is dropped and counted.  ljmpd serves the exports as\n"
    "it serves reports: a session's stream waits while its export is built\n"
    "(milliseconds for thousands of sites, seconds for a million).\n"
    "\n"
    "Options:\n"
    "  -s, --socket PATH     ljmpd's control socket (default: $LJMP_CONTROL,\n"
    "                        else ljmpd's default); ljmpd must let this user\n"
    "                        read every session (its --reader)\n"
    "      --server URL      the Pyroscope server, e.g. http://host:4040\n"
    "      --interval S      seconds between pushes (15)\n"
    "      --app NAME        the application name (default: each process's\n"
    "                        program, from its command line)\n"
    "      --host NAME       the host label (default: this host's name)\n"
    "      --token-file F    send 'Authorization: Bearer' with F's first line\n"
    "      --basic-auth-file F  HTTP basic authentication, F's first line\n"
    "                        being USER:PASSWORD\n"
    "      --tenant ID       X-Scope-OrgID, for a multi-tenant server\n"
    "      --cacert F        trust F's certificates for https\n"
    "      --queue N         profiles kept while the server is down (64)\n"
    "      --timeout S       one push's time limit (10)\n"
    "      --once            one round: push each session once, and exit\n"
    "                        (1 if a push failed)\n"
    "  -h, --help            this help\n";

struct push_opts {
    const char *server, *app, *host_label, *tenant, *cacert;
    char *token, *basic;
    unsigned interval_s, queue_max, timeout_s;
    int once;
};

/* A profile waiting to be pushed. */
struct pending {
    char *url;
    uint8_t *body;
    size_t len;
};

/* One session followed: its id and start (ljmpd numbers sessions anew
 * when it restarts), and its allocations at the last push. */
struct followed {
    uint64_t id, start_ms;
    uint64_t from_s; /* the interval's start (Unix seconds) */
    struct pprof_delta *delta;
    int seen; /* listed in this round */
};

struct pusher {
    struct push_opts o;
    CURL *curl;
    struct pending *queue;
    unsigned nqueue;
    struct followed *fol;
    size_t nfol, folcap;
    uint64_t pushed, dropped, failed;
    time_t retry_at;
    unsigned backoff_s;
};

static volatile sig_atomic_t stopping;

static void on_stop(int sig)
{
    (void)sig;
    stopping = 1;
}

/* The first line of a file (a secret: never in a message), or exits. */
static char *first_line(const char *path)
{
    FILE *f = fopen(path, "re");
    char *line = NULL;
    size_t cap = 0;

    if (f == NULL || getline(&line, &cap, f) < 0) {
        fprintf(stderr, "ljmp-push: cannot read %s: %s\n", path,
                f ? "empty" : strerror(errno));
        exit(2);
    }
    fclose(f);
    line[strcspn(line, "\r\n")] = '\0';
    return line;
}

static unsigned number_arg(const char *name, const char *arg, unsigned min,
                           unsigned max)
{
    char *end;
    unsigned long v = strtoul(arg, &end, 10);

    if (*arg == '\0' || *end != '\0' || v < min || v > max) {
        fprintf(stderr, "ljmp-push: --%s wants a number in [%u, %u]\n", name,
                min, max);
        exit(2);
    }
    return (unsigned)v;
}

static void parse_args(int argc, char **argv, struct push_opts *o)
{
    static const struct option longs[] = {
        {"socket", required_argument, NULL, 's'},
        {"server", required_argument, NULL, 'S'},
        {"interval", required_argument, NULL, 'i'},
        {"app", required_argument, NULL, 'a'},
        {"host", required_argument, NULL, 'H'},
        {"token-file", required_argument, NULL, 't'},
        {"basic-auth-file", required_argument, NULL, 'b'},
        {"tenant", required_argument, NULL, 'T'},
        {"cacert", required_argument, NULL, 'c'},
        {"queue", required_argument, NULL, 'q'},
        {"timeout", required_argument, NULL, 'o'},
        {"once", no_argument, NULL, '1'},
        {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0},
    };
    int c;

    *o = (struct push_opts){.interval_s = 15, .queue_max = 64, .timeout_s = 10};
    while ((c = getopt_long(argc, argv, "s:h", longs, NULL)) != -1) {
        switch (c) {
        case 's':
            conn_set_socket_path(optarg);
            break;
        case 'S':
            o->server = optarg;
            break;
        case 'i':
            o->interval_s = number_arg("interval", optarg, 1, 86400);
            break;
        case 'a':
            o->app = optarg;
            break;
        case 'H':
            o->host_label = optarg;
            break;
        case 't':
            o->token = first_line(optarg);
            break;
        case 'b':
            o->basic = first_line(optarg);
            break;
        case 'T':
            o->tenant = optarg;
            break;
        case 'c':
            o->cacert = optarg;
            break;
        case 'q':
            o->queue_max = number_arg("queue", optarg, 1, 65536);
            break;
        case 'o':
            o->timeout_s = number_arg("timeout", optarg, 1, 3600);
            break;
        case '1':
            o->once = 1;
            break;
        case 'h':
            fputs(usage_text, stdout);
            exit(0);
        default:
            fputs(usage_text, stderr);
            exit(2);
        }
    }
    if (o->server == NULL || optind < argc) {
        fprintf(stderr, "ljmp-push: %s; see ljmp-push --help\n",
                o->server == NULL ? "--server URL is required"
                                  : "unexpected argument");
        exit(2);
    }
}

/* A label value as Pyroscope's name syntax takes it: the characters that
 * delimit labels (and spaces) become '_'. */
static void put_label_value(FILE *f, const char *v, size_t n)
{
    for (size_t i = 0; i < n && v[i] != '\0'; i++)
        fputc(strchr("{},= \t\"", v[i]) ? '_' : v[i], f);
}

/* The program of a command line: its first word's last path part. */
static void program_of(const char *cmdline, const char **p, size_t *n)
{
    size_t word = strcspn(cmdline, " ");
    const char *slash = memrchr(cmdline, '/', word);

    *p = slash ? slash + 1 : cmdline;
    *n = word - (size_t)(*p - cmdline);
}

/* The push's URL for session s, covering [from_s, until_s]; malloc'd. */
static char *push_url(struct pusher *ps, const Ljmp__SessionInfo *s,
                      uint64_t from_s, uint64_t until_s)
{
    char host[256] = "", *name = NULL, *url = NULL, *escaped;
    size_t len = 0, plen;
    const char *prog, *cmd = s->cmdline ? s->cmdline : "";
    FILE *f = open_memstream(&name, &len);

    if (f == NULL)
        return NULL;
    if (ps->o.host_label != NULL)
        snprintf(host, sizeof(host), "%s", ps->o.host_label);
    else
        gethostname(host, sizeof(host) - 1);
    /* A relayed stream's name comes first, in brackets: skip it. */
    if (cmd[0] == '[' && strstr(cmd, "] ") != NULL)
        cmd = strstr(cmd, "] ") + 2;
    program_of(cmd, &prog, &plen);
    if (ps->o.app != NULL)
        put_label_value(f, ps->o.app, strlen(ps->o.app));
    else
        put_label_value(f, prog, plen);
    fputs("{host=", f);
    put_label_value(f, host, sizeof(host));
    fprintf(f, ",pid=%u,command=", s->pid);
    put_label_value(f, prog, plen);
    fputc('}', f);
    if (fclose(f) != 0)
        return NULL;
    escaped = curl_easy_escape(ps->curl, name, (int)len);
    if (escaped != NULL &&
        asprintf(&url,
                 "%s/ingest?name=%s&from=%" PRIu64 "&until=%" PRIu64
                 "&format=pprof&spyName=ljmp",
                 ps->o.server, escaped, from_s, until_s) < 0)
        url = NULL;
    curl_free(escaped);
    free(name);
    return url;
}

/* The session's pprof export from ljmpd (its parts gathered); malloc'd. */
static uint8_t *export_session(uint64_t id, size_t *len)
{
    struct conn c;
    Ljmp__Request req = LJMP__REQUEST__INIT;
    Ljmp__ReportRequest rr = LJMP__REPORT_REQUEST__INIT;
    Ljmp__Selector sel = LJMP__SELECTOR__INIT;
    char *buf = NULL;
    FILE *f = open_memstream(&buf, len);
    int rc, more;

    if (f == NULL)
        return NULL;
    sel.has_session_id = 1;
    sel.session_id = id;
    rr.session = &sel;
    rr.has_export_format = rr.has_export_value = 1;
    rr.export_format = LJMP__EXPORT_FORMAT__PPROF;
    rr.export_value = LJMP__EXPORT_VALUE__INUSE_SPACE;
    req.body_case = LJMP__REQUEST__BODY_REPORT;
    req.report = &rr;
    Ljmp__Response *resp =
        conn_ask(&c, "push", &req, -1, 30000, LJMP__RESPONSE__BODY_REPORT, &rc);
    uint64_t rid = resp ? resp->id : 0;
    do {
        if (resp == NULL)
            break;
        more = 0;
        if (resp->id == rid && resp->body_case == LJMP__RESPONSE__BODY_REPORT) {
            fwrite(resp->report->text.data, 1, resp->report->text.len, f);
            more = resp->report->more;
        } else if (resp->id != rid) {
            more = 1; /* not ours */
        } else {
            rc = -1;
        }
        ljmp__response__free_unpacked(resp, NULL);
        resp = more ? conn_recv(&c, 30000) : NULL;
        if (more && resp == NULL)
            rc = -1;
    } while (more);
    conn_close(&c);
    if (fclose(f) != 0 || rc != 0) {
        free(buf);
        return NULL;
    }
    return (uint8_t *)buf;
}

static void pending_free(struct pending *p)
{
    free(p->url);
    free(p->body);
}

/* Queues a profile; the oldest goes when the queue is full. */
static void enqueue(struct pusher *ps, char *url, uint8_t *body, size_t len)
{
    if (ps->nqueue == ps->o.queue_max) {
        pending_free(&ps->queue[0]);
        memmove(ps->queue, ps->queue + 1,
                (ps->nqueue - 1) * sizeof(*ps->queue));
        ps->nqueue--;
        ps->dropped++;
        fprintf(
            stderr,
            "ljmp-push: queue full (%u): the oldest profile dropped, %" PRIu64
            " in all\n",
            ps->o.queue_max, ps->dropped);
    }
    ps->queue[ps->nqueue++] = (struct pending){url, body, len};
}

/* POSTs one profile; 0 when the server took it (2xx). */
static int post(struct pusher *ps, const struct pending *p)
{
    CURL *c = ps->curl;
    curl_mime *mime = curl_mime_init(c);
    curl_mimepart *part = curl_mime_addpart(mime);
    struct curl_slist *headers = NULL;
    char *header;
    long status = 0;
    CURLcode rc;

    curl_mime_name(part, "profile");
    curl_mime_filename(part, "profile.pprof");
    curl_mime_type(part, "application/octet-stream");
    curl_mime_data(part, (const char *)p->body, p->len);
    part = curl_mime_addpart(mime);
    curl_mime_name(part, "sample_type_config");
    curl_mime_filename(part, "sample_type_config.json");
    curl_mime_data(part,
                   "{\"alloc_objects\":{\"units\":\"objects\"},"
                   "\"alloc_space\":{\"units\":\"bytes\"},"
                   "\"inuse_objects\":{\"units\":\"objects\","
                   "\"aggregation\":\"average\"},"
                   "\"inuse_space\":{\"units\":\"bytes\","
                   "\"aggregation\":\"average\"}}",
                   CURL_ZERO_TERMINATED);
    /* A token is as long as its issuer makes it (a JWT: kilobytes). */
    if (ps->o.token != NULL &&
        asprintf(&header, "Authorization: Bearer %s", ps->o.token) >= 0) {
        headers = curl_slist_append(headers, header);
        free(header);
    }
    if (ps->o.tenant != NULL &&
        asprintf(&header, "X-Scope-OrgID: %s", ps->o.tenant) >= 0) {
        headers = curl_slist_append(headers, header);
        free(header);
    }
    curl_easy_reset(c);
    curl_easy_setopt(c, CURLOPT_URL, p->url);
    curl_easy_setopt(c, CURLOPT_MIMEPOST, mime);
    curl_easy_setopt(c, CURLOPT_HTTPHEADER, headers);
    curl_easy_setopt(c, CURLOPT_TIMEOUT, (long)ps->o.timeout_s);
    curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(c, CURLOPT_PROTOCOLS_STR, "http,https");
    if (ps->o.basic != NULL) {
        curl_easy_setopt(c, CURLOPT_HTTPAUTH, (long)CURLAUTH_BASIC);
        curl_easy_setopt(c, CURLOPT_USERPWD, ps->o.basic);
    }
    if (ps->o.cacert != NULL)
        curl_easy_setopt(c, CURLOPT_CAINFO, ps->o.cacert);
    rc = curl_easy_perform(c);
    if (rc == CURLE_OK)
        curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &status);
    curl_mime_free(mime);
    curl_slist_free_all(headers);
    if (rc == CURLE_OK && status >= 200 && status < 300)
        return 0;
    ps->failed++;
    fprintf(stderr, "ljmp-push: push to %s failed: %s\n", ps->o.server,
            rc != CURLE_OK ? curl_easy_strerror(rc) : "the server said no");
    if (rc == CURLE_OK)
        fprintf(stderr, "ljmp-push: HTTP status %ld\n", status);
    return -1;
}

/* Pushes the queue, oldest first, unless backing off; a failure backs off
 * (1 s doubling to 60 s) and keeps the profile. */
static void push_queue(struct pusher *ps)
{
    time_t now = time(NULL);

    if (now < ps->retry_at)
        return;
    while (ps->nqueue > 0 && !stopping) {
        if (post(ps, &ps->queue[0]) != 0) {
            ps->backoff_s = ps->backoff_s ? ps->backoff_s * 2 : 1;
            if (ps->backoff_s > 60)
                ps->backoff_s = 60;
            ps->retry_at = time(NULL) + ps->backoff_s;
            return;
        }
        ps->backoff_s = 0;
        ps->pushed++;
        pending_free(&ps->queue[0]);
        memmove(ps->queue, ps->queue + 1,
                (ps->nqueue - 1) * sizeof(*ps->queue));
        ps->nqueue--;
    }
}

static struct followed *follow(struct pusher *ps, uint64_t id,
                               uint64_t start_ms)
{
    for (size_t i = 0; i < ps->nfol; i++)
        if (ps->fol[i].id == id && ps->fol[i].start_ms == start_ms)
            return &ps->fol[i];
    if (ps->nfol == ps->folcap) {
        size_t cap = ps->folcap ? ps->folcap * 2 : 16;
        struct followed *f = realloc(ps->fol, cap * sizeof(*f));
        if (f == NULL)
            return NULL;
        ps->fol = f;
        ps->folcap = cap;
    }
    struct pprof_delta *d = pprof_delta_new();
    if (d == NULL)
        return NULL;
    ps->fol[ps->nfol] = (struct followed){id, start_ms, start_ms / 1000, d, 0};
    return &ps->fol[ps->nfol++];
}

/* Forgets the sessions not listed in this round (ended and pushed). */
static void forget_unseen(struct pusher *ps)
{
    size_t k = 0;

    for (size_t i = 0; i < ps->nfol; i++) {
        if (ps->fol[i].seen) {
            ps->fol[i].seen = 0;
            ps->fol[k++] = ps->fol[i];
        } else {
            pprof_delta_free(ps->fol[i].delta);
        }
    }
    ps->nfol = k;
}

/* One session's interval profile, queued. */
static void take_session(struct pusher *ps, const Ljmp__SessionInfo *s,
                         uint64_t now)
{
    struct followed *f = follow(ps, s->id, s->session_start_ms);
    size_t len, dlen;
    uint8_t *gz, *delta = NULL;
    char *url;

    if (f == NULL)
        return;
    f->seen = 1;
    if ((gz = export_session(s->id, &len)) == NULL) {
        fprintf(stderr, "ljmp-push: no export of session %" PRIu64 "\n", s->id);
        return;
    }
    if (pprof_delta_next(f->delta, gz, len, &delta, &dlen) != 0 ||
        (url = push_url(ps, s, f->from_s, now)) == NULL) {
        fprintf(stderr, "ljmp-push: session %" PRIu64 ": a bad profile\n",
                s->id);
        free(gz);
        free(delta);
        return;
    }
    free(gz);
    f->from_s = now;
    enqueue(ps, url, delta, dlen);
}

/* A round: every streaming session's profile (and a last one of each
 * followed session that ended since), queued and pushed. */
static void round_of(struct pusher *ps)
{
    struct conn c;
    Ljmp__Request req = LJMP__REQUEST__INIT;
    Ljmp__ListRequest lr = LJMP__LIST_REQUEST__INIT;
    uint64_t now = (uint64_t)time(NULL);
    int rc;

    req.body_case = LJMP__REQUEST__BODY_LIST;
    req.list = &lr;
    Ljmp__Response *resp =
        conn_ask(&c, "push", &req, -1, 30000, LJMP__RESPONSE__BODY_LIST, &rc);
    conn_close(&c);
    if (resp == NULL)
        return; /* said on stderr; tried again next round */
    for (size_t i = 0; i < resp->list->n_sessions; i++) {
        const Ljmp__SessionInfo *s = resp->list->sessions[i]->info;
        int streaming = s->state == LJMP__SESSION_STATE__STREAMING;
        int followed = 0;
        for (size_t k = 0; k < ps->nfol && !followed; k++)
            followed = ps->fol[k].id == s->id &&
                       ps->fol[k].start_ms == s->session_start_ms;
        if (streaming || followed)
            take_session(ps, s, now);
        /* An ended session's last profile is taken: forget it next. */
        for (size_t k = 0; !streaming && k < ps->nfol; k++)
            if (ps->fol[k].id == s->id &&
                ps->fol[k].start_ms == s->session_start_ms)
                ps->fol[k].seen = 0;
    }
    ljmp__response__free_unpacked(resp, NULL);
    forget_unseen(ps);
    push_queue(ps);
}

int main(int argc, char **argv)
{
    struct pusher ps = {0};

    parse_args(argc, argv, &ps.o);
    signal(SIGPIPE, SIG_IGN);
    signal(SIGTERM, on_stop);
    signal(SIGINT, on_stop);
    if (curl_global_init(CURL_GLOBAL_DEFAULT) != 0 ||
        (ps.curl = curl_easy_init()) == NULL ||
        (ps.queue = calloc(ps.o.queue_max, sizeof(*ps.queue))) == NULL) {
        fprintf(stderr, "ljmp-push: cannot start libcurl\n");
        return 1;
    }
    while (!stopping) {
        round_of(&ps);
        if (ps.o.once)
            break;
        for (unsigned s = 0; s < ps.o.interval_s && !stopping; s++) {
            sleep(1);
            push_queue(&ps); /* retries come due between rounds */
        }
    }
    fprintf(stderr,
            "ljmp-push: %" PRIu64 " profiles pushed, %" PRIu64
            " failed attempts, %" PRIu64 " dropped, %u unsent\n",
            ps.pushed, ps.failed, ps.dropped, ps.nqueue);
    for (unsigned i = 0; i < ps.nqueue; i++)
        pending_free(&ps.queue[i]);
    for (size_t i = 0; i < ps.nfol; i++)
        pprof_delta_free(ps.fol[i].delta);
    free(ps.queue);
    free(ps.fol);
    free(ps.o.token);
    free(ps.o.basic);
    curl_easy_cleanup(ps.curl);
    curl_global_cleanup();
    return ps.nqueue > 0 && ps.o.once ? 1 : 0;
}
