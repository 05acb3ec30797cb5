#include "launcher/source_filter/source_filter.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

static struct sock_filter statement(uint16_t code, uint32_t k) {
  struct sock_filter s = {code, 0, 0, k};
  return s;
}

static struct sock_filter jump(uint16_t code, uint32_t k, uint8_t jt, uint8_t jf) {
  struct sock_filter s = {code, jt, jf, k};
  return s;
}

int nano_source_filter(const uint32_t* sources, int count, struct sock_filter* program, int room) {
  if (count < 0 || count > NANO_MAX_SOURCES || room < count + NANO_FILTER_OVERHEAD) return -1;
  // A TCP socket's filter sees a packet from its TCP header on; the IP header lies before it, at
  // SKF_NET_OFF. Its version decides where the source is.
  const uint32_t net = (uint32_t)SKF_NET_OFF;
  int n = 0;
  program[n++] = statement(BPF_LD | BPF_B | BPF_ABS, net);
  program[n++] = statement(BPF_ALU | BPF_AND | BPF_K, 0xf0);
  // IPv6: on to its checks below the IPv4 ones (count compares, a drop and a load further on).
  program[n++] = jump(BPF_JMP | BPF_JEQ | BPF_K, 0x40, 0, (uint8_t)(count + 2));
  // IPv4: the source, against each allowed one; a match jumps to the pass at the very end.
  program[n++] = statement(BPF_LD | BPF_W | BPF_ABS, net + 12);
  for (int i = 0; i < count; ++i) {
    // From here to the pass: the other compares, the drop, the IPv6 part (8) and its drop.
    program[n++] = jump(BPF_JMP | BPF_JEQ | BPF_K, ntohl(sources[i]), (uint8_t)(count - i + 9), 0);
  }
  program[n++] = statement(BPF_RET | BPF_K, 0);  // IPv4 from elsewhere: drop
  // IPv6: only ::1, the words 0, 0, 0, 1 of the source at offset 8. A word that differs jumps
  // to the drop before the pass; the last one, when it matches, jumps over that drop.
  for (int word = 0; word < 4; ++word) {
    program[n++] = statement(BPF_LD | BPF_W | BPF_ABS, net + 8 + 4 * (uint32_t)word);
    const uint8_t to_drop = (uint8_t)(2 * (3 - word));
    program[n++] = word < 3 ? jump(BPF_JMP | BPF_JEQ | BPF_K, 0, 0, to_drop) : jump(BPF_JMP | BPF_JEQ | BPF_K, 1, 1, 0);
  }
  program[n++] = statement(BPF_RET | BPF_K, 0);            // drop
  program[n++] = statement(BPF_RET | BPF_K, 0xffffffffu);  // pass, whole
  return n;
}

int nano_parse_sources(const char* text, uint32_t* sources, int room) {
  if (!text || !*text) return -1;
  int count = 0;
  for (const char* at = text;;) {
    const char* end = strchr(at, ',');
    const size_t size = end ? (size_t)(end - at) : strlen(at);
    char one[INET_ADDRSTRLEN];
    struct in_addr addr;
    if (size == 0 || size >= sizeof one || count >= room) return -1;
    memcpy(one, at, size);
    one[size] = '\0';
    // inet_pton takes only the four dotted decimal parts: no spaces, "1.2.3" nor "::1".
    if (inet_pton(AF_INET, one, &addr) != 1) return -1;
    sources[count++] = addr.s_addr;
    if (!end) return count;
    at = end + 1;
  }
}

int nano_read_guard(const char* value, uint32_t* sources, int room) {
  if (!value || strcmp(value, "off") == 0) return NANO_GUARD_OFF;
  const int count = nano_parse_sources(value, sources, room);
  return count > 0 ? count : NANO_GUARD_MALFORMED;
}

int nano_admit_only(int fd, const uint32_t* sources, int count) {
  struct sock_filter program[NANO_MAX_SOURCES + NANO_FILTER_OVERHEAD];
  const int n = nano_source_filter(sources, count, program, NANO_MAX_SOURCES + NANO_FILTER_OVERHEAD);
  if (n < 0) return EINVAL;
  struct sock_fprog prog;
  prog.len = (unsigned short)n;
  prog.filter = program;
  return setsockopt(fd, SOL_SOCKET, SO_ATTACH_FILTER, &prog, sizeof prog) == 0 ? 0 : errno;
}

int nano_reachable_tcp_socket(int fd) {
  int type = 0;
  socklen_t size = sizeof type;
  if (getsockopt(fd, SOL_SOCKET, SO_TYPE, &type, &size) != 0 || type != SOCK_STREAM) return 0;
  struct sockaddr_storage bound;
  size = sizeof bound;
  if (getsockname(fd, (struct sockaddr*)&bound, &size) != 0) return 0;
  if (bound.ss_family == AF_INET) {
    const struct sockaddr_in* a = (const struct sockaddr_in*)&bound;
    return (ntohl(a->sin_addr.s_addr) >> 24) != 127;
  }
  if (bound.ss_family == AF_INET6) {
    const struct sockaddr_in6* a = (const struct sockaddr_in6*)&bound;
    if (IN6_IS_ADDR_LOOPBACK(&a->sin6_addr)) return 0;
    if (IN6_IS_ADDR_V4MAPPED(&a->sin6_addr) && a->sin6_addr.s6_addr[12] == 127) return 0;
    return 1;
  }
  return 0;
}
