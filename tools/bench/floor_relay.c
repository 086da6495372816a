// floor_relay: the floor of a large-body relay on this kernel (issue 38), and the backend that
// serves the bodies. Not part of rondel; a measuring stick for tools/bench/limit38.py.
//
//   floor_relay backend N          N listeners on 127.0.0.1 port 0 in one process ("listening
//                                  127.0.0.1:PORT" each); answers GET /<size>/... with 200 and a
//                                  body of <size> (32b, 16k, 256k, 4m, or bytes), head and body
//                                  written with writev from user memory, keep-alive.
//   floor_relay relay PIPE P1 P2.. one listener on port 0 ("listening 127.0.0.1:PORT"); each
//                                  client connection gets one backend connection (round-robin
//                                  over P1..), and bytes are spliced both ways through a pipe of
//                                  PIPE bytes each (F_SETPIPE_SZ). No HTTP parsing; both sockets
//                                  registered once, edge-triggered, EPOLLIN|EPOLLOUT: no
//                                  epoll_ctl after the connection is set up.
// Edge cases (errors, half-closes, slow peers) are ignored: a connection that fails is closed.
// Build: cc -O2 -o floor_relay floor_relay.c
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <unistd.h>

static int listen0(void) {
  int fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  int one = 1;
  setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
  if (bind(fd, (struct sockaddr*)&a, sizeof a) != 0 || listen(fd, 1024) != 0) {
    perror("bind/listen");
    exit(1);
  }
  socklen_t len = sizeof a;
  getsockname(fd, (struct sockaddr*)&a, &len);
  printf("listening 127.0.0.1:%d\n", ntohs(a.sin_port));
  fflush(stdout);
  return fd;
}

// ------------------------------------------------------------------------------------------
// backend

#define MAXBODY (4u << 20)
#define QMAX 64
static char* body;

struct bconn {
  int fd;
  char in[8192];
  size_t in_len;
  size_t q[QMAX];  // body sizes of responses owed, in order
  int qh, qn;
  char head[128];
  size_t head_len, off;  // current response: bytes of head+body written
};

static size_t parse_size(const char* p, const char* end) {
  // "GET /<size>/..." : 32b, 16k, 256k, 4m, or a number of bytes
  while (p < end && *p != '/') p++;
  if (p < end) p++;
  size_t n = 0;
  while (p < end && *p >= '0' && *p <= '9') n = n * 10 + (size_t)(*p++ - '0');
  if (p < end && (*p == 'k' || *p == 'K')) n <<= 10;
  else if (p < end && (*p == 'm' || *p == 'M')) n <<= 20;
  return n > MAXBODY ? MAXBODY : n;
}

static void bclose(int ep, struct bconn* c) {
  epoll_ctl(ep, EPOLL_CTL_DEL, c->fd, NULL);
  close(c->fd);
  free(c);
}

// Writes owed responses until the socket is full. 0, or -1 on error.
static int bflush(struct bconn* c) {
  while (c->qn > 0) {
    size_t bl = c->q[c->qh];
    if (c->off == 0 && c->head_len == 0) {
      c->head_len = (size_t)snprintf(c->head, sizeof c->head,
                                     "HTTP/1.1 200 OK\r\nContent-Type: application/octet-stream\r\n"
                                     "Content-Length: %zu\r\n\r\n", bl);
    }
    struct iovec iov[2];
    int n = 0;
    if (c->off < c->head_len) {
      iov[n].iov_base = c->head + c->off;
      iov[n++].iov_len = c->head_len - c->off;
      iov[n].iov_base = body;
      iov[n++].iov_len = bl;
    } else {
      iov[n].iov_base = body + (c->off - c->head_len);
      iov[n++].iov_len = bl - (c->off - c->head_len);
    }
    ssize_t w = writev(c->fd, iov, n);
    if (w < 0) return errno == EAGAIN ? 0 : -1;
    c->off += (size_t)w;
    if (c->off == c->head_len + bl) {
      c->off = 0;
      c->head_len = 0;
      c->qh = (c->qh + 1) % QMAX;
      c->qn--;
    }
  }
  return 0;
}

// Reads requests; 0, or -1 on EOF/error.
static int bread(struct bconn* c) {
  for (;;) {
    ssize_t r = read(c->fd, c->in + c->in_len, sizeof c->in - c->in_len);
    if (r == 0) return -1;
    if (r < 0) return errno == EAGAIN ? 0 : -1;
    c->in_len += (size_t)r;
    char* p = c->in;
    char* end = c->in + c->in_len;
    for (;;) {
      char* e = memmem(p, (size_t)(end - p), "\r\n\r\n", 4);
      if (e == NULL || c->qn == QMAX) break;
      c->q[(c->qh + c->qn) % QMAX] = parse_size(p, e);
      c->qn++;
      p = e + 4;
    }
    c->in_len = (size_t)(end - p);
    memmove(c->in, p, c->in_len);
    if (c->in_len == sizeof c->in) return -1;  // a head too long: not ours
  }
}

__attribute__((noreturn)) static void run_backend(int n) {
  body = malloc(MAXBODY);
  for (size_t i = 0; i < MAXBODY; i++) body[i] = (char)('a' + i % 26);
  int ep = epoll_create1(EPOLL_CLOEXEC);
  int lfds[64];
  if (n > 64) n = 64;
  for (int i = 0; i < n; i++) {
    lfds[i] = listen0();
    struct epoll_event ev = {.events = EPOLLIN, .data.ptr = NULL};
    ev.data.u64 = (uint64_t)i;  // listeners: small integers; connections: pointers
    epoll_ctl(ep, EPOLL_CTL_ADD, lfds[i], &ev);
  }
  struct epoll_event evs[128];
  for (;;) {
    int k = epoll_wait(ep, evs, 128, -1);
    for (int i = 0; i < k; i++) {
      if (evs[i].data.u64 < 64) {
        int lfd = lfds[evs[i].data.u64];
        int fd;
        while ((fd = accept4(lfd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC)) >= 0) {
          int one = 1;
          setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
          struct bconn* c = calloc(1, sizeof *c);
          c->fd = fd;
          struct epoll_event ev = {.events = EPOLLIN | EPOLLOUT | EPOLLET, .data.ptr = c};
          epoll_ctl(ep, EPOLL_CTL_ADD, fd, &ev);
        }
        continue;
      }
      struct bconn* c = evs[i].data.ptr;
      int rc = 0;
      if (evs[i].events & (EPOLLIN | EPOLLHUP | EPOLLERR)) rc = bread(c);
      if (rc == 0) rc = bflush(c);
      if (rc != 0) bclose(ep, c);
    }
  }
}

// ------------------------------------------------------------------------------------------
// relay

struct side;
struct dir {  // one direction: from -> pipe -> to
  int from, to;
  int p[2];
  size_t held;
};
struct pair {
  struct dir up, down;  // up: client -> backend; down: backend -> client
  int cfd, bfd;
  int dead;
  struct pair* next_dead;
};
struct tag {  // epoll data: which fd of which pair
  struct pair* pr;
  int is_backend;
};

static size_t pipe_bytes;

// Moves what it can; 0, or -1 when the pair must close.
static int pump(struct dir* d) {
  for (;;) {
    while (d->held > 0) {
      ssize_t w = splice(d->p[0], NULL, d->to, NULL, d->held, SPLICE_F_NONBLOCK | SPLICE_F_MOVE);
      if (w < 0) return errno == EAGAIN ? 0 : -1;
      d->held -= (size_t)w;
    }
    ssize_t r = splice(d->from, NULL, d->p[1], NULL, pipe_bytes, SPLICE_F_NONBLOCK | SPLICE_F_MOVE);
    if (r == 0) return -1;
    if (r < 0) return errno == EAGAIN ? 0 : -1;
    d->held += (size_t)r;
  }
}

static void pclose_pair(int ep, struct pair* pr) {
  epoll_ctl(ep, EPOLL_CTL_DEL, pr->cfd, NULL);
  epoll_ctl(ep, EPOLL_CTL_DEL, pr->bfd, NULL);
  close(pr->cfd);
  close(pr->bfd);
  close(pr->up.p[0]);
  close(pr->up.p[1]);
  close(pr->down.p[0]);
  close(pr->down.p[1]);
  // freed after the epoll batch (a later event of the same batch may name it); the tags are
  // freed with the pair (allocated in one block after it)
  pr->dead = 1;
}

__attribute__((noreturn)) static void run_relay(int nb, int* bports) {
  signal(SIGPIPE, SIG_IGN);
  int ep = epoll_create1(EPOLL_CLOEXEC);
  int lfd = listen0();
  struct epoll_event lev = {.events = EPOLLIN, .data.ptr = NULL};
  epoll_ctl(ep, EPOLL_CTL_ADD, lfd, &lev);
  int rr = 0;
  struct pair* dead = NULL;
  struct epoll_event evs[128];
  for (;;) {
    int k = epoll_wait(ep, evs, 128, -1);
    for (int i = 0; i < k; i++) {
      if (evs[i].data.ptr == NULL) {
        int cfd;
        while ((cfd = accept4(lfd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC)) >= 0) {
          int bfd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
          struct sockaddr_in a = {.sin_family = AF_INET,
                                  .sin_addr.s_addr = htonl(INADDR_LOOPBACK),
                                  .sin_port = htons((uint16_t)bports[rr++ % nb])};
          if (connect(bfd, (struct sockaddr*)&a, sizeof a) != 0) {
            close(bfd);
            close(cfd);
            continue;
          }
          fcntl(bfd, F_SETFL, O_NONBLOCK);
          int one = 1;
          setsockopt(bfd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
          setsockopt(cfd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
          struct pair* pr = calloc(1, sizeof *pr + 2 * sizeof(struct tag));
          struct tag* t = (struct tag*)(pr + 1);
          pr->cfd = cfd;
          pr->bfd = bfd;
          pr->up = (struct dir){.from = cfd, .to = bfd};
          pr->down = (struct dir){.from = bfd, .to = cfd};
          pipe2(pr->up.p, O_NONBLOCK | O_CLOEXEC);
          pipe2(pr->down.p, O_NONBLOCK | O_CLOEXEC);
          fcntl(pr->down.p[1], F_SETPIPE_SZ, (int)pipe_bytes);
          t[0] = (struct tag){pr, 0};
          t[1] = (struct tag){pr, 1};
          struct epoll_event ev = {.events = EPOLLIN | EPOLLOUT | EPOLLET};
          ev.data.ptr = &t[0];
          epoll_ctl(ep, EPOLL_CTL_ADD, cfd, &ev);
          ev.data.ptr = &t[1];
          epoll_ctl(ep, EPOLL_CTL_ADD, bfd, &ev);
        }
        continue;
      }
      struct pair* pr = ((struct tag*)evs[i].data.ptr)->pr;
      if (pr->dead) continue;
      // Either side's readiness may unblock either direction: pump both.
      if (pump(&pr->up) != 0 || pump(&pr->down) != 0) {
        pclose_pair(ep, pr);
        pr->next_dead = dead;
        dead = pr;
      }
    }
    while (dead != NULL) {
      struct pair* next = dead->next_dead;
      free(dead);
      dead = next;
    }
  }
}

int main(int argc, char** argv) {
  signal(SIGPIPE, SIG_IGN);  // a client gone mid-body: EPIPE, not death
  if (argc >= 3 && strcmp(argv[1], "backend") == 0) run_backend(atoi(argv[2]));
  if (argc >= 4 && strcmp(argv[1], "relay") == 0) {
    pipe_bytes = (size_t)strtoul(argv[2], NULL, 0);
    int nb = argc - 3;
    int* ports = calloc((size_t)nb, sizeof *ports);
    for (int i = 0; i < nb; i++) ports[i] = atoi(argv[3 + i]);
    run_relay(nb, ports);
  }
  fprintf(stderr, "usage: floor_relay backend N | floor_relay relay PIPE_BYTES PORT...\n");
  return 2;
}
